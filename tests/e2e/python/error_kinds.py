"""Typed errors across the C boundary, end to end (issue 11): the kind of each moraine error picks
DuckDB's exception type, and DuckLake's commit retry (which reads only the message: "conflict",
"primary key", "unique", "concurrent") sees exactly the conflicts.

- A commit race through DuckLake is a conflict: DuckLake retries it and the loser lands.
- A writer whose folder role another process took (RFC 0004 v3) goes on: its next commit lands
  (DuckLake retries the conflict when the other committed first) and its reads work.
- A bad URL is an Invalid Input Error, a table moraine does not serve and an existing schema
  are Catalog Errors, deleting the head snapshot is a constraint violation.
- A store path holding DuckLake's retry words: the error names the path, and the words are
  broken (by an invisible U+2060), so DuckLake could never retry it.
- A commit of unknown outcome (an S3 lake whose service stops answering mid-commit, through a
  fault-injecting proxy in front of moto_server): the user reads that the commit may or may not
  have been applied, unlike an I/O failure that wrote nothing ("cannot reach"); DuckLake does not
  retry it; the attach's next statement is a Connection Error saying so while the service still
  does not answer, and once it answers the next statement settles the outcome and goes on.

Host: the pinned `duckdb==1.5.5` Python package. Run by `cargo xtask e2e`.
"""
# needs: moto_server
import os
import subprocess
import sys
import threading


from _harness import TEST_DIR, check, connect, error_of, finish
from _s3 import FaultProxy, Moto, s3_connect

RETRY_WORDS = ("conflict", "primary key", "unique", "concurrent")
ATTACH = f"ATTACH 'ducklake:moraine:{TEST_DIR}/meta' AS lake (DATA_PATH '{TEST_DIR}/data/')"


def retried(message):
    return "exceeded the maximum retry count" in message.lower()


db = connect()
db.execute(ATTACH)
db.execute("CREATE TABLE lake.t (i INTEGER)")
db.execute("SET ducklake_max_retry_count = 2")
db.execute("SET ducklake_retry_wait_ms = 1")

# ---- a conflict: retried ---------------------------------------------------------------------
a, b = db.cursor(), db.cursor()
a.execute("BEGIN")
b.execute("BEGIN")
a.execute("INSERT INTO lake.t VALUES (1)")
b.execute("INSERT INTO lake.t VALUES (2)")
a.execute("COMMIT")
kind, msg = error_of(lambda: b.execute("COMMIT"))
check("the loser of a commit race is retried by DuckLake and lands", kind is None, msg)
check("both rows are there", db.execute("SELECT i FROM lake.t ORDER BY i").fetchall() == [(1,), (2,)])

# ---- errors outside a commit: their types ----------------------------------------------------
kind, msg = error_of(lambda: db.execute("ATTACH 'moraine:ftp://x' AS bad"))
check("a bad URL is an Invalid Input Error", kind == "InvalidInputException" and "ftp://" in msg,
      (kind, msg))
kind, msg = error_of(lambda: db.execute("CREATE TABLE __ducklake_metadata_lake.main.foo (i INT)"))
check("a table moraine does not serve is a Catalog Error", kind == "CatalogException", (kind, msg))
kind, msg = error_of(lambda: db.execute("CREATE SCHEMA __ducklake_metadata_lake.main"))
check("an existing schema is a Catalog Error", kind == "CatalogException", (kind, msg))
kind, msg = error_of(lambda: db.execute(
    "DELETE FROM __ducklake_metadata_lake.main.ducklake_snapshot WHERE snapshot_id = "
    "(SELECT max(snapshot_id) FROM __ducklake_metadata_lake.main.ducklake_snapshot)"))
check("deleting the head snapshot is a constraint violation (at COMMIT, which DuckDB reports "
      "as a TransactionContext Error)",
      kind == "TransactionException" and "constraint violation" in msg and "head snapshot" in msg,
      (kind, msg))

# ---- a store path holding the retry words ----------------------------------------------------
odd = os.path.join(TEST_DIR, "a-conflict-of-unique-concurrent-names")
with open(odd, "w") as f:
    f.write("not a store")
kind, msg = error_of(lambda: db.execute(f"ATTACH 'moraine:{odd}' AS odd"))
check("a store path that is a file is refused naming the path",
      kind == "InvalidInputException" and odd in (msg or "").replace("\u2060", ""), (kind, msg))
check("... with none of DuckLake's retry words left whole in the message",
      msg is not None and not any(w in msg.lower() for w in RETRY_WORDS), msg)

# ---- a writer whose folder role another process took: it goes on ------------------------------
other = (
    "import sys\n"
    f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
    "from _harness import connect\n"
    "d = connect()\n"
    f"d.execute({ATTACH!r})\n"
    "d.execute('INSERT INTO lake.t VALUES (7)')\n"
    "d.close()\n"
)
done = subprocess.run([sys.executable, "-c", other], capture_output=True, text=True, timeout=120)
check("another process attaches the lake read-write and commits", done.returncode == 0,
      done.stderr[-2000:])
kind, msg = error_of(lambda: db.execute("INSERT INTO lake.t VALUES (3)"))
check("this attach's next commit lands all the same", kind is None, (kind, msg))
rows = db.execute("SELECT i FROM lake.t ORDER BY i").fetchall()
check("... and its reads see both processes' commits", rows == [(1,), (2,), (3,), (7,)], rows)
db.close()

fresh = connect()
fresh.execute(ATTACH)
rows = fresh.execute("SELECT i FROM lake.t ORDER BY i").fetchall()
check("a fresh attach holds every acknowledged commit", rows == [(1,), (2,), (3,), (7,)], rows)
fresh.close()


# ---- a commit of unknown outcome: not retried, and said so -----------------------------------
def bounded(db, sql, limit=60):
    """(exception class name, message) of running `sql`, or (None, None); a statement still
    running after `limit` seconds fails the scenario at once (its thread is left behind)."""
    out = {}

    def run():
        out["result"] = error_of(lambda: db.execute(sql).fetchall())
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(limit)
    if "result" not in out:
        print(f"FAIL no statement may hang: {sql!r} ran for {limit} s", flush=True)
        os._exit(1)
    return out["result"]


moto = Moto(os.path.join(TEST_DIR, "moto"))
proxy = FaultProxy(moto.port)
try:
    moto.create_bucket("kinds")
    s3_attach = ("ATTACH 'ducklake:moraine:s3://kinds/meta' AS lake "
                 "(READ_WRITE, DATA_PATH 's3://kinds/data/')")
    s3 = s3_connect(moto, endpoint=proxy.endpoint)
    s3.execute("SET moraine_io_timeout = '2 seconds'")
    s3.execute("SET ducklake_max_retry_count = 2")
    s3.execute("SET ducklake_retry_wait_ms = 1")
    check("an S3 lake through the proxy", bounded(s3, s3_attach) == (None, None))
    check("... takes a commit", bounded(s3, "CREATE TABLE lake.t (i INTEGER)") == (None, None)
          and bounded(s3, "INSERT INTO lake.t VALUES (1)") == (None, None))

    # an attach during an outage wrote nothing, and says only that the store was not reached
    # (another lake: one open in this process would be shared, not opened)
    proxy.set("hang")
    other = s3_connect(moto, endpoint=proxy.endpoint)
    other.execute("SET moraine_io_timeout = '2 seconds'")
    kind, msg = bounded(other, "ATTACH 'moraine:s3://kinds/other' AS other")
    check("an attach during an outage is an IO Error: the store was not reached",
          kind == "IOException" and "cannot reach" in msg and "may or may not" not in msg,
          (kind, msg))
    other.close()

    # the service stops answering while a commit writes: its outcome is unknown
    kind, msg = bounded(s3, "INSERT INTO lake.t VALUES (2)")
    check("a commit whose write outlived the time limit says its outcome is unknown",
          msg is not None and "the outcome of the commit is unknown" in msg, (kind, msg))
    check("... that it may or may not have been applied",
          msg is not None and "may or may not have been applied" in msg, msg)
    check("... and what happens next (the next statement settles it)",
          msg is not None and "the next statement settles it" in msg, msg)
    check("... and DuckLake did not retry it", msg is not None and not retried(msg), msg)
    check("... and its message holds no retry word",
          msg is not None and not any(w in msg.lower() for w in RETRY_WORDS), msg)
    kind, msg = bounded(s3, "SELECT count(*) FROM lake.t")
    check("while the service still does not answer, the next statement is a Connection Error",
          kind == "ConnectionException", (kind, msg))
    check("... saying an earlier commit may or may not have been applied, not yet settled",
          msg is not None and "may or may not have been applied" in msg
          and "cannot say yet" in msg, msg)
    proxy.set("pass")
    kind, msg = bounded(s3, "SELECT count(*) FROM lake.t")
    check("once it answers, the same attach settles the outcome and reads", kind is None, (kind, msg))
    rows = s3.execute("SELECT i FROM lake.t ORDER BY i").fetchall()
    check("... holding the acknowledged commit, and the unknown one whole or not at all",
          rows in ([(1,)], [(1,), (2,)]), rows)
    check("... and commits again", bounded(s3, "INSERT INTO lake.t VALUES (3)") == (None, None))
    bounded(s3, "DETACH lake")
    check("after DETACH + ATTACH the lake serves again", bounded(s3, s3_attach) == (None, None))
    again = s3.execute("SELECT i FROM lake.t ORDER BY i").fetchall()
    check("... holding what the settled attach held", again == rows + [(3,)], (again, rows))
    s3.close()
finally:
    proxy.stop()
    moto.stop()

finish("error_kinds")
