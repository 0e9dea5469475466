"""Runs examples/handover.rs (what several writers would cost on SlateDB, RFC 0004 v3) against
the S3 test server: moto_server on 127.0.0.1, optionally behind a loopback proxy that holds
each piece of every answer back RTT milliseconds (so that time / RTT is about the round trips).
Also counts the requests the server answered during the run.

    MOTO_PYTHONPATH=~/.cache/moraine/pypi-moto python3 tests/bench/handover.py \
        EXAMPLE_BINARY [--rtt MS] [--rounds N]

Talks to no address but 127.0.0.1."""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e", "python"))
os.environ.setdefault("HTTPFS_EXT", "")  # _s3 reads it at import; nothing here loads httpfs
import _s3  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--rtt", type=float, default=0.0, help="milliseconds added to each answer")
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as home:
        moto = _s3.Moto(os.path.join(home, "moto"))
        proxy = None
        try:
            moto.create_bucket("handover")
            endpoint = moto.endpoint
            if args.rtt > 0:
                proxy = _s3.FaultProxy(moto.port)
                proxy.SLOW = args.rtt / 1000.0
                proxy.set("slow")
                endpoint = proxy.endpoint
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                   "AWS_ACCESS_KEY_ID": _s3.KEY_ID, "AWS_SECRET_ACCESS_KEY": _s3.SECRET,
                   "AWS_ENDPOINT": f"http://{endpoint}", "AWS_EC2_METADATA_DISABLED": "true",
                   "NO_PROXY": "*"}
            before = len(moto.requests())
            out = subprocess.run([args.binary, "s3://handover/db", str(args.rounds)], env=env,
                                 capture_output=True, text=True, timeout=1800)
            sys.stdout.write(out.stdout)
            if out.returncode != 0:
                sys.stderr.write(out.stderr)
                return out.returncode
            print(f"server: {len(moto.requests()) - before} requests answered in the run "
                  f"(rtt {args.rtt:g} ms added per answer)")
        finally:
            if proxy:
                proxy.stop()
            moto.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
