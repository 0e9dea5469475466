"""Security of inputs (issue 11, part 7): hostile or oversized input gets a clear error and leaves
nothing behind, and what moraine stores comes back byte for byte.

- A lake URL moraine does not take (an unknown scheme, an empty URL, an S3 bucket name S3 does
  not allow, an S3 key prefix with '..', a query string) is an Invalid Input Error naming it,
  and creates nothing.
- An ATTACH option moraine does not know (directly, or through DuckLake's META_ prefix) is an
  Invalid Input Error naming it and listing the known ones, and creates nothing.
- DuckDB's file-access rules hold: with enable_external_access = false, a lake outside
  allowed_directories, or reaching out of one with '..', is a Permission Error and nothing is
  created there; a lake inside one works.
- Table, column and schema names with quotes, SQL text, non-ASCII letters and 70,000 characters,
  values with quotes and NUL bytes, and a catalog key holding a NUL byte round-trip exactly,
  through a fresh process: moraine runs no SQL of its own, so no catalog value is ever
  interpolated into SQL (DuckDB's parser refuses a NUL inside an identifier before moraine
  sees it).
- A commit larger than moraine_max_commit_size is an Invalid Input Error naming the setting and
  the table, writes nothing, and the next commit lands; a setting that is not a size, or
  exceeds the 1GiB ceiling, is refused at SET.

Host: the pinned `duckdb==1.5.5` Python package, with the pinned httpfs (DuckDB wants it loaded
before it hands a remote URL to any storage extension; no server is started or contacted). Run by
`cargo xtask e2e`.
"""
# needs: moto_server
import os
import subprocess
import sys


from _harness import TEST_DIR, check, connect, error_of, finish

HERE = os.path.dirname(os.path.abspath(__file__))


def tree(root):
    out = set()
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            out.add(os.path.relpath(os.path.join(d, n), root))
    return out


# ---- URLs and options ------------------------------------------------------------------------
db = connect()
db.execute(f"LOAD '{os.environ['HTTPFS_EXT']}'")
before = tree(TEST_DIR)
for url, needle in [
    ("ftp://host/lake", "ftp://"),
    ("http://127.0.0.1:9/lake", "http://"),
    ("", "empty"),
    ("s3://Bad_Bucket/lake", "Bad_Bucket"),
    ("s3://bucket/a/../b", "'..'"),
    ("s3://bucket/lake?versionId=1", "query"),
]:
    kind, msg = error_of(lambda: db.execute(f"ATTACH 'moraine:{url}' AS bad (READ_WRITE)"))
    check(f"the lake URL {url!r} is an Invalid Input Error saying what is wrong",
          kind == "InvalidInputException" and needle in (msg or ""), (kind, msg))
kind, msg = error_of(lambda: db.execute(f"ATTACH 'moraine:{TEST_DIR}/opt' AS bad (FOO 1)"))
check("an unknown ATTACH option is an Invalid Input Error naming it and the known ones",
      kind == "InvalidInputException" and '"foo"' in msg.lower() and "READ_ONLY" in msg
      and "SECRET" in msg, (kind, msg))
kind, msg = error_of(lambda: db.execute(
    f"ATTACH 'ducklake:moraine:{TEST_DIR}/opt2' AS bad (DATA_PATH '{TEST_DIR}/d/', META_FOO 1)"))
check("... also when DuckLake passes it on (META_FOO)",
      kind == "InvalidInputException" and "foo" in msg.lower(), (kind, msg))
check("none of them created anything", tree(TEST_DIR) == before, tree(TEST_DIR) - before)
db.close()

# ---- DuckDB's file-access rules --------------------------------------------------------------
allowed = os.path.join(TEST_DIR, "allowed")
os.makedirs(allowed)
db = connect()
db.execute(f"SET allowed_directories = ['{allowed}/']")
db.execute("SET enable_external_access = false")
before = tree(TEST_DIR)
for url in [f"{allowed}/../escaped", f"{TEST_DIR}/elsewhere", f"file://{allowed}/../../elsewhere2"]:
    for attach in (f"ATTACH 'moraine:{url}' AS m",
                   f"ATTACH 'ducklake:moraine:{url}' AS m (DATA_PATH '{allowed}/data/')"):
        kind, msg = error_of(lambda: db.execute(attach))
        check(f"with external access off, {attach[:60]}... is refused naming the resolved directory",
              msg is not None and "outside what DuckDB may access" in msg
              and os.path.normpath(url.removeprefix("file://")) in msg, (kind, msg))
check("... and nothing was created outside the allowed directory", tree(TEST_DIR) == before,
      tree(TEST_DIR) - before)
db.execute(f"ATTACH 'ducklake:moraine:{allowed}/lake' AS lake (DATA_PATH '{allowed}/data/')")
db.execute("CREATE TABLE lake.t AS SELECT 1 AS i")
check("a lake inside the allowed directory works",
      db.execute("SELECT i FROM lake.t").fetchall() == [(1,)])
db.close()

# ---- names and values that could break a careless catalog ------------------------------------
META = f"{TEST_DIR}/names"
ATTACH = f"ATTACH 'ducklake:moraine:{META}' AS lake (DATA_PATH '{TEST_DIR}/names-data/')"
TABLE = "we\"ird 'name'); DROP TABLE lake.keep; --"
COLUMN = "col\"x'y"
SCHEMA = "s'\"chema"
UNICODE = "Ωmega ✓ 表"
LONG = "n" * 70_000
VALUES = ["a\x00b", "q'\"x", "'); DROP TABLE lake.keep; --", "\x00"]


def ident(name):
    return '"' + name.replace('"', '""') + '"'


def lit(value):
    return "'" + value.replace("'", "''").replace("\x00", "' || chr(0) || '") + "'"


db = connect()
db.execute(ATTACH)
db.execute("CREATE TABLE lake.keep (i INTEGER)")
db.execute(f"CREATE SCHEMA lake.{ident(SCHEMA)}")
db.execute(f"CREATE TABLE lake.{ident(SCHEMA)}.{ident(TABLE)} ({ident(COLUMN)} VARCHAR, {ident(UNICODE)} INTEGER)")
db.execute(f"CREATE TABLE lake.{ident(LONG)} (i INTEGER)")
for i, v in enumerate(VALUES):
    db.execute(f"INSERT INTO lake.{ident(SCHEMA)}.{ident(TABLE)} VALUES ({lit(v)}, {i})")
db.execute("INSERT INTO __ducklake_metadata_lake.ducklake_metadata (key, value) "
           "VALUES ('nul' || chr(0) || 'key', 'v' || chr(0))")
db.close()

VALUES_SQL = f"SELECT * FROM lake.{ident(SCHEMA)}.{ident(TABLE)} ORDER BY 2"
reader = (
    "import sys, json\n"
    f"sys.path.insert(0, {HERE!r})\n"
    "from _harness import connect\n"
    "db = connect()\n"
    f"db.execute({ATTACH!r})\n"
    "out = {\n"
    "  'tables': sorted(r[0] for r in db.execute(\"SELECT table_name FROM __ducklake_metadata_lake.ducklake_table\").fetchall()),\n"
    "  'schemas': sorted(r[0] for r in db.execute(\"SELECT schema_name FROM __ducklake_metadata_lake.ducklake_schema\").fetchall()),\n"
    "  'columns': sorted(r[0] for r in db.execute(\"SELECT column_name FROM __ducklake_metadata_lake.ducklake_column\").fetchall()),\n"
    f"  'values': db.execute({VALUES_SQL!r}).fetchall(),\n"
    "  'keep': db.execute('SELECT count(*) FROM lake.keep').fetchone()[0],\n"
    "  'meta': db.execute(\"SELECT value FROM __ducklake_metadata_lake.ducklake_metadata WHERE key = 'nul' || chr(0) || 'key'\").fetchall(),\n"
    "}\n"
    "print(json.dumps(out))\n"
)
done = subprocess.run([sys.executable, "-c", reader], capture_output=True, text=True, timeout=120)
check("a fresh process reads the lake", done.returncode == 0, done.stderr[-2000:])
import json  # noqa: E402
got = json.loads(done.stdout) if done.returncode == 0 else {}
check("table names with quotes, SQL text and 70,000 characters come back exactly",
      got.get("tables") == sorted(["keep", TABLE, LONG]), [t[:60] for t in got.get("tables", [])])
check("a schema name with quotes comes back exactly", SCHEMA in got.get("schemas", []), got.get("schemas"))
check("column names with quotes and non-ASCII letters come back exactly",
      COLUMN in got.get("columns", []) and UNICODE in got.get("columns", []), got.get("columns"))
check("values with quotes and NUL bytes come back byte for byte",
      [tuple(r) for r in got.get("values", [])] == [(v, i) for i, v in enumerate(VALUES)], got.get("values"))
check("no name or value was run as SQL (lake.keep is still there)", got.get("keep") == 0, got)
check("a catalog key holding a NUL byte is stored and found by it",
      got.get("meta") == [["v\x00"]], got.get("meta"))

# ---- an oversized commit ---------------------------------------------------------------------
db = connect()
for bad, needle in [("lots", "'lots'"), ("2GiB", "'2GiB'"), ("0", "'0'")]:
    kind, msg = error_of(lambda: db.execute(f"SET moraine_max_commit_size = '{bad}'"))
    check(f"moraine_max_commit_size '{bad}' is refused at SET naming it",
          kind == "InvalidInputException" and needle in msg, (kind, msg))
db.execute("SET moraine_max_commit_size = '64KiB'")
db.execute(f"ATTACH 'ducklake:moraine:{TEST_DIR}/big' AS big (DATA_PATH '{TEST_DIR}/big-data/', "
           "DATA_INLINING_ROW_LIMIT 10)")
db.execute("CREATE TABLE big.t (s VARCHAR)")
db.execute("SET ducklake_max_retry_count = 2")
db.execute("SET ducklake_retry_wait_ms = 1")
db.execute("INSERT INTO big.t VALUES ('small')")
snapshots = db.execute("SELECT count(*) FROM big.snapshots()").fetchone()[0]
kind, msg = error_of(lambda: db.execute("INSERT INTO big.t VALUES (repeat('x', 100000))"))
# (DuckLake keeps the string whole as the column's min and max too: its stats row is the largest)
check("a commit past moraine_max_commit_size fails (at COMMIT, which DuckDB reports as a "
      "TransactionContext Error) as invalid input naming the limit and the table",
      kind == "TransactionException" and "invalid input: this commit would write" in msg
      and "moraine_max_commit_size (64.0 KiB)" in msg
      and "of ducklake_table_column_stats" in msg and "Nothing was written" in msg, (kind, msg))
check("... DuckLake did not retry it (a retried error would end 'Exceeded the maximum retry "
      "count of 2')", "exceeded the maximum retry count" not in (msg or "").lower(), msg)
check("... and wrote nothing",
      db.execute("SELECT count(*) FROM big.snapshots()").fetchone()[0] == snapshots
      and db.execute("SELECT s FROM big.t").fetchall() == [("small",)])
db.execute("INSERT INTO big.t VALUES ('next')")
check("the next commit within the limit lands",
      db.execute("SELECT s FROM big.t ORDER BY s").fetchall() == [("next",), ("small",)])
db.close()

finish("input_safety")
