"""Withdrawal (issues 13 and 39, RFC 0003): a value taken out of every snapshot, every byte and
every path name of a lake, touching only the tables that held it.

A distinctive e-mail address (random hex, which no compressor can shorten) is written into three
tables: `people`, inlined, in a Parquet file where it is the column's maximum (so it lands in the
file and table column statistics), by an UPDATE of a Parquet row, and inlined again after a flush;
and `contacts`, partitioned on the e-mail column, so that a directory of the data path is named
after it; and `notes`, whose only file holds nothing else, so that its DELETE ends every file and
leaves the table no bounds. A fourth table, `orders`, never holds it, and has deletes, an update and time travel of
its own. The value is read at several snapshots. Then the procedure of docs/operating-a-lake.md
("Withdrawing data") runs, in a child process, exactly as that guide gives it, after `USE lake`:

    DELETE from each table; ducklake_flush_inlined_data and
    ducklake_rewrite_data_files(delete_threshold => 0) of those tables only; the column bounds
    that name the value set to those of the files left (none for `notes`);
    ducklake_expire_snapshots(versions => every snapshot from the oldest ended file of those
    tables); ducklake_cleanup_old_files(cleanup_all => true); ducklake_delete_orphaned_files;
    moraine_reclaim; on a local data path, the directories left empty removed

Afterwards, on a local store and on S3 (moto):
- no surviving snapshot returns the value; every snapshot from before it survives and reads as
  before (`orders` included), the head as before less the withdrawn rows;
- no row of any metadata table holds it; `notes` has no bounds, and after later inserts takes
  theirs and finds its rows by them;
- no file of the data path and no object of the metadata store holds its bytes, and no path name
  of either holds it (before the withdrawal all three did: the search can fail); the Parquet
  files still there, decoded, hold none;
- a READ_ONLY reader attached through it never returns it, and reads again after at most one
  failed query.
On the local store the procedure is first killed (SIGKILL) once inside each of its steps, every
time run again from the start; the last run finishes it. Then `moraine_reclaim` is called from
every session state: after `USE lake`, inside `BEGIN … COMMIT` (also after reading the lake), and
from a second connection, and while another connection's transaction that read the lake before
a commit is open (it waits for that one to end); inside a transaction that read the lake before
another connection's commit it fails at once, saying to run it on its own.

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
import threading
import time
import urllib.error

from _harness import DUCKLAKE, MORAINE, TEST_DIR, check, connect, finish
from _s3 import Moto, s3_connect

HERE = os.path.dirname(os.path.abspath(__file__))
VALUE = "zz.withdraw." + secrets.token_hex(24) + "@example.com"
# what the byte search looks for: the random part, which only this value holds
NEEDLE = VALUE[len("zz.withdraw."):].split("@")[0].encode()


def _verbatim(prefix):
    """`prefix` and random hex in which no 4 bytes repeat: a compressor (snappy, which Parquet
    pages use, copies repeats of 4 bytes or more) then leaves its bytes as they are, so a byte
    search finds them. (Without this a random value held a repeat now and then, and the flushed
    file no longer showed it.)"""
    while True:
        s = prefix + secrets.token_hex(24)
        grams = [s[i:i + 4] for i in range(len(s) - 3)]
        if len(set(grams)) == len(grams):
            return s


# a value of the other table, which stays: the same search must find it after the withdrawal
KEEP = _verbatim("keep.")
KEEP_NEEDLE = KEEP.encode()


# the tables the value is withdrawn from (the guide names them), and one that never held it
HELD = ["people", "contacts", "notes"]
TABLES = HELD + ["orders"]
# a step of the procedure that is a shell command, not SQL: on a local data path, the
# directories cleanup left empty (a partition directory keeps the value in its name)
REMOVE_EMPTY_DIRS = "find {data} -mindepth 1 -type d -empty -delete"


def steps(start_head, moraine=True, local_data=None):
    """The withdrawal, statement by statement, as docs/operating-a-lake.md gives it;
    `start_head` is the lake's head before its first run; `local_data` the data path when it is
    a local directory."""
    held = ", ".join(f"'{t}'" for t in HELD)
    out = ["USE lake"]
    out += [f"DELETE FROM {t} WHERE email = '{VALUE}'" for t in HELD]
    out += [f"CALL ducklake_flush_inlined_data('lake', table_name => '{t}')" for t in HELD]
    out += [f"CALL ducklake_rewrite_data_files('lake', '{t}', delete_threshold => 0)" for t in HELD]
    live_files = (
        "FROM __ducklake_metadata_lake.ducklake_file_column_stats AS f "
        "JOIN __ducklake_metadata_lake.ducklake_data_file AS d USING (data_file_id, table_id) "
        "WHERE d.end_snapshot IS NULL AND f.table_id = s.table_id AND f.column_id = s.column_id")
    live_bound = "(SELECT {agg}(f.{col}) " + live_files + ")"
    out += [
        # a table whose DELETE ended whole files (the value's partition, or every file) had no
        # deleted row to rewrite, and DuckLake keeps the value as its column's bound: the bounds
        # of the files left, or none when no file is left
        "UPDATE __ducklake_metadata_lake.ducklake_table_column_stats AS s "
        f"SET min_value = {live_bound.format(agg='min', col='min_value')}, "
        f"max_value = {live_bound.format(agg='max', col='max_value')} "
        f"WHERE (s.min_value = '{VALUE}' OR s.max_value = '{VALUE}') "
        # (not a column with a file whose bounds are unknown although it has values)
        "AND NOT EXISTS (SELECT 1 " + live_files + " AND (f.min_value IS NULL OR "
        "f.max_value IS NULL) AND coalesce(f.value_count, 1) > 0)",
        "SET VARIABLE first_affected = (SELECT min(begin_snapshot) "
        f"FROM __ducklake_metadata_lake.ducklake_data_file WHERE end_snapshot > {start_head} "
        "AND table_id IN (SELECT table_id FROM __ducklake_metadata_lake.ducklake_table "
        f"WHERE end_snapshot IS NULL AND table_name IN ({held})))",
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
    if local_data:
        out.append(REMOVE_EMPTY_DIRS.format(data=local_data.rstrip("/")))
    return out


class Lake:
    """One catalog under test: how to attach it, and where its bytes are."""

    def __init__(self, name, meta, data, moto=None, moraine=True, settings=()):
        self.name, self.meta, self.data, self.moto, self.moraine = name, meta, data, moto, moraine
        self.settings = list(settings)  # run before the ATTACH
        # whether moraine compresses its objects (RFC 0013): a search of their bytes as stored
        # then finds a value in none of them, and only moraine's verifier can tell
        self.compressed = moraine and "SET moraine_compression = 'none'" not in self.settings

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
        settings = "".join(f"db.execute({sql!r})\n" for sql in self.settings)
        if self.moto:
            return head + (f"from _s3 import s3_connect\ndb = s3_connect(None, secret=False)\n"
                           f"db.execute({self.moto.secret_sql()!r})\n{settings}"
                           f"db.execute({self.attach_sql(mode)!r})\n")
        return head + (f"from _harness import connect\ndb = connect()\n{settings}"
                       f"db.execute({self.attach_sql(mode)!r})\n")

    def objects(self, where):
        """(name, bytes) of every file of the data path (`data`) or the metadata store (`meta`)."""
        if self.moto:
            bucket, prefix = self._bucket_prefix(self.data if where == "data" else self.meta)
            out = []
            for k in self.moto.keys(bucket, prefix):
                try:
                    out.append((k, self.moto._request("GET", f"/{bucket}/{k}")))
                except urllib.error.HTTPError as e:  # collected since the listing
                    if e.code != 404:
                        raise
            return out
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

    def decoded_holding(self, needle=NEEDLE):
        """moraine's verifier: the metadata store's objects that hold `needle` as stored or
        once decoded (SlateDB's SSTs and WAL entry by entry, image checkpoints, commit
        objects), read through a READ_ONLY attach (which writes nothing)."""
        db = self.connect("READ_ONLY")
        try:
            return rows(db, f"SELECT object, found FROM moraine_objects_holding('lake', "
                            f"'{needle.decode()}')")
        finally:
            db.close()

    def local_data(self):
        """The data path when it is a local directory, else None."""
        return None if self.moto else self.data

    def names_holding(self, needle=NEEDLE.decode()):
        """Every path name of the data path and the metadata store (files, directories, object
        keys) that holds `needle`."""
        if self.moto:
            names = []
            for url in (self.data, self.meta.split(":", 1)[-1]):
                bucket, prefix = self._bucket_prefix(url)
                names += self.moto.keys(bucket, prefix)
        else:
            names = []
            for root in (self.data, self.meta.split(":", 1)[-1]):
                for r, dirs, files in os.walk(root):
                    names += [os.path.join(r, n) for n in dirs + files]
        return [n for n in names if needle in n]


def rows(db, sql):
    return [tuple(r) for r in db.execute(sql).fetchall()]


def snapshot_ids(db):
    return [r[0] for r in rows(db, "SELECT snapshot_id FROM ducklake_snapshots('lake') ORDER BY 1")]


def reads(db):
    """Per snapshot and table: the rows without the value, and whether the value is there."""
    out = {}
    for s in snapshot_ids(db):
        at = f"AT (VERSION => {s})"
        seen = {}
        for t in TABLES:
            got = rows(db, f"SELECT * FROM lake.{t} {at} ORDER BY ALL") if has_table(db, t, s) else []
            seen[t] = ([r for r in got if VALUE not in r], any(VALUE in r for r in got))
        out[s] = seen
    return out


def has_value(read):
    return any(has for _, has in read.values())


def without_value(read):
    return {t: kept for t, (kept, _) in read.items()}


def has_table(db, table, snapshot):
    try:
        db.execute(f"SELECT 1 FROM lake.{table} AT (VERSION => {snapshot}) LIMIT 0")
        return True
    except Exception:
        return False


def build(lake):
    """The lake: `orders` with deletes and an update of its own first, then `people` and
    `contacts` (partitioned on the e-mail) before the value, then the value written five ways,
    read at several snapshots, with `orders` changing around it."""
    db = lake.connect()
    db.execute("CREATE TABLE lake.people (id INTEGER, email VARCHAR)")
    db.execute("CREATE TABLE lake.orders (id INTEGER, note VARCHAR)")
    db.execute("CREATE TABLE lake.contacts (email VARCHAR, n INTEGER)")
    db.execute("ALTER TABLE lake.contacts SET PARTITIONED BY (email)")
    db.execute("CALL lake.set_option('data_inlining_row_limit', 0, table_name => 'contacts')")
    db.execute("CREATE TABLE lake.notes (id INTEGER, email VARCHAR)")
    db.execute("CALL lake.set_option('data_inlining_row_limit', 0, table_name => 'notes')")
    db.execute(f"INSERT INTO lake.orders VALUES (1, '{KEEP}'), (2, 'plain')")              # inlined
    db.execute("INSERT INTO lake.orders SELECT i, 'o' || i FROM range(10, 200) r(i)")      # Parquet
    db.execute("DELETE FROM lake.orders WHERE id IN (11, 12)")                             # a delete file
    db.execute("UPDATE lake.orders SET note = 'changed' WHERE id = 13")
    db.execute("INSERT INTO lake.people VALUES (1, 'ann@example.com')")
    db.execute("CALL ducklake_flush_inlined_data('lake', table_name => 'people')")
    db.execute("INSERT INTO lake.contacts VALUES ('c1@example.com', 1), ('c2@example.com', 2)")
    db.execute(f"INSERT INTO lake.people VALUES (2, '{VALUE}')")                           # inlined
    db.execute(f"INSERT INTO lake.contacts VALUES ('{VALUE}', 3), ('c4@example.com', 4)")  # its directory
    db.execute(f"INSERT INTO lake.notes VALUES (1, '{VALUE}'), (2, '{VALUE}')")           # its only file
    db.execute("INSERT INTO lake.people SELECT i, 'p' || i || '@example.com' FROM range(10, 300) r(i)")
    db.execute("INSERT INTO lake.people SELECT i, CASE WHEN i = 350 THEN ? ELSE 'q' || i END "
               "FROM range(300, 400) r(i)", [VALUE])                                        # Parquet, the max
    db.execute("INSERT INTO lake.orders SELECT i, 'o' || i FROM range(200, 300) r(i)")
    db.execute("UPDATE lake.people SET email = ? WHERE id = 10", [VALUE])                   # update
    db.execute("CALL ducklake_flush_inlined_data('lake')")
    db.execute(f"INSERT INTO lake.people VALUES (3, '{VALUE}'), (4, 'bob@example.com')")   # inlined again
    db.execute("INSERT INTO lake.orders VALUES (3, 'late')")
    db.execute("DELETE FROM lake.orders WHERE id = 14")
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
        "import subprocess\n"
        "for i, sql in enumerate(%r):\n"
        "    print('step', i, flush=True)\n"
        "    if sql.startswith('find '):\n"
        "        subprocess.run(sql.split(), check=True)\n"
        "        print('done', i, flush=True)\n"
        "        continue\n"
        "    cur = db.execute(sql)\n"
        "    if 'moraine_reclaim' in sql:\n"
        "        print('reclaimed', dict(zip([d[0] for d in cur.description], cur.fetchone())))\n"
        "    print('done', i, flush=True)\n"
        "print('finished', flush=True)\n"
    ) % (steps(start_head, lake.moraine, lake.local_data()),)
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
            # (short: a whole step takes milliseconds to a few hundred on a local store)
            time.sleep(random.uniform(0, 0.05))
            break
        if time.time() > deadline:
            break
    ended_by_itself = child.poll()
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:  # it ended by itself (see below)
        pass
    child.wait(30)
    err = child.stderr.read()
    rest = child.stdout.read().split()
    landed = "after the end" if "finished" in rest else \
        f"in step {max([kill_in_step] + [int(n) for w, n in zip(rest, rest[1:]) if w == 'step'])}"
    print(f"info [{lake.name}] the kill meant for step {kill_in_step} landed {landed}")
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
    first_seen = min(s for s, read in before.items() if has_value(read))
    start_head = max(before)
    check(f"{tag} before: the data path holds the value's bytes", lake.holding("data") != [])
    if not lake.compressed:
        check(f"{tag} before: the metadata holds them", lake.holding("meta") != [])
    if lake.moraine:
        found = lake.decoded_holding()
        check(f"{tag} before: moraine's verifier finds them", found != [], found)
    check(f"{tag} before: a path name holds the value (the partition's)",
          lake.names_holding() != [])
    check(f"{tag} before: the table statistics hold the value",
          ("ducklake_table_column_stats", len(HELD)) in metadata_rows_with_value(db),
          metadata_rows_with_value(db))
    check(f"{tag} before: snapshots before the value read orders' own history",
          len({str(without_value(r)["orders"]) for s, r in before.items() if s < first_seen}) >= 4)
    db.close()

    reader = start_reader(lake) if with_reader else None
    if reader:
        first = ask(reader)
        check(f"{tag} a READ_ONLY reader sees the value before", [3, VALUE] in first.get("rows", []),
              first)
    if kill:
        for i in range(len(steps(start_head, lake.moraine, lake.local_data()))):
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
    earlier = [s for s in before if s < first_seen]
    check(f"{tag} every snapshot from before the value survives",
          set(earlier) <= set(survivors), (earlier, survivors))
    check(f"{tag} no surviving snapshot returns the value",
          not any(has_value(read) for read in after.values()), after)
    check(f"{tag} every surviving earlier snapshot reads as before, every table",
          all(after[s] == before[s] for s in survivors if s <= start_head))
    head_before, head_after = before[max(before)], after[max(after)]
    check(f"{tag} the head reads as before, less the withdrawn rows",
          without_value(head_after) == without_value(head_before),
          (without_value(head_after), without_value(head_before)))
    check(f"{tag} no metadata row holds the value", metadata_rows_with_value(db) == [],
          metadata_rows_with_value(db))
    # the bounds the procedure set are right: filters pruned by them find every row
    for email in ["c1@example.com", "c4@example.com"]:
        check(f"{tag} contacts finds {email} by its bound",
              len(rows(db, f"SELECT * FROM lake.contacts WHERE email = '{email}'")) == 1)
    notes_bounds = ("SELECT min_value, max_value FROM "
                    "__ducklake_metadata_lake.ducklake_table_column_stats s JOIN "
                    "__ducklake_metadata_lake.ducklake_column c USING (table_id, column_id) "
                    "WHERE c.column_name = 'email' AND c.end_snapshot IS NULL AND table_id = "
                    "(SELECT table_id FROM __ducklake_metadata_lake.ducklake_table "
                    "WHERE table_name = 'notes' AND end_snapshot IS NULL)")
    check(f"{tag} notes, with no file left, has no bounds (as DuckLake's own recompute leaves a "
          "column with no live data)", rows(db, notes_bounds) == [(None, None)],
          rows(db, notes_bounds))
    check(f"{tag} contacts' bounds are its remaining values",
          rows(db, "SELECT min_value, max_value FROM "
                   "__ducklake_metadata_lake.ducklake_table_column_stats s JOIN "
                   "__ducklake_metadata_lake.ducklake_column c USING (table_id, column_id) "
                   "WHERE c.column_name = 'email' AND c.end_snapshot IS NULL AND table_id = "
                   "(SELECT table_id FROM __ducklake_metadata_lake.ducklake_table "
                   "WHERE table_name = 'contacts' AND end_snapshot IS NULL)")
          == [("c1@example.com", "c4@example.com")])
    data_left = lake.holding("data")
    check(f"{tag} no data file holds the value's bytes", data_left == [], data_left)
    names_left = lake.names_holding()
    check(f"{tag} no path name holds the value", names_left == [], names_left)
    check(f"{tag} the same searches find the other table's value",
          lake.holding("data", KEEP_NEEDLE) or lake.holding("meta", KEEP_NEEDLE))
    check(f"{tag} the other partitions' directories stay",
          lake.names_holding("email=c1") != [], lake.names_holding("email=c1"))
    check(f"{tag} the Parquet files left, decoded, hold no row with it",
          parquet_rows_with_value(lake, db) == 0)
    db.close()
    meta_left = lake.holding("meta")
    if lake.moraine:
        check(f"{tag} no object of the metadata store holds the value's bytes", meta_left == [],
              meta_left)
        found = lake.decoded_holding()
        check(f"{tag} nor, says moraine's verifier, once decoded", found == [], found)
        kept = lake.decoded_holding(b"orders")
        check(f"{tag} the verifier finds the other table's name", kept != [], kept)
    if reader:
        answers = [ask(reader), ask(reader)]
        print(f"info [{lake.name}] the reader's first query after the withdrawal: "
              + (answers[0]["error"] if "error" in answers[0] else "read the new head"))
        check(f"{tag} the reader never returns the value",
              not any([3, VALUE] in a.get("rows", []) or [2, VALUE] in a.get("rows", [])
                      for a in answers), answers)
        check(f"{tag} the reader reads the head after at most one failed query",
              answers[1].get("rows") == [list(r) for r in without_value(head_after)["people"]],
              answers)
        reader.stdin.close()
        reader.wait(30)
    # the table left without bounds takes the next insert's, and filters find its rows
    db = lake.connect()
    db.execute("INSERT INTO lake.notes VALUES (3, 'n3@example.com'), (4, 'n4@example.com')")
    db.execute("INSERT INTO lake.notes VALUES (5, 'a5@example.com')")
    for email in ["n3@example.com", "n4@example.com", "a5@example.com"]:
        check(f"{tag} notes finds {email} by its bounds after later inserts",
              len(rows(db, f"SELECT * FROM lake.notes WHERE email = '{email}'")) == 1)
    check(f"{tag} notes' bounds are those of its new rows", rows(db, notes_bounds) ==
          [("a5@example.com", "n4@example.com")], rows(db, notes_bounds))
    db.close()
    return meta_left


def reclaim_in_sessions(lake):
    """moraine_reclaim from every session state: after USE lake, inside BEGIN … COMMIT (before
    and after reading the lake), from a second connection; inside a transaction that read the
    lake before another connection's commit it fails at once, and works once that ends."""
    tag = f"[{lake.name}]"
    db = lake.connect()
    other = db.cursor()
    db.execute("USE lake")
    other.execute("USE lake")
    reclaim = "CALL moraine_reclaim('lake')"

    def returns(what, con, sql=reclaim):
        try:
            con.execute(sql).fetchall()
            check(f"{tag} moraine_reclaim returns {what}", True)
        except Exception as e:
            check(f"{tag} moraine_reclaim returns {what}", False, e)

    returns("after USE lake", db)
    db.execute("BEGIN")
    returns("first in BEGIN … COMMIT", db)
    db.execute("COMMIT")
    everyone = "SELECT * FROM people ORDER BY ALL"
    db.execute("BEGIN")
    seen = rows(db, everyone)
    returns("in BEGIN … COMMIT after reading the lake", db)
    check(f"{tag} and the transaction reads on", rows(db, everyone) == seen)
    db.execute("COMMIT")
    returns("from a second connection", other)
    # another connection's transaction that read before a commit is waited for, not refused
    other.execute("BEGIN")
    seen = rows(other, everyone)
    db.execute("INSERT INTO orders VALUES (999, 'meanwhile')")
    ending = threading.Event()

    def end_other():
        # (long enough for the reclaim to reach its wait, on moto too)
        time.sleep(2)
        check(f"{tag} the older transaction reads on while the reclaim waits for it",
              rows(other, everyone) == seen)
        ending.set()
        other.execute("COMMIT")

    ender = threading.Thread(target=end_other)
    ender.start()
    returns("once another connection's older transaction ended", db)
    waited = ending.is_set()
    ender.join()
    check(f"{tag} it returned only once that transaction was ending", waited)
    db.execute("BEGIN")
    rows(db, "SELECT count(*) FROM people")
    other.execute("INSERT INTO orders VALUES (1000, 'after')")
    try:
        db.execute(reclaim).fetchall()
        check(f"{tag} inside a transaction that holds an older read it is refused", False,
              "it returned")
    except Exception as e:
        check(f"{tag} inside a transaction that holds an older read it is refused at once, "
              "saying to run it on its own",
              "COMMIT or ROLLBACK" in str(e) and "on its own" in str(e), e)
    db.execute("ROLLBACK")
    returns("once that transaction ended", db)
    check(f"{tag} the lake reads the commit made meanwhile",
          rows(db, "SELECT note FROM orders WHERE id = 1000") == [("after",)])
    db.close()


def reclaimed_by_itself(lake):
    """A writer that stays attached reclaims by itself once its oldest SST is older than
    moraine_reclaim_interval: the procedure without moraine_reclaim, then a wait."""
    tag = f"[{lake.name}]"
    db = build(lake)
    start_head = rows(db, "SELECT max(snapshot_id) FROM ducklake_snapshots('lake')")[0][0]
    [(kept,)] = rows(db, f"SELECT count(*) FROM lake.people WHERE email <> '{VALUE}'")
    found = lake.decoded_holding()
    check(f"{tag} before: moraine's verifier finds the value's bytes", found != [], found)
    for sql in steps(start_head, moraine=False):
        db.execute(sql)
    db.execute("USE memory")
    check(f"{tag} the attach runs with the interval",
          rows(db, "SELECT reclaim_interval_ms FROM moraine_status('lake')") == [(1000,)])
    # (moraine's verifier: the store's tables are compressed, so a search of the objects as
    # stored would stop finding the value before it is gone)
    deadline, left = time.time() + 120, lake.decoded_holding()
    while left and time.time() < deadline:
        time.sleep(1)
        left = lake.decoded_holding()
    check(f"{tag} the store lets go of the value's bytes by itself", left == [], left)
    check(f"{tag} no object holds them as stored either", lake.holding("meta") == [])
    check(f"{tag} and still reads the head", rows(db, "SELECT count(*) FROM lake.people") == [(kept,)],
          rows(db, "SELECT count(*) FROM lake.people"))
    db.close()


def main():
    os.chdir(TEST_DIR)
    # uncompressed, so that the search of the files' bytes finds the value before (the S3 lake
    # and the automatic one are compressed: there only the verifier finds it)
    local = Lake("local", f"moraine:{TEST_DIR}/local/meta", f"{TEST_DIR}/local/data/",
                 settings=["SET moraine_compression = 'none'"])
    withdraw_and_check(local, kill=os.environ.get("WITHDRAWAL_KILL", "1") == "1", with_reader=True)
    reclaim_in_sessions(local)

    reclaimed_by_itself(Lake("automatic", f"moraine:{TEST_DIR}/auto/meta", f"{TEST_DIR}/auto/data/",
                             settings=["SET moraine_reclaim_interval = '1 second'"]))

    moto = Moto(os.path.join(TEST_DIR, "moto"))
    try:
        moto.create_bucket("withdrawal")
        s3 = Lake("s3", "moraine:s3://withdrawal/meta", "s3://withdrawal/data/", moto=moto)
        withdraw_and_check(s3, with_reader=True)
        reclaim_in_sessions(s3)
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
