"""Several OS processes on one local-directory moraine lake (RFC 0004 v3: any number of writers
and readers).

Host: the pinned `duckdb==1.5.5` Python package. Run by `cargo xtask e2e` with MORAINE_EXT,
DUCKLAKE_EXT and TEST_DIR set. This file is both the orchestrator and, with `--worker`, the
worker: each worker is a separate `python3` process with its own DuckDB database, reading one
JSON request per line on stdin and answering one JSON line on stdout, so the orchestrator
decides exactly when each process attaches, commits and reads.

(a) two writers: B's read-write ATTACH takes the folder role from A, and both go on: each
    commits (inlined rows, Parquet files, DDL), reads the other's commits, and a fresh process
    sees exactly the acknowledged commits. A racing variant commits from A in a tight loop while
    B attaches and commits: every acknowledged commit is stored once, and nothing else.
(c) DuckLake's own conflict rules across processes: two overlapping inserts into one table both
    land; of two overlapping ALTERs of one table, the second fails with DuckLake's own conflict.
(b) a READ_ONLY reader beside a live writer: it reads whole committed states only, follows the
    writer's commits without re-attaching (after SlateDB's manifest poll, ~200 ms), refuses
    writes naming "read-only", and never fences the writer. No reader query fails while the
    writer commits in a loop, each shows a whole committed state, and an explicit reader
    transaction reads the state it began on to its end (RFC 0009).
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

TEST_DIR = os.environ["TEST_DIR"]


# ---- worker ------------------------------------------------------------------------------------

def worker():
    from _harness import connect

    db = connect()
    cursors = {"main": db}
    print(json.dumps({"ok": True, "pid": os.getpid()}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("exit"):
            break
        name = req.get("con", "main")
        if name not in cursors:
            cursors[name] = db.cursor()  # another connection to this process's database
        con = cursors[name]
        try:
            rows = con.execute(req["sql"]).fetchall()
            out = {"ok": True, "rows": [list(r) for r in rows]}
        except Exception as e:  # duckdb.Error subclasses; report the message verbatim
            out = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out, default=str), flush=True)
    db.close()


if len(sys.argv) > 1 and sys.argv[1] == "--worker":
    worker()
    sys.exit(0)


# ---- orchestrator ------------------------------------------------------------------------------

signal.alarm(600)  # a hung worker must fail the file, not hang the runner

failures = []
checks = 0


def check(name, cond, detail=""):
    global checks
    checks += 1
    print(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail and not cond else ""),
          flush=True)
    if not cond:
        failures.append(name)


class Proc:
    """One OS process with its own DuckDB database."""

    def __init__(self, name):
        self.name = name
        self.p = subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        hello = self._read()
        self.pid = hello["pid"]

    def _read(self):
        line = self.p.stdout.readline()
        if not line:
            err = self.p.stderr.read()
            raise RuntimeError(f"process {self.name} died (exit {self.p.wait()}): {err[-2000:]}")
        return json.loads(line)

    def run(self, sql, con="main"):
        self.p.stdin.write(json.dumps({"sql": sql, "con": con}) + "\n")
        self.p.stdin.flush()
        return self._read()

    def ok(self, sql, con="main"):
        r = self.run(sql, con)
        if not r["ok"]:
            raise RuntimeError(f"process {self.name}: {sql!r} failed: {r['error']}")
        return r["rows"]

    def one(self, sql, con="main"):
        return self.ok(sql, con)[0][0]

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write(json.dumps({"exit": True}) + "\n")
                self.p.stdin.flush()
            except BrokenPipeError:
                pass
            try:
                self.p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        if self.p.returncode != 0:
            check(f"process {self.name} exits cleanly", False,
                  f"exit {self.p.returncode}: {self.p.stderr.read()[-2000:]}")


def attach(lake, read_only=False):
    opts = f"DATA_PATH '{lake}/data/'" + (", READ_ONLY" if read_only else "")
    return f"ATTACH 'ducklake:moraine:{lake}/meta' AS lake ({opts})"


def writer_on_new_lake(name, proc_name):
    """A new lake directory and a process attached to it read-write, holding table lake.t."""
    lake = f"{TEST_DIR}/{name}"
    os.makedirs(lake)
    proc = Proc(proc_name)
    proc.ok(attach(lake))
    proc.ok("CREATE TABLE lake.t (i INTEGER, who VARCHAR)")
    return lake, proc


def expect_error(name, result, *needles, absent=()):
    if result["ok"]:
        check(name, False, f"no error raised (rows {result['rows']})")
        return
    msg = result["error"].lower()
    missing = [n for n in needles if n.lower() not in msg]
    present = [n for n in absent if n.lower() in msg]
    check(name, not missing and not present,
          f"error {result['error']!r}: lacks {missing}, must not contain {present}")


def snapshot_ids(proc):
    return [r[0] for r in proc.ok("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1")]


def rows_of(proc, table="lake.t"):
    return proc.ok(f"SELECT i, who FROM {table} WHERE who NOT LIKE 'bulk%' ORDER BY i")


# ---- (a) two writers ----------------------------------------------------------------------------

lake, A = writer_on_new_lake("fence", "A")
A.ok("INSERT INTO lake.t VALUES (1, 'A')")
A.ok("INSERT INTO lake.t SELECT i, 'bulk-A' FROM range(1000, 4000) r(i)")  # Parquet, not inlined
data_files_before = sorted(os.listdir(f"{lake}/data/main/t"))
check("a: A's commits are stored (one inlined, one Parquet file)",
      A.one("SELECT count(*) FROM lake.t") == 3001 and len(data_files_before) == 1,
      f"{A.ok('SELECT count(*) FROM lake.t')} {data_files_before}")

B = Proc("B")
B.ok(attach(lake))  # SlateDB: a new writer epoch; B folds from here on, A commits without it
check("a: B's read-write attach sees A's committed rows",
      B.one("SELECT count(*) FROM lake.t") == 3001)
B.ok("INSERT INTO lake.t VALUES (10, 'B')")

# A goes on: its commits land (after DuckLake's own retry when B committed first), its reads work
A.ok("INSERT INTO lake.t VALUES (2, 'A-after-B')")
A.ok("INSERT INTO lake.t SELECT i, 'bulk-A-after-B' FROM range(5000, 8000) r(i)")
A.ok("CREATE TABLE lake.a_only (x INTEGER)")
check("a: A reads its own and B's commits",
      rows_of(A) == [[1, "A"], [2, "A-after-B"], [10, "B"]]
      and A.one("SELECT count(*) FROM lake.t") == 6003, str(rows_of(A)))

B.ok("CREATE TABLE lake.u (x INTEGER)")
B.ok("INSERT INTO lake.u VALUES (42)")
B.ok("UPDATE lake.t SET who = 'B-updated' WHERE i = 10")
expected = [[1, "A"], [2, "A-after-B"], [10, "B-updated"]]
time.sleep(0.5)  # B's pin reads the tail once per poll interval (200 ms)
check("a: B reads A's commits and its own", rows_of(B) == expected, str(rows_of(B)))
A.ok("INSERT INTO lake.u VALUES (43)")

C = Proc("C")
C.ok(attach(lake, read_only=True))
check("a: a fresh process sees exactly the acknowledged rows",
      rows_of(C) == expected and C.one("SELECT count(*) FROM lake.t") == 6003, str(rows_of(C)))
tables = [r[0] for r in C.ok(
    "SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake' ORDER BY 1")]
check("a: ... and both processes' tables", tables == ["a_only", "t", "u"], str(tables))
check("a: ... and both processes' rows of one table",
      C.ok("SELECT x FROM lake.u ORDER BY 1") == [[42], [43]])
listed = C.one("SELECT count(*) FROM ducklake_list_files('lake', 't')")
check("a: the catalog lists both Parquet files", listed == 2, str(listed))
snaps = snapshot_ids(C)
check("a: the snapshots are consecutive, one per acknowledged commit",
      snaps == list(range(12)), str(snaps))
C.close()

# A re-attaches (DETACH + ATTACH) and takes the folder role back; B goes on.
A.ok("DETACH lake")
A.ok(attach(lake))
A.ok("INSERT INTO lake.t VALUES (3, 'A-reattached')")
B.ok("INSERT INTO lake.t VALUES (11, 'B')")
A.close()
B.close()

D = Proc("D")
D.ok(attach(lake))
final = [[1, "A"], [2, "A-after-B"], [3, "A-reattached"], [10, "B-updated"], [11, "B"]]
check("a: a fresh read-write process finds every acknowledged commit and nothing else",
      rows_of(D) == final and D.one("SELECT count(*) FROM lake.t") == 6005,
      f"{rows_of(D)} {snapshot_ids(D)}")
D.ok("INSERT INTO lake.t VALUES (4, 'D')")
check("a: and can write", D.one("SELECT count(*) FROM lake.t") == 6006)
D.close()

# ---- (a, racing) B attaches and commits while A commits in a tight loop -------------------------

lake, A = writer_on_new_lake("race", "A2")
log = []  # (i, sent_at, acknowledged, error)
stop = threading.Event()


def a_loop():
    i = 0
    while not stop.is_set() and i < 5000:
        i += 1
        r = A.run(f"INSERT INTO lake.t VALUES ({i}, 'A')")
        log.append((i, time.monotonic(), r["ok"], r.get("error")))


loop = threading.Thread(target=a_loop)
loop.start()
while len(log) < 10 and loop.is_alive():
    time.sleep(0.01)
B = Proc("B2")
B.ok(attach(lake))
b_acked, b_errors = 0, []
for j in range(20):
    r = B.run(f"INSERT INTO lake.t VALUES ({100000 + j}, 'B')")
    b_acked += r["ok"]
    if not r["ok"]:
        b_errors.append(r["error"])
time.sleep(0.5)
stop.set()
loop.join(timeout=120)
acked = [i for i, _, ok, _ in log if ok]
errors = [e for _, _, ok, e in log if not ok]
check("race: both processes commit while the other does",
      len(acked) > 10 and b_acked > 10,
      f"A acknowledged {len(acked)} of {len(log)}, B {b_acked} of 20")
check("race: every error either process saw is DuckLake's conflict after its retries",
      all("conflict" in e.lower() for e in errors + b_errors), str((errors + b_errors)[:3]))
time.sleep(0.5)
stored = [r[0] for r in B.ok("SELECT i FROM lake.t WHERE who = 'A' ORDER BY i")]
check("race: B's view holds exactly A's acknowledged commits", stored == acked,
      f"stored {stored[-5:]} vs acknowledged {acked[-5:]}")
A.close()
B.close()
R = Proc("R2")
R.ok(attach(lake, read_only=True))
stored = [r[0] for r in R.ok("SELECT i FROM lake.t WHERE who = 'A' ORDER BY i")]
check("race: a fresh process holds exactly both processes' acknowledged commits",
      stored == acked and R.one("SELECT count(*) FROM lake.t WHERE who = 'B'") == b_acked,
      f"stored {len(stored)} vs acknowledged {len(acked)}")
R.close()

# ---- (b) a read-only reader beside a live writer -----------------------------------------------

lake, A = writer_on_new_lake("reader", "A3")
A.ok("INSERT INTO lake.t VALUES (1, 'A')")

B = Proc("B3")
B.ok(attach(lake, read_only=True))
check("b: the reader's attach is read-only",
      B.ok("SELECT readonly FROM duckdb_databases() WHERE database_name = 'lake'") == [[True]])
check("b: the reader sees the committed state", rows_of(B) == [[1, "A"]], str(rows_of(B)))

# Writes are refused: DuckDB refuses statements on the lake at plan time; DuckLake functions
# that write the metadata reach moraine, which refuses them.
for label, sql in [("INSERT", "INSERT INTO lake.t VALUES (99, 'B')"),
                   ("CREATE TABLE", "CREATE TABLE lake.b_only (x INTEGER)"),
                   ("UPDATE", "UPDATE lake.t SET i = 5"),
                   ("DELETE", "DELETE FROM lake.t")]:
    expect_error(f"b: reader's {label} is refused as read-only", B.run(sql), "read-only",
                 '"lake"')
expect_error("b: reader's set_option (a metadata write through DuckLake) is refused by moraine",
             B.run("CALL lake.set_option('parquet_compression', 'zstd')"),
             "moraine", "attached read-only", f"{lake}/meta")
expect_error("b: reader's snapshot expiry is refused by moraine",
             B.run("CALL ducklake_expire_snapshots('lake', older_than => now())"),
             "attached read-only")
expect_error("b: a direct write to the metadata catalog is refused by moraine",
             B.run("INSERT INTO __ducklake_metadata_lake.main.ducklake_metadata "
                   "VALUES ('k', 'v', NULL, NULL)"), "attached read-only")

# The writer is not fenced by the reader, and the reader follows it without re-attaching.
states = {1: (1, 1)}
A.ok("INSERT INTO lake.t VALUES (2, 'A')")
states[2] = (2, 3)
A.ok("INSERT INTO lake.t SELECT i, 'bulk' FROM range(1000, 4000) r(i)")
states[3] = (3002, sum(range(1000, 4000)) + 3)
A.ok("DELETE FROM lake.t WHERE i = 1")
states[4] = (3001, sum(range(1000, 4000)) + 2)
check("b: the writer kept working beside the reader", A.one("SELECT count(*) FROM lake.t") == 3001)


seen, failed, deadline, start = [], [], time.monotonic() + 10, time.monotonic()
while time.monotonic() < deadline:
    r = B.run("SELECT count(*), sum(i) FROM lake.t")
    if not r["ok"]:
        failed.append(r["error"])
        continue
    got = tuple(r["rows"][0])
    if not seen or seen[-1] != got:
        seen.append(got)
    if got == states[4]:
        break
    time.sleep(0.02)
print(f"     (reader saw {seen} over {time.monotonic() - start:.2f}s)")
check("b: the same attach sees the writer's latest commit without re-attaching",
      seen and seen[-1] == states[4], str(seen))
check("b: every state the reader saw is a whole committed state",
      all(s in states.values() for s in seen), f"saw {seen}, committed {states}")
check("b: no reader query failed", not failed, str(failed))

# A writer committing in a loop beside a reader querying in a loop: every reader query succeeds
# and shows a whole committed state (RFC 0009: a reader transaction reads one pinned image).
base = states[4]
loop_states = {base}
total = base
for k in range(1, 41):
    total = (total[0] + 1, total[1] + 10_000 + k)
    loop_states.add(total)


def write_loop():
    for k in range(1, 41):
        A.ok(f"INSERT INTO lake.t VALUES ({10_000 + k}, 'loop')")
        time.sleep(0.03)


writer = threading.Thread(target=write_loop)
writer.start()
queries, torn, failed = 0, [], []
while writer.is_alive() or queries == 0:
    r = B.run("SELECT count(*), sum(i) FROM lake.t")
    queries += 1
    if not r["ok"]:
        failed.append(r["error"])
    elif tuple(r["rows"][0]) not in loop_states:
        torn.append(tuple(r["rows"][0]))
writer.join()
print(f"     ({queries} reader queries while the writer committed 40 times)")
check("b: under a writer committing in a loop, no reader query fails", not failed,
      f"{len(failed)} of {queries} failed: {failed[:3]}")
check("b: ... and each shows a whole committed state", not torn, str(torn[:5]))
states[4] = total
A.ok("DELETE FROM lake.t WHERE i > 10000")
states[4] = base

# An explicit read-only transaction pins the image it began on: a writer commit underneath it
# changes nothing it reads, and a new transaction afterwards sees the commit.
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    r = B.run("SELECT count(*), sum(i) FROM lake.t")
    if r["ok"] and tuple(r["rows"][0]) == states[4]:
        break
    time.sleep(0.02)
B.ok("BEGIN", con="txn")
pinned = B.ok("SELECT count(*), sum(i) FROM lake.t", con="txn")
A.ok("INSERT INTO lake.t VALUES (5, 'A')")
states[5] = (3002, states[4][1] + 5)
# wait until the reader process has picked up the commit (another connection, autocommit)
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    r = B.run("SELECT count(*), sum(i) FROM lake.t")
    if r["ok"] and tuple(r["rows"][0]) == states[5]:
        break
    if not r["ok"]:
        check("b: while waiting, no reader query fails", False, r["error"])
    time.sleep(0.02)
r = B.run("SELECT count(*), sum(i) FROM lake.t", con="txn")
check("b: a read-only transaction spanning a writer commit reads on, at its own state",
      r["ok"] and tuple(r["rows"][0]) == tuple(pinned[0]) == states[4], str(r))
B.run("COMMIT", con="txn")
check("b: a new transaction after it sees the new state",
      tuple(B.ok("SELECT count(*), sum(i) FROM lake.t", con="txn")[0]) == states[5])

# Re-attaching also shows the latest state.
A.ok("INSERT INTO lake.t VALUES (6, 'A')")
B.ok("DETACH lake")
B.ok(attach(lake, read_only=True))
check("b: after a re-attach the reader sees the writer's latest commit",
      rows_of(B) == [[2, "A"], [5, "A"], [6, "A"]], str(rows_of(B)))
check("b: the reader's view of the snapshots matches the writer's",
      snapshot_ids(B) == snapshot_ids(A))
A.close()
B.close()

# ---- (c) DuckLake's own conflict rules across processes -----------------------------------------

lake, A = writer_on_new_lake("rules", "A4")
A.ok("INSERT INTO lake.t VALUES (1, 'A')")
B = Proc("B4")
B.ok(attach(lake))
time.sleep(0.5)  # (B folds; A reads the tail)

# two inserts into one table, in transactions that overlap: both land (DuckLake's retry)
A.ok("BEGIN")
B.ok("BEGIN")
A.ok("INSERT INTO lake.t VALUES (2, 'A-txn')")
B.ok("INSERT INTO lake.t VALUES (3, 'B-txn')")
A.ok("COMMIT")
r = B.run("COMMIT")
check("c: two overlapping inserts into one table both land", r["ok"], r.get("error"))
time.sleep(0.5)
check("c: ... and both processes read both", rows_of(A) == rows_of(B) == [
    [1, "A"], [2, "A-txn"], [3, "B-txn"]], f"{rows_of(A)} / {rows_of(B)}")

# two ALTERs of one table, in transactions that overlap: DuckLake's own conflict for the second
A.ok("BEGIN")
B.ok("BEGIN")
A.ok("ALTER TABLE lake.t ADD COLUMN a INTEGER")
B.ok("ALTER TABLE lake.t ADD COLUMN b INTEGER")
A.ok("COMMIT")
r = B.run("COMMIT")
expect_error("c: the second of two overlapping ALTERs of one table fails with DuckLake's conflict",
             r, "Transaction conflict - attempting to alter table", "another transaction has "
             "altered it")
time.sleep(0.5)
cols = [c[0] for c in B.ok(
    "SELECT column_name FROM duckdb_columns() WHERE database_name = 'lake' AND table_name = 't' "
    "ORDER BY column_index")]
check("c: the table has the first ALTER's column, not the second's", cols == ["i", "who", "a"],
      str(cols))
A.close()
B.close()

print(f"cross_process: {checks - len(failures)} checks passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
