"""Several OS processes on one local-directory moraine lake (RFC 0004: one writer, many readers).

Host: the pinned `duckdb==1.5.5` Python package. Run by `cargo xtask e2e` with MORAINE_EXT,
DUCKLAKE_EXT and TEST_DIR set. This file is both the orchestrator and, with `--worker`, the
worker: each worker is a separate `python3` process with its own DuckDB database, reading one
JSON request per line on stdin and answering one JSON line on stdout, so the orchestrator
decides exactly when each process attaches, commits and reads.

(a) two writers: B's read-write ATTACH fences A; A's next commit fails naming the cause and
    stores nothing; B works; fresh processes see exactly the acknowledged commits; A can
    re-attach (fencing B in turn). A racing variant checks that no commit A sent after B's
    ATTACH returned is acknowledged, and that every acknowledged commit survives.
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


# ---- (a) a second writer fences the first ------------------------------------------------------

lake, A = writer_on_new_lake("fence", "A")
A.ok("INSERT INTO lake.t VALUES (1, 'A')")
A.ok("INSERT INTO lake.t SELECT i, 'bulk-A' FROM range(1000, 4000) r(i)")  # Parquet, not inlined
a_snaps = snapshot_ids(A)
data_files_before = sorted(os.listdir(f"{lake}/data/main/t"))
check("a: A's commits are stored (one inlined, one Parquet file)",
      A.one("SELECT count(*) FROM lake.t") == 3001 and len(data_files_before) == 1,
      f"{A.ok('SELECT count(*) FROM lake.t')} {data_files_before}")

B = Proc("B")
B.ok(attach(lake))  # SlateDB: a new writer epoch; A is fenced from here on
check("a: B's read-write attach sees A's committed rows",
      B.one("SELECT count(*) FROM lake.t") == 3001 and snapshot_ids(B) == a_snaps)
B.ok("INSERT INTO lake.t VALUES (10, 'B')")
b_snap = snapshot_ids(B)[-1]

# A's next commits fail, naming the cause; DuckLake must not retry them as conflicts.
r = A.run("INSERT INTO lake.t VALUES (2, 'A-after-fence')")
expect_error("a: A's inlined commit after the fence fails naming another writer / fencing",
             r, "another writer", "fenced", absent=("conflict",))
r = A.run("INSERT INTO lake.t SELECT i, 'bulk-A-after-fence' FROM range(5000, 8000) r(i)")
expect_error("a: A's Parquet commit after the fence fails the same way", r, "another writer",
             "fenced", absent=("conflict",))
r = A.run("CREATE TABLE lake.a_only (x INTEGER)")
expect_error("a: A's DDL after the fence fails the same way", r, "another writer", "fenced")
r = A.run("SELECT count(*) FROM lake.t")
expect_error("a: even A's reads now say it was fenced (its store is closed)", r,
             "another writer", "fenced")

# B's session carries on normally.
B.ok("CREATE TABLE lake.u (x INTEGER)")
B.ok("INSERT INTO lake.u VALUES (42)")
B.ok("UPDATE lake.t SET who = 'B-updated' WHERE i = 10")
check("a: B's session works after A's failed commits",
      rows_of(B) == [[1, "A"], [10, "B-updated"]] and B.one("SELECT x FROM lake.u") == 42,
      str(rows_of(B)))
b_snaps = snapshot_ids(B)

# A fresh process (read-only, so B keeps its writer) sees exactly the successful commits.
C = Proc("C")
C.ok(attach(lake, read_only=True))
check("a: a fresh process sees exactly the acknowledged rows",
      rows_of(C) == [[1, "A"], [10, "B-updated"]], str(rows_of(C)))
check("a: ... and none of A's failed Parquet commit",
      C.one("SELECT count(*) FROM lake.t WHERE who LIKE 'bulk%'") == 3000
      and C.one("SELECT count(*) FROM lake.t WHERE who = 'bulk-A-after-fence'") == 0)
check("a: ... exactly the acknowledged snapshots (A's, then B's three)",
      snapshot_ids(C) == b_snaps and b_snaps == a_snaps + [b_snap, b_snap + 1, b_snap + 2,
                                                           b_snap + 3],
      f"{snapshot_ids(C)} vs A {a_snaps}, B {b_snaps}")
tables = [r[0] for r in C.ok(
    "SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake' ORDER BY 1")]
check("a: ... and B's table but not A's", tables == ["t", "u"], str(tables))
listed = C.one("SELECT count(*) FROM ducklake_list_files('lake', 't')")
check("a: the catalog lists only the Parquet file A committed before the fence", listed == 1,
      str(listed))
C.close()
B.ok("INSERT INTO lake.t VALUES (11, 'B')")
check("a: a read-only process did not fence B", rows_of(B)[-1] == [11, "B"])

# A re-attaches (DETACH + ATTACH) and becomes the writer again; now B is fenced.
A.ok("DETACH lake")
A.ok(attach(lake))
A.ok("INSERT INTO lake.t VALUES (3, 'A-reattached')")
check("a: A works again after re-attaching, and sees B's commits",
      rows_of(A) == [[1, "A"], [3, "A-reattached"], [10, "B-updated"], [11, "B"]],
      str(rows_of(A)))
r = B.run("INSERT INTO lake.t VALUES (12, 'B-after-fence')")
expect_error("a: B is fenced in turn by A's re-attach", r, "another writer", "fenced")
A.close()
B.close()

D = Proc("D")
D.ok(attach(lake))
check("a: a fresh read-write process finds every acknowledged commit and nothing else",
      rows_of(D) == [[1, "A"], [3, "A-reattached"], [10, "B-updated"], [11, "B"]]
      and D.one("SELECT count(*) FROM lake.t") == 3004
      and D.one("SELECT x FROM lake.u") == 42
      and len(snapshot_ids(D)) == len(b_snaps) + 2,
      f"{rows_of(D)} {snapshot_ids(D)}")
D.ok("INSERT INTO lake.t VALUES (4, 'D')")
check("a: and can write", D.one("SELECT count(*) FROM lake.t") == 3005)
D.close()

# ---- (a, racing) B attaches while A commits in a tight loop ------------------------------------

lake, A = writer_on_new_lake("race", "A2")
log = []  # (i, sent_at, acknowledged, error)
stop = threading.Event()


def a_loop():
    i = 0
    while not stop.is_set() and i < 5000:
        i += 1
        sent = time.monotonic()
        r = A.run(f"INSERT INTO lake.t VALUES ({i}, 'A')")
        log.append((i, sent, r["ok"], r.get("error")))
        if not r["ok"]:
            # one more, to show the failure is permanent rather than a blip
            r = A.run(f"INSERT INTO lake.t VALUES ({i + 1}, 'A')")
            log.append((i + 1, time.monotonic(), r["ok"], r.get("error")))
            return


loop = threading.Thread(target=a_loop)
loop.start()
while len(log) < 10 and loop.is_alive():
    time.sleep(0.01)
B = Proc("B2")
B.ok(attach(lake))
fenced_at = time.monotonic()
B.ok("INSERT INTO lake.t VALUES (100000, 'B')")
loop.join(timeout=60)
stop.set()
loop.join()
acked = [i for i, _, ok, _ in log if ok]
late = [i for i, sent, ok, _ in log if ok and sent > fenced_at]
errors = [e for _, _, ok, e in log if not ok]
check("race: A's loop hit the fence", len(errors) == 2, f"{len(log)} commits, no error")
check("race: A's errors name the fencing",
      all("another writer" in e and "fenced" in e for e in errors), str(errors))
check("race: no commit A sent after B's ATTACH returned was acknowledged", late == [],
      f"acknowledged after the fence: {late}")
stored = [r[0] for r in B.ok("SELECT i FROM lake.t WHERE who = 'A' ORDER BY i")]
check("race: B's view holds exactly A's acknowledged commits", stored == acked,
      f"stored {stored[-5:]} vs acknowledged {acked[-5:]}")
A.close()
B.close()
R = Proc("R2")
R.ok(attach(lake, read_only=True))
stored = [r[0] for r in R.ok("SELECT i FROM lake.t WHERE who = 'A' ORDER BY i")]
check("race: a fresh process holds exactly A's acknowledged commits plus B's",
      stored == acked and R.one("SELECT count(*) FROM lake.t WHERE who = 'B'") == 1,
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

print(f"cross_process: {checks - len(failures)} checks passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
