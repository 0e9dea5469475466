"""Crash torture (issue 11): writer processes killed with SIGKILL at random moments.

Each round starts a writer process on one lake that loops over DuckLake's work (commits of
inlined rows and of Parquet files, inlined-data flushes, merges, snapshot expiry and cleanup,
an occasional DETACH and re-ATTACH), logging each acknowledged commit to a file (fsynced) only
after its COMMIT returned. The round kills it with SIGKILL at a random moment: some rounds while
it attaches, some while it detaches, most in its loop; one round in four starts two more writers
part-way (three processes writing the lake at once, each also running DuckLake's maintenance;
the folder role moves to the last to attach, RFC 0004 v3) and kills all three at once, in half
of those rounds after killing one of them first and checking that the other two go on without a
restart (they acknowledge another commit within 20 s). A commit
that loses a race and that DuckLake then gives up on ("conflict") is not acknowledged, and the
writer goes on. Then this process attaches the lake afresh and checks:

- every acknowledged commit is there whole: a commit inserts the same id into two tables, so an
  id is in both or in neither (nothing in part), and every acknowledged id is in both;
- an id that is there but not acknowledged was the commit in flight when the kill came: at most
  one per killed writer;
- time travel to the head snapshot reads the same rows;
- a new commit succeeds.

MORAINE_TORTURE_ROUNDS sets the number of rounds (default 12; `cargo xtask torture --rounds N`
for long runs, recorded in docs/reliability.md). MORAINE_TORTURE_SEED sets the seed.
Host: the pinned `duckdb==1.5.5` Python package. Run by `cargo xtask e2e`.
"""
import os
import random
import signal
import subprocess
import sys
import time

from _harness import TEST_DIR, check, connect, finish

ROUNDS = int(os.environ.get("MORAINE_TORTURE_ROUNDS", "12"))
SEED = int(os.environ.get("MORAINE_TORTURE_SEED", "1"))
LAKE = os.path.join(TEST_DIR, "lake")
ATTACH = f"ATTACH 'ducklake:moraine:{LAKE}/meta' AS lake (DATA_PATH '{LAKE}/data/')"

WRITER = r"""
import os, random, sys
sys.path.insert(0, {here!r})
import duckdb
from _harness import connect
ATTACH, log_path, first_id, seed, expire_age = {attach!r}, {log!r}, {first_id}, {seed}, {expire_age}
rng = random.Random(seed)
db = connect()
print("attaching", flush=True)
db.execute(ATTACH)
print("attached", flush=True)
log = open(log_path, "a")
next_id = first_id
while True:
    op = rng.random()
    try:
        if op < 0.55:
            # one commit, the same id in both tables (inlined: a one-row insert)
            db.execute("BEGIN")
            db.execute("INSERT INTO lake.a VALUES (?)", [next_id])
            db.execute("INSERT INTO lake.b SELECT ? FROM range(?)", [next_id, rng.choice([1, 20])])
            db.execute("COMMIT")
            log.write(f"{{next_id}}\n"); log.flush(); os.fsync(log.fileno())
            next_id += 1
        elif op < 0.65:
            db.execute("SELECT count(*) FROM ducklake_flush_inlined_data('lake')").fetchall()
        elif op < 0.72:
            db.execute("SELECT count(*) FROM ducklake_merge_adjacent_files('lake')").fetchall()
        elif op < 0.80:
            db.execute(f"SELECT count(*) FROM ducklake_expire_snapshots('lake', older_than => now() - INTERVAL {{expire_age}} SECOND)").fetchall()
        elif op < 0.86:
            db.execute("SELECT count(*) FROM ducklake_cleanup_old_files('lake', cleanup_all => true)").fetchall()
        elif op < 0.90:
            print("detaching", flush=True)
            db.execute("DETACH lake")
            db.execute(ATTACH)
            print("attached", flush=True)
        else:
            db.execute("SELECT count(*) FROM lake.a").fetchall()
    except duckdb.Error as e:
        try:
            db.execute("ROLLBACK")
        except duckdb.Error:
            pass
        if "conflict" in str(e).lower():
            # another writer won; DuckLake gave up retrying: not acknowledged, and not stored
            next_id += 1
            continue
        raise
"""


def start_writer(log, first_id, seed, expire_age=0):
    script = WRITER.format(here=os.path.dirname(os.path.abspath(__file__)), attach=ATTACH,
                           log=log, first_id=first_id, seed=seed, expire_age=expire_age)
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=os.environ)


def wait_for(p, word, limit):
    """Reads the writer's lines until `word` (True) or `limit` seconds pass or it exits."""
    deadline = time.time() + limit
    while time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            return False
        if line.strip() == word:
            return True
    return False


def kill(p):
    try:
        os.kill(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()
    return p.returncode


def acked_ids(log):
    if not os.path.exists(log):
        return set()
    with open(log) as f:
        return {int(line) for line in f if line.strip()}


def main():
    rng = random.Random(SEED)
    db = connect()
    db.execute(ATTACH)
    db.execute("CREATE TABLE lake.a (id BIGINT)")
    db.execute("CREATE TABLE lake.b (id BIGINT)")
    db.execute("CALL lake.set_option('data_inlining_row_limit', 10)")
    db.close()
    acked, extra_allowed = set(), 0
    failures = []
    how = {}
    for r in range(ROUNDS):
        # every way in the first four rounds, then at random
        ways = ["loop", "attach", "detach", "writers"]
        where = ways[r] if r < len(ways) else rng.choice(ways[:1] * 5 + ways[1:] + ways[3:])
        how[where] = how.get(where, 0) + 1
        log = os.path.join(TEST_DIR, f"acked-{r}.log")
        first = 1_000_000 * (r + 1)
        # With several writers, expiry keeps the last 10 s of snapshots: DuckLake's conflict check
        # on a retried commit reads the snapshot changes since the transaction began, and an
        # expiry of those snapshots by another process hides them (DuckLake's own race, on any
        # catalog: RFC 0004, "Implementation (v3)").
        age = 10 if where == "writers" else 0
        w = start_writer(log, first, rng.randrange(1 << 30), age)
        killed = [w]
        crashed = None
        if where == "attach":
            wait_for(w, "attaching", 30)
            time.sleep(rng.uniform(0, 0.15))
        elif where == "detach":
            wait_for(w, "attached", 30)
            # the first DETACH of its loop, then kill right away (or a moment after)
            if wait_for(w, "detaching", 20):
                time.sleep(rng.choice([0, 0, rng.uniform(0, 0.05)]))
        elif where == "writers":
            wait_for(w, "attached", 30)
            for k in (1, 2):
                time.sleep(rng.uniform(0.2, 1.0))
                other = os.path.join(TEST_DIR, f"acked-{r}-{k}.log")
                w2 = start_writer(other, first + 300_000 * k, rng.randrange(1 << 30), age)
                killed.append(w2)
                wait_for(w2, "attached", 30)
            time.sleep(rng.uniform(0.1, 1.5))
            if rng.random() < 0.5:
                # one of the three killed (in a commit, a hand-over of the folder role, an
                # expiry...): the other two go on without a restart and acknowledge commits
                logs = [log] + [os.path.join(TEST_DIR, f"acked-{r}-{k}.log") for k in (1, 2)]
                victim = rng.randrange(3)
                code = kill(killed[victim])
                if code != -signal.SIGKILL:
                    crashed = (code, killed[victim].stderr.read()[-1500:])
                survivors = [i for i in range(3) if i != victim]
                before = {i: len(acked_ids(logs[i])) for i in survivors}
                went_on = False
                until = time.time() + 20
                while time.time() < until and not went_on:
                    time.sleep(0.2)
                    went_on = any(len(acked_ids(logs[i])) > before[i] for i in survivors)
                    if any(killed[i].poll() is not None for i in survivors):
                        break
                stopped = [i for i in survivors if killed[i].poll() is not None]
                if stopped or not went_on:
                    failures.append(f"round {r}: after writer {victim} was killed, the others "
                                    f"{'exited' if stopped else 'acknowledged nothing in 20 s'}: "
                                    + "; ".join(killed[i].stderr.read()[-500:] for i in stopped))
                    for p in killed:
                        kill(p)
                    break
                how["one of three"] = how.get("one of three", 0) + 1
                time.sleep(rng.uniform(0.1, 1.0))
        else:
            wait_for(w, "attached", 30)
            time.sleep(rng.uniform(0.05, 1.5))
        for p in killed:
            code = kill(p)
            if code != -signal.SIGKILL:
                crashed = (code, p.stderr.read()[-1500:])
        if crashed:
            failures.append(f"round {r}: a writer exited by itself before the kill: {crashed}")
            break
        for path in [log] + [os.path.join(TEST_DIR, f"acked-{r}-{k}.log") for k in (1, 2)]:
            acked |= acked_ids(path)
        extra_allowed += len(killed)

        # a fresh attach: every acknowledged commit whole, nothing in part
        db = connect()
        try:
            db.execute(ATTACH)
            a = [x[0] for x in db.execute("SELECT id FROM lake.a").fetchall()]
            b = {}
            for (i, n) in db.execute("SELECT id, count(*) FROM lake.b GROUP BY id").fetchall():
                b[i] = n
            head = db.execute("SELECT max(snapshot_id) FROM lake.snapshots()").fetchone()[0]
            at_head = sorted(x[0] for x in db.execute(
                f"SELECT id FROM lake.a AT (VERSION => {head})").fetchall())
            marker = 900_000_000 + r
            db.execute("BEGIN")
            db.execute("INSERT INTO lake.a VALUES (?)", [marker])
            db.execute("INSERT INTO lake.b VALUES (?)", [marker])
            db.execute("COMMIT")
        except Exception as e:  # any error here is a failed round
            failures.append(f"round {r} ({where}): re-attach, read or commit failed: {e}")
            break
        finally:
            db.close()
        a_set = set(a)
        if len(a) != len(a_set):
            failures.append(f"round {r} ({where}): an id twice in lake.a")
        if a_set != set(b):
            failures.append(f"round {r} ({where}): in part: {sorted(a_set ^ set(b))[:5]}")
        if any(n not in (1, 20) for n in b.values()):
            failures.append(f"round {r} ({where}): a commit's rows in part in lake.b")
        lost = acked - a_set
        if lost:
            failures.append(f"round {r} ({where}): acknowledged commits lost: {sorted(lost)[:5]}")
        unacked = a_set - acked
        if len(unacked) > extra_allowed:
            failures.append(f"round {r} ({where}): {len(unacked)} unacknowledged commits, at most "
                            f"{extra_allowed} in flight")
        # the ids first seen now were in flight: there from here on, as is the round's marker
        acked |= unacked | {marker}
        extra_allowed = 0
        if at_head != sorted(a_set):
            failures.append(f"round {r} ({where}): time travel to the head differs")
        if failures:
            break
    print(f"     {ROUNDS} rounds ({how}), {len(acked)} commits checked")
    check(f"{ROUNDS} rounds of SIGKILL: every acknowledged commit whole, nothing in part, time "
          "travel to the head, and a new commit after each", not failures, failures[:3])


if __name__ == "__main__":
    main()
    finish("torture")
