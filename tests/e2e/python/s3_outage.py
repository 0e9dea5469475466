"""Bounded failures on an S3 store (issue 10): a fault-injecting loopback proxy between moraine
and the pinned moto_server drops connections, hangs, answers 503, cuts each answer in the
middle, or delays every answer, with `moraine_io_timeout` set to 3 s.

- ATTACH during an outage fails naming the URL, within the limit, and writes nothing.
- A READ_ONLY reader's query during an outage answers or fails naming the URL; afterwards it
  reads again.
- A COMMIT during an outage fails within the limit and says its outcome is unknown. Once the
  store answers, the same attach's next statement settles the outcome and goes on: it sees the
  whole commit or none of it, and its next commit works; a fresh attach sees the same.
- A 10 s outage (issue 41): every commit during it fails within its limit, the first saying
  its outcome is unknown; the same session's first commit afterwards lands, without DETACH and
  ATTACH, and every acknowledged row is there.
- With every answer delayed (but well within the limit) attach, commit and query still work.
Every statement runs under a hard limit (60 s): a hang fails the scenario at once.
"""
# needs: moto_server
import os
import threading

import duckdb

from _harness import TEST_DIR, check, finish
from _s3 import FaultProxy, Moto, s3_connect

BUCKET = "moraine-outage"
META = f"s3://{BUCKET}/meta"
HARD_LIMIT = 60


def bounded(db, sql):
    """Runs `sql`; returns None or the error text. A statement still running after HARD_LIMIT
    is reported as a hang (its thread is left behind, a daemon: the scenario fails anyway)."""
    out = {}

    def run():
        try:
            db.execute(sql).fetchall()
            out["err"] = None
        except duckdb.Error as e:
            out["err"] = str(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(HARD_LIMIT)
    if "err" not in out:
        # the connection is still busy: closing it could hang too, so stop here
        print(f"FAIL no statement may hang: {sql!r} ran for {HARD_LIMIT} s", flush=True)
        os._exit(1)
    return out["err"]


def proxied(proxy, moto):
    """A DuckDB reaching the server through the proxy, with a 3 s store time limit."""
    db = s3_connect(moto, endpoint=proxy.endpoint)
    db.execute("SET moraine_io_timeout = '3 seconds'")
    # a commit error DuckLake retried would end "Exceeded the maximum retry count of 2"
    db.execute("SET ducklake_max_retry_count = 2")
    db.execute("SET ducklake_retry_wait_ms = 1")
    return db


ATTACH = f"ATTACH 'ducklake:moraine:{META}' AS lake (READ_WRITE, DATA_PATH 's3://{BUCKET}/data/')"


def scenario(moto, proxy):
    moto.create_bucket(BUCKET)
    # ---- an attach during an outage ------------------------------------------------------------
    for mode in ("drop", "hang", "503", "cut"):
        proxy.set(mode)
        db = proxied(proxy, moto)
        err = bounded(db, ATTACH)
        check(f"ATTACH during an outage ({mode}) fails, naming the URL",
              err is not None and META in err and "cannot reach" in err, err)
        db.close()
    proxy.set("pass")
    check("the failed attaches wrote nothing", moto.keys(BUCKET) == [], moto.keys(BUCKET))

    # ---- a commit during an outage -------------------------------------------------------------
    db = proxied(proxy, moto)
    check("ATTACH through the proxy", bounded(db, ATTACH) is None)
    check("CREATE + INSERT", bounded(db, "CREATE TABLE lake.t (i INTEGER)") is None
          and bounded(db, "INSERT INTO lake.t VALUES (1)") is None)
    # ---- a READ_ONLY reader during an outage: its queries answer or fail, never hang ---------
    reader = proxied(proxy, moto)
    check("a READ_ONLY attach", bounded(reader, ATTACH.replace("READ_WRITE", "READ_ONLY")) is None)
    proxy.set("hang")
    err = bounded(reader, "SELECT count(*) FROM lake.t")
    check("a reader's query during an outage answers or fails naming the URL",
          err is None or "cannot reach" in err, err)
    proxy.set("pass")
    check("after it the reader reads again", bounded(reader, "SELECT count(*) FROM lake.t") is None
          and reader.execute("SELECT count(*) FROM lake.t").fetchall() == [(1,)])
    reader.close()

    acked, maybe = [1], []
    for mode, value in (("drop", 2), ("hang", 3), ("503", 4), ("cut", 5)):
        proxy.set(mode)
        err = bounded(db, f"INSERT INTO lake.t VALUES ({value})")
        check(f"a commit during an outage ({mode}) fails, saying its outcome is unknown",
              err is not None and "outcome of the commit is unknown" in err, err)
        check(f"... and DuckLake does not retry it ({mode})",
              err is not None and "maximum retry count" not in err
              and not any(w in err.lower() for w in ("conflict", "unique", "primary key",
                                                     "concurrent")), err)
        proxy.set("pass")
        err = bounded(db, "SELECT count(*) FROM lake.t")
        check(f"after it ({mode}) the same attach settles the commit and reads again", err is None, err)
        got = [r[0] for r in db.execute("SELECT i FROM lake.t ORDER BY i").fetchall()]
        check(f"every acknowledged commit is there, the failed one once or not at all ({mode})",
              set(acked) <= set(got) and got.count(value) <= 1
              and set(got) <= set(acked) | set(maybe) | {value}, (got, acked))
        check(f"... and commits again ({mode})",
              bounded(db, f"INSERT INTO lake.t VALUES ({20 + value})") is None)
        acked.append(20 + value)
        got = sorted(got + [20 + value])
        bounded(db, "DETACH lake")
        db.close()
        db = proxied(proxy, moto)
        check(f"a fresh attach after the outage ({mode})", bounded(db, ATTACH) is None)
        again = [r[0] for r in db.execute("SELECT i FROM lake.t ORDER BY i").fetchall()]
        check(f"... sees what the settled attach saw ({mode})", again == got, (again, got))
        maybe.append(value)
        check(f"the next commit works ({mode})",
              bounded(db, f"INSERT INTO lake.t VALUES ({10 + value})") is None
              and db.execute(f"SELECT count(*) FROM lake.t WHERE i = {10 + value}").fetchall()
              == [(1,)])
        acked.append(10 + value)

    # ---- a 10 s outage: every commit during it fails within its limit; the same session's
    # first commit after it lands, without DETACH/ATTACH ------------------------------------------
    import time
    proxy.set("hang")
    outage_ends = time.monotonic() + 10
    took, errs, value = [], [], 200
    while time.monotonic() < outage_ends:
        started = time.monotonic()
        err = bounded(db, f"INSERT INTO lake.t VALUES ({value})")
        took.append(time.monotonic() - started)
        errs.append(err)
        maybe.append(value)
        value += 1
    proxy.set("pass")
    # (a statement runs a few storage steps, each within the 3 s limit: settling the earlier
    # commit, reading the head, creating the commit object)
    check("every commit during a 10 s outage fails", all(e is not None for e in errs), errs)
    check("... each within its time limit", max(took) < 12, took)
    check("... the first saying its outcome is unknown",
          errs[0] is not None and "outcome of the commit is unknown" in errs[0], errs[0])
    err = bounded(db, "INSERT INTO lake.t VALUES (300)")
    check("the same session's first commit after the outage lands", err is None, err)
    acked.append(300)
    got = [r[0] for r in db.execute("SELECT i FROM lake.t ORDER BY i").fetchall()]
    check("every acknowledged commit is there after the outage, the failed ones once at most",
          set(acked) <= set(got) and len(got) == len(set(got))
          and set(got) <= set(acked) | set(maybe), (got, acked))
    db.close()

    # ---- a slow service: every answer late, the statements within the limit --------------------
    proxy.set("slow")
    db = proxied(proxy, moto)
    check("ATTACH with every answer delayed", bounded(db, ATTACH) is None)
    err = bounded(db, "INSERT INTO lake.t VALUES (100)")
    check("a commit with every answer delayed is acknowledged", err is None, err)
    acked.append(100)
    db.close()
    proxy.set("pass")
    db = proxied(proxy, moto)
    check("a fresh attach after the slow service", bounded(db, ATTACH) is None)
    got = [r[0] for r in db.execute("SELECT i FROM lake.t ORDER BY i").fetchall()]
    check("every acknowledged commit is there, the slow one too",
          set(acked) <= set(got) and set(got) <= set(acked) | set(maybe), (got, acked))
    db.close()
    check("nothing written to the local disk",
          [f for r, _, fs in os.walk(TEST_DIR) if "moto" not in r for f in fs] == [])


def main():
    moto = Moto(os.path.join(TEST_DIR, "moto"))
    proxy = FaultProxy(moto.port)
    try:
        scenario(moto, proxy)
    finally:
        proxy.stop()
        moto.stop()


if __name__ == "__main__":
    main()
    finish("s3_outage")
