"""Moving a lake onto moraine and off it (RFC 0014; docs/operating-a-lake.md, "Moving a lake").

For each source catalog this machine runs (a DuckDB file and SQLite), a lake with schema changes,
renames, partitions, a view, a macro, comments, inlined rows, deletes, an update, a flush, a merge
and an expiry is copied into a new moraine store with DuckDB's `COPY FROM DATABASE`, as one
transaction. Then:
- every catalog table matches the source's row for row (the source's stored forms, SQLite's text
  timestamps and integer booleans, read as the values DuckLake reads them as);
- every surviving snapshot reads the same rows through DuckLake on both;
- the copy back out, into a DuckDB file and into SQLite, matches the original and is served by
  stock DuckLake;
- the imported lake commits, expires and cleans up.
A second copy into the same store, and a source of another catalog version, are refused with
nothing written. An import killed at any point leaves the target empty (and can be run again)
and the source untouched.
"""
import hashlib
import os
import select
import shutil
import subprocess
import sys
import time

import duckdb

from _harness import DUCKLAKE, MORAINE, TEST_DIR, check, connect, finish

SQLITE = os.environ["SQLITE_EXT"]


def db():
    con = connect()
    con.execute(f"LOAD '{SQLITE}'")
    return con


LAKE = [
    "CREATE SCHEMA lake.s2",
    "CREATE TABLE lake.t (a INTEGER, b VARCHAR, ts TIMESTAMPTZ, d DOUBLE, ok BOOLEAN)",
    # inlined rows (at most 10 per insert stay in the catalog)
    "INSERT INTO lake.t VALUES (1, 'one', '2024-01-02 03:04:05.25+00', 1.5, true), "
    "(2, 'two', NULL, -0.25, false)",
    # a data file
    "INSERT INTO lake.t SELECT i, 'r' || i, TIMESTAMPTZ '2024-01-01 00:00:00+00' + to_hours(i), "
    "i / 4, i % 2 = 0 FROM range(100, 200) r(i)",
    "ALTER TABLE lake.t ADD COLUMN c INTEGER DEFAULT 7",
    "ALTER TABLE lake.t RENAME COLUMN b TO bb",
    "ALTER TABLE lake.t RENAME TO t2",
    "CREATE TABLE lake.s2.p (k INTEGER, v VARCHAR)",
    "ALTER TABLE lake.s2.p SET PARTITIONED BY (k)",
    "INSERT INTO lake.s2.p SELECT i % 3, 'v' || i FROM range(30) r(i)",
    "CREATE VIEW lake.v AS SELECT a, bb FROM lake.t2 WHERE a < 150",
    "CREATE MACRO lake.plus_one(x) AS x + 1",
    "COMMENT ON TABLE lake.t2 IS 'the table'",
    "COMMENT ON COLUMN lake.t2.a IS 'a column'",
    "DELETE FROM lake.t2 WHERE a IN (1, 150, 151)",
    "UPDATE lake.t2 SET bb = 'uno' WHERE a = 2",
    "CALL ducklake_flush_inlined_data('lake')",
    "INSERT INTO lake.s2.p SELECT i % 3, 'w' || i FROM range(30) r(i)",
    "CALL ducklake_merge_adjacent_files('lake')",
    "INSERT INTO lake.t2 VALUES (3, 'three', '2025-06-07 08:09:10+00', 3.0, NULL, 9)",
    # inlined values of more types
    "CREATE TABLE lake.s2.kinds (dt DATE, tm TIME, f FLOAT, si SMALLINT, tsn TIMESTAMP, tz TIMESTAMPTZ)",
    "INSERT INTO lake.s2.kinds VALUES (DATE '2024-02-29', TIME '23:59:59.999999', 3.4028235e+38::FLOAT, "
    "-32768, TIMESTAMP '1999-12-31 23:59:59.5', TIMESTAMPTZ '2000-01-01 00:00:00+00'), "
    # (not -0.0 or NaN: the way out into SQLite stores a FLOAT as SQLite's REAL, which keeps
    # neither; RFC 0014, "What is not done")
    "(NULL, TIME '00:00:00', 2.5::FLOAT, 7, NULL, TIMESTAMPTZ '1969-12-31 23:00:00-03:30')",
    "CALL ducklake_expire_snapshots('lake', versions => [3, 4])",
]
TABLES = ["t", "t2", "s2.p", "s2.kinds", "v"]


def build(ducklake_url, data):
    con = db()
    con.execute(f"ATTACH '{ducklake_url}' AS lake (DATA_PATH '{data}', DATA_INLINING_ROW_LIMIT 10)")
    for sql in LAKE:
        con.execute(sql)
    con.close()


def columns(con, cat):
    """{table: [(column, type)]} of the catalog tables of database `cat`."""
    out = {}
    for t, c, ty in con.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        f"WHERE table_catalog = '{cat}' ORDER BY table_name, ordinal_position"
    ).fetchall():
        out.setdefault(t, []).append((c, ty))
    return out


def catalog_rows(con, cat, served):
    """Every row of every table of `cat`, each column cast to the type moraine serves it as."""
    out = {}
    for t, cols in columns(con, cat).items():
        types = dict(served.get(t, []))
        # (as text: Python reads no TIMESTAMP WITH TIME ZONE without pytz)
        exprs = ", ".join(f'CAST(CAST("{c}" AS {types.get(c, ty)}) AS VARCHAR)' for c, ty in cols)
        out[t] = sorted(map(repr, con.execute(f'SELECT {exprs} FROM {cat}.main."{t}"').fetchall()))
    return out


def reads(con, lake):
    """What DuckLake reads of each table at each surviving snapshot, and of the view and the
    macro at head."""
    snaps = [r[0] for r in con.execute(f"SELECT snapshot_id FROM ducklake_snapshots('{lake}') ORDER BY 1").fetchall()]
    out = {"snapshots": snaps}
    for s in snaps:
        for t in TABLES:
            try:
                out[(s, t)] = sorted(map(repr, con.execute(f"SELECT COLUMNS(*)::VARCHAR FROM {lake}.{t} AT (VERSION => {s})").fetchall()))
            except duckdb.Error as e:
                out[(s, t)] = type(e).__name__
    out["view"] = sorted(con.execute(f"SELECT COLUMNS(*)::VARCHAR FROM {lake}.v").fetchall())
    out["macro"] = con.execute(f"SELECT {lake}.plus_one(41)").fetchall()
    return out


def served_types():
    """The types moraine serves each catalog table's columns as (a lake moraine itself made)."""
    con = db()
    con.execute(f"ATTACH 'ducklake:moraine:{TEST_DIR}/types-meta' AS lake (DATA_PATH '{TEST_DIR}/types-data/')")
    con.execute("DETACH lake")
    con.execute(f"ATTACH 'moraine:{TEST_DIR}/types-meta' AS m (READ_ONLY)")
    out = columns(con, "m")
    con.close()
    return out


def count_in(url, query):
    """The count `query` gives on the moraine store at `url`, attached READ_ONLY as m."""
    con = db()
    con.execute(f"ATTACH 'moraine:{url}' AS m (READ_ONLY)")
    n = con.execute(query).fetchone()[0]
    con.close()
    return n


def tables_in(url):
    return count_in(url, "SELECT count(*) FROM information_schema.tables WHERE table_catalog = 'm'")


def files_in(url):
    return count_in(url, "SELECT count(*) FROM m.ducklake_data_file")


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


SERVED = served_types()
check("moraine serves DuckLake's types", dict(SERVED["ducklake_snapshot"])["snapshot_time"] == "TIMESTAMP WITH TIME ZONE")

SOURCES = [
    # (name, DuckLake's URL of the source, DuckDB's URL of its catalog database, the file)
    ("duckdb", f"ducklake:{TEST_DIR}/src.ducklake", f"{TEST_DIR}/src.ducklake", f"{TEST_DIR}/src.ducklake"),
    ("sqlite", f"ducklake:sqlite:{TEST_DIR}/src.sqlite", f"sqlite:{TEST_DIR}/src.sqlite", f"{TEST_DIR}/src.sqlite"),
]

for name, ducklake_url, plain_url, path in SOURCES:
    data = f"{TEST_DIR}/{name}-data/"
    target = f"{TEST_DIR}/{name}-moraine"
    build(ducklake_url, data)
    before = digest(path)

    # the way in: one transaction (COPY FROM DATABASE is its schema step and its data step)
    con = db()
    con.execute(f"ATTACH '{plain_url}' AS src (READ_ONLY)")
    con.execute(f"ATTACH 'moraine:{target}' AS m")
    con.execute("COPY FROM DATABASE src TO m")
    # (compared as the types moraine serves, its inlined tables' included)
    mtypes = columns(con, "m")
    original = catalog_rows(con, "src", mtypes)
    imported = catalog_rows(con, "m", mtypes)
    check(f"{name}: every catalog table is copied", sorted(original) == sorted(imported),
          f"{sorted(set(original) ^ set(imported))}")
    differ = [t for t in original if original[t] != imported.get(t)]
    check(f"{name}: every catalog table matches row for row", not differ, f"{differ}")
    copied = columns(con, "m")
    inlined = {t: dict(c) for t, c in copied.items() if t.startswith("ducklake_inlined_data_") and t != "ducklake_inlined_data_tables"}
    check(f"{name}: the copied inlined tables take DuckLake's own types",
          any(c.get("ts") == "TIMESTAMP WITH TIME ZONE" and c.get("d") == "DOUBLE" and c.get("ok") == "BOOLEAN"
              and c.get("a") == "INTEGER" for c in inlined.values())
          and any(c.get("dt") == "DATE" and c.get("tm") == "TIME" and c.get("f") == "FLOAT"
                  and c.get("si") == "SMALLINT" and c.get("tsn") == "TIMESTAMP"
                  and c.get("tz") == "TIMESTAMP WITH TIME ZONE" for c in inlined.values()), str(inlined))
    wrong = [t for t in SERVED if copied.get(t) != SERVED[t]]
    check(f"{name}: every copied table is served with DuckLake's types", not wrong,
          f"{[(t, copied.get(t)) for t in wrong[:2]]}")
    snapshots_in = con.execute("SELECT count(*) FROM m.ducklake_snapshot").fetchone()[0]

    # a second copy into a store that holds a lake is refused, and writes nothing
    try:
        con.execute("COPY FROM DATABASE src TO m")
        check(f"{name}: a store that holds a lake is refused", False, "no error")
    except duckdb.Error as e:
        check(f"{name}: a store that holds a lake is refused", "already holds a DuckLake catalog" in str(e), str(e))
        con.execute("ROLLBACK") if "aborted" in str(e) else None
    con.close()
    con = db()
    con.execute(f"ATTACH 'moraine:{target}' AS m (READ_ONLY)")
    check(f"{name}: the refused copy wrote nothing",
          con.execute("SELECT count(*) FROM m.ducklake_snapshot").fetchone()[0] == snapshots_in)
    con.close()

    # every surviving snapshot reads the same rows through DuckLake
    con = db()
    con.execute(f"ATTACH '{ducklake_url}' AS a (READ_ONLY)")
    con.execute(f"ATTACH 'ducklake:moraine:{target}' AS b (READ_ONLY)")
    ra, rb = reads(con, "a"), reads(con, "b")
    check(f"{name}: the expiry left snapshots", 3 not in ra["snapshots"] and len(ra["snapshots"]) > 10, str(ra["snapshots"]))
    bad = [k for k in ra if ra[k] != rb.get(k)]
    check(f"{name}: every surviving snapshot reads the same rows", not bad, f"{bad[:5]}")
    check(f"{name}: the lake has inlined rows, files and deletes",
          ("'three'" in " ".join(ra[(ra['snapshots'][-1], 't2')])) and len(ra[(ra["snapshots"][-1], "s2.p")]) == 60)
    con.close()

    # the way out: into a DuckDB file and into SQLite, both served by stock DuckLake
    for out_kind, out_plain, out_ducklake in [
        ("duckdb", f"{TEST_DIR}/{name}-out.ducklake", f"ducklake:{TEST_DIR}/{name}-out.ducklake"),
        ("sqlite", f"sqlite:{TEST_DIR}/{name}-out.sqlite", f"ducklake:sqlite:{TEST_DIR}/{name}-out.sqlite"),
    ]:
        con = db()
        con.execute(f"ATTACH 'moraine:{target}' AS m (READ_ONLY)")
        con.execute(f"ATTACH '{out_plain}' AS o")
        con.execute("COPY FROM DATABASE m TO o")
        con.execute(f"ATTACH '{plain_url}' AS src (READ_ONLY)")
        exported = catalog_rows(con, "o", mtypes)
        original = catalog_rows(con, "src", mtypes)
        differ = sorted(t for t in set(original) | set(exported) if original.get(t) != exported.get(t))
        check(f"{name} -> moraine -> {out_kind}: every catalog table matches the original", not differ, f"{differ}")
        con.close()
        con = db()
        con.execute(f"ATTACH '{ducklake_url}' AS a (READ_ONLY)")
        con.execute(f"ATTACH '{out_ducklake}' AS o (READ_ONLY)")
        ra, ro = reads(con, "a"), reads(con, "o")
        bad = [k for k in ra if ra[k] != ro.get(k)]
        check(f"{name} -> moraine -> {out_kind}: DuckLake reads the same rows at every snapshot", not bad,
              f"{bad[:5]}")
        con.close()

    check(f"{name}: the source is untouched", digest(path) == before)

    # the imported lake commits, expires and cleans up
    con = db()
    con.execute(f"ATTACH 'ducklake:moraine:{target}' AS lake")
    con.execute("INSERT INTO lake.t2 VALUES (4, 'four', NULL, 4.0, true, 4)")
    con.execute("DELETE FROM lake.s2.p WHERE k = 0")
    con.execute("CALL ducklake_flush_inlined_data('lake')")
    con.execute("CALL ducklake_merge_adjacent_files('lake')")
    con.execute("CALL ducklake_expire_snapshots('lake', older_than => now() + INTERVAL 1 HOUR)")
    cleaned = con.execute("CALL ducklake_cleanup_old_files('lake', cleanup_all => true)").fetchall()
    t2 = sorted(r[0] for r in con.execute("SELECT a FROM lake.t2").fetchall())
    p = con.execute("SELECT count(*), min(k) FROM lake.s2.p").fetchone()
    check(f"{name}: the imported lake commits, expires and cleans up",
          t2[:4] == [2, 3, 4, 100] and len(t2) == 101 and p == (40, 1) and len(cleaned) > 0, f"{t2[:5]} {p} {len(cleaned)}")
    snaps = con.execute("SELECT count(*) FROM ducklake_snapshots('lake')").fetchone()[0]
    check(f"{name}: expiry kept only the head", snaps == 1, str(snaps))
    con.close()
    con = db()
    con.execute(f"ATTACH 'ducklake:moraine:{target}' AS lake (READ_ONLY)")
    check(f"{name}: a new process reads what was committed", con.execute("SELECT count(*) FROM lake.t2").fetchone()[0] == 101)
    con.close()

# a source of another catalog version is refused, naming the version, and nothing is written
old = f"{TEST_DIR}/old.ducklake"
shutil.copy(f"{TEST_DIR}/src.ducklake", old)
con = db()
con.execute(f"ATTACH '{old}' AS o")
con.execute("UPDATE o.ducklake_metadata SET value = '0.3' WHERE key = 'version'")
con.execute("DETACH o")
con.execute(f"ATTACH '{old}' AS src (READ_ONLY)")
con.execute(f"ATTACH 'moraine:{TEST_DIR}/old-moraine' AS m")
try:
    con.execute("COPY FROM DATABASE src TO m")
    check("a source of another catalog version is refused", False, "no error")
except duckdb.Error as e:
    check("a source of another catalog version is refused", "catalog version 0.3" in str(e), str(e))
con.close()
check("the refused source wrote nothing", tables_in(f"{TEST_DIR}/old-moraine") == 0)

# an import killed at any point leaves the target empty, and can be run again; the source is
# untouched. The source has a few thousand catalog rows (one insert of 1,000 partitions), so
# the copy and its commit take long enough to be killed inside.
big = f"{TEST_DIR}/big.ducklake"
con = db()
con.execute(f"ATTACH 'ducklake:{big}' AS lake (DATA_PATH '{TEST_DIR}/big-data/')")
con.execute("CREATE TABLE lake.p (k INTEGER, v INTEGER)")
con.execute("ALTER TABLE lake.p SET PARTITIONED BY (k)")
con.execute("INSERT INTO lake.p SELECT i, i FROM range(1000) r(i)")
con.close()
big_digest = digest(big)
IMPORT = f"""
import duckdb, sys, time
con = duckdb.connect(config={{"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}})
con.execute("LOAD '{DUCKLAKE}'")
con.execute("LOAD '{MORAINE}'")
con.execute("ATTACH '{big}' AS src (READ_ONLY)")
con.execute("ATTACH 'moraine:" + sys.argv[1] + "' AS m")
if len(sys.argv) > 2:
    con.execute("SET moraine_log_level = '" + sys.argv[2] + "'")
print("attached", flush=True)
started = time.monotonic()
con.execute("COPY FROM DATABASE src TO m")
print("copied", time.monotonic() - started, flush=True)
"""


def run_import(target, kill_after=None, logs=None):
    """Runs the import in a process; kills it `kill_after` seconds after it attached. Returns
    how long its COPY took, or None if it was killed first (or failed). With `logs` (a list),
    logs at info and appends what it wrote to stderr."""
    args = [sys.executable, "-c", IMPORT, target] + (["info"] if logs is not None else [])
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True,
                            stderr=subprocess.PIPE if logs is not None else None)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        line = proc.stdout.readline() if ready else ""
        if kill_after is not None and line.strip() == "attached":
            time.sleep(kill_after)
            proc.kill()
        out, err = proc.communicate(timeout=120)
        if logs is not None:
            logs.append(err)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None
    for word in out.split("\n"):
        if word.startswith("copied "):
            return float(word.split()[1])
    return None


logs = []
copy_time = run_import(f"{TEST_DIR}/kill-whole", logs=logs)
check("the whole import runs", copy_time is not None)
# its progress at info: a line per large table, and the commit's
check("a long copy logs its progress", "moraine: staged 1000 rows into main.ducklake_data_file" in logs[0]
      and "moraine: committed" in logs[0], logs[0][-2000:])
copy_time = copy_time or 0.1
whole_files = files_in(f"{TEST_DIR}/kill-whole")
emptied, completed = 0, 0
# kills from the moment the copy starts to well after it should have ended (its COPY alone
# took copy_time in the run above)
for i, fraction in enumerate([0.0, 0.15, 0.3, 0.5, 0.7, 0.9, 1.5, 3.0]):
    target = f"{TEST_DIR}/kill-{i}"
    run_import(target, kill_after=copy_time * fraction)
    n = tables_in(target)
    if n == 0:
        emptied += 1
        check(f"killed import {i}: the target is empty and the import runs again",
              run_import(target) is not None and files_in(target) == whole_files)
    else:
        completed += 1
        check(f"killed import {i}: a target that is not empty holds the whole lake (the commit landed)",
              n == tables_in(f"{TEST_DIR}/kill-whole") and files_in(target) == whole_files, f"{n} tables")
print(f"     (copy took {copy_time:.3f} s; {emptied} imports killed before they committed, {completed} after)")
check("imports were killed before they committed, not only at once", emptied >= 2,
      f"{emptied} emptied, {completed} completed")
check("the killed imports left the source untouched", digest(big) == big_digest)

finish("moving_a_lake")
