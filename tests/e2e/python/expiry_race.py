"""Expiry racing other writers, two connections in one DuckDB v1.5.5 process (RFC 0007).

1. A commit racing an expiry lands beside it when they touch different rows (as on Postgres);
   two expiries of one snapshot conflict, never corrupt.
2. A commit whose base snapshot was expired by a concurrent expiry conflicts, DuckLake
   refreshes and retries, and the write lands exactly once.
"""
import duckdb

from _harness import TEST_DIR, check, connect, finish

db = connect()
db.execute(f"ATTACH 'ducklake:moraine:{TEST_DIR}/meta' AS lake (DATA_PATH '{TEST_DIR}/data/')")
db.execute("CREATE TABLE lake.t (i INTEGER)")
for i in range(4):
    db.execute(f"INSERT INTO lake.t VALUES ({i})")


def snapshots(con):
    return [r[0] for r in con.execute("SELECT snapshot_id FROM lake.snapshots() ORDER BY 1").fetchall()]


def values(con):
    return [r[0] for r in con.execute("SELECT i FROM lake.t ORDER BY 1").fetchall()]


# 1. an expiry and an insert race: the insert commits first; the expiry touched none of its
#    rows, so it lands too (as on Postgres, where they change different rows)
a, b = db.cursor(), db.cursor()
a.execute("BEGIN")
a.execute("CALL ducklake_expire_snapshots('lake', versions => [2])")
b.execute("INSERT INTO lake.t VALUES (100)")  # autocommit, lands first
a.execute("COMMIT")
check("racing expiry: the concurrent insert is kept", values(db) == [0, 1, 2, 3, 100], str(values(db)))
snaps = snapshots(db)
check("racing expiry: the expiry landed after it", snaps == [0, 1, 3, 4, 5, 6], str(snaps))
check("racing expiry: head is the insert's snapshot", max(snaps) == 6, str(snaps))

# 1b. two expiries of one snapshot race: they delete the same rows, so the second conflicts
#     and removes nothing more
a, b = db.cursor(), db.cursor()
a.execute("BEGIN")
b.execute("BEGIN")
a.execute("CALL ducklake_expire_snapshots('lake', versions => [3])")
try:
    # (in one process the row lock refuses the second at once; across processes, its commit)
    b.execute("CALL ducklake_expire_snapshots('lake', versions => [3])")
    a.execute("COMMIT")
    b.execute("COMMIT")
    outcome = "committed"
except duckdb.Error as e:
    outcome = str(e)
    try:
        b.execute("ROLLBACK")
        a.execute("COMMIT")
    except duckdb.Error:
        pass
check("racing expiries of one snapshot: the second is refused with a conflict",
      "conflict" in outcome.lower(), outcome)
snaps = snapshots(db)
check("racing expiries: snapshot 3 is gone once, the rest kept", snaps == [0, 1, 4, 5, 6], str(snaps))

# 2. a writer's base is expired under it: its commit conflicts, DuckLake refreshes, and it lands
base = max(snapshots(db))
a, b = db.cursor(), db.cursor()
a.execute("BEGIN")
a.execute("INSERT INTO lake.t VALUES (200)")  # based on `base`
b.execute("INSERT INTO lake.t VALUES (300)")  # base + 1
b.execute("INSERT INTO lake.t VALUES (400)")  # base + 2
b.execute(f"CALL ducklake_expire_snapshots('lake', versions => [{base}, {base + 1}])")
check("stale base: the snapshots after A's base are expired",
      base not in snapshots(db) and base + 1 not in snapshots(db), str(snapshots(db)))
a.execute("COMMIT")  # moraine refuses the stale commit with a conflict; DuckLake retries it
check("stale base: A's write landed exactly once after the retry", values(db) == [0, 1, 2, 3, 100, 200, 300, 400],
      str(values(db)))
snaps = snapshots(db)
check("stale base: A's commit is the new head", max(snaps) == base + 3, str(snaps))

# the store is sound in a new attachment too
db.execute("DETACH lake")
db.execute(f"ATTACH 'ducklake:moraine:{TEST_DIR}/meta' AS lake (DATA_PATH '{TEST_DIR}/data/')")
check("after re-attach: rows", values(db) == [0, 1, 2, 3, 100, 200, 300, 400], str(values(db)))
check("after re-attach: snapshots", snapshots(db) == snaps, str(snapshots(db)))

finish("expiry_race")
