"""The URL forms of an S3 store (issue 10): virtual-hosted requests (`URL_STYLE 'vhost'`, the
default) and HTTPS (`USE_SSL true`, the default), against the pinned moto_server on 127.0.0.1.

A virtual-hosted bucket's host is `<bucket>.localhost`, which no resolver here maps to
127.0.0.1; the harness's forward proxies do, and refuse every other host. moraine sends its
requests through DuckDB's `http_proxy` setting (set, or taken from HTTP_PROXY), with
`http_proxy_username` and `http_proxy_password` (here a proxy that answers 407 without them,
and a password that needs encoding), except to the hosts NO_PROXY names, as httpfs does; with
the setting empty, through the proxy the environment names (HTTPS_PROXY). HTTPS ends at the
harness's TLS front, whose certificate a test authority signed; moraine trusts the
authorities of the file SSL_CERT_FILE names, httpfs those of `ca_cert_file`.

Each form, in fresh processes: a writer creates a table, inserts inlined and Parquet rows,
updates and deletes; a fresh READ_ONLY process reads them. The requests the server logged
(or the tunnels the proxy opened) show the form used, and moraine's objects are under the
prefix. A wrong proxy password, and HTTPS with a certificate moraine does not trust, each fail
ATTACH naming the URL and write nothing.
"""
# needs: moto_server
import os

from _harness import TEST_DIR, check, finish
from _s3 import ForwardProxy, Moto, TlsFront, fresh_process, tls_files

WRITE = [
    "CREATE TABLE lake.t (i INTEGER, s VARCHAR)",
    "INSERT INTO lake.t VALUES (1, 'one'), (2, 'two')",
    "INSERT INTO lake.t SELECT i, 'bulk' FROM range(100, 1100) r(i)",
    "UPDATE lake.t SET s = 'uno' WHERE i = 1",
    "DELETE FROM lake.t WHERE i >= 1000",
]
COUNT = "SELECT count(*), min(i), max(i), count(*) FILTER (s = 'uno') FROM lake.t"
READ = [COUNT, "SELECT mode FROM moraine_status('lake')"]
WANT = [(902, 1, 999, 1)]
BUCKETS = ["moraine-vhost", "moraine-https", "moraine-https-vhost", "moraine-env-proxy",
           "moraine-untrusted", "moraine-proxy-refused"]
# the proxy's credentials: a user name and a password that a URL must encode
PROXY_USER, PROXY_PASSWORD = "moraine user", "p@ss:w/rd%"


def names_bucket(path, bucket):
    """Whether a request the server logged names `bucket`, path-style or in its host."""
    return (path == f"/{bucket}" or path.startswith((f"/{bucket}/", f"/{bucket}?"))
            or path.startswith(f"http://{bucket}.localhost:"))


def in_path(path, bucket):
    """Whether a request's path names `bucket` path-style."""
    return names_bucket(path, bucket) and path.startswith("/")


def run(setup, queries, env):
    """`fresh_process` with `env` added to this process's environment less every proxy
    variable (the runner's NO_PROXY exempts localhost, and here the proxy must see
    `*.localhost`; a proxy of the machine's must see nothing)."""
    child = {k: v for k, v in os.environ.items()
             if k.lower() not in ("no_proxy", "http_proxy", "https_proxy", "all_proxy")}
    child.update(env)
    return fresh_process(setup, queries, child)


def main():
    moto = Moto(os.path.join(TEST_DIR, "moto"))
    proxy = ForwardProxy(user=PROXY_USER, password=PROXY_PASSWORD)
    env_proxy = ForwardProxy()
    ca, cert, key = tls_files(os.path.join(TEST_DIR, "tls"),
                              ["localhost"] + [f"{b}.localhost" for b in BUCKETS])
    tls = TlsFront(moto.port, cert, key)
    try:
        scenario(moto, proxy, env_proxy, tls, ca)
    finally:
        tls.stop()
        env_proxy.stop()
        proxy.stop()
        moto.stop()


def proxy_settings(proxy, password=PROXY_PASSWORD, host=True):
    """The settings that send requests through `proxy` (its host only with `host`: else it
    comes from HTTP_PROXY)."""
    return ([f"SET http_proxy = '127.0.0.1:{proxy.port}'"] if host else []) + [
        f"SET http_proxy_username = '{PROXY_USER}'",
        f"SET http_proxy_password = '{password}'"]


def scenario(moto, proxy, env_proxy, tls, ca):
    for b in BUCKETS:
        moto.create_bucket(b)
    trusted = {"SSL_CERT_FILE": ca}
    ca_sql = f"SET ca_cert_file = '{ca}'"
    setting = "SELECT current_setting('http_proxy')"
    forms = [
        # (name, bucket, endpoint, url style, TLS, environment, DuckDB settings, data path)
        # the proxy from HTTP_PROXY, which DuckDB's http_proxy setting starts out as
        ("virtual-hosted over HTTP, the proxy from HTTP_PROXY", "moraine-vhost",
         f"localhost:{moto.port}", "vhost", False, {"HTTP_PROXY": f"127.0.0.1:{proxy.port}"},
         proxy_settings(proxy, host=False), None),
        # the proxy set, but NO_PROXY names the endpoint's host: moraine goes direct, as curl
        ("path-style over HTTPS, the endpoint in NO_PROXY", "moraine-https",
         f"127.0.0.1:{tls.port}", "path", True, {**trusted, "NO_PROXY": "127.0.0.1"},
         proxy_settings(proxy) + [ca_sql], None),
        # the data files stay local: httpfs 1.5.5 (curl) crashed here now and then, in its
        # header callback on the proxy's answer to CONNECT (SIGSEGV in HTTPHeaders::Insert)
        ("virtual-hosted over HTTPS", "moraine-https-vhost", f"localhost:{tls.port}", "vhost",
         True, trusted, proxy_settings(proxy),
         os.path.join(TEST_DIR, "https-vhost-data") + "/"),
        # the http_proxy setting empty (no HTTP_PROXY): moraine takes HTTPS_PROXY, which httpfs
        # takes too, through curl; the data files stay local, so only moraine's requests count
        ("virtual-hosted over HTTPS, the proxy from HTTPS_PROXY", "moraine-env-proxy",
         f"localhost:{tls.port}", "vhost", True,
         {**trusted, "HTTPS_PROXY": env_proxy.url, "https_proxy": env_proxy.url}, [],
         os.path.join(TEST_DIR, "env-proxy-data") + "/"),
    ]
    for name, bucket, endpoint, style, use_ssl, env, settings, local_data in forms:
        meta, data = f"s3://{bucket}/meta", local_data or f"s3://{bucket}/data/"
        setup = settings + [moto.secret_sql(endpoint=endpoint, url_style=style, use_ssl=use_ssl)]
        logged = len(moto.requests())
        tunnels_before = len(env_proxy.seen)
        got, err = run(setup + [f"ATTACH 'ducklake:moraine:{meta}' AS lake (DATA_PATH '{data}')"]
                       + WRITE, [COUNT, setting], env)
        check(f"{name}: a writer creates, inserts, updates and deletes",
              got is not None and got[0] == WANT, err or got)
        via_setting = "HTTP_PROXY" in env or any(q.startswith("SET http_proxy =")
                                                 for q in settings)
        want_setting = [(f"127.0.0.1:{proxy.port}" if via_setting else "",)]
        check(f"{name}: DuckDB's http_proxy setting is as meant",
              got is not None and got[1] == want_setting, got)
        got, err = run(setup + [f"ATTACH 'ducklake:moraine:{meta}' AS lake "
                                f"(READ_ONLY, DATA_PATH '{data}')"], READ, env)
        check(f"{name}: a fresh READ_ONLY process reads the rows",
              got == [WANT, [("reader",)]], err or got)
        # the processes' requests, less the harness's own for the other buckets (its log may
        # show them late), taken before the harness lists this bucket
        paths = [p for _, p, _ in moto.requests()[logged:]
                 if not any(names_bucket(p, b) for b in BUCKETS if b != bucket)]
        keys = moto.keys(bucket)
        check(f"{name}: moraine's objects are under the prefix, DuckLake's files under theirs",
              any(k.startswith("meta/manifest/") for k in keys)
              and (local_data or any(k.startswith("data/") and k.endswith(".parquet")
                                     for k in keys))
              and all(k.startswith(("meta/", "data/")) for k in keys), keys[:20])
        if style == "vhost" and not use_ssl:
            # the server logs a proxied request's absolute URL, host included
            check(f"{name}: every request names the bucket in the host",
                  paths and all(p.startswith(f"http://{bucket}.localhost:{moto.port}/")
                                for p in paths),
                  [p for p in paths if not p.startswith(f"http://{bucket}.localhost")][:5])
        elif style == "vhost":
            used = proxy if via_setting else env_proxy
            tunnels = {a for m, a in used.seen if m == "CONNECT"}
            check(f"{name}: the requests went through a tunnel to the bucket's host",
                  f"{bucket}.localhost:{tls.port}" in tunnels, tunnels)
            check(f"{name}: no request names the bucket in its path",
                  paths and not any(in_path(p, bucket) for p in paths),
                  [p for p in paths if in_path(p, bucket)][:5])
        else:
            check(f"{name}: every request names the bucket in its path",
                  paths and all(in_path(p, bucket) for p in paths),
                  [p for p in paths if not in_path(p, bucket)][:5])
        if use_ssl:
            check(f"{name}: the TLS front saw the handshakes",
                  (f"{bucket}.localhost" if style == "vhost" else None) in tls.handshakes,
                  set(tls.handshakes))
        if "NO_PROXY" in env:
            check(f"{name}: the proxy saw none of its requests",
                  not any(a == endpoint for _, a in proxy.seen), proxy.seen)
        if "HTTPS_PROXY" in env:
            check(f"{name}: only the environment's proxy was used",
                  len(env_proxy.seen) > tunnels_before
                  and not any(a.startswith(f"{bucket}.") for _, a in proxy.seen), proxy.seen)

    # ---- the proxy refuses a wrong password ---------------------------------------------------
    bucket = "moraine-proxy-refused"
    meta = f"s3://{bucket}/meta"
    refused = proxy.refused
    got, err = run(proxy_settings(proxy, password="not-the-password")
                   + [moto.secret_sql(endpoint=f"localhost:{moto.port}", url_style="vhost")],
                   [f"ATTACH 'ducklake:moraine:{meta}' AS lake (DATA_PATH '{TEST_DIR}/data/')"],
                   {})
    check("a wrong proxy password fails ATTACH naming the URL",
          err is not None and meta in err, err or got)
    check("... the proxy refused it", proxy.refused > refused)
    check("... the error does not show the password",
          err is not None and "not-the-password" not in err, err)
    check("... and nothing was written", moto.keys(bucket) == [], moto.keys(bucket))

    # ---- a certificate moraine does not trust --------------------------------------------------
    bucket = "moraine-untrusted"
    meta = f"s3://{bucket}/meta"
    other_ca, _, _ = tls_files(os.path.join(TEST_DIR, "tls-other"), ["localhost"])
    got, err = run([moto.secret_sql(endpoint=f"127.0.0.1:{tls.port}", use_ssl=True)],
                   [f"ATTACH 'ducklake:moraine:{meta}' AS lake (DATA_PATH '{TEST_DIR}/data/')"],
                   {"SSL_CERT_FILE": other_ca})
    check("HTTPS with an untrusted certificate fails ATTACH naming the URL",
          err is not None and meta in err, err or got)
    check("... and says why", err is not None and "invalid peer certificate" in err, err)
    check("... and writes nothing", moto.keys(bucket) == [], moto.keys(bucket))


if __name__ == "__main__":
    main()
    finish("s3_url_forms")
