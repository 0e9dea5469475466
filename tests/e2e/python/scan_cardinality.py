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

# A scan its pushed-down selections leave empty hands DuckDB a constant FALSE in their place, so
# DuckDB replaces the scan, and the join over it, with an empty result, as it does for an empty
# table of its own. DuckLake's count joins a table's delete files (none here) to the data files.
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

# A scan that emits rows reports each BIGINT column's least and greatest value and whether it
# holds NULL, as DuckDB's own storage does from its zone maps: a filter every emitted row passes
# (DuckLake's snapshot bounds on live rows) is dropped rather than evaluated row by row; one that
# some rows fail stays, and the answers stay right. `unserved` is a filter no index narrows (an
# OR across columns, of which `data_file_id < 0` is false by the statistics): DuckDB decides it
# from the statistics alone.
head = db.execute(f"SELECT max(snapshot_id) FROM {meta}.ducklake_snapshot").fetchall()[0][0]
files = db.execute(f"SELECT table_id, begin_snapshot, end_snapshot FROM {meta}.ducklake_data_file").fetchall()


def visible(at):
    return sum(1 for t, b, e in files if b <= at and (e is None or at < e))


def as_ducklake(at):
    return (f"SELECT count(*) FROM {meta}.ducklake_data_file WHERE {at} >= begin_snapshot "
            f"AND ({at} < end_snapshot OR end_snapshot IS NULL)")


def unserved(at):
    return (f"SELECT count(*) FROM {meta}.ducklake_data_file WHERE (begin_snapshot <= {at} "
            f"OR data_file_id < 0) AND ({at} < end_snapshot OR end_snapshot IS NULL)")


for name, sql in (("DuckLake's snapshot filter", as_ducklake(head)), ("an unserved filter", unserved(head))):
    plan = explain(sql)
    check(f"{name} every emitted row passes is dropped", "FILTER" not in plan, plan)
    check("... and the count is right", db.execute(sql).fetchall() == [(visible(head),)])
first = min(b for t, b, e in files if t == t_id)
check("the files of a later snapshot exist", visible(first) < visible(head))
plan = explain(unserved(first))
check("a filter some rows fail stays", "FILTER" in plan, plan)
check("... and counts only the rows that pass", db.execute(unserved(first)).fetchall() == [(visible(first),)])
# the bounds follow the transaction's own rows: a staged file of a later snapshot fails the filter
db.execute("BEGIN")
db.execute(
    f"INSERT INTO {meta}.ducklake_data_file SELECT * REPLACE (987655 AS data_file_id, "
    f"{head + 1000} AS begin_snapshot) FROM {meta}.ducklake_data_file WHERE data_file_id = {file_id}"
)
plan = explain(unserved(head))
check("a staged row outside the filter keeps it", "FILTER" in plan, plan)
check("... and is not counted", db.execute(unserved(head)).fetchall() == [(visible(head),)])
check("... nor by DuckLake's filter", db.execute(as_ducklake(head)).fetchall() == [(visible(head),)])
check("... at its own snapshot it is", db.execute(unserved(head + 1000)).fetchall()
      == [(visible(head) + 1,)])
# a narrowed scan's bounds are those of the rows its selection admits: the staged row belongs to
# table t, so a scan narrowed to table u's files still drops the filter, and t's keeps it
u_id = db.execute(f"SELECT table_id FROM {meta}.ducklake_table WHERE table_name = 'u'").fetchall()[0][0]
for table, dropped in ((u_id, True), (t_id, False)):
    narrowed = unserved(head).replace("WHERE (", f"WHERE table_id = {table} AND (")
    plan = explain(narrowed)
    check(f"table {table}'s files: the snapshot filter {'dropped' if dropped else 'kept'}",
          ("begin_snapshot" not in plan.split("MORAINE_SCAN")[0]) == dropped, plan)
    want = sum(1 for t, b, e in files if t == table and b <= head and e is None)
    check("... and the count is right", db.execute(narrowed).fetchall() == [(want,)])
db.execute("ROLLBACK")
check("after the rollback: dropped again", "FILTER" not in explain(unserved(head)), explain(unserved(head)))

# An equality, an IN list or a bound on an integer column is applied by the scan itself, exactly
# (through the rows' index), as DuckDB's own storage applies a table filter inside its scan: no
# FILTER is left above the scan, and every answer stays right, a staged row's included.
rows = db.execute(f"SELECT table_id, data_file_id FROM {meta}.ducklake_data_file").fetchall()
ids = sorted(f for _, f in rows)
lo, hi = ids[3], ids[-5]
applied = (
    (f"table_id = {t_id}", lambda t, f: t == t_id),
    (f"table_id IN ({u_id}, 99999)", lambda t, f: t == u_id),
    (f"data_file_id >= {lo} AND data_file_id < {hi}", lambda t, f: lo <= f < hi),
    (f"table_id = {t_id} AND data_file_id > {lo}", lambda t, f: t == t_id and f > lo),
    ("table_id = 99999", lambda t, f: False),
)


def count_where(where):
    return db.execute(f"SELECT count(*) FROM {meta}.ducklake_data_file WHERE {where}").fetchall()[0][0]


for where, passes in applied:
    plan = explain(f"SELECT count(*) FROM {meta}.ducklake_data_file WHERE {where}")
    check(f"`{where}`: applied by the scan, no FILTER above it", "FILTER" not in plan, plan)
    want = sum(1 for t, f in rows if passes(t, f))
    check("... and the count is right", count_where(where) == want, f"{count_where(where)} != {want}")
db.execute("BEGIN")
db.execute(
    f"INSERT INTO {meta}.ducklake_data_file SELECT * REPLACE (987656 AS data_file_id, {u_id} AS table_id) "
    f"FROM {meta}.ducklake_data_file WHERE data_file_id = {file_id}"
)
u_files = sum(1 for t, _ in rows if t == u_id)
check("a staged row is selected with its table's", count_where(f"table_id = {u_id}") == u_files + 1)
check("... and not with the table it was copied from",
      count_where(f"table_id = {t_id}") == sum(1 for t, _ in rows if t == t_id))
check("... and by a bound", count_where("data_file_id > 987655") == 1)
db.execute(f"UPDATE {meta}.ducklake_data_file SET end_snapshot = {head} WHERE data_file_id = 987656")
check("an UPDATE through a selecting scan changes that row only",
      count_where(f"table_id = {u_id} AND end_snapshot = {head}") == 1
      and count_where(f"end_snapshot = {head}") == 1)
db.execute("ROLLBACK")
check("after the rollback: the staged row is gone", count_where("data_file_id > 987655") == 0)

finish("scan_cardinality")
