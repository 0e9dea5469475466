"""Wrong keys on an S3 store (issue 10): the pinned moto_server checks every request's access
key, signature and IAM policy, and moraine signs with the DuckDB secret's key and nothing else.

- A secret with the right key id and a wrong secret key, and one with a key id the server does
  not know: each ATTACH (read-write, and READ_ONLY) fails naming the URL and the server's
  refusal, and writes nothing.
- The right key attaches, commits and reads; a wrong key then still cannot read the lake, and
  leaves its objects exactly as they were.
- Two secrets covering the lake: the one whose SCOPE is longest signs (a wrong key there fails
  ATTACH though the bucket-wide secret is right; the other way round ATTACH works).
- Temporary credentials (an assumed role's key, from the server's STS): with a wrong session
  token, or none, ATTACH fails naming the URL and writes nothing; with the right
  `SESSION_TOKEN` the same key attaches, commits and reads.
"""
# needs: moto_server
import os
import urllib.error

from _harness import TEST_DIR, check, expect_error, finish
from _s3 import Moto, s3_connect

BUCKET = "moraine-keys"
META = f"s3://{BUCKET}/meta"
ATTACH = f"ATTACH 'ducklake:moraine:{META}' AS lake (READ_WRITE, DATA_PATH 's3://{BUCKET}/data/')"


def objects(moto):
    """Every key in the bucket, listed through DuckDB with the right key."""
    db = s3_connect(moto)
    try:
        return sorted(r[0] for r in db.execute(f"SELECT file FROM glob('s3://{BUCKET}/**')").fetchall())
    finally:
        db.close()


def with_secret(moto, **key):
    db = s3_connect(moto, secret=False)
    db.execute(moto.secret_sql(**key))
    return db


def scenario(moto):
    # the server does check: a request signed with no known key is refused
    try:
        moto.keys(BUCKET)
        refused = False
    except urllib.error.HTTPError as e:
        refused = e.code == 403
    check("the server refuses a request signed with an unknown key", refused)

    wrong = {
        "a wrong secret key": ({"secret_key": "not-the-secret-key"}, "signaturedoesnotmatch"),
        "an unknown key id": ({"key_id": "AKIAUNKNOWNUNKNOWN00"}, "invalidaccesskeyid"),
    }
    for what, (key, code) in wrong.items():
        for mode in ("READ_WRITE", "READ_ONLY"):
            db = with_secret(moto, **key)
            expect_error(f"ATTACH {mode} with {what} fails naming the URL",
                         lambda: db.execute(ATTACH.replace("READ_WRITE", mode)), META)
            expect_error(f"... and the server's refusal ({mode}, {what})",
                         lambda: db.execute(ATTACH.replace("READ_WRITE", mode)), code)
            db.close()
    check("the refused attaches wrote nothing", objects(moto) == [], objects(moto))

    db = s3_connect(moto)
    db.execute(ATTACH)
    db.execute("CREATE TABLE lake.t AS SELECT range AS i FROM range(3)")
    db.execute("INSERT INTO lake.t VALUES (10)")
    check("the right key attaches, commits and reads",
          db.execute("SELECT count(*), max(i) FROM lake.t").fetchall() == [(4, 10)])
    db.close()
    before = objects(moto)
    check("the lake's objects are under the prefix",
          before and all(k.startswith(f"{META}/") or k.startswith(f"s3://{BUCKET}/data/")
                         for k in before), before)
    for what, (key, code) in wrong.items():
        db = with_secret(moto, **key)
        expect_error(f"{what} cannot read the lake", lambda: db.execute(
            ATTACH.replace("READ_WRITE", "READ_ONLY")), code)
        db.close()
    check("the lake's objects are as they were", objects(moto) == before)
    db = s3_connect(moto)
    db.execute(ATTACH.replace("READ_WRITE", "READ_ONLY"))
    check("the right key still reads every row",
          db.execute("SELECT count(*), max(i) FROM lake.t").fetchall() == [(4, 10)])
    db.close()

    # ---- two secrets cover the URL: the one with the longest SCOPE signs ----------------------
    db = s3_connect(moto, secret=False)
    db.execute(moto.secret_sql(name="bucket_wide", scope=f"s3://{BUCKET}"))
    db.execute(moto.secret_sql(name="lake_only", scope=META, secret_key="not-the-secret-key"))
    expect_error("with a wrong key scoped to the lake's URL and the right one to its bucket, "
                 "the lake's secret signs and ATTACH fails",
                 lambda: db.execute(ATTACH.replace("READ_WRITE", "READ_ONLY")),
                 "signaturedoesnotmatch")
    db.close()
    db = s3_connect(moto, secret=False)
    db.execute(moto.secret_sql(name="bucket_wide", scope=f"s3://{BUCKET}",
                               secret_key="not-the-secret-key"))
    db.execute(moto.secret_sql(name="lake_only", scope=META))
    db.execute(ATTACH.replace("READ_WRITE", "READ_ONLY"))
    check("with the keys the other way round, the lake's secret signs and ATTACH reads",
          db.execute("SELECT mode FROM moraine_status('lake')").fetchall() == [("reader",)])
    db.close()
    check("... and nothing was written", objects(moto) == before)

    # ---- temporary credentials: the key of an assumed role and its session token --------------
    key_id, secret_key, token = moto.session
    for what, wrong_token, code in (
            ("a wrong session token", "not-the-" + token[:20], "invalidtoken"),
            # without a token the server looks for the key among permanent keys
            ("the temporary key without its session token", None, "invalidaccesskeyid")):
        for mode in ("READ_WRITE", "READ_ONLY"):
            db = with_secret(moto, key_id=key_id, secret_key=secret_key,
                             session_token=wrong_token)
            expect_error(f"ATTACH {mode} with {what} fails naming the URL",
                         lambda: db.execute(ATTACH.replace("READ_WRITE", mode)), META)
            expect_error(f"... and the server's refusal ({mode}, {what})",
                         lambda: db.execute(ATTACH.replace("READ_WRITE", mode)), code)
            db.close()
    check("... and leaves the lake's objects as they were", objects(moto) == before)
    db = with_secret(moto, key_id=key_id, secret_key=secret_key, session_token=token)
    db.execute(ATTACH)
    db.execute("INSERT INTO lake.t VALUES (20)")
    check("the temporary key with its session token attaches, commits and reads",
          db.execute("SELECT count(*), max(i) FROM lake.t").fetchall() == [(5, 20)])
    db.close()
    check("nothing written to the local disk",
          [f for r, _, fs in os.walk(TEST_DIR) if "moto" not in r for f in fs] == [])


def main():
    moto = Moto(os.path.join(TEST_DIR, "moto"), checked_buckets=[BUCKET])
    try:
        scenario(moto)
    finally:
        moto.stop()


if __name__ == "__main__":
    main()
    finish("s3_keys")
