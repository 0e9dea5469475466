"""The S3-compatible server of the S3 scenarios (not a scenario: the runner skips "_" files).

A scenario that says `# needs: moto_server` gets MOTO_PYTHONPATH (the pinned moto, installed by
`cargo xtask deps`) and HTTPFS_EXT (the pinned httpfs extension). `Moto()` starts moto_server on
127.0.0.1 on a free port with dummy credentials and nothing else in its environment, and
`stop()` ends it. Nothing here talks to any address but 127.0.0.1.
"""
import json
import os
import re
import subprocess
import sys
import time
import queue
import threading
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

HTTPFS = os.environ["HTTPFS_EXT"]
KEY_ID, SECRET, REGION = "moraine-test", "moraine-test-secret", "us-east-1"
# requests to the server never go through a proxy the environment names
_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# moto checks that a request is signed, not the signature
# the server's log line of each request it answers (werkzeug's)
_REQUEST_LINE = re.compile(r'"([A-Z]+) (\S+) HTTP/[\d.]+" (\d{3})')
_AUTH = (f"AWS4-HMAC-SHA256 Credential={KEY_ID}/20260101/{REGION}/s3/aws4_request, "
         "SignedHeaders=host, Signature=0")


def secret_sql(endpoint, name="moto", scope=None, key_id=KEY_ID, secret_key=SECRET,
               session_token=None, url_style="path", use_ssl=False):
    """A DuckDB secret for a server of this kind at `endpoint` (host:port; by default plain
    HTTP and path-style URLs)."""
    scope_sql = f", SCOPE '{scope}'" if scope else ""
    token_sql = f", SESSION_TOKEN '{session_token}'" if session_token else ""
    return (f"CREATE SECRET {name} (TYPE s3, KEY_ID '{key_id}', SECRET '{secret_key}', "
            f"REGION '{REGION}', ENDPOINT '{endpoint}', URL_STYLE '{url_style}', "
            f"USE_SSL {str(use_ssl).lower()}{scope_sql}{token_sql})")


def fresh_process(setup, queries, env=None, timeout=300):
    """Runs `setup` then `queries` in a new python3 process (a stock DuckDB with DuckLake,
    moraine and httpfs loaded, `env` its environment, this one's by default, stopped after
    `timeout` seconds); returns (rows of each query, None), or (None, the error text) when a
    statement fails. A process that ends any other way raises, with its output."""
    script = (
        "import json, sys\n"
        "sys.path.insert(0, %r)\n"
        "import duckdb\n"
        "from _s3 import s3_connect\n"
        "db = s3_connect(None, secret=False)\n"
        "try:\n"
        "    for q in %r: db.execute(q)\n"
        "    out = [[list(r) for r in db.execute(q).fetchall()] for q in %r]\n"
        "except duckdb.Error as e:\n"
        "    print(json.dumps({'error': str(e)}), flush=True); sys.exit(0)\n"
        "print(json.dumps({'rows': out}, default=str), flush=True)\n"
    ) % (os.path.dirname(os.path.abspath(__file__)), setup, queries)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=timeout, env=os.environ if env is None else env)
    if out.returncode != 0 or not out.stdout.strip():
        raise RuntimeError(f"exit {out.returncode}: {out.stdout[-1000:]}\n{out.stderr[-3000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if "error" in got:
        return None, got["error"]
    return [[tuple(r) for r in q] for q in got["rows"]], None


def s3_connect(moto, endpoint=None, secret=True):
    """A fresh stock DuckDB (`_harness.connect`) with httpfs loaded and, unless `secret` is
    false, a secret for the server (or for `endpoint`, a proxy in front of it)."""
    from _harness import connect
    db = connect()
    db.execute(f"LOAD '{HTTPFS}'")
    if secret:
        db.execute(moto.secret_sql(endpoint=endpoint))
    return db


class Moto:
    def __init__(self, home, checked_buckets=None):
        """By default the server checks no request's key or signature (any secret works).
        With `checked_buckets` it creates an IAM user with an access key allowed everything
        (`key_id`, `secret_key`), a role allowed everything and temporary credentials for it
        (`session`: key id, secret key, session token, from STS AssumeRole), and those
        buckets, and then checks every later request's access key, signature, session token
        and policy (moto's INITIAL_NO_AUTH_ACTION_COUNT counts the requests answered
        unchecked: the start-up probe, six IAM and STS calls, the buckets)."""
        os.makedirs(home, exist_ok=True)
        self.key_id, self.secret_key = KEY_ID, SECRET
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "PYTHONPATH": os.environ["MOTO_PYTHONPATH"],
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        if checked_buckets is not None:
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(1 + 6 + len(checked_buckets))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", "0"],
            env=env, cwd=home, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 60
        lines = queue.Queue()

        self._requests = []  # (method, path, status) of every request served, in order
        self._log_lock = threading.Lock()

        def read_log():
            # its whole log is read, so it never blocks on a full pipe
            for line in self.proc.stdout:
                m = _REQUEST_LINE.search(line)
                if m:
                    with self._log_lock:
                        self._requests.append((m.group(1), m.group(2), int(m.group(3))))
                else:
                    lines.put(line)
            lines.put(None)
        threading.Thread(target=read_log, daemon=True).start()
        self.port = None
        seen = []
        while self.port is None:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                line = ""
            if line is None:
                raise RuntimeError("moto_server exited: " + "".join(seen))
            seen.append(line)
            m = re.search(r"Running on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            elif time.time() > deadline:
                self.stop()
                raise RuntimeError("moto_server did not start in 60 s: " + "".join(seen))
        while True:
            try:
                _LOOPBACK.open(self.url("/"), timeout=5).read()
                break
            except (urllib.error.URLError, ConnectionError):
                if time.time() > deadline:
                    self.stop()
                    raise RuntimeError("moto_server never answered")
                time.sleep(0.2)
        if checked_buckets is not None:
            self._create_checked_key()
            for bucket in checked_buckets:
                self.create_bucket(bucket)

    def _iam(self, action, service="iam", version="2010-05-08", **params):
        body = urllib.parse.urlencode(dict(params, Action=action, Version=version)).encode()
        req = urllib.request.Request(
            self.url("/"), data=body, method="POST",
            headers={"Authorization": _AUTH.replace("/s3/", f"/{service}/"),
                     "Content-Type": "application/x-www-form-urlencoded"})
        with _LOOPBACK.open(req, timeout=30) as r:
            return r.read().decode()

    def _create_checked_key(self):
        self._iam("CreateUser", UserName="moraine-test")
        created = self._iam("CreateAccessKey", UserName="moraine-test")
        self.key_id = re.search(r"<AccessKeyId>(.*?)</AccessKeyId>", created).group(1)
        self.secret_key = re.search(r"<SecretAccessKey>(.*?)</SecretAccessKey>", created).group(1)
        everything = ('{"Version": "2012-10-17", "Statement": '
                      '[{"Effect": "Allow", "Action": "*", "Resource": "*"}]}')
        self._iam("PutUserPolicy", UserName="moraine-test", PolicyName="everything",
                  PolicyDocument=everything)
        trust = ('{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", '
                 '"Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}')
        role = re.search(r"<Arn>(.*?)</Arn>", self._iam(
            "CreateRole", RoleName="moraine-test-role", AssumeRolePolicyDocument=trust)).group(1)
        self._iam("PutRolePolicy", RoleName="moraine-test-role", PolicyName="everything",
                  PolicyDocument=everything)
        assumed = self._iam("AssumeRole", service="sts", version="2011-06-15", RoleArn=role,
                            RoleSessionName="moraine-test")
        self.session = tuple(re.search(f"<{tag}>(.*?)</{tag}>", assumed).group(1)
                             for tag in ("AccessKeyId", "SecretAccessKey", "SessionToken"))

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.port}"

    def requests(self):
        """Every request the server has logged so far, as (method, path, status), in order
        (the server logs a request as it answers it)."""
        with self._log_lock:
            return list(self._requests)

    def url(self, path):
        return f"http://{self.endpoint}{path}"

    def _request(self, method, path, body=None):
        req = urllib.request.Request(self.url(path), data=body, method=method,
                                     headers={"Authorization": _AUTH,
                                              "Content-Type": "application/octet-stream"})
        with _LOOPBACK.open(req, timeout=30) as r:
            return r.read()

    def create_bucket(self, bucket):
        self._request("PUT", f"/{bucket}")

    def keys(self, bucket, prefix=""):
        """Every object key in `bucket` under `prefix`."""
        out, token = [], None
        while True:
            q = f"/{bucket}?list-type=2&prefix={urllib.parse.quote(prefix)}"
            if token:
                q += f"&continuation-token={urllib.parse.quote(token)}"
            root = ET.fromstring(self._request("GET", q))
            ns = {"s3": root.tag.split("}")[0].strip("{")} if root.tag.startswith("{") else {}
            find = (lambda e, t: e.findall(f"s3:{t}", ns)) if ns else (lambda e, t: e.findall(t))
            for c in find(root, "Contents"):
                out.append((find(c, "Key")[0]).text)
            trunc = find(root, "IsTruncated")
            nxt = find(root, "NextContinuationToken")
            if not trunc or trunc[0].text != "true" or not nxt:
                return out
            token = nxt[0].text

    def secret_sql(self, name="moto", scope=None, endpoint=None, key_id=None, secret_key=None,
                   session_token=None, url_style="path", use_ssl=False):
        """A secret for the server (or for `endpoint`, a proxy or TLS front before it), with
        the server's key unless `key_id` / `secret_key` / `session_token` say otherwise."""
        return secret_sql(endpoint or self.endpoint, name=name, scope=scope,
                          key_id=key_id or self.key_id, secret_key=secret_key or self.secret_key,
                          session_token=session_token, url_style=url_style, use_ssl=use_ssl)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()



class _Server:
    """A loopback listener on a free port that serves each connection in a thread of its own
    (`_serve`, defined by the subclass) from `_start()` until `stop()`."""

    def _start(self):
        self.sock = _listen()
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def stop(self):
        self.sock.close()


class FaultProxy(_Server):
    """A loopback TCP proxy in front of the S3 server that can fail on request.

    mode "pass" relays; "drop" closes each connection as it is accepted (and cuts those open);
    "hang" accepts and never answers; "503" answers every request with 503 Slow Down; "cut"
    relays each request but only the first half of the first piece of its answer, then closes
    the connection (the server has done the request; the client never learns how it went);
    "slow" relays every piece of every answer SLOW seconds late; "rtt" adds RTT seconds to
    every request, as a network round trip would (the first piece of each answer goes on RTT
    seconds after the server sent it: a connection's answer follows its request, so each
    request pays it once; connection set-up is not delayed).
    """

    SLOW = 0.05
    RTT = 0.02

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.mode = "pass"
        self.open = []
        self.lock = threading.Lock()
        # in "rtt" mode, every request relayed: [target (path and query), bytes up, bytes down]
        self.traffic = []
        self._start()

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.port}"

    def set(self, mode):
        self.mode = mode
        if mode != "pass":
            with self.lock:
                _close(*self.open)
                self.open = []

    def _serve(self, client):
        import socket
        mode = self.mode
        if mode == "drop":
            client.close()
            return
        if mode == "hang":
            with self.lock:
                self.open.append(client)
            return
        if mode == "503":
            self._slow_down(client)
            return
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            client.close()
            return
        with self.lock:
            self.open += [client, upstream]
        if mode == "rtt":
            asked = threading.Event()
            current = [None]  # this connection's request in flight, as an entry of `traffic`

            def request(data):
                asked.set()
                line = data.split(b"\r\n", 1)[0].split(b" ")
                if len(line) == 3 and line[2].startswith(b"HTTP/1."):
                    current[0] = [line[1].decode("latin-1"), 0, 0]
                    with self.lock:
                        self.traffic.append(current[0])
                if current[0] is not None:
                    current[0][1] += len(data)
                return data, False

            def answer(data):
                if asked.is_set():
                    asked.clear()
                    time.sleep(self.RTT)
                if current[0] is not None:
                    current[0][2] += len(data)
                return data, False

            _join(client, upstream, answer=answer, request=request)
            return
        _join(client, upstream, answer=self._answer)

    def _answer(self, data):
        """A piece of the server's answer as the mode passes it on: (bytes, whether to stop)."""
        if self.mode == "cut":
            return data[:max(1, len(data) // 2)], True
        if self.mode == "slow":
            time.sleep(self.SLOW)
        return data, False

    @staticmethod
    def _slow_down(client):
        body = (b"<?xml version=\"1.0\"?><Error><Code>SlowDown</Code>"
                b"<Message>injected by the test proxy</Message></Error>")
        try:
            _read_head(client)
            client.sendall(b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                           b"Connection: close\r\nContent-Length: " + str(len(body)).encode()
                           + b"\r\n\r\n" + body)
        except OSError:
            pass
        client.close()

    def stop(self):
        self.set("drop")
        self.sock.close()


def _close(*socks):
    """Closes each socket, whatever state it is in."""
    for sock in socks:
        try:
            sock.close()
        except OSError:
            pass


def _relay(src, dst, shape=None):
    """Copies src to dst until either side closes (or `shape`, given each piece, says to stop
    after the bytes it returns), then closes both."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            stop = False
            if shape is not None:
                data, stop = shape(data)
            dst.sendall(data)
            if stop:
                break
    except OSError:
        pass
    _close(src, dst)


def _join(client, server, answer=None, request=None):
    """Relays client and server both ways, each direction in a thread of its own; `answer`
    may shape the server's side and `request` the client's (see `_relay`)."""
    for src, dst, shape in ((client, server, request), (server, client, answer)):
        threading.Thread(target=_relay, args=(src, dst, shape), daemon=True).start()


def _read_head(client):
    """What `client` sends up to the end of its first request's head (all of it if it closes
    first), waiting at most 10 s for each piece."""
    client.settimeout(10)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = client.recv(65536)
        if not chunk:
            break
        head += chunk
    return head


def _listen():
    import socket
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


def tls_files(directory, names):
    """A test certificate authority and a server certificate for `names` (DNS names) and
    127.0.0.1, made with the `cryptography` package that moto brings; returns the paths of the
    authority's certificate, the server's certificate and its key (PEM)."""
    os.makedirs(directory, exist_ok=True)
    ca, cert, key = (os.path.join(directory, f) for f in ("ca.pem", "server.pem", "server.key"))
    script = r'''
import datetime, ipaddress, sys
from cryptography import x509
from cryptography.x509.oid import NameOID
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
ca_path, cert_path, key_path, *names = sys.argv[1:]
now = datetime.datetime.now(datetime.timezone.utc)
def name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
ca = (x509.CertificateBuilder().subject_name(name("moraine test CA")).issuer_name(name("moraine test CA"))
      .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
      .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
      .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
      .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                   content_commitment=False, key_encipherment=False,
                                   data_encipherment=False, key_agreement=False,
                                   encipher_only=False, decipher_only=False), critical=True)
      .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
      .sign(ca_key, hashes.SHA256()))
sans = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
leaf = (x509.CertificateBuilder().subject_name(name(names[0])).issuer_name(ca.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256()))
open(ca_path, "wb").write(ca.public_bytes(serialization.Encoding.PEM))
open(cert_path, "wb").write(leaf.public_bytes(serialization.Encoding.PEM))
open(key_path, "wb").write(key.private_bytes(serialization.Encoding.PEM,
    serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
'''
    subprocess.run([sys.executable, "-c", script, ca, cert, key, *names], check=True, timeout=60,
                   env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                        "PYTHONPATH": os.environ["MOTO_PYTHONPATH"]})
    return ca, cert, key


class TlsFront(_Server):
    """HTTPS in front of the S3 server: a loopback listener that completes a TLS handshake with
    the given certificate and relays the plain bytes to the server (which then sees the
    client's Host header as sent)."""

    def __init__(self, target_port, cert, key):
        import ssl
        self.target = ("127.0.0.1", target_port)
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.handshakes = []  # (server name the client asked for, or None) of each handshake
        self.ctx.sni_callback = lambda conn, server_name, ctx: self.handshakes.append(server_name)
        self._start()

    def _serve(self, client):
        import socket
        try:
            client.settimeout(10)
            tls = self.ctx.wrap_socket(client, server_side=True)
            tls.settimeout(None)
            upstream = socket.create_connection(self.target, timeout=10)
            upstream.settimeout(None)
        except OSError:  # a client that refuses the certificate ends here
            client.close()
            return
        # one thread per connection: an SSL socket must not be read and written at once
        import select
        try:
            while True:
                ready = [tls] if tls.pending() else select.select([tls, upstream], [], [])[0]
                for src in ready:
                    data = src.recv(65536)
                    if not data:
                        raise EOFError
                    (upstream if src is tls else tls).sendall(data)
        except (OSError, EOFError):
            pass
        _close(tls, upstream)


class ForwardProxy(_Server):
    """An HTTP proxy on loopback for names that only it can resolve: `localhost` and every
    `<name>.localhost` (a virtual-hosted bucket's host) go to 127.0.0.1, any other host is
    refused with 403, so nothing leaves the machine. It serves CONNECT (HTTPS) by tunnelling,
    and a plain request in absolute form (`GET http://host:port/key`) by passing the bytes on as
    they are (the S3 server takes the host from the absolute URL). With `user` and `password`
    it answers 407 to a connection whose first request does not carry them (Basic). `seen`
    holds each connection's (method, host:port); `refused` counts the 407s."""

    def __init__(self, user=None, password=None):
        import base64
        self.seen = []
        self.refused = 0
        self.credentials = None if user is None else (
            "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
        self._start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def _serve(self, client):
        import socket
        try:
            head = _read_head(client)
            if b"\r\n\r\n" not in head:
                raise OSError("closed before a request")
            lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            method, target = lines[0].split(" ")[:2]
            authority = target if method == "CONNECT" else urllib.parse.urlsplit(target).netloc
            host, _, port = authority.rpartition(":")
            given = [l.split(":", 1)[1].strip() for l in lines[1:]
                     if l.lower().startswith("proxy-authorization:")]
            if self.credentials is not None and given != [self.credentials]:
                self.refused += 1
                client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                               b"Proxy-Authenticate: Basic realm=\"moraine-test\"\r\n"
                               b"Content-Length: 0\r\nConnection: close\r\n\r\n")
                client.close()
                return
            self.seen.append((method, authority))
            if not (host in ("localhost", "127.0.0.1") or host.endswith(".localhost")) or not port:
                client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n"
                               b"Connection: close\r\n\r\n")
                client.close()
                return
            upstream = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
            upstream.settimeout(None)
            client.settimeout(None)
            if method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                rest = head.split(b"\r\n\r\n", 1)[1]
            else:
                rest = head
            if rest:
                upstream.sendall(rest)
        except (OSError, ValueError):
            client.close()
            return
        _join(client, upstream)
