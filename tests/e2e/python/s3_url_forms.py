"""The URL forms of an S3 store (issue 10): virtual-hosted requests (`URL_STYLE 'vhost'`, the
default) and HTTPS (`USE_SSL true`, the default), against the pinned moto_server on 127.0.0.1.

A virtual-hosted bucket's host is `<bucket>.localhost`, which no resolver here maps to
127.0.0.1; the harness's forward proxy does, and refuses every other host. moraine's requests go
through DuckDB's `http_proxy` setting (httpfs's) when it is set, else through the proxy the
environment names (HTTP_PROXY, HTTPS_PROXY); both routes are taken here. HTTPS ends at the
harness's TLS front, whose certificate a test authority signed; moraine trusts the authorities
of the file SSL_CERT_FILE names (else the system's), httpfs those of `ca_cert_file`.

Each form, in fresh processes: a writer creates a table, inserts inlined and Parquet rows,
updates and deletes; a fresh READ_ONLY process reads them. The requests the server logged
(or the tunnels the proxy opened) show the form used, and moraine's objects are under the
prefix. HTTPS with a certificate moraine does not trust fails ATTACH naming the URL, and
writes nothing.
"""
# needs: moto_server
import json
import os
import subprocess
import sys

from _harness import TEST_DIR, check, finish
from _s3 import ForwardProxy, Moto, TlsFront, tls_files

HERE = os.path.dirname(os.path.abspath(__file__))

WRITE = [
    "CREATE TABLE lake.t (i INTEGER, s VARCHAR)",
    "INSERT INTO lake.t VALUES (1, 'one'), (2, 'two')",
    "INSERT INTO lake.t SELECT i, 'bulk' FROM range(100, 1100) r(i)",
    "UPDATE lake.t SET s = 'uno' WHERE i = 1",
    "DELETE FROM lake.t WHERE i >= 1000",
    "SELECT count(*), min(i), max(i), count(*) FILTER (s = 'uno') FROM lake.t",
]
READ = ["SELECT count(*), min(i), max(i), count(*) FILTER (s = 'uno') FROM lake.t",
        "SELECT mode FROM moraine_status('lake')"]
WANT = [(902, 1, 999, 1)]
BUCKETS = ["moraine-vhost", "moraine-https", "moraine-https-vhost", "moraine-env-proxy",
           "moraine-untrusted"]


def in_path(path, bucket):
    """Whether a request's path names `bucket` path-style."""
    return path == f"/{bucket}" or path.startswith((f"/{bucket}/", f"/{bucket}?"))


def secret_sql(moto, endpoint, url_style, use_ssl):
    return (f"CREATE SECRET s (TYPE s3, KEY_ID '{moto.key_id}', SECRET '{moto.secret_key}', "
            f"REGION 'us-east-1', ENDPOINT '{endpoint}', URL_STYLE '{url_style}', "
            f"USE_SSL {str(use_ssl).lower()})")


def run(setup, queries, env):
    """Runs `setup` then `queries` in a fresh python3 process with `env` added to this one's
    (less NO_PROXY: the runner exempts localhost, and here the proxy must see `*.localhost`);
    returns (rows of each query, None) or (None, the error text)."""
    script = (
        "import json, sys\n"
        "sys.path.insert(0, %r)\n"
        "import duckdb\n"
        "from _harness import connect\n"
        "from _s3 import HTTPFS\n"
        "db = connect()\n"
        "db.execute(f\"LOAD '{HTTPFS}'\")\n"
        "try:\n"
        "    for q in %r: db.execute(q)\n"
        "    out = [[list(r) for r in db.execute(q).fetchall()] for q in %r]\n"
        "except duckdb.Error as e:\n"
        "    print(json.dumps({'error': str(e)}), flush=True); sys.exit(0)\n"
        "print(json.dumps({'rows': out}, default=str), flush=True)\n"
    ) % (HERE, setup, queries)
    child = {k: v for k, v in os.environ.items() if k.lower() != "no_proxy"}
    child.update(env)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, env=child)
    if out.returncode != 0 or not out.stdout.strip():
        raise RuntimeError(f"exit {out.returncode}: {out.stdout[-1000:]}\n{out.stderr[-3000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if "error" in got:
        return None, got["error"]
    return [[tuple(r) for r in q] for q in got["rows"]], None


def main():
    moto = Moto(os.path.join(TEST_DIR, "moto"))
    proxy = ForwardProxy()
    ca, cert, key = tls_files(os.path.join(TEST_DIR, "tls"),
                              ["localhost"] + [f"{b}.localhost" for b in BUCKETS])
    tls = TlsFront(moto.port, cert, key)
    try:
        scenario(moto, proxy, tls, ca)
    finally:
        tls.stop()
        proxy.stop()
        moto.stop()


def scenario(moto, proxy, tls, ca):
    for b in BUCKETS:
        moto.create_bucket(b)
    trusted = {"SSL_CERT_FILE": ca}
    proxied = {"HTTP_PROXY": proxy.url, "HTTPS_PROXY": proxy.url,
               "http_proxy": proxy.url, "https_proxy": proxy.url}
    http_proxy_sql = f"SET http_proxy = '127.0.0.1:{proxy.port}'"
    ca_sql = f"SET ca_cert_file = '{ca}'"
    forms = [
        # (name, bucket, endpoint, url style, TLS, environment, DuckDB settings, data path)
        ("virtual-hosted over HTTP", "moraine-vhost", f"localhost:{moto.port}", "vhost", False,
         {}, [http_proxy_sql], None),
        ("path-style over HTTPS", "moraine-https", f"127.0.0.1:{tls.port}", "path", True,
         trusted, [ca_sql], None),
        ("virtual-hosted over HTTPS", "moraine-https-vhost", f"localhost:{tls.port}", "vhost",
         True, trusted, [http_proxy_sql, ca_sql], None),
        # with no http_proxy setting moraine's client takes the environment's proxy (httpfs
        # would not: the data files stay local)
        ("virtual-hosted over HTTPS, the proxy from the environment", "moraine-env-proxy",
         f"localhost:{tls.port}", "vhost", True, {**trusted, **proxied}, [],
         os.path.join(TEST_DIR, "env-proxy-data") + "/"),
    ]
    for name, bucket, endpoint, style, use_ssl, env, settings, local_data in forms:
        meta, data = f"s3://{bucket}/meta", local_data or f"s3://{bucket}/data/"
        setup = settings + [secret_sql(moto, endpoint, style, use_ssl)]
        logged = len(moto.requests())
        got, err = run(setup + [f"ATTACH 'ducklake:moraine:{meta}' AS lake (DATA_PATH '{data}')"]
                       + WRITE[:-1], WRITE[-1:], env)
        check(f"{name}: a writer creates, inserts, updates and deletes", got == [WANT], err or got)
        got, err = run(setup + [f"ATTACH 'ducklake:moraine:{meta}' AS lake "
                                f"(READ_ONLY, DATA_PATH '{data}')"], READ, env)
        check(f"{name}: a fresh READ_ONLY process reads the rows",
              got == [WANT, [("reader",)]], err or got)
        # the processes' requests (before the harness's own listing below)
        # (less the harness's own requests for the other buckets, which its log may show late)
        paths = [p for _, p, _ in moto.requests()[logged:]
                 if not any(in_path(p, b) for b in BUCKETS if b != bucket)]
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
            tunnels = {a for m, a in proxy.seen if m == "CONNECT"}
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

    # ---- a certificate moraine does not trust --------------------------------------------------
    bucket = "moraine-untrusted"
    meta = f"s3://{bucket}/meta"
    other_ca, _, _ = tls_files(os.path.join(TEST_DIR, "tls-other"), ["localhost"])
    got, err = run([secret_sql(moto, f"127.0.0.1:{tls.port}", "path", True)],
                   [f"ATTACH 'ducklake:moraine:{meta}' AS lake (DATA_PATH '{TEST_DIR}/data/')"],
                   {"SSL_CERT_FILE": other_ca})
    check("HTTPS with an untrusted certificate fails ATTACH naming the URL",
          err is not None and meta in err, err or got)
    check("... and says why", err is not None and "invalid peer certificate" in err, err)
    check("... and writes nothing", moto.keys(bucket) == [], moto.keys(bucket))


if __name__ == "__main__":
    main()
    finish("s3_url_forms")
