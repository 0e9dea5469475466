"""Two connections in one DuckDB v1.5.5 process race commits on one moraine lake.

Host: the pinned `duckdb==1.5.5` Python package (the stock CLI has a single connection).
Run by `cargo xtask e2e` with MORAINE_EXT, DUCKLAKE_EXT and TEST_DIR set.
"""
from _harness import TEST_DIR, check, connect, expect_error, finish

db = connect()

# 1. Raw moraine tables, no DuckLake: two racing commits of different rows both land (as two
#    DuckDB transactions appending to one table do); of two racing commits of the same row, the
#    second gets a "conflict" error and stores nothing.
db.execute(f"ATTACH 'moraine:{TEST_DIR}/raw' AS raw")
db.execute("CREATE TABLE raw.main.ducklake_snapshot_changes (snapshot_id BIGINT, changes_made VARCHAR, "
           "author VARCHAR, commit_message VARCHAR, commit_extra_info VARCHAR)")


def race(first, second):
    a, b = db.cursor(), db.cursor()
    a.execute("BEGIN")
    b.execute("BEGIN")
    a.execute(f"INSERT INTO raw.main.ducklake_snapshot_changes VALUES ({first}, NULL, NULL, NULL)")
    b.execute(f"INSERT INTO raw.main.ducklake_snapshot_changes VALUES ({second}, NULL, NULL, NULL)")
    a.execute("COMMIT")
    return b


race("1, 'a'", "2, 'b'").execute("COMMIT")
rows = db.execute("SELECT snapshot_id, changes_made FROM raw.main.ducklake_snapshot_changes "
                  "ORDER BY 1").fetchall()
check("raw: racing commits of different rows both land", rows == [(1, "a"), (2, "b")], str(rows))
b = race("3, 'a'", "3, 'b'")
expect_error("raw: the loser of a race for one row gets a conflict error", lambda: b.execute("COMMIT"),
             "conflict")
rows = db.execute("SELECT snapshot_id, changes_made FROM raw.main.ducklake_snapshot_changes "
                  "ORDER BY 1").fetchall()
check("raw: only the winner's row is stored", rows == [(1, "a"), (2, "b"), (3, "a")], str(rows))

# 2. Through DuckLake: two non-conflicting inserts race; DuckLake retries the loser, both land.
db.execute(f"ATTACH 'ducklake:moraine:{TEST_DIR}/meta' AS lake (DATA_PATH '{TEST_DIR}/data/')")
db.execute("CREATE TABLE lake.t (i INTEGER)")
a, b = db.cursor(), db.cursor()
a.execute("BEGIN")
b.execute("BEGIN")
a.execute("INSERT INTO lake.t VALUES (1)")
b.execute("INSERT INTO lake.t VALUES (2)")
a.execute("COMMIT")
b.execute("COMMIT")
rows = db.execute("SELECT i FROM lake.t ORDER BY i").fetchall()
check("ducklake: both racing inserts land after DuckLake's retry", rows == [(1,), (2,)], str(rows))
snaps = db.execute("SELECT count(*) FROM lake.snapshots()").fetchone()[0]
check("ducklake: one snapshot per commit", snaps == 4, str(snaps))

# 3. Through DuckLake: two conflicting changes (both drop the same table); exactly one commits.
a, b = db.cursor(), db.cursor()
a.execute("BEGIN")
b.execute("BEGIN")
a.execute("DROP TABLE lake.t")
b.execute("DROP TABLE lake.t")
a.execute("COMMIT")
expect_error("ducklake: a conflicting concurrent drop is refused", lambda: b.execute("COMMIT"), "conflict")
tables = db.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake'").fetchone()[0]
check("ducklake: the table is dropped once", tables == 0, str(tables))

finish("two_connections")
