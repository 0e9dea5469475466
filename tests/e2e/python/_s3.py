"""The S3-compatible server of the S3 scenarios (not a scenario: the runner skips "_" files).

A scenario that says `# needs: moto_server` gets MOTO_PYTHONPATH (the pinned moto, installed by
`cargo xtask deps`) and HTTPFS_EXT (the pinned httpfs extension). `Moto()` starts moto_server on
127.0.0.1 on a free port with dummy credentials and nothing else in its environment, and
`stop()` ends it. Nothing here talks to any address but 127.0.0.1.
"""
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


def secret_sql(endpoint, name="moto", scope=None, key_id=KEY_ID, secret_key=SECRET):
    """A DuckDB secret for a server of this kind at `endpoint` (host:port, plain HTTP,
    path-style URLs)."""
    scope_sql = f", SCOPE '{scope}'" if scope else ""
    return (f"CREATE SECRET {name} (TYPE s3, KEY_ID '{key_id}', SECRET '{secret_key}', "
            f"REGION '{REGION}', ENDPOINT '{endpoint}', URL_STYLE 'path', "
            f"USE_SSL false{scope_sql})")


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
        (`key_id`, `secret_key`), and those buckets, and then checks every later request's
        access key, signature and policy (moto's INITIAL_NO_AUTH_ACTION_COUNT counts the
        requests answered unchecked: the start-up probe, three IAM calls, the buckets)."""
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
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(1 + 3 + len(checked_buckets))
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

    def _iam(self, action, **params):
        body = urllib.parse.urlencode(dict(params, Action=action, Version="2010-05-08")).encode()
        req = urllib.request.Request(
            self.url("/"), data=body, method="POST",
            headers={"Authorization": _AUTH.replace("/s3/", "/iam/"),
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

    def secret_sql(self, name="moto", scope=None, endpoint=None, key_id=None, secret_key=None):
        """A secret for the server (or for `endpoint`, a proxy in front of it), with the
        server's key unless `key_id` / `secret_key` say otherwise."""
        return secret_sql(endpoint or self.endpoint, name=name, scope=scope,
                          key_id=key_id or self.key_id, secret_key=secret_key or self.secret_key)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()



class FaultProxy:
    """A loopback TCP proxy in front of the S3 server that can fail on request.

    mode "pass" relays; "drop" closes each connection as it is accepted (and cuts those open);
    "hang" accepts and never answers; "503" answers every request with 503 Slow Down; "cut"
    relays each request but only the first half of the first piece of its answer, then closes
    the connection (the server has done the request; the client never learns how it went);
    "slow" relays every piece of every answer SLOW seconds late.
    """

    SLOW = 0.05

    def __init__(self, target_port):
        import socket
        self.target = ("127.0.0.1", target_port)
        self.mode = "pass"
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.open = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.port}"

    def set(self, mode):
        self.mode = mode
        if mode != "pass":
            with self.lock:
                for s in self.open:
                    try:
                        s.close()
                    except OSError:
                        pass
                self.open = []

    def _accept(self):
        import socket
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            mode = self.mode
            if mode == "drop":
                client.close()
                continue
            if mode == "hang":
                with self.lock:
                    self.open.append(client)
                continue
            if mode == "503":
                threading.Thread(target=self._slow_down, args=(client,), daemon=True).start()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.open += [client, upstream]
            for a, b, answer in ((client, upstream, False), (upstream, client, True)):
                threading.Thread(target=self._pipe, args=(a, b, answer), daemon=True).start()

    def _pipe(self, src, dst, answer):
        """Relays src to dst; on the server's side (`answer`) the mode may cut or delay it."""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if answer and self.mode == "cut":
                    dst.sendall(data[:max(1, len(data) // 2)])
                    break
                if answer and self.mode == "slow":
                    time.sleep(self.SLOW)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.close()
            except OSError:
                pass

    @staticmethod
    def _slow_down(client):
        body = (b"<?xml version=\"1.0\"?><Error><Code>SlowDown</Code>"
                b"<Message>injected by the test proxy</Message></Error>")
        try:
            client.settimeout(10)
            buf = b""
            while b"\r\n\r\n" not in buf:
                chunk = client.recv(65536)
                if not chunk:
                    break
                buf += chunk
            client.sendall(b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                           b"Connection: close\r\nContent-Length: " + str(len(body)).encode()
                           + b"\r\n\r\n" + body)
        except OSError:
            pass
        client.close()

    def stop(self):
        self.set("drop")
        self.sock.close()
