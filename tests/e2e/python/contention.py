"""Contention (issue 11): 8 connections in one process and a second writer process, 1000
transactions in all, on overlapping and disjoint tables of one moraine lake.

Process A runs 8 connections at once, each committing its transactions: a row into its own
table, into the table all share, or into both. Part-way through, process B attaches the same lake
read-write (taking the folder role from A, RFC 0004 v3) and commits its own transactions while
A goes on. Every COMMIT either returns (acknowledged) or fails; a failure must be a conflict
DuckLake gave up retrying (its message says "conflict"). Nothing else may fail, and no process is
fenced.

Afterwards, in a fresh attach: every acknowledged row is there exactly once, no row of a failed
commit is, and each table equals a serial replay of the acknowledged transactions into a lake on
DuckLake's own DuckDB-file catalog.

Host: the pinned `duckdb==1.5.5` Python package. Run by `cargo xtask e2e`.
"""
import json
import os
import subprocess
import sys
import threading

import duckdb

from _harness import TEST_DIR, check, connect, finish

CONNECTIONS = 8
PER_CONNECTION = 100          # process A: 800 transactions
IN_B = 200                    # process B: 200 transactions
B_ATTACHES_AFTER = 600             # B attaches once A has this many acknowledged commits
ATTACH = f"ATTACH 'ducklake:moraine:{TEST_DIR}/meta' AS lake (DATA_PATH '{TEST_DIR}/data/')"
SHARED = "shared"


def statements(owner, n):
    """The transaction `n` of `owner`: (table, id) rows it inserts."""
    uid = f"{owner}-{n}"
    own = f"t_{owner}"
    return [[(own, uid)], [(SHARED, uid)], [(own, uid), (SHARED, uid)]][n % 3]


def run_transaction(cur, rows):
    cur.execute("BEGIN")
    try:
        for table, uid in rows:
            cur.execute(f"INSERT INTO lake.{table} VALUES (?)", [uid])
        cur.execute("COMMIT")
    except duckdb.Error:
        try:
            cur.execute("ROLLBACK")
        except duckdb.Error:
            pass
        raise


def classify(message):
    m = message.lower()
    if "fenced" in m:
        return "fenced"
    if "conflict" in m:
        return "conflict"
    return "other"


B_SCRIPT = """
import json, sys
sys.path.insert(0, {here!r})
import duckdb
from _harness import connect
from contention import statements, run_transaction, classify, ATTACH
db = connect()
db.execute(ATTACH)
acked, failed = [], []
for n in range({count}):
    rows = statements("b", n)
    try:
        run_transaction(db, rows)
        acked.append(rows)
    except duckdb.Error as e:
        failed.append((rows, classify(str(e)), str(e)[:300]))
db.close()
print(json.dumps({{"acked": acked, "failed": failed}}))
"""


def main():
    db = connect()
    db.execute(ATTACH)
    owners = [str(i) for i in range(CONNECTIONS)]
    for table in [SHARED, "t_b"] + [f"t_{o}" for o in owners]:
        db.execute(f"CREATE TABLE lake.{table} (id VARCHAR)")

    acked, failed = [], []
    lock = threading.Lock()
    b_started = threading.Event()
    b_result = {}

    def start_b():
        script = B_SCRIPT.format(here=os.path.dirname(os.path.abspath(__file__)), count=IN_B)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=600, env=os.environ)
        b_result["returncode"] = done.returncode
        b_result["stderr"] = done.stderr[-3000:]
        if done.returncode == 0:
            b_result.update(json.loads(done.stdout.strip().splitlines()[-1]))

    b_thread = threading.Thread(target=start_b)

    def worker(owner):
        cur = db.cursor()
        for n in range(PER_CONNECTION):
            rows = statements(owner, n)
            try:
                run_transaction(cur, rows)
                with lock:
                    acked.append(rows)
                    if len(acked) >= B_ATTACHES_AFTER and not b_started.is_set():
                        b_started.set()
                        b_thread.start()
            except duckdb.Error as e:
                with lock:
                    failed.append((rows, classify(str(e)), str(e)[:300]))
        cur.close()

    threads = [threading.Thread(target=worker, args=(o,)) for o in owners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if not b_started.is_set():
        b_started.set()
        b_thread.start()
    b_thread.join()
    db.close()

    check("process B ran", b_result.get("returncode") == 0, b_result.get("stderr"))
    b_acked = [[tuple(r) for r in rows] for rows in b_result.get("acked", [])]
    b_failed = b_result.get("failed", [])
    total = len(acked) + len(failed) + len(b_acked) + len(b_failed)
    check("1000 transactions in all", total == CONNECTIONS * PER_CONNECTION + IN_B, total)
    kinds = {}
    for _, kind, _ in failed + [tuple(f) for f in b_failed]:
        kinds[kind] = kinds.get(kind, 0) + 1
    print(f"     A: {len(acked)} acknowledged, B: {len(b_acked)} acknowledged; failures {kinds}")
    others = [f for f in failed + b_failed if f[1] == "other"]
    check("every failed commit is a conflict", not others, others[:3])
    check("no commit of either process was fenced", kinds.get("fenced", 0) == 0, kinds)
    check("B's writer committed", len(b_acked) > 0)

    # the lake holds exactly the acknowledged rows, each once
    fresh = connect()
    fresh.execute(ATTACH)
    want = {}
    for rows in acked + b_acked:
        for table, uid in rows:
            want.setdefault(table, []).append(uid)
    tables = [SHARED, "t_b"] + [f"t_{o}" for o in owners]
    got = {t: sorted(r[0] for r in fresh.execute(f"SELECT id FROM lake.{t}").fetchall())
           for t in tables}
    lost = {t: sorted(set(want.get(t, [])) - set(got[t])) for t in tables}
    extra = {t: sorted(set(got[t]) - set(want.get(t, []))) for t in tables}
    dup = {t: len(got[t]) - len(set(got[t])) for t in tables}
    check("no acknowledged row is lost", not any(lost.values()), {t: v[:3] for t, v in lost.items() if v})
    check("no row of a failed commit is there", not any(extra.values()),
          {t: v[:3] for t, v in extra.items() if v})
    check("no row is there twice", not any(dup.values()), dup)
    fresh.close()

    # a serial replay of the winners on DuckLake's own DuckDB-file catalog
    replay = connect()
    replay.execute(f"ATTACH 'ducklake:{TEST_DIR}/replay.ducklake' AS lake "
                   f"(DATA_PATH '{TEST_DIR}/replay-data/')")
    for table in tables:
        replay.execute(f"CREATE TABLE lake.{table} (id VARCHAR)")
    for rows in acked + b_acked:
        run_transaction(replay, rows)
    replayed = {t: sorted(r[0] for r in replay.execute(f"SELECT id FROM lake.{t}").fetchall())
                for t in tables}
    check("every table equals a serial replay of the acknowledged transactions",
          replayed == got, {t: (len(replayed[t]), len(got[t])) for t in tables})
    replay.close()


if __name__ == "__main__":
    main()
    finish("contention")
