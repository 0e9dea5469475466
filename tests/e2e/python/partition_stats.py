"""An ungrouped COUNT(*), MIN or MAX straight over a moraine scan is answered from the scan's
partition statistics, the exact count and BIGINT bounds of the rows it would emit: EXPLAIN then
shows no moraine scan, and the answer is the rows' own. Checked against a second query that
reads the rows (a FILTER on the aggregate keeps DuckDB from using the statistics), through a
transaction's staged insert, UPDATE and DELETE and its rollback, and across a PREPAREd
statement executed again after a commit. A filter DuckDB evaluates above the scan, and a column
that is not BIGINT, make DuckDB read the rows.
"""
from _harness import TEST_DIR, check, connect, finish

db = connect()
db.execute(
    f"ATTACH 'ducklake:moraine:{TEST_DIR}/meta' AS lake "
    f"(DATA_PATH '{TEST_DIR}/data/', DATA_INLINING_ROW_LIMIT 100)"
)
db.execute("CREATE TABLE lake.t (i BIGINT)")
for k in range(5):
    db.execute(f"INSERT INTO lake.t SELECT range FROM range({k * 10}, {k * 10 + 10})")
db.execute("DELETE FROM lake.t WHERE i % 7 = 0")
db.execute("CREATE TABLE lake.u (x INTEGER)")
db.execute("INSERT INTO lake.u VALUES (5), (-3), (12)")
meta = "__ducklake_metadata_lake.main"
inlined = {
    name: f"{meta}.{name}"
    for (name,) in db.execute(f"SELECT table_name FROM {meta}.ducklake_inlined_data_tables").fetchall()
}
t_rows, u_rows = sorted(inlined.values())


def plan(sql):
    return "\n".join(row[1] for row in db.execute("EXPLAIN " + sql).fetchall())


def one(sql):
    return db.execute(sql).fetchall()[0]


def from_stats(name, aggregates, source, where=""):
    """`aggregates` over `source` is answered without a scan, and equals the rows' answer."""
    sql = f"SELECT {aggregates} FROM {source} {where}"
    # the same aggregates with a FILTER clause, which DuckDB never answers from statistics
    read = ", ".join(a.strip() + " FILTER (WHERE i_am_true)" for a in aggregates.split(","))
    check(f"{name}: no scan in the plan", "MORAINE_SCAN" not in plan(sql), plan(sql))
    read_sql = f"SELECT {read} FROM {source}, (SELECT random() >= 0 AS i_am_true) {where}"
    check(f"{name}: the rows' answer", one(sql) == one(read_sql), f"{one(sql)} != {one(read_sql)}")
    check(f"{name}: (that one reads them)", "MORAINE_SCAN" in plan(read_sql), plan(read_sql))
    return one(sql)


head = from_stats("snapshots", "max(snapshot_id), min(snapshot_id), count(*)", f"{meta}.ducklake_snapshot")
check("... are the lake's", head == (one(f"SELECT max(snapshot_id) FROM {meta}.ducklake_snapshot_changes")[0], 0, head[0] + 1), head)
from_stats("a snapshot bound the scan applies", "count(*), max(row_id), min(begin_snapshot)", t_rows,
           "WHERE begin_snapshot BETWEEN 3 AND 4")
from_stats("an index lookup", "count(*), max(snapshot_id)", f"{meta}.ducklake_snapshot", "WHERE snapshot_id IN (1, 3, 99)")
from_stats("ended rows' bounds skip the NULLs", "min(end_snapshot), max(end_snapshot), count(*)", t_rows)

# DuckDB reads the rows: a filter above the scan, a column that is not BIGINT
above = f"SELECT count(*), max(row_id) FROM {t_rows} WHERE row_id % 2 = 1"
check("a filter above the scan: the rows are read", "MORAINE_SCAN" in plan(above), plan(above))
check("... and counted", one(above) == (25, 49), one(above))
integer = f"SELECT min(x), max(x), count(*) FROM {u_rows}"
check("an INTEGER column: the rows are read", "MORAINE_SCAN" in plan(integer), plan(integer))
check("... and its bounds are right", one(integer) == (-3, 12, 3), one(integer))

# a transaction's own changes, then its rollback
files = f"{meta}.ducklake_schema_versions"
before = from_stats("committed", "count(*), max(begin_snapshot)", files)
db.execute("BEGIN")
db.execute(f"INSERT INTO {files} VALUES (90, 90, NULL), (91, 91, NULL)")
check("a staged insert counts", from_stats("staged insert", "count(*), max(begin_snapshot)", files)
      == (before[0] + 2, 91))
db.execute(f"UPDATE {files} SET begin_snapshot = 95 WHERE begin_snapshot = 90")
check("a staged UPDATE moves the bound", from_stats("staged update", "count(*), max(begin_snapshot)", files)
      == (before[0] + 2, 95))
db.execute(f"DELETE FROM {files} WHERE begin_snapshot >= 91")
check("a staged DELETE drops its rows", from_stats("staged delete", "count(*), max(begin_snapshot)", files)
      == before)
db.execute("ROLLBACK")
check("after the rollback", from_stats("rolled back", "count(*), max(begin_snapshot)", files) == before)

# a prepared statement is planned again for each execution, in that execution's transaction
db.execute(f"PREPARE latest AS SELECT max(snapshot_id), count(*) FROM {meta}.ducklake_snapshot")
first = db.execute("EXECUTE latest").fetchall()[0]
db.execute("INSERT INTO lake.t VALUES (1000)")
again = db.execute("EXECUTE latest").fetchall()[0]
check("a prepared statement sees a later commit", again == (first[0] + 1, first[1] + 1), f"{first} then {again}")

finish("partition_stats")
