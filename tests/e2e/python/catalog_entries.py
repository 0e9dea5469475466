"""The table entries DuckDB binds against: shared by the transactions that see the same committed
definitions, and a transaction's own once it creates or drops a table.

Host: the pinned `duckdb==1.5.5` Python package (several connections in one process).
Run by `cargo xtask e2e` with MORAINE_EXT, DUCKLAKE_EXT and TEST_DIR set.
"""
from _harness import TEST_DIR, check, connect, expect_error, finish

INLINED = "(row_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, v INTEGER)"

db = connect()
db.execute(f"ATTACH 'moraine:{TEST_DIR}/raw' AS raw")
db.execute(f"CREATE TABLE raw.main.ducklake_inlined_data_1_0 {INLINED}")
db.execute("INSERT INTO raw.main.ducklake_inlined_data_1_0 VALUES (0, 1, NULL, 10)")


def count(cur, table):
    return cur.execute(f"SELECT count(*) FROM raw.main.{table}").fetchone()[0]


# 1. A table committed by another connection is not in a transaction that started before, and is
#    in every transaction after; the earlier transaction keeps working on its own view.
a, b = db.cursor(), db.cursor()
a.execute("BEGIN")
check("a reads the committed table", count(a, "ducklake_inlined_data_1_0") == 1)
b.execute(f"CREATE TABLE raw.main.ducklake_inlined_data_2_0 {INLINED}")
expect_error("a table committed after a transaction began is not in it",
             lambda: count(a, "ducklake_inlined_data_2_0"), "does not exist")
check("the earlier transaction still reads its tables", count(a, "ducklake_inlined_data_1_0") == 1)
a.execute("COMMIT")
check("the next transaction sees the committed table", count(a, "ducklake_inlined_data_2_0") == 0)
check("so does another connection's", count(b, "ducklake_inlined_data_2_0") == 0)

# 2. A table created in a transaction is its own until it commits; a rollback forgets it.
a.execute("BEGIN")
check("before the CREATE, a reads the shared tables", count(a, "ducklake_inlined_data_1_0") == 1)
a.execute(f"CREATE TABLE raw.main.ducklake_inlined_data_3_0 {INLINED}")
a.execute("INSERT INTO raw.main.ducklake_inlined_data_3_0 VALUES (0, 2, NULL, 30)")
check("the creating transaction reads its new table", count(a, "ducklake_inlined_data_3_0") == 1)
check("and the tables it read before", count(a, "ducklake_inlined_data_1_0") == 1)
expect_error("another connection does not see the staged table",
             lambda: count(b, "ducklake_inlined_data_3_0"), "does not exist")
a.execute("ROLLBACK")
expect_error("a rolled-back table is gone", lambda: count(a, "ducklake_inlined_data_3_0"), "does not exist")
names = [r[0] for r in db.execute(
    "SELECT table_name FROM duckdb_tables() WHERE database_name = 'raw' ORDER BY 1").fetchall()]
check("the catalog lists the committed tables only",
      names == ["ducklake_inlined_data_1_0", "ducklake_inlined_data_2_0"], str(names))

# 3. A table dropped in a transaction is gone for it only, until it commits.
a.execute("BEGIN")
a.execute("DROP TABLE raw.main.ducklake_inlined_data_2_0")
expect_error("the dropping transaction no longer sees the table",
             lambda: count(a, "ducklake_inlined_data_2_0"), "does not exist")
check("another connection still reads it", count(b, "ducklake_inlined_data_2_0") == 0)
a.execute("COMMIT")
expect_error("after the commit nobody sees it", lambda: count(b, "ducklake_inlined_data_2_0"), "does not exist")

# 4. Table names match case-insensitively, through the shared entries as before.
check("a name in other case finds the table", count(b, "DUCKLAKE_INLINED_DATA_1_0") == 1)
a.execute("BEGIN")
a.execute("DROP TABLE raw.main.DUCKLAKE_INLINED_DATA_1_0")
expect_error("a DROP in other case drops the table", lambda: count(a, "ducklake_inlined_data_1_0"), "does not exist")
a.execute("ROLLBACK")
check("and its rollback keeps it", count(a, "ducklake_inlined_data_1_0") == 1)

finish("catalog_entries")
