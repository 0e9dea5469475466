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
import threading
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

HTTPFS = os.environ["HTTPFS_EXT"]
KEY_ID, SECRET, REGION = "moraine-test", "moraine-test-secret", "us-east-1"
# moto checks that a request is signed, not the signature
_AUTH = (f"AWS4-HMAC-SHA256 Credential={KEY_ID}/20260101/{REGION}/s3/aws4_request, "
         "SignedHeaders=host, Signature=0")


class Moto:
    def __init__(self, home):
        os.makedirs(home, exist_ok=True)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "PYTHONPATH": os.environ["MOTO_PYTHONPATH"],
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", "0"],
            env=env, cwd=home, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 60
        self.port = None
        seen = []
        while self.port is None:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("moto_server exited: " + "".join(seen))
            seen.append(line)
            m = re.search(r"Running on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if time.time() > deadline:
                self.stop()
                raise RuntimeError("moto_server did not start in 60 s: " + "".join(seen))
        # drain its log so it never blocks on a full pipe
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()
        while True:
            try:
                urllib.request.urlopen(self.url("/"), timeout=5).read()
                break
            except (urllib.error.URLError, ConnectionError):
                if time.time() > deadline:
                    self.stop()
                    raise RuntimeError("moto_server never answered")
                time.sleep(0.2)

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.port}"

    def url(self, path):
        return f"http://{self.endpoint}{path}"

    def _request(self, method, path, body=None):
        req = urllib.request.Request(self.url(path), data=body, method=method,
                                     headers={"Authorization": _AUTH,
                                              "Content-Type": "application/octet-stream"})
        with urllib.request.urlopen(req, timeout=30) as r:
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

    def secret_sql(self, name="moto", scope=None):
        scope_sql = f", SCOPE '{scope}'" if scope else ""
        return (f"CREATE SECRET {name} (TYPE s3, KEY_ID '{KEY_ID}', SECRET '{SECRET}', "
                f"REGION '{REGION}', ENDPOINT '{self.endpoint}', URL_STYLE 'path', "
                f"USE_SSL false{scope_sql})")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

