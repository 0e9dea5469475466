"""Differential test: one scripted DuckLake workload on moraine and on DuckLake's own DuckDB-file catalog.

Host: the pinned `duckdb==1.5.5` Python package. Run by `cargo xtask e2e` with MORAINE_EXT, DUCKLAKE_EXT
and TEST_DIR set.

One process attaches two lakes:
    ml: 'ducklake:moraine:<TEST_DIR>/m/meta'    DATA_PATH <TEST_DIR>/m/data/
    dl: 'ducklake:<TEST_DIR>/d/meta.ducklake'   DATA_PATH <TEST_DIR>/d/data/
Both get `METADATA_CATALOG '__ducklake_metadata_<lake>'` (the name DuckLake would pick anyway): without
it DuckLake attaches the metadata database HIDDEN, and hidden databases are left out of duckdb_tables()
and duckdb_columns(), which this test needs to list every table of each catalog.

The same WORKLOAD (SQL with a `{lake}` placeholder) runs statement by statement on both lakes, each on
its own connection (the workload uses `USE {lake}`, so that view and macro bodies are stored without a
lake name). Each statement must succeed on both and return the same rows. Then:

  * the two metadata catalogs must hold the same set of tables, with the same columns and types;
  * every table, the 28 fixed ones and the dynamic ducklake_inlined_data_<t>_<v> /
    ducklake_inlined_delete_<t>, must hold the same rows (`SELECT * EXCLUDE (<IGNORED>) ... ORDER BY ALL`,
    every column cast to VARCHAR, the columns in NORMALIZED rewritten first);
  * every one of the 28 fixed tables must be non-empty on the DuckDB-file side, so the workload really
    exercises it;
  * each lake records the true size and footer size of its delete files (checked against the disk);
  * a set of user queries (contents, aggregates, time travel at every snapshot, snapshots(),
    table_changes/insertions/deletions, list_files, table_info, options, cleanup dry runs, views and
    macros) must return the same rows on both lakes.
Halfway through, both lakes are detached and attached again, so the rest runs on what moraine stored.

Determinism: the connection runs with `threads = 1`, so both lakes write identical Parquet files (same
sizes, row order, and file ids per partition). With 2 threads, a partitioned INSERT hands out data file ids
to partitions in a run-dependent order (seen: data_file_id 34 is year=2024/month=1 on one lake and
year=2023/month=12 on the other), which has nothing to do with the catalog.
"""
import os
import re
import sys

import duckdb

MORAINE = os.environ["MORAINE_EXT"]
DUCKLAKE = os.environ["DUCKLAKE_EXT"]
TEST_DIR = os.environ["TEST_DIR"].rstrip("/")

LAKES = ("ml", "dl")
DATA_DIR = {"ml": f"{TEST_DIR}/m/data/", "dl": f"{TEST_DIR}/d/data/"}
META_DB = {lake: f"__ducklake_metadata_{lake}" for lake in LAKES}

# Columns that legitimately differ between two runs of the same workload, per metadata table.
IGNORED = {
    # UUID() / uuidv7 generated at creation
    "ducklake_schema": ["schema_uuid"],
    "ducklake_table": ["table_uuid"],
    "ducklake_view": ["view_uuid"],
    # NOW() at commit
    "ducklake_snapshot": ["snapshot_time"],
    # NOW() when the file was scheduled
    "ducklake_files_scheduled_for_deletion": ["schedule_start"],
    # A delete file stores the absolute path of its data file ('<data path>/s/orders/ducklake-<uuidv7>.parquet')
    # in a PLAIN-encoded, Snappy-compressed column, so its size depends on how well the random uuid
    # compresses (seen: 995 vs 999 bytes for identical contents). Its footer records that column's
    # compressed size and the following columns' offsets as varints, so footer_size can move too (by a byte
    # when a value crosses 128). Instead of comparing them between the lakes, the test checks on each lake
    # that both are those of the file on disk (see "delete files on disk").
    "ducklake_delete_file": ["file_size_bytes", "footer_size"],
}
# Columns compared after rewriting: the lake's own data path -> '<DATA>/', uuids -> '<uuid>'.
# Data and delete file names are 'ducklake-<uuidv7>.parquet' / 'ducklake-<uuidv7>-delete.parquet'
# (relative to the table path); ducklake_metadata.value holds the lake's data_path.
NORMALIZED = {
    "ducklake_data_file": ["path"],
    "ducklake_delete_file": ["path"],
    "ducklake_files_scheduled_for_deletion": ["path"],
    "ducklake_metadata": ["value"],
}
# Not ignored although they could look random: encryption_key columns (NULL on both sides, the lakes are
# not encrypted), ducklake_metadata 'created_by' (same DuckDB build), data file sizes and footer sizes (the
# same Parquet bytes, see threads = 1), every id (both catalogs draw ids from the same snapshot counters),
# data_file.path of files added with ducklake_add_data_files (an absolute path outside both lakes).

FIXED_TABLES = [
    "ducklake_metadata", "ducklake_snapshot", "ducklake_snapshot_changes", "ducklake_schema", "ducklake_table",
    "ducklake_view", "ducklake_tag", "ducklake_column_tag", "ducklake_data_file", "ducklake_file_column_stats",
    "ducklake_file_variant_stats", "ducklake_delete_file", "ducklake_column", "ducklake_table_stats",
    "ducklake_table_column_stats", "ducklake_partition_info", "ducklake_partition_column",
    "ducklake_file_partition_value", "ducklake_files_scheduled_for_deletion", "ducklake_inlined_data_tables",
    "ducklake_column_mapping", "ducklake_name_mapping", "ducklake_schema_versions", "ducklake_macro",
    "ducklake_macro_impl", "ducklake_macro_parameters", "ducklake_sort_info", "ducklake_sort_expression",
]
assert len(FIXED_TABLES) == 28

# The workload. `{lake}` is the lake name, `{ext}` a directory outside both lakes (external Parquet files
# added with ducklake_add_data_files are referenced by absolute path, identical for both lakes), `{data}`
# the lake's own data path; `{reattach}` detaches the lake and attaches it again.
# Comments name the metadata tables a statement is there for. The default data_inlining_row_limit is 10:
# inserts of <= 10 rows are inlined, deletes of <= 10 rows from one Parquet file become inlined deletes.
WORKLOAD = [
    # ducklake_metadata: global options (and below, schema- and table-scoped ones)
    "CALL {lake}.set_option('parquet_row_group_size', 5000)",
    "CALL ducklake_set_option('{lake}', 'hive_file_pattern', true)",
    # ducklake_schema (a dropped schema ends its row)
    "CREATE SCHEMA {lake}.s",
    "CREATE SCHEMA {lake}.tmp",
    "DROP SCHEMA {lake}.tmp",
    # ducklake_metadata with scope 'schema'
    "CALL {lake}.set_option('target_file_size', '64MB', schema => 's')",
    # ducklake_snapshot_changes.author / commit_message / commit_extra_info
    "BEGIN",
    "CALL {lake}.set_commit_message('alice', 'create orders', extra_info => '{\"ticket\": 1}')",
    # ducklake_table, ducklake_column (nested: LIST and STRUCT children), ducklake_inlined_data_tables
    "CREATE TABLE {lake}.s.orders (id INTEGER, customer VARCHAR, amount DECIMAL(10,2), region VARCHAR, "
    "tags VARCHAR[], info STRUCT(a INTEGER, b VARCHAR))",
    "COMMIT",
    # ducklake_tag, ducklake_column_tag
    "COMMENT ON TABLE {lake}.s.orders IS 'customer orders'",
    "COMMENT ON COLUMN {lake}.s.orders.customer IS 'who ordered'",
    "COMMENT ON TABLE {lake}.s.orders IS 'all customer orders'",
    # a rolled-back transaction leaves no trace
    "BEGIN",
    "INSERT INTO {lake}.s.orders VALUES (999, 'ghost', 0, 'eu', NULL, NULL)",
    "COMMENT ON COLUMN {lake}.s.orders.amount IS 'never'",
    "ROLLBACK",
    # ducklake_inlined_data_<orders>_<v>
    "INSERT INTO {lake}.s.orders VALUES (1, 'ann', 10.50, 'eu', ['a'], {'a': 1, 'b': 'x'}), "
    "(2, 'bob', 20.00, 'us', NULL, NULL), (3, 'cy', 30.25, 'eu', ['b', 'c'], {'a': 3, 'b': NULL})",
    # ducklake_data_file, ducklake_file_column_stats, ducklake_table_stats, ducklake_table_column_stats
    "INSERT INTO {lake}.s.orders SELECT i, 'bulk' || (i % 7), i * 1.5, CASE WHEN i % 2 = 0 THEN 'eu' ELSE 'us' END, "
    "NULL, {'a': i, 'b': 'v' || i} FROM range(100, 3100) t(i)",
    # 3 rows of a Parquet file (<= inlining limit): ducklake_inlined_delete_<orders>
    "DELETE FROM {lake}.s.orders WHERE id IN (150, 151, 152)",
    # 100 rows of a Parquet file: ducklake_delete_file
    "DELETE FROM {lake}.s.orders WHERE id BETWEEN 200 AND 299",
    # an inlined row and a Parquet row: inlined end_snapshot + re-insert, and an inlined file delete
    "UPDATE {lake}.s.orders SET amount = amount + 1 WHERE id IN (1, 100)",
    "DELETE FROM {lake}.s.orders WHERE id = 2",
    # ducklake_metadata with scope 'table'
    "CALL {lake}.set_option('data_inlining_row_limit', 20, table_name => 'orders', schema => 's')",
    # ducklake_column versions, ducklake_schema_versions, a new inlined data table per schema version
    "ALTER TABLE {lake}.s.orders ADD COLUMN note VARCHAR DEFAULT 'none'",
    "ALTER TABLE {lake}.s.orders RENAME COLUMN customer TO buyer",
    # ducklake_partition_info, ducklake_partition_column
    "ALTER TABLE {lake}.s.orders SET PARTITIONED BY (region)",
    # ducklake_file_partition_value (hive paths region=<v>/)
    "INSERT INTO {lake}.s.orders SELECT i, 'p' || (i % 3), i * 0.5, CASE WHEN i % 3 = 0 THEN 'ap' ELSE 'eu' END, "
    "['t'], NULL, 'n' || i FROM range(5000, 6000) t(i)",
    "INSERT INTO {lake}.s.orders VALUES (7000, 'dee', 1.00, 'us', NULL, NULL, 'small')",
    # ducklake_sort_info, ducklake_sort_expression
    "ALTER TABLE {lake}.s.orders SET SORTED BY (id DESC, buyer ASC NULLS FIRST)",
    "INSERT INTO {lake}.s.orders SELECT i, 's', 2.0, 'us', NULL, NULL, NULL FROM range(8000, 8100) t(i)",
    # bodies of views and macros are stored as written: name tables relative to the lake
    "USE {lake}",
    # ducklake_view (+ a tag on it)
    "CREATE VIEW {lake}.s.big_orders AS SELECT id, amount FROM s.orders WHERE amount > 4000",
    "COMMENT ON VIEW {lake}.s.big_orders IS 'big ones'",
    "CREATE VIEW {lake}.s.tmp_view AS SELECT 1 AS one",
    "ALTER VIEW {lake}.s.tmp_view RENAME TO tmp_view2",
    "DROP VIEW {lake}.s.tmp_view2",
    # ducklake_macro, ducklake_macro_impl (several implementations), ducklake_macro_parameters
    # (untyped, typed, with defaults), and a table macro
    "CREATE MACRO {lake}.s.multi_add () AS 0, (a) AS a, (a, b, c := 5) AS a + b + c",
    "CREATE MACRO {lake}.s.typed(x INTEGER, y := 2) AS x * y",
    "CREATE MACRO {lake}.s.orders_over(n) AS TABLE SELECT id FROM s.orders WHERE amount > n",
    "CREATE MACRO {lake}.s.gone(x) AS x",
    "DROP MACRO {lake}.s.gone",
    "USE memory",
    # ducklake_file_variant_stats: a VARIANT column whose values shred consistently (STRUCT, then INT)
    "CREATE TABLE {lake}.main.variants (k INTEGER, v VARIANT)",
    "INSERT INTO {lake}.main.variants SELECT i, CASE WHEN i % 10 = 0 THEN NULL ELSE {'x': i, 'y': 'z' || i}::VARIANT END "
    "FROM range(0, 500) t(i)",
    "INSERT INTO {lake}.main.variants SELECT i, (i * 2)::VARIANT FROM range(1000, 1050) t(i)",
    # ducklake_column_mapping, ducklake_name_mapping (with a STRUCT: parent_column set)
    "COPY (SELECT i AS id, 'ext' || i AS name, (i * 2.5)::DOUBLE AS score, {'p': i, 'q': 'w' || i} AS st "
    "FROM range(0, 50) t(i)) TO '{ext}/ext1.parquet'",
    "COPY (SELECT i AS id, 'more' || i AS name, NULL::DOUBLE AS score, {'p': -i, 'q': NULL::VARCHAR} AS st "
    "FROM range(50, 80) t(i)) TO '{ext}/ext2.parquet'",
    "CREATE TABLE {lake}.main.ext (id BIGINT, name VARCHAR, score DOUBLE, st STRUCT(p BIGINT, q VARCHAR))",
    "CALL ducklake_add_data_files('{lake}', 'ext', '{ext}/ext1.parquet')",
    "CALL ducklake_add_data_files('{lake}', 'ext', '{ext}/ext2.parquet', schema => 'main')",
    # a table that lives in inlined data only: UPDATE / DELETE of inlined rows, then a column type change
    "CREATE TABLE {lake}.main.inl (k INTEGER, s VARCHAR)",
    "INSERT INTO {lake}.main.inl VALUES (1, 'one'), (2, 'two'), (3, 'three')",
    "UPDATE {lake}.main.inl SET s = upper(s) WHERE k = 2",
    "DELETE FROM {lake}.main.inl WHERE k = 3",
    "ALTER TABLE {lake}.main.inl ALTER k SET DATA TYPE BIGINT",
    "INSERT INTO {lake}.main.inl VALUES (4, 'four')",
    # two partition keys with transforms; a multi-statement transaction
    "CREATE TABLE {lake}.main.events (ts TIMESTAMP, kind VARCHAR, v INTEGER)",
    "ALTER TABLE {lake}.main.events SET PARTITIONED BY (year(ts), month(ts))",
    "BEGIN",
    "INSERT INTO {lake}.main.events SELECT TIMESTAMP '2023-11-01 00:00:00' + INTERVAL (i) DAY, 'k' || (i % 4), i "
    "FROM range(0, 90) t(i)",
    "UPDATE {lake}.main.events SET v = -v WHERE kind = 'k1'",
    "COMMENT ON COLUMN {lake}.main.events.kind IS 'event kind'",
    "COMMIT",
    "COMMENT ON COLUMN {lake}.main.events.kind IS NULL",
    # table rename and drop
    "CREATE TABLE {lake}.main.scratch AS SELECT 1 AS x",
    "ALTER TABLE {lake}.main.scratch RENAME TO scratch2",
    "DROP TABLE {lake}.main.scratch2",
    "ALTER TABLE {lake}.s.orders DROP COLUMN tags",
    # maintenance: flush inlined rows of orders to Parquet; merge small files; rewrite files with deletes
    # (ducklake_files_scheduled_for_deletion)
    "CALL ducklake_flush_inlined_data('{lake}', schema_name => 's', table_name => 'orders')",
    "CALL ducklake_merge_adjacent_files('{lake}')",
    "CALL ducklake_rewrite_data_files('{lake}', delete_threshold => 0.0)",
    # expire early snapshots: files only those snapshots saw are scheduled for deletion
    "SELECT snapshot_id, schema_version, changes, author, commit_message, commit_extra_info "
    "FROM ducklake_expire_snapshots('{lake}', versions => [2, 3, 9])",
    # a stray Parquet file in the data path, for ducklake_delete_orphaned_files (dry run) to find
    "COPY (SELECT 1 AS x) TO '{data}s/stray.parquet'",
    # detach and attach both lakes again: from here on, moraine serves what it stored
    "{reattach}",
    # after the maintenance: leave inlined rows and inlined deletes in place for the table comparison
    "INSERT INTO {lake}.s.orders VALUES (9000, 'late', 9.99, 'eu', NULL, 'after flush')",
    "DELETE FROM {lake}.s.orders WHERE id IN (5001, 5002)",
    "INSERT INTO {lake}.main.variants VALUES (2000, {'x': 1, 'y': 'one'}::VARIANT), (2001, 'plain'::VARIANT)",
    "DELETE FROM {lake}.main.variants WHERE k < 3",
    "UPDATE {lake}.main.ext SET score = -1 WHERE id = 7",
    "DELETE FROM {lake}.main.events WHERE v BETWEEN 10 AND 12",
]

# User queries compared between the lakes (after the workload). `{lake}` as above.
USER_QUERIES = [
    "SELECT * FROM {lake}.s.orders ORDER BY ALL",
    "SELECT * FROM {lake}.main.variants ORDER BY k",
    "SELECT * FROM {lake}.main.ext ORDER BY ALL",
    "SELECT * FROM {lake}.main.inl ORDER BY ALL",
    "SELECT count(*), sum(amount), min(buyer), max(buyer), count(DISTINCT region) FROM {lake}.s.orders",
    "SELECT region, count(*), sum(amount), sum(id) FROM {lake}.s.orders GROUP BY region ORDER BY region",
    "SELECT count(*), sum(score), sum(st.p) FROM {lake}.main.ext",
    "SELECT rowid, id FROM {lake}.s.orders WHERE id < 120 OR id > 8090 ORDER BY rowid",
    "SELECT count(*), sum(amount) FROM {lake}.s.big_orders",
    "SELECT {lake}.s.multi_add(), {lake}.s.multi_add(4), {lake}.s.multi_add(4, 6), {lake}.s.multi_add(4, 6, 1), "
    "{lake}.s.typed(7), {lake}.s.typed(7, 3)",
    # a table macro's body names s.orders relative to the lake: the connection has `USE {lake}`
    "SELECT count(*), sum(id) FROM {lake}.s.orders_over(4000)",
    "SELECT count(*), sum(amount) FROM s.orders WHERE id > 5000",
    "SELECT snapshot_id, schema_version, changes, author, commit_message, commit_extra_info "
    "FROM {lake}.snapshots() ORDER BY snapshot_id",
    "SELECT id FROM {lake}.current_snapshot()",
    "SELECT id FROM {lake}.last_committed_snapshot()",
    # table_uuid is random; delete file sizes are checked against the disk instead (see IGNORED)
    "SELECT table_name, schema_id, table_id, file_count, file_size_bytes, delete_file_count "
    "FROM {lake}.table_info() ORDER BY ALL",
    "SELECT * EXCLUDE (delete_file_size_bytes, delete_file_footer_size) "
    "FROM ducklake_list_files('{lake}', 'orders', schema => 's') ORDER BY ALL",
    "SELECT * EXCLUDE (delete_file_size_bytes, delete_file_footer_size) "
    "FROM ducklake_list_files('{lake}', 'orders', schema => 's', snapshot_version => 12) ORDER BY ALL",
    "SELECT * EXCLUDE (delete_file_size_bytes, delete_file_footer_size) "
    "FROM ducklake_list_files('{lake}', 'variants') ORDER BY ALL",
    "SELECT * EXCLUDE (delete_file_size_bytes, delete_file_footer_size) "
    "FROM ducklake_list_files('{lake}', 'ext') ORDER BY ALL",
    "SELECT * EXCLUDE (delete_file_size_bytes, delete_file_footer_size) "
    "FROM ducklake_list_files('{lake}', 'events') ORDER BY ALL",
    "SELECT option_name, value, scope, scope_entry FROM {lake}.options() ORDER BY ALL",
    "SELECT extension_version, data_path FROM {lake}.settings()",
    "SELECT * FROM ducklake_table_changes('{lake}', 's', 'orders', 4, 12) ORDER BY ALL",
    "SELECT * FROM ducklake_table_changes('{lake}', 's', 'orders', 10, {last}) ORDER BY ALL",
    "SELECT * FROM ducklake_table_insertions('{lake}', 's', 'orders', 13, {last}) ORDER BY ALL",
    "SELECT * FROM ducklake_table_deletions('{lake}', 's', 'orders', 5, {last}) ORDER BY ALL",
    "SELECT * FROM ducklake_table_changes('{lake}', 'main', 'inl', 0, {last}) ORDER BY ALL",
    "SELECT * FROM ducklake_table_changes('{lake}', 'main', 'variants', 0, {last}) ORDER BY ALL",
    "SELECT * FROM ducklake_table_changes('{lake}', 'main', 'ext', 0, {last}) ORDER BY ALL",
    "SELECT * FROM ducklake_table_changes('{lake}', 'main', 'events', 0, {last}) ORDER BY ALL",
    "SELECT * FROM {lake}.main.events WHERE ts >= TIMESTAMP '2024-01-01' ORDER BY ALL",
    "SELECT year(ts), month(ts), count(*), sum(v) FROM {lake}.main.events GROUP BY ALL ORDER BY ALL",
    "SELECT * FROM ducklake_cleanup_old_files('{lake}', cleanup_all => true, dry_run => true) ORDER BY ALL",
    "SELECT * FROM ducklake_delete_orphaned_files('{lake}', cleanup_all => true, dry_run => true) ORDER BY ALL",
    "SELECT schema_name, table_name, comment FROM duckdb_tables() WHERE database_name = '{lake}' ORDER BY ALL",
    "SELECT schema_name, view_name, comment, sql FROM duckdb_views() WHERE database_name = '{lake}' ORDER BY ALL",
    "SELECT schema_name, table_name, column_name, column_index, data_type, column_default, comment "
    "FROM duckdb_columns() WHERE database_name = '{lake}' ORDER BY ALL",
    "SELECT schema_name, function_name, function_type, parameters, parameter_types, macro_definition "
    "FROM duckdb_functions() WHERE database_name = '{lake}' ORDER BY ALL",
]
# Time travel: every table (by name, as it was) at every snapshot, including expired ones (which must
# fail the same way on both lakes).
TIME_TRAVEL_TABLES = ["s.orders", "s.big_orders", "main.variants", "main.ext", "main.inl", "main.events",
                      "main.scratch", "main.scratch2"]

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

failures = []
passes = 0


def check(name, cond, detail=""):
    global passes
    print(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail and not cond else ""))
    if cond:
        passes += 1
    else:
        failures.append(name)


def normalize(lake, value):
    if value is None:
        return None
    value = value.replace(DATA_DIR[lake], "<DATA>/").replace(DATA_DIR[lake].rstrip("/"), "<DATA>")
    return UUID_RE.sub("<uuid>", value)


def normalize_error(lake, message):
    # error texts name the lake; only the first line counts (DuckDB's "Did you mean ..." suggestions
    # list similar names from every attached database, which depends on the connection's USE)
    message = normalize(lake, message.split("\n")[0])
    return re.sub(r"\b(ml|dl)\b", "<lake>", message)


def sort_key(row):
    return tuple((v is None, v or "") for v in row)


def run(con, sql):
    """Rows as tuples of VARCHAR (or None), or ('error', message)."""
    con.execute(sql)
    return con.fetchall()


def as_text(con, sql):
    """Run a query with every output column cast to VARCHAR (Python cannot convert every DuckDB type).
    The rows come back sorted here, on their text: an ORDER BY inside the wrapped query need not survive."""
    return sorted(run(con, f"SELECT COLUMNS(*)::VARCHAR FROM ({sql})"), key=sort_key)


def outcome(lake, fn):
    try:
        return ("rows", fn())
    except duckdb.Error as e:
        return ("error", normalize_error(lake, str(e)))


def diff_detail(a, b, limit=5):
    """Describe how row lists a (ml) and b (dl) differ."""
    if a[0] != b[0]:
        return f"ml: {shorten(a)} / dl: {shorten(b)}"
    if a[0] == "error":
        return f"ml error {a[1]!r} / dl error {b[1]!r}"
    ra, rb = a[1], b[1]
    only_a = [r for r in ra if r not in rb]
    only_b = [r for r in rb if r not in ra]
    msg = f"ml {len(ra)} rows, dl {len(rb)} rows"
    if only_a:
        msg += f"; only on ml: {only_a[:limit]}"
    if only_b:
        msg += f"; only on dl: {only_b[:limit]}"
    if not only_a and not only_b:
        msg += f"; same rows, different order or multiplicity; first difference at " \
               f"{next((i for i, (x, y) in enumerate(zip(ra, rb)) if x != y), min(len(ra), len(rb)))}"
    return msg


def shorten(o):
    s = repr(o)
    return s if len(s) < 600 else s[:600] + "..."


# ------------------------------------------------------------------------------------------------
db = duckdb.connect(config={
    "allow_unsigned_extensions": "true",
    "autoinstall_known_extensions": "false",
    "autoload_known_extensions": "false",
    "threads": "1",
})
db.execute(f"LOAD '{DUCKLAKE}'")
db.execute(f"LOAD '{MORAINE}'")
EXT_DIR = f"{TEST_DIR}/ext"
for d in (f"{TEST_DIR}/m", f"{TEST_DIR}/d", EXT_DIR):
    os.makedirs(d, exist_ok=True)
con = {lake: db.cursor() for lake in LAKES}
ATTACH_SQL = {
    "ml": f"ATTACH 'ducklake:moraine:{TEST_DIR}/m/meta' AS ml "
          f"(DATA_PATH '{DATA_DIR['ml']}', METADATA_CATALOG '{META_DB['ml']}')",
    "dl": f"ATTACH 'ducklake:{TEST_DIR}/d/meta.ducklake' AS dl "
          f"(DATA_PATH '{DATA_DIR['dl']}', METADATA_CATALOG '{META_DB['dl']}')",
}
for lake in LAKES:
    db.execute(ATTACH_SQL[lake])


def sql_for(lake, template, last=None):
    if template == "{reattach}":
        return f"DETACH {lake}; {ATTACH_SQL[lake]}"
    sql = template.replace("{lake}", lake).replace("{ext}", EXT_DIR).replace("{data}", DATA_DIR[lake])
    return sql if last is None else sql.replace("{last}", str(last))


# 1. The workload, statement by statement on both lakes.
for n, stmt in enumerate(WORKLOAD):
    res = {}
    for lake in LAKES:
        c = con[lake]
        res[lake] = outcome(lake, lambda: [tuple(None if v is None else str(v) for v in r)
                                           for r in run(c, sql_for(lake, stmt))])
    head = stmt.replace("{lake}.", "").replace("'{lake}', ", "")[:70]
    ok = res["ml"] == res["dl"] and res["dl"][0] == "rows"
    detail = diff_detail(res["ml"], res["dl"]) if res["ml"] != res["dl"] else f"both failed: {res['dl'][1]}"
    check(f"workload {n:02}: {head}", ok, detail)

# 2. The metadata catalogs: same tables, same columns, same rows.
tables = {}
columns = {}
for lake in LAKES:
    tables[lake] = {t for (t,) in run(db, f"SELECT table_name FROM duckdb_tables() "
                                          f"WHERE database_name = '{META_DB[lake]}' AND schema_name = 'main'")}
    columns[lake] = {}
    for t, col, ty in run(db, f"SELECT table_name, column_name, data_type FROM duckdb_columns() "
                              f"WHERE database_name = '{META_DB[lake]}' AND schema_name = 'main' "
                              f"ORDER BY table_name, column_index"):
        columns[lake].setdefault(t, []).append((col, ty))
check("catalog: the DuckDB-file catalog has the 28 fixed tables", set(FIXED_TABLES) <= tables["dl"],
      str(sorted(set(FIXED_TABLES) - tables["dl"])))
check("catalog: same set of tables", tables["ml"] == tables["dl"],
      f"only on ml: {sorted(tables['ml'] - tables['dl'])}, only on dl: {sorted(tables['dl'] - tables['ml'])}")
dynamic = sorted(tables["dl"] - set(FIXED_TABLES))
nonempty = {t for t in dynamic if run(db, f'SELECT count(*) FROM "{META_DB["dl"]}".main."{t}"')[0][0] > 0}
check("catalog: the workload leaves rows in inlined data and inlined delete tables",
      any(t.startswith("ducklake_inlined_data_") for t in nonempty)
      and any(t.startswith("ducklake_inlined_delete_") for t in nonempty), f"non-empty: {sorted(nonempty)}")

for t in sorted(tables["ml"] & tables["dl"]):
    check(f"columns: {t}", columns["ml"].get(t) == columns["dl"].get(t),
          f"ml {columns['ml'].get(t)} / dl {columns['dl'].get(t)}")
    ignored = IGNORED.get(t, [])
    normalized = NORMALIZED.get(t, [])
    cols = [c for c, _ in columns["dl"][t] if c not in ignored]
    res = {}
    for lake in LAKES:
        select = ", ".join(f'CAST("{c}" AS VARCHAR) AS "{c}"' for c in cols)

        def fetch(lake=lake, select=select):
            rows = run(db, f'SELECT {select} FROM "{META_DB[lake]}".main."{t}" ORDER BY ALL')
            idx = [i for i, c in enumerate(cols) if c in normalized]
            rows = [tuple(normalize(lake, v) if i in idx else v for i, v in enumerate(r)) for r in rows]
            return sorted(rows, key=sort_key) if idx else rows
        res[lake] = outcome(lake, fetch)
    note = f", ignoring {', '.join(ignored)}" if ignored else ""
    count = len(res["dl"][1]) if res["dl"][0] == "rows" else "?"
    check(f"rows: {t} ({count} rows{note})", res["ml"] == res["dl"] and res["dl"][0] == "rows", diff_detail(res["ml"], res["dl"]))
    if t in FIXED_TABLES:
        check(f"non-empty on the DuckDB-file side: {t}", res["dl"][0] == "rows" and len(res["dl"][1]) > 0,
              "the workload does not populate it")

# 3. The size and footer size each catalog records for its delete files, compared to the files on disk
#    (not between the lakes, see IGNORED). A Parquet file ends in <4-byte footer length> 'PAR1'.
for lake in LAKES:
    rows = run(db, f"""
        WITH t AS (SELECT DISTINCT ON (table_id) table_id, schema_id, path, path_is_relative
                   FROM "{META_DB[lake]}".main.ducklake_table ORDER BY table_id, begin_snapshot DESC)
        SELECT d.delete_file_id, d.file_size_bytes, d.footer_size,
               CASE WHEN NOT d.path_is_relative THEN d.path
                    WHEN NOT t.path_is_relative THEN t.path || d.path
                    WHEN NOT s.path_is_relative THEN s.path || t.path || d.path
                    ELSE '{DATA_DIR[lake]}' || s.path || t.path || d.path END
        FROM "{META_DB[lake]}".main.ducklake_delete_file d JOIN t USING (table_id)
             JOIN "{META_DB[lake]}".main.ducklake_schema s ON s.schema_id = t.schema_id
        ORDER BY 1""")
    def on_disk(path):
        if not os.path.exists(path):
            return None
        with open(path, "rb") as f:
            data = f.read()
        return len(data), int.from_bytes(data[-8:-4], "little")
    wrong = [(i, (size, footer), path, on_disk(path))
             for i, size, footer, path in rows if on_disk(path) != (size, footer)]
    check(f"delete files on disk: {lake} records the size and footer size of each of its {len(rows)} delete files",
          rows and not wrong, f"(id, (recorded size, footer), path, on disk): {wrong}")

# 4. User queries.
last = run(con["dl"], "SELECT max(snapshot_id) FROM dl.snapshots()")[0][0]
for lake in LAKES:
    con[lake].execute(f"USE {lake}")
for n, q in enumerate(USER_QUERIES):
    res = {}
    for lake in LAKES:
        c = con[lake]
        res[lake] = outcome(lake, lambda: sorted([tuple(normalize(lake, v) for v in r)
                                                  for r in as_text(c, sql_for(lake, q, last))], key=sort_key))
    head = q.replace("{lake}.", "").replace("'{lake}', ", "")[:80]
    ok = res["ml"] == res["dl"] and res["dl"][0] == "rows" and len(res["dl"][1]) > 0
    detail = diff_detail(res["ml"], res["dl"]) if res["ml"] != res["dl"] else f"dl: {shorten(res['dl'])}"
    check(f"query {n:02}: {head}", ok, detail)

for table in TIME_TRAVEL_TABLES:
    mismatched = []
    seen = 0
    for v in range(0, last + 1):
        res = {}
        for lake in LAKES:
            c = con[lake]
            res[lake] = outcome(lake, lambda: as_text(c, f"SELECT * FROM {lake}.{table} AT (VERSION => {v}) "
                                                         f"ORDER BY ALL"))
        if res["dl"][0] == "rows":
            seen += 1
        if res["ml"] != res["dl"]:
            mismatched.append(f"version {v}: {diff_detail(res['ml'], res['dl'], limit=2)}")
    check(f"time travel: {table} at versions 0..{last} ({seen} readable)", not mismatched and seen > 0,
          "; ".join(mismatched[:3]))

print(f"differential: {passes} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
