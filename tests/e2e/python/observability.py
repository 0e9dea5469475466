"""Observability (issue 11, part 6): what an operator sees of moraine from DuckDB.

- `moraine_log_level` is a DuckDB setting with a description; a value that does not parse is an
  Invalid Input Error naming it and changes nothing.
- At the default ('warn') a healthy session writes nothing to stderr. At 'debug' every attach,
  image refresh, commit (with its batch, keys and bytes), expiry translation and checkpoint
  writes a line when it ends, with how long it took; 'trace' adds the tables a transaction
  scans and each store operation. A READ_ONLY reader in another process logs the refresh that
  follows the writer.
- `moraine_status(lake)` shows the head, the SlateDB writer epoch, the image, this attach's
  commits and the time of the last one; a writer another process fenced says so.
- `moraine_metrics(lake)` shows SlateDB's own counters for the store.

Each logging check runs in a child process, so its stderr is the child's alone. Host: the
pinned `duckdb==1.5.5` Python package. Run by `cargo xtask e2e`.
"""
import os
import re
import selectors
import subprocess
import sys
import time

import duckdb

from _harness import TEST_DIR, check, connect, finish

HERE = os.path.dirname(os.path.abspath(__file__))
META = f"{TEST_DIR}/meta"
ATTACH = f"ATTACH 'ducklake:moraine:{META}' AS lake (DATA_PATH '{TEST_DIR}/data/')"
READER = f"ATTACH 'ducklake:moraine:{META}' AS lake (READ_ONLY)"


def child(body, level=None):
    """Runs `body` (Python, with `db` connected) in a fresh process; returns (rc, stdout, stderr)."""
    setting = f"db.execute(\"SET moraine_log_level = '{level}'\")\n" if level else ""
    code = (
        "import sys\n"
        f"sys.path.insert(0, {HERE!r})\n"
        "from _harness import connect\n"
        "db = connect()\n" + setting + body + "\ndb.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    return done.returncode, done.stdout, done.stderr


def readline_within(proc, seconds):
    """The next line the child writes, or an AssertionError after `seconds` (never a hang)."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(seconds):
        proc.kill()
        raise AssertionError(f"the child wrote nothing within {seconds} s")
    return proc.stdout.readline()


def lines(stderr, pattern):
    return [l for l in stderr.splitlines() if re.search(pattern, l)]


# a span's own line when it closes (tracing-subscriber's fmt layer): its target, then how long it
# was entered (busy) and not (idle), which add up to how long it was open
def closed(target):
    return rf": {target}: close time\.busy=[0-9.]+[nµm]?s time\.idle=[0-9.]+[nµm]?s$"


# ---- the setting -----------------------------------------------------------------------------
db = connect()
rows = db.execute("SELECT value, description FROM duckdb_settings() "
                  "WHERE name = 'moraine_log_level'").fetchall()
check("moraine_log_level is a DuckDB setting with a description, moraine's and SlateDB's "
      "warnings by default", len(rows) == 1 and rows[0][0] == "warn,slatedb=warn"
      and "stderr" in rows[0][1], rows)
try:
    db.execute("SET moraine_log_level = 'loud'")
    check("a level that does not parse is refused", False, "no error")
except duckdb.Error as e:
    check("a level that does not parse is an Invalid Input Error naming it",
          type(e).__name__ == "InvalidInputException" and "'loud'" in str(e), repr(e))
try:
    db.execute("SET moraine_log_level = 'debug,tokio=trace'")
    check("a target moraine does not log is refused", False, "no error")
except duckdb.Error as e:
    check("a target moraine does not log is refused naming it", "'tokio'" in str(e), repr(e))
value = db.execute("SELECT current_setting('moraine_log_level')").fetchone()[0]
check("... and the setting is unchanged", value == "warn,slatedb=warn", value)
db.close()

# ---- the default writes nothing -------------------------------------------------------------
WORK = (
    f"db.execute({ATTACH!r})\n"
    "db.execute('CREATE TABLE lake.t (i INTEGER)')\n"
    "for i in range(3):\n"
    "    db.execute(f'INSERT INTO lake.t VALUES ({i})')\n"
    "db.execute('SELECT count(*) FROM lake.t').fetchall()\n"
)
rc, out, err = child(WORK)
check("at the default level a healthy session writes nothing to stderr", rc == 0 and err == "",
      err[-2000:])

# ---- debug: attach, refresh, commit, expiry, checkpoint --------------------------------------
rc, out, err = child(
    f"db.execute({ATTACH!r})\n"
    "db.execute('INSERT INTO lake.t VALUES (10)')\n"
    "db.execute(\"CALL ducklake_expire_snapshots('lake', versions => [1])\")\n"
    "db.execute('DETACH lake')\n", level="debug")
check("a debug session runs", rc == 0, err[-2000:])
attach = lines(err, r"DEBUG moraine\.attach\{url=\S+ mode=\"writer\"\}" + closed("moraine::store"))
check("the attach is logged with its time", len(attach) == 1, err[-3000:])
# (read afresh, or started from the newest checkpoint without SlateDB)
refresh = lines(err, r"moraine\.(refresh|image\.start)\{store=\S+ to=\d+\}" + closed("moraine::store"))
check("the attach's image read is logged", len(refresh) >= 1, err[-3000:])
commits = lines(err, r"moraine\.commit\{store=\S+ batch=\d+ keys=\d+ bytes=\d+\}" + closed("moraine::store"))
check("each commit is logged with its batch, keys, bytes and time (the insert and the expiry)",
      len(commits) == 2, "\n".join(lines(err, "moraine.commit")) or err[-3000:])
expiry = lines(err, r"moraine\.translate\.expiry\{snapshots=1 parents=\d+\}" + closed("moraine::translate"))
check("the expiry's translation is logged with the snapshots it deletes", len(expiry) == 1,
      "\n".join(lines(err, "expiry")) or err[-3000:])
check("the checkpoint DETACH leaves is logged",
      len(lines(err, r"moraine\.close\{store=\S+\}:moraine\.checkpoint\{store=\S+ batch=\d+\}"
                + closed("moraine::store"))) == 1,
      "\n".join(lines(err, "checkpoint")) or err[-3000:])
check("nothing is logged above debug", not lines(err, r" (TRACE|INFO|WARN|ERROR) "), err[-3000:])
stamp = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z +(TRACE|DEBUG|INFO|WARN|ERROR) "
                   r"(\S.*: )?moraine(::\w+)*: \S")
check("every line is stamped with the UTC time, level, open spans and target",
      err != "" and all(stamp.match(l) for l in err.splitlines()), err[:500])

# ---- trace: scans and store operations -------------------------------------------------------
rc, out, err = child(f"db.execute({READER!r})\n"
                     "db.execute('SELECT count(*) FROM lake.t').fetchall()\n", level="trace")
check("a trace session runs", rc == 0, err[-2000:])
check("trace shows each table a transaction scans, with its rows",
      len(lines(err, r"moraine\.scan\{table=\"ducklake_snapshot\" history=\w+ rows=\d+\}"
                + closed("moraine::txn"))) >= 1,
      err[-3000:])
check("trace shows the store operations",
      len(lines(err, r'moraine\.io\{what="reading the head" store=\S+\}' + closed("moraine::runtime"))) >= 1,
      err[-3000:])

# ---- a reader in another process logs the refresh that follows the writer --------------------
writer = connect()
writer.execute(ATTACH)
reader = subprocess.Popen(
    [sys.executable, "-c",
     "import sys, time\n"
     f"sys.path.insert(0, {HERE!r})\n"
     "from _harness import connect\n"
     "db = connect()\n"
     "db.execute(\"SET moraine_log_level = 'debug'\")\n"
     f"db.execute({READER!r})\n"
     "n = db.execute('SELECT count(*) FROM lake.t').fetchone()[0]\n"
     "print(n, flush=True)\n"
     "sys.stdin.readline()\n"
     "deadline = time.time() + 10\n"
     "while db.execute('SELECT count(*) FROM lake.t').fetchone()[0] == n and time.time() < deadline:\n"
     "    time.sleep(0.1)\n"
     "print(db.execute('SELECT count(*) FROM lake.t').fetchone()[0], flush=True)\n"
     "db.close()\n"],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
before = int(readline_within(reader, 60))
writer.execute("INSERT INTO lake.t VALUES (11)")
reader.stdin.write("\n")
reader.stdin.flush()
after = int(readline_within(reader, 60))
_, err = reader.communicate(timeout=60)
check("the reader in another process sees the writer's commit", after == before + 1, (before, after))
check("... and logs how it followed the lake from the image it had to the new head",
      len(lines(err, r"moraine: followed the lake's tail from batch \d+ to \d+")) >= 1,
      err[-3000:])

# ---- moraine_status / moraine_metrics --------------------------------------------------------
def status(con, lake="lake"):
    r = con.execute(f"SELECT * REPLACE (last_commit::VARCHAR AS last_commit) FROM moraine_status('{lake}')")
    return dict(zip([d[0] for d in r.description], r.fetchone()))


s = status(writer)
check("moraine_status shows the writer's head, image and state",
      s["mode"] == "writer" and s["state"] == "open" and s["problem"] is None
      and s["head_batch"] == s["image_batch"] and s["head_snapshot"] is not None
      and s["image_records"] > 0 and s["image_bytes"] > 0, s)
check("... its SlateDB writer epoch and manifest", s["writer_epoch"] >= 1 and s["manifest_id"] >= 1, s)
check("... and this attach's one commit, with its time", s["commits"] == 1 and s["last_commit"] is not None, s)
same = status(writer, "__ducklake_metadata_lake")
check("the metadata catalog's name shows the same store",
      same["url"] == s["url"] and same["head_batch"] == s["head_batch"], same)
metrics = dict(((n, l), v) for n, l, v in writer.execute("SELECT * FROM moraine_metrics('lake')").fetchall())
check("moraine_metrics shows SlateDB's counters for the store",
      metrics.get(("slatedb.db.write_batch_count", ""), 0) >= 1
      and metrics.get(("slatedb.db.request_count", "op=get"), 0) >= 1, sorted(metrics)[:20])
try:
    writer.execute("SELECT * FROM moraine_status('memory')")
    check("moraine_status of a catalog that is not moraine's is refused", False, "no error")
except duckdb.Error as e:
    check("moraine_status of a catalog that is not moraine's is refused naming it",
          "\"memory\"" in str(e), repr(e))

rc, out, err = child("db.execute(\"SET moraine_reader_poll_interval = '1 second'\")\n"
                     f"db.execute({READER!r})\n"
                     "r = db.execute(\"SELECT mode, commits, last_commit IS NULL, head_batch, reader_poll_ms "
                     "FROM moraine_status('lake')\")\n"
                     "print(r.fetchone())\n")
check("a reader's status says reader, with no commits of its own, polling as its setting says",
      rc == 0 and out.strip() == f"('reader', 0, True, {s['head_batch']}, 1000)", (out, err[-2000:]))

# another process attaches the lake read-write: it takes the folder role, and this attach goes
# on as a plain writer (RFC 0004 v3), its status says so and reads the other's commit
check("this attach holds the folder role", status(writer)["role"] == "folder", status(writer))
rc, out, err = child(f"db.execute({ATTACH!r})\ndb.execute('INSERT INTO lake.t VALUES (12)')\n")
check("another process attaches read-write and commits", rc == 0, err[-2000:])
deadline = time.time() + 10
while status(writer)["role"] != "writer" and time.time() < deadline:
    time.sleep(0.2)
s2 = status(writer)
check("this attach's role is writer (the other took the folder role), open, at the new head",
      s2["role"] == "writer" and s2["state"] == "open" and s2["problem"] is None
      and s2["head_batch"] > s["head_batch"], s2)
writer.close()

finish("observability")
