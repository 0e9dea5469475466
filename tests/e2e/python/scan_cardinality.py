"""A scan of a catalog table tells DuckDB how many rows it will emit, so joins build on the
small side.

DuckLake's row count for a table joins `ducklake_delete_file` to every `ducklake_data_file`
(no table filter on the data-file side). Without an estimate DuckDB may build the hash table
on all the data files; with one, the empty delete-file side is built and the probe of the data
files ends at once. EXPLAIN shows each scan's estimate ("~N rows"); the answers stay right.
"""
import re

from _harness import TEST_DIR, check, connect, finish

db = connect()
db.execute(
    f"ATTACH 'ducklake:moraine:{TEST_DIR}/meta' AS lake "
    f"(DATA_PATH '{TEST_DIR}/data/', DATA_INLINING_ROW_LIMIT 0)"
)
db.execute("CREATE TABLE lake.t (p INTEGER, i INTEGER)")
db.execute("ALTER TABLE lake.t SET PARTITIONED BY (p)")
db.execute("INSERT INTO lake.t SELECT i % 40, i FROM range(400) r(i)")  # 40 data files
db.execute("CREATE TABLE lake.u (i INTEGER)")
db.execute("INSERT INTO lake.u VALUES (1), (2)")                      # 1 data file

meta = "__ducklake_metadata_lake.main"


def explain(sql):
    return "\n".join(row[1] for row in db.execute("EXPLAIN " + sql).fetchall())


def estimates(sql):
    return [int(n) for n in re.findall(r"~(\d+)", explain(sql).replace(",", ""))]


files = f"SELECT * FROM {meta}.ducklake_data_file"
check("a scan estimates its rows", 41 in estimates(files), explain(files))
# the estimate follows the selection the index serves
by_table = f"SELECT * FROM {meta}.ducklake_data_file WHERE table_id = 1"
check("a selection narrows the estimate", 40 in estimates(by_table) and 41 not in estimates(by_table),
      explain(by_table))
empty = f"SELECT * FROM {meta}.ducklake_delete_file"
check("an empty table estimates no rows", estimates(empty)[-1:] in ([0], [1]), explain(empty))

# DuckLake's join of delete files to data files: the delete side (empty) is the build side,
# which DuckDB's plan draws as the join's right child (the two scans' boxes side by side)
join = (f"SELECT count(*) FROM {meta}.ducklake_delete_file del "
        f"JOIN {meta}.ducklake_data_file data ON del.data_file_id = data.data_file_id")
plan = explain(join)
pairs = [[int(n) for n in re.findall(r"~(\d+) rows", line.replace(",", ""))] for line in plan.splitlines()]
pairs = [p for p in pairs if len(p) == 2]
check("the join's two scans are side by side", len(pairs) == 1, plan)
probe, build = pairs[0]
check("the empty delete side is built, the data files probe", (probe, build) == (41, 0), plan)
check("... and the join is still right", db.execute(join).fetchall() == [(0,)])
check("DuckLake counts rows right", db.execute("SELECT count(*) FROM lake.t").fetchall() == [(400,)])

# A scan that will emit no row tells DuckDB its columns' statistics, so the filter above it folds
# to false and DuckDB replaces the scan with an empty result, as it does for an empty table of
# its own. DuckLake's count joins a table's delete files (none here) to the data files.
t_id = db.execute(f"SELECT table_id FROM {meta}.ducklake_table WHERE table_name = 't'").fetchall()[0][0]
counted = (f"SELECT sum(del.delete_count) FROM {meta}.ducklake_delete_file del "
           f"JOIN {meta}.ducklake_data_file data ON del.data_file_id = data.data_file_id "
           f"WHERE del.table_id = {t_id} AND data.end_snapshot IS NULL")
plan = explain(counted)
check("a scan with no row left becomes an empty result", "EMPTY_RESULT" in plan, plan)
check("... and the answer is right", db.execute(counted).fetchall() == [(None,)])
# an empty side without a filter on it, beside a side that emits rows: nothing folds
kept = counted.replace(f"del.table_id = {t_id}", f"data.table_id = {t_id}")
check("a scan with rows left stays", "EMPTY_RESULT" not in explain(kept), explain(kept))

# The statistics follow the transaction's own rows: one that stages a delete file sees it.
file_id, snap = db.execute(
    f"SELECT data_file_id, begin_snapshot FROM {meta}.ducklake_data_file WHERE table_id = {t_id} LIMIT 1"
).fetchall()[0]
db.execute("BEGIN")
check("before the staged row: empty", "EMPTY_RESULT" in explain(counted))
db.execute(
    f"INSERT INTO {meta}.ducklake_delete_file VALUES (987654, {t_id}, {snap}, NULL, {file_id}, "
    f"'x.parquet', true, 'parquet', 3, 100, 10, NULL, NULL)"
)
plan = explain(counted)
check("a staged delete file is not planned away", "EMPTY_RESULT" not in plan, plan)
check("... and is counted", db.execute(counted).fetchall() == [(3,)], str(db.execute(counted).fetchall()))
db.execute("ROLLBACK")
check("after the rollback: empty again", db.execute(counted).fetchall() == [(None,)])
# DuckLake's own delete files take the same path
db.execute("DELETE FROM lake.t WHERE i < 10")
check("DuckLake counts rows after a delete", db.execute("SELECT count(*) FROM lake.t").fetchall() == [(390,)])
check("... through a delete-file join that is not empty", db.execute(counted).fetchall() == [(10,)],
      str(db.execute(counted).fetchall()))

finish("scan_cardinality")
