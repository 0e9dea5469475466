"""Withdrawal (issue 13, RFC 0003): a value taken out of every snapshot and every byte of a lake.

A distinctive e-mail address (random hex, which no compressor can shorten) is written inlined, in
a Parquet file where it is the column's maximum (so it lands in the file and table column
statistics), by an UPDATE of a Parquet row, and inlined again after a flush; it is read at several
snapshots. Then the procedure of docs/operating-a-lake.md ("Withdrawing data") runs, in a child
process, exactly as that guide gives it:

    DELETE; ducklake_flush_inlined_data; ducklake_rewrite_data_files(delete_threshold => 0);
    ducklake_expire_snapshots(versions => every snapshot from the first that held it);
    ducklake_cleanup_old_files(cleanup_all => true); moraine_reclaim

Afterwards, on a local store and on S3 (moto):
- no surviving snapshot returns the value; the snapshots before it and the other table read as
  before, the head as before less the withdrawn rows;
- no row of any metadata table holds it;
- no file of the data path and no object of the metadata store holds its bytes (before the
  withdrawal both did: the search can fail); the Parquet files still there, decoded, hold none;
- a READ_ONLY reader attached through it never returns it, and reads again after at most one
  failed query.
On the local store the procedure is first killed (SIGKILL) once inside each of its steps, every
time run again from the start; the last run finishes it.

The same procedure on DuckLake's DuckDB-file catalog (without moraine_reclaim) is reported beside
it: whether its .ducklake file still holds the bytes.
"""
# needs: moto_server
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import time

from _harness import DUCKLAKE, MORAINE, TEST_DIR, check, connect, finish
from _s3 import Moto, s3_connect

HERE = os.path.dirname(os.path.abspath(__file__))
VALUE = "zz.withdraw." + secrets.token_hex(24) + "@example.com"
# what the byte search looks for: the random part, which only this value holds
NEEDLE = VALUE[len("zz.withdraw."):].split("@")[0].encode()
# a value of the other table, which stays: the same search must find it after the withdrawal
KEEP = "keep." + secrets.token_hex(24)
KEEP_NEEDLE = KEEP.encode()


def steps(start_head, moraine=True):
    """The withdrawal, statement by statement, as docs/operating-a-lake.md gives it;
    `start_head` is the lake's head before its first run."""
    out = [
        f"DELETE FROM lake.people WHERE email = '{VALUE}'",
        "CALL ducklake_flush_inlined_data('lake')",
        "CALL ducklake_rewrite_data_files('lake', delete_threshold => 0)",
        "SET VARIABLE first_affected = (SELECT min(begin_snapshot) "
        f"FROM __ducklake_metadata_lake.ducklake_data_file WHERE end_snapshot > {start_head})",
        "SET VARIABLE affected = (SELECT list(snapshot_id) FROM ducklake_snapshots('lake') "
        "WHERE snapshot_id >= coalesce(getvariable('first_affected'), "
        "(SELECT max(snapshot_id) FROM ducklake_snapshots('lake'))))",
        "CALL ducklake_expire_snapshots('lake', versions => getvariable('affected'))",
        "CALL ducklake_cleanup_old_files('lake', cleanup_all => true)",
        # what a step killed half way wrote and never committed (a flush's file holds the value)
        "CALL ducklake_delete_orphaned_files('lake', cleanup_all => true)",
    ]
    if moraine:
        out.append("CALL moraine_reclaim('lake')")
    return out


class Lake:
    """One catalog under test: how to attach it, and where its bytes are."""

    def __init__(self, name, meta, data, moto=None, moraine=True, settings=()):
        self.name, self.meta, self.data, self.moto, self.moraine = name, meta, data, moto, moraine
        self.settings = list(settings)  # run before the ATTACH

    def attach_sql(self, mode=""):
        opts = f"DATA_PATH '{self.data}'" + (f", {mode}" if mode else "")
        return f"ATTACH 'ducklake:{self.meta}' AS lake ({opts})"

    def connect(self, mode=""):
        db = s3_connect(self.moto) if self.moto else connect()
        for sql in self.settings:
            db.execute(sql)
        db.execute(self.attach_sql(mode))
        return db

    def connect_code(self, mode=""):
        """Python that sets `db` to a connection attached like `connect`, for a child."""
        head = f"import sys\nsys.path.insert(0, {HERE!r})\n"
        if self.moto:
            return head + (f"from _s3 import s3_connect\ndb = s3_connect(None, secret=False)\n"
                           f"db.execute({self.moto.secret_sql()!r})\n"
                           f"db.execute({self.attach_sql(mode)!r})\n")
        return head + f"from _harness import connect\ndb = connect()\ndb.execute({self.attach_sql(mode)!r})\n"

    def objects(self, where):
        """(name, bytes) of every file of the data path (`data`) or the metadata store (`meta`)."""
        if self.moto:
            bucket, prefix = self._bucket_prefix(self.data if where == "data" else self.meta)
            return [(k, self.moto._request("GET", f"/{bucket}/{k}"))
                    for k in self.moto.keys(bucket, prefix)]
        root = self.data if where == "data" else self.meta.split(":", 1)[-1]
        if os.path.isfile(root):
            paths = [p for p in [root, root + ".wal"] if os.path.exists(p)]
        else:
            paths = [os.path.join(r, f) for r, _, fs in os.walk(root) for f in fs]
        out = []
        for p in paths:
            try:
                with open(p, "rb") as f:
                    out.append((p, f.read()))
            except FileNotFoundError:  # collected since the listing
                pass
        return out

    @staticmethod
    def _bucket_prefix(url):
        path = url.split("s3://", 1)[1]
        bucket, _, prefix = path.partition("/")
        return bucket, prefix.rstrip("/") + "/"

    def holding(self, where, needle=NEEDLE):
        return [name for name, body in self.objects(where) if needle in body]


def rows(db, sql):
    return [tuple(r) for r in db.execute(sql).fetchall()]


def snapshot_ids(db):
    return [r[0] for r in rows(db, "SELECT snapshot_id FROM ducklake_snapshots('lake') ORDER BY 1")]


def reads(db):
    """Per snapshot: the people rows without the value, the orders rows, and whether the value
    is there."""
    out = {}
    for s in snapshot_ids(db):
        at = f"AT (VERSION => {s})"
        people = rows(db, f"SELECT id, email FROM lake.people {at} ORDER BY id, email") \
            if has_table(db, "people", s) else []
        orders = rows(db, f"SELECT * FROM lake.orders {at} ORDER BY ALL") \
            if has_table(db, "orders", s) else []
        out[s] = ([r for r in people if r[1] != VALUE], orders, any(r[1] == VALUE for r in people))
    return out


def has_table(db, table, snapshot):
    try:
        db.execute(f"SELECT 1 FROM lake.{table} AT (VERSION => {snapshot}) LIMIT 0")
        return True
    except Exception:
        return False


def build(lake):
    """The lake: the value written four ways, read at several snapshots; the other table's
    rows around it."""
    db = lake.connect()
    db.execute("CREATE TABLE lake.people (id INTEGER, email VARCHAR)")
    db.execute("CREATE TABLE lake.orders (id INTEGER, note VARCHAR)")
    db.execute(f"INSERT INTO lake.orders VALUES (1, '{KEEP}'), (2, 'plain')")              # inlined
    db.execute("INSERT INTO lake.people VALUES (1, 'ann@example.com')")
    db.execute(f"INSERT INTO lake.people VALUES (2, '{VALUE}')")                           # inlined
    db.execute("INSERT INTO lake.people SELECT i, 'p' || i || '@example.com' FROM range(10, 300) r(i)")
    db.execute("INSERT INTO lake.people SELECT i, CASE WHEN i = 350 THEN ? ELSE 'q' || i END "
               "FROM range(300, 400) r(i)", [VALUE])                                        # Parquet, the max
    db.execute("INSERT INTO lake.orders SELECT i, 'o' || i FROM range(10, 200) r(i)")
    db.execute("UPDATE lake.people SET email = ? WHERE id = 10", [VALUE])                   # update
    db.execute("CALL ducklake_flush_inlined_data('lake')")
    db.execute(f"INSERT INTO lake.people VALUES (3, '{VALUE}'), (4, 'bob@example.com')")   # inlined again
    db.execute("INSERT INTO lake.orders VALUES (3, 'late')")
    return db


# DuckLake 1.5's metadata tables (its metadata catalog is hidden from duckdb_tables()); the
# inlined data tables are listed in ducklake_inlined_data_tables
METADATA_TABLES = """ducklake_column ducklake_column_mapping ducklake_column_tag ducklake_data_file
    ducklake_delete_file ducklake_file_column_stats ducklake_file_partition_value
    ducklake_file_variant_stats ducklake_files_scheduled_for_deletion ducklake_inlined_data_tables
    ducklake_macro ducklake_macro_impl ducklake_macro_parameters ducklake_metadata
    ducklake_name_mapping ducklake_partition_column ducklake_partition_info ducklake_schema
    ducklake_schema_versions ducklake_snapshot ducklake_snapshot_changes ducklake_sort_expression
    ducklake_sort_info ducklake_table ducklake_table_column_stats ducklake_table_stats ducklake_tag
    ducklake_view""".split()


def metadata_rows_with_value(db):
    """(table, rows) of every metadata table with a row whose text holds the value."""
    inlined = [r[0] for r in rows(db, "SELECT table_name FROM "
                                      "__ducklake_metadata_lake.ducklake_inlined_data_tables")]
    found = []
    for t in METADATA_TABLES + inlined:
        try:
            [(n,)] = rows(db, f"SELECT count(*) FROM __ducklake_metadata_lake.{t} AS r "
                              f"WHERE CAST(r AS VARCHAR) LIKE '%{NEEDLE.decode()}%'")
        except Exception as e:
            if "does not exist" in str(e):  # an inlined table dropped since it was listed
                continue
            raise
        if n:
            found.append((t, n))
    return found


def parquet_rows_with_value(lake, db):
    """How many rows of the Parquet files left in the data path, decoded, hold the value."""
    files = [n for n, _ in lake.objects("data") if n.endswith(".parquet")]
    if lake.moto:
        files = [f"s3://{lake._bucket_prefix(lake.data)[0]}/{f}" for f in files]
    if not files:
        return 0
    [(n,)] = rows(db, f"SELECT count(*) FROM read_parquet({files!r}, union_by_name => true) AS r "
                      f"WHERE CAST(r AS VARCHAR) LIKE '%{NEEDLE.decode()}%'")
    return n


def run_procedure(lake, start_head, kill_in_step=None):
    """Runs the procedure in a child process; with `kill_in_step`, SIGKILLs it inside that step
    (after a random moment) and returns None; else returns its output."""
    body = lake.connect_code() + (
        "for i, sql in enumerate(%r):\n"
        "    print('step', i, flush=True)\n"
        "    cur = db.execute(sql)\n"
        "    if 'moraine_reclaim' in sql:\n"
        "        print('reclaimed', dict(zip([d[0] for d in cur.description], cur.fetchone())))\n"
        "    print('done', i, flush=True)\n"
        "print('finished', flush=True)\n"
    ) % (steps(start_head, lake.moraine),)
    child = subprocess.Popen([sys.executable, "-c", body], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=os.environ,
                             start_new_session=True)
    if kill_in_step is None:
        out, err = child.communicate(timeout=300)
        if child.returncode != 0:
            raise RuntimeError(f"the withdrawal failed: {err[-3000:]}")
        return out
    deadline = time.time() + 300
    for line in child.stdout:
        if line.split() == ["step", str(kill_in_step)]:
            time.sleep(random.uniform(0, 0.3))
            break
        if time.time() > deadline:
            break
    ended_by_itself = child.poll()
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(30)
    err = child.stderr.read()
    child.stdout.close()
    child.stderr.close()
    # a run that failed on its own before the kill would hide a broken step
    check(f"[{lake.name}] the run killed in step {kill_in_step} had not failed before",
          ended_by_itself in (None, 0), err[-2000:])
    return None


def start_reader(lake):
    """A READ_ONLY process that answers each line on its stdin with a query's result."""
    body = lake.connect_code("READ_ONLY") + (
        "import json\n"
        "for line in sys.stdin:\n"
        "    try:\n"
        "        r = db.execute('SELECT id, email FROM lake.people ORDER BY id, email').fetchall()\n"
        "        print(json.dumps({'rows': [list(x) for x in r]}), flush=True)\n"
        "    except Exception as e:\n"
        "        print(json.dumps({'error': type(e).__name__ + ': ' + str(e)}), flush=True)\n"
    )
    return subprocess.Popen([sys.executable, "-c", body], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=os.environ)


def ask(reader):
    reader.stdin.write("q\n")
    reader.stdin.flush()
    return json.loads(reader.stdout.readline())


def withdraw_and_check(lake, kill=False, with_reader=False):
    tag = f"[{lake.name}]"
    db = build(lake)
    before = reads(db)
    first_seen = min(s for s, (_, _, has) in before.items() if has)
    start_head = max(before)
    check(f"{tag} before: the data path holds the value's bytes", lake.holding("data") != [])
    check(f"{tag} before: the metadata holds them", lake.holding("meta") != [])
    check(f"{tag} before: the table statistics hold the value",
          ("ducklake_table_column_stats", 1) in metadata_rows_with_value(db),
          metadata_rows_with_value(db))
    db.close()

    reader = start_reader(lake) if with_reader else None
    if reader:
        first = ask(reader)
        check(f"{tag} a READ_ONLY reader sees the value before", [3, VALUE] in first.get("rows", []),
              first)
    if kill:
        for i in range(len(steps(start_head, lake.moraine))):
            run_procedure(lake, start_head, kill_in_step=i)
    out = run_procedure(lake, start_head)
    check(f"{tag} the withdrawal runs to its end", "finished" in out, out)
    for line in out.splitlines():
        if line.startswith("reclaimed"):
            print(f"info [{lake.name}] {line}")

    db = lake.connect()
    after = reads(db)
    survivors = snapshot_ids(db)
    check(f"{tag} the snapshots from the first that held the value are expired",
          all(s < first_seen or s > start_head for s in survivors), survivors)
    check(f"{tag} no surviving snapshot returns the value",
          not any(has for _, _, has in after.values()), after)
    check(f"{tag} the snapshots before it read as before",
          all(after[s] == before[s] for s in survivors if s < first_seen))
    head_before, head_after = before[max(before)], after[max(after)]
    check(f"{tag} the head reads as before, less the withdrawn rows",
          head_after[:2] == head_before[:2], (head_after[:2], head_before[:2]))
    check(f"{tag} no metadata row holds the value", metadata_rows_with_value(db) == [],
          metadata_rows_with_value(db))
    data_left = lake.holding("data")
    check(f"{tag} no data file holds the value's bytes", data_left == [], data_left)
    check(f"{tag} the same search finds the other table's value",
          lake.holding("data", KEEP_NEEDLE) or lake.holding("meta", KEEP_NEEDLE))
    check(f"{tag} the Parquet files left, decoded, hold no row with it",
          parquet_rows_with_value(lake, db) == 0)
    db.close()
    meta_left = lake.holding("meta")
    if lake.moraine:
        check(f"{tag} no object of the metadata store holds the value's bytes", meta_left == [],
              meta_left)
    if reader:
        answers = [ask(reader), ask(reader)]
        print(f"info [{lake.name}] the reader's first query after the withdrawal: "
              + (answers[0]["error"] if "error" in answers[0] else "read the new head"))
        check(f"{tag} the reader never returns the value",
              not any([3, VALUE] in a.get("rows", []) or [2, VALUE] in a.get("rows", [])
                      for a in answers), answers)
        check(f"{tag} the reader reads the head after at most one failed query",
              answers[1].get("rows") == [list(r) for r in head_after[0]], answers)
        reader.stdin.close()
        reader.wait(30)
    return meta_left


def reclaimed_by_itself(lake):
    """A writer that stays attached reclaims by itself once its oldest SST is older than
    moraine_reclaim_interval: the procedure without moraine_reclaim, then a wait."""
    tag = f"[{lake.name}]"
    db = build(lake)
    start_head = rows(db, "SELECT max(snapshot_id) FROM ducklake_snapshots('lake')")[0][0]
    [(kept,)] = rows(db, f"SELECT count(*) FROM lake.people WHERE email <> '{VALUE}'")
    check(f"{tag} before: the metadata holds the value's bytes", lake.holding("meta") != [])
    for sql in steps(start_head, moraine=False):
        db.execute(sql)
    check(f"{tag} the attach runs with the interval",
          rows(db, "SELECT reclaim_interval_ms FROM moraine_status('lake')") == [(1000,)])
    deadline, left = time.time() + 120, lake.holding("meta")
    while left and time.time() < deadline:
        time.sleep(1)
        left = lake.holding("meta")
    check(f"{tag} the store lets go of the value's bytes by itself", left == [], left)
    check(f"{tag} and still reads the head", rows(db, "SELECT count(*) FROM lake.people") == [(kept,)],
          rows(db, "SELECT count(*) FROM lake.people"))
    db.close()


def main():
    os.chdir(TEST_DIR)
    local = Lake("local", f"moraine:{TEST_DIR}/local/meta", f"{TEST_DIR}/local/data/")
    withdraw_and_check(local, kill=os.environ.get("WITHDRAWAL_KILL", "1") == "1", with_reader=True)

    reclaimed_by_itself(Lake("automatic", f"moraine:{TEST_DIR}/auto/meta", f"{TEST_DIR}/auto/data/",
                             settings=["SET moraine_reclaim_interval = '1 second'"]))

    moto = Moto(os.path.join(TEST_DIR, "moto"))
    try:
        moto.create_bucket("withdrawal")
        s3 = Lake("s3", "moraine:s3://withdrawal/meta", "s3://withdrawal/data/", moto=moto)
        withdraw_and_check(s3, with_reader=True)
    finally:
        moto.stop()

    duck = Lake("duckdb-file", f"{TEST_DIR}/duck/meta.ducklake", f"{TEST_DIR}/duck/data/",
                moraine=False)
    os.makedirs(f"{TEST_DIR}/duck", exist_ok=True)
    left = withdraw_and_check(duck)
    print(f"info [duckdb-file] after the same procedure its catalog file still holds the value's "
          f"bytes: {'yes' if left else 'no'} {left}")
    finish("withdrawal")


main()
