"""Loading the catalog at head never reads the history keyspace; time travel does.

The scan reports its decision in EXPLAIN ANALYZE ("History read: yes|no"). DuckLake's
visibility predicate at head admits no ended version, so the scan must skip history; at an
older snapshot the ended versions are needed and must be read (and returned).
"""
from _harness import TEST_DIR, check, connect, finish


def plan(con, sql):
    return "\n".join(row[1] for row in con.execute("EXPLAIN ANALYZE " + sql).fetchall())


db = connect()
db.execute(f"ATTACH 'ducklake:moraine:{TEST_DIR}/meta' AS lake (DATA_PATH '{TEST_DIR}/data/')")
db.execute("CREATE TABLE lake.t (i INTEGER)")          # snapshot 1
db.execute("ALTER TABLE lake.t ADD COLUMN j INTEGER")  # snapshot 2
db.execute("ALTER TABLE lake.t DROP COLUMN i")         # snapshot 3: column i's version ends

columns = "__ducklake_metadata_lake.main.ducklake_column"
at_head = f"SELECT * FROM {columns} WHERE 3 >= begin_snapshot AND (3 < end_snapshot OR end_snapshot IS NULL)"
at_two = f"SELECT * FROM {columns} WHERE 2 >= begin_snapshot AND (2 < end_snapshot OR end_snapshot IS NULL)"
live = f"SELECT * FROM {columns} WHERE end_snapshot IS NULL"
unfiltered = f"SELECT * FROM {columns}"

check("head: history not read", "History read: no" in plan(db, at_head), plan(db, at_head))
check("live only: history not read", "History read: no" in plan(db, live))
check("older snapshot: history read", "History read: yes" in plan(db, at_two))
check("no filter: history read", "History read: yes" in plan(db, unfiltered))
names = [r[0] for r in db.execute(at_two.replace("SELECT *", "SELECT column_name") + " ORDER BY 1").fetchall()]
check("older snapshot sees the ended version", names == ["i", "j"], str(names))
names = [r[0] for r in db.execute(at_head.replace("SELECT *", "SELECT column_name")).fetchall()]
check("head sees only the live version", names == ["j"], str(names))
# the same holds through DuckLake itself
check("time travel through DuckLake", [d[0] for d in db.execute("DESCRIBE SELECT * FROM lake.t AT (VERSION => 2)").fetchall()] == ["i", "j"])

# an equality on an integer column is served from the index (RFC 0009): the scan emits only the
# matching rows, and says so
by_table = f"SELECT * FROM {columns} WHERE table_id = 1"
check("an equality filter is served by index", "(by index)" in plan(db, by_table), plan(db, by_table))
rows = db.execute(by_table).fetchall()
check("... and returns every matching row", len(rows) == 2, str(rows))
check("no filter: no index", "(by index)" not in plan(db, unfiltered))

finish("history_at_head")
