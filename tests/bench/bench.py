#!/usr/bin/env python3
"""One DuckLake workload on one catalog, timed: the driver behind `cargo xtask bench`.

    bench.py --catalog moraine|duckdb|sqlite|postgres --dir DIR --workload NAME [sizes]

Host: the pinned `duckdb==1.5.5` Python package (PYTHONPATH from `cargo xtask deps`). The
extensions are LOADed by path from DUCKLAKE_EXT, MORAINE_EXT (moraine), SQLITE_EXT (sqlite) and
POSTGRES_EXT (postgres); autoload and autoinstall are off, so nothing is downloaded.

Every figure is one JSON line on stdout:

    {"workload": "history", "figure": "N=100: warm query", "unit": "ms", "value": 1.23}
    {"workload": "readers", "figure": "reader attach", "text": "ok"}
    {"workload": "files", "figure": "...", "error": "IOException: ..."}

Progress goes to stderr. Nothing here asserts anything about timing. Workloads:

  commit   one-row INSERT (inlined) and 10-row INSERT (one Parquet file) into an existing table,
           each an explicit transaction: the whole transaction and its COMMIT alone
  history  N one-row commits (N grows on one lake); at each N: attach + first query in a fresh
           process, a warm query, then on copies of the lake: expire all but the last 10
           snapshots and cleanup_old_files (medians over the copies), and on the last copy the
           same two figures again
  files    a lake of F data files over T partitioned tables (no inlining): a count(*) of one
           table warm and in a fresh process, peak RSS, live catalog rows
  scale    files at a million data files (1,000 tables x 1,000 files; cargo xtask bench sets
           the sizes), and a one-file commit's time
  move     files's lake moved onto moraine and back with COPY FROM DATABASE, each in a fresh
           process: time and peak RSS, beside a fresh attach of the imported lake (RFC 0014)
  readers  READ_ONLY reader processes beside one writer process committing R times a second
  turns    the warm queries of history and files again, every catalog at once: copies of the
           lakes those workloads kept (--keep) attached in P processes per catalog, which sit
           for --settle seconds and then take turns running blocks of B queries, so that the
           machine's drift over the run weighs on every catalog alike; then their attach +
           first query in fresh processes, one per catalog a round, taking turns (one run for
           all --catalogs; its lines name their catalog)

With --store s3 (commit and history only), a moto_server on 127.0.0.1 (the e2e scenarios'
`_s3.Moto`, from MOTO_PYTHONPATH) holds every lake's data files, through httpfs (HTTPFS_EXT),
and moraine's catalog; DuckLake's DuckDB-file and SQLite catalogs stay local files. Each timed
step then also reports the requests the server answered during it, counted from its log: those
under the catalog's prefix and those under the data path, per commit or per attach.

The same file is also the child process of those workloads (`--role probe|writer|reader|turn`):
children talk one JSON line at a time on stdin/stdout and exit when stdin closes.
"""
import argparse
import bisect
import itertools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid

import duckdb

THIS = os.path.abspath(__file__)

# DuckLake 1.5.5's fixed catalog tables (spec 1.0) and whether each has end_snapshot. The
# per-table inlined data tables (ducklake_inlined_data_<table>_<version>) come on top; their
# names are in ducklake_inlined_data_tables. DuckDB hides the metadata database from
# duckdb_tables(), so the list is spelled out here.
CATALOG_TABLES = {
    "ducklake_column": True,
    "ducklake_column_mapping": False,
    "ducklake_column_tag": True,
    "ducklake_data_file": True,
    "ducklake_delete_file": True,
    "ducklake_file_column_stats": False,
    "ducklake_file_partition_value": False,
    "ducklake_file_variant_stats": False,
    "ducklake_files_scheduled_for_deletion": False,
    "ducklake_inlined_data_tables": False,
    "ducklake_macro": True,
    "ducklake_macro_impl": False,
    "ducklake_macro_parameters": False,
    "ducklake_metadata": False,
    "ducklake_name_mapping": False,
    "ducklake_partition_column": False,
    "ducklake_partition_info": True,
    "ducklake_schema": True,
    "ducklake_schema_versions": False,
    "ducklake_snapshot": False,
    "ducklake_snapshot_changes": False,
    "ducklake_sort_expression": False,
    "ducklake_sort_info": True,
    "ducklake_table": True,
    "ducklake_table_column_stats": False,
    "ducklake_table_stats": False,
    "ducklake_tag": True,
    "ducklake_view": True,
}


# ---- small helpers ----------------------------------------------------------------------------

T_START = time.perf_counter()


def log(msg):
    print(f"bench.py [{time.perf_counter() - T_START:6.1f}s]: {msg}", file=sys.stderr, flush=True)


def lit(s):
    """A single-quoted SQL string literal."""
    return "'" + str(s).replace("'", "''") + "'"


def ident(s):
    return '"' + str(s).replace('"', '""') + '"'


def err_text(e):
    text = f"{type(e).__name__}: {e}"
    return " ".join(text.split())


def proc_status_kb(field):
    """A `kB` field of /proc/self/status (VmHWM: peak resident set, VmRSS: current)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def median(xs):
    return statistics.median(xs) if xs else None


def percentile(xs, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def ms(seconds):
    return seconds * 1000.0


class Out:
    """Writes the figure lines of one workload."""

    def __init__(self, workload, catalog=None):
        self.workload = workload
        # the catalog each line names (the turns workload measures every catalog in one run)
        self.catalog = catalog

    def _emit(self, **kv):
        head = {"workload": self.workload}
        if self.catalog:
            head["catalog"] = self.catalog
        print(json.dumps({**head, **kv}), flush=True)

    def value(self, figure, value, unit):
        if value is None:
            self._emit(figure=figure, error="no measurement")
        else:
            self._emit(figure=figure, unit=unit, value=value)
        log(f"{self._name()}: {figure} = {value} {unit}")

    def text(self, figure, text):
        self._emit(figure=figure, text=text)
        log(f"{self._name()}: {figure} = {text}")

    def error(self, figure, e):
        msg = e if isinstance(e, str) else err_text(e)
        self._emit(figure=figure, error=msg)
        log(f"{self._name()}: {figure}: ERROR {msg}")

    def _name(self):
        """How progress names the lines: the workload, and the catalog when they name one."""
        return f"{self.workload}: {self.catalog}" if self.catalog else self.workload

    def of(self, catalog):
        """The lines of the same workload for `catalog`."""
        return Out(self.workload, catalog)


# ---- the S3 store (--store s3) ----------------------------------------------------------------

S3_BUCKET = "moraine-bench"
# the server's endpoint (host:port) when the lakes are on S3, else None; set by main()
S3_ENDPOINT = None
# the moto_server this process started (a workload's process, not its children)
MOTO = None
# with --rtt, the delay line in front of it, which also counts each request's bytes
LINE = None


def s3_requests():
    """How many requests the server has answered so far (and the delay line relayed): the
    marker for `since`."""
    if MOTO is None:
        return None
    time.sleep(0.05)  # the server logs a request as it answers it; let the log reader catch up
    return len(MOTO.requests()), (len(LINE.traffic) if LINE is not None else None)


def requests_since(mark, lake):
    """(catalog, data) requests the server answered since `mark`, for `lake`'s prefixes."""
    if mark is None:
        return None
    return requests_between(mark, s3_requests(), lake)


def where(path, lake):
    """Which of `lake`'s prefixes a request's target (path and query) is for: "catalog",
    "data" or None."""
    key = path.split("?", 1)[0]
    if key.startswith(f"/{S3_BUCKET}/{lake.name}/meta") or \
            f"prefix={lake.name}%2Fmeta" in path or f"prefix={lake.name}/meta" in path:
        return "catalog"
    if key.startswith(f"/{S3_BUCKET}/{lake.name}/data") or f"prefix={lake.name}" in path:
        return "data"
    if key == f"/{S3_BUCKET}" and "prefix=" not in path:
        # a multi-object delete names its keys in the body; in these workloads only
        # SlateDB's garbage collector sends one (nothing runs DuckLake's cleanup on S3)
        return "catalog"
    return None


def requests_between(start, end, lake):
    """(catalog, data) requests among the server's requests start..end, for `lake`'s prefixes."""
    counts = {"catalog": 0, "data": 0, None: 0}
    for _method, path, _status in MOTO.requests()[start[0]:end[0]]:
        counts[where(path, lake)] += 1
    return counts["catalog"], counts["data"]


def bytes_between(start, end, lake):
    """(catalog, data) bytes, both ways, of the requests the delay line relayed start..end for
    `lake`'s prefixes; None without the delay line."""
    if start[1] is None or end[1] is None:
        return None
    counts = {"catalog": 0, "data": 0, None: 0}
    for path, up, down in LINE.traffic[start[1]:end[1]]:
        counts[where(path, lake)] += up + down
    return counts["catalog"], counts["data"]


def request_figures(out, label, mark, lake, per):
    """Figures: requests (and with --rtt bytes) to the catalog's prefix and to the data path
    per `per` steps."""
    if mark is None:
        return
    end = s3_requests()
    catalog, data = requests_between(mark, end, lake)
    out.value(f"{label}: requests to the catalog", catalog / per, "requests")
    out.value(f"{label}: requests to the data path", data / per, "requests")
    moved = bytes_between(mark, end, lake)
    if moved is not None:
        out.value(f"{label}: KiB to and from the catalog", moved[0] / per / 1024, "KiB")


def probe_request_figures(out, label, res, lake):
    """Figures: the median requests of fresh-process probes, attaching and querying, and
    closing."""
    if not res or "requests" not in res[0]:
        return
    for part, (a, b) in (("attach + first query", (0, 1)), ("close (DETACH)", (1, 2))):
        counts = [requests_between(r["requests"][a], r["requests"][b], lake) for r in res]
        for i, to in ((0, "catalog"), (1, "data path")):
            out.value(f"{label}: {part}, per fresh process: requests to the {to}",
                      median([c[i] for c in counts]), "requests")
        moved = [bytes_between(r["requests"][a], r["requests"][b], lake) for r in res]
        if all(m is not None for m in moved):
            out.value(f"{label}: {part}, per fresh process: KiB to and from the catalog",
                      median([m[0] for m in moved]) / 1024, "KiB")


def idle_reader_figures(args, out, label, lake, query, seconds=5.0):
    """Figures: the requests a READ_ONLY reader makes per second while the lake is idle, when
    it runs nothing, and when it runs `query` every 100 ms (each transaction looks for the
    writer's commits at most once per poll interval: its freshness costs requests)."""
    reader = connect(args.catalog, os.path.join(args.dir, "ext"))
    try:
        reader.execute(lake.attach_sql(read_only=True))
        reader.execute(query).fetchall()
        time.sleep(1.0)  # what the attach started settles
        mark = s3_requests()
        time.sleep(seconds)
        request_figures(out, f"{label}: an idle READ_ONLY reader, per second", mark, lake,
                        seconds)
        mark = s3_requests()
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            reader.execute(query).fetchall()
            time.sleep(0.1)
        request_figures(out, f"{label}: a READ_ONLY reader querying every 100 ms, per second",
                        mark, lake, time.perf_counter() - started)
    except Exception as e:
        out.error(f"{label}: an idle READ_ONLY reader, per second: requests to the catalog", e)
    finally:
        reader.close()


def s3_helpers():
    """The e2e scenarios' S3 test-server module (tests/e2e/python/_s3.py)."""
    here = os.path.join(os.path.dirname(os.path.dirname(THIS)), "e2e", "python")
    if here not in sys.path:
        sys.path.insert(0, here)
    import _s3
    return _s3


def start_moto(args):
    global MOTO
    MOTO = s3_helpers().Moto(os.path.join(args.dir, "moto"))
    MOTO.create_bucket(S3_BUCKET)
    return MOTO


# ---- connections and lakes --------------------------------------------------------------------

def connect(catalog, ext_dir):
    """A fresh in-memory DuckDB with DuckLake (and the catalog's extension) LOADed by path, and
    with the lakes on S3, httpfs and a secret for the server."""
    db = duckdb.connect(config={
        "allow_unsigned_extensions": "true",
        "autoinstall_known_extensions": "false",
        "autoload_known_extensions": "false",
        "extension_directory": ext_dir,
    })
    db.execute(f"LOAD {lit(os.environ['DUCKLAKE_EXT'])}")
    if catalog == "moraine":
        db.execute(f"LOAD {lit(os.environ['MORAINE_EXT'])}")
        if os.environ.get("MORAINE_BENCH_COMPRESSION"):
            # (cargo xtask bench --compression)
            db.execute(f"SET moraine_compression = {lit(os.environ['MORAINE_BENCH_COMPRESSION'])}")
    elif catalog == "sqlite":
        db.execute(f"LOAD {lit(os.environ['SQLITE_EXT'])}")
    elif catalog == "postgres":
        db.execute(f"LOAD {lit(os.environ['POSTGRES_EXT'])}")
    if S3_ENDPOINT:
        db.execute(f"LOAD {lit(os.environ['HTTPFS_EXT'])}")
        db.execute(s3_helpers().secret_sql(S3_ENDPOINT, name="bench_s3"))
    return db


class Lake:
    """Where one lake's catalog and data files live, and how to ATTACH it."""

    def __init__(self, catalog, root, postgres=None, pg_schema=None, copied=False):
        self.catalog = catalog
        self.root = root
        self.postgres = postgres
        self.pg_schema = pg_schema
        self.copied = copied  # a copy: its catalog still names the original DATA_PATH
        self.name = os.path.basename(root)
        if S3_ENDPOINT:
            self.data = f"s3://{S3_BUCKET}/{self.name}/data/"
        else:
            self.data = os.path.join(root, "data") + "/"
            os.makedirs(self.data, exist_ok=True)

    def url(self):
        if self.catalog == "moraine" and S3_ENDPOINT:
            return f"ducklake:moraine:s3://{S3_BUCKET}/{self.name}/meta"
        if self.catalog == "moraine":
            return f"ducklake:moraine:{self.root}/meta"
        if self.catalog == "duckdb":
            return f"ducklake:{self.root}/meta.ducklake"
        if self.catalog == "sqlite":
            return f"ducklake:sqlite:{self.root}/meta.sqlite"
        if self.catalog == "postgres":
            return f"ducklake:postgres:{self.postgres}"
        raise ValueError(self.catalog)

    def attach_sql(self, alias="lake", read_only=False, options=()):
        opts = []
        if read_only:
            opts.append("READ_ONLY")
        else:
            opts.append(f"DATA_PATH {lit(self.data)}")
            if self.copied:
                opts.append("OVERRIDE_DATA_PATH true")
        if self.pg_schema:
            opts.append(f"METADATA_SCHEMA {lit(self.pg_schema)}")
        opts.extend(options)
        return f"ATTACH {lit(self.url())} AS {alias} ({', '.join(opts)})"

    def metadata_schema(self):
        return self.pg_schema or "main"

    def copy_to(self, root, db):
        """Copies the whole lake (catalog and data files) while nobody has it attached."""
        if S3_ENDPOINT:
            raise RuntimeError("a lake on S3 is not copied (expiry is measured on local lakes)")
        if os.path.exists(root):
            shutil.rmtree(root)
        shutil.copytree(self.root, root)
        schema = None
        if self.catalog == "postgres":
            schema = f"{self.pg_schema}_copy"
            pg_copy_schema(db, self.postgres, self.pg_schema, schema)
        return Lake(self.catalog, root, self.postgres, schema, copied=True)

    def remove(self, db, files=True):
        """Drops the lake. `files=False` leaves its directory to the caller (xtask removes the
        work directory after the run: on this kind of disk every unlink of a written file costs
        milliseconds, which is not worth spending between measurements)."""
        if self.catalog == "postgres" and self.pg_schema:
            try:
                pg_execute(db, self.postgres, f"DROP SCHEMA IF EXISTS {ident(self.pg_schema)} CASCADE")
            except Exception as e:  # leave it; report
                log(f"could not drop Postgres schema {self.pg_schema}: {err_text(e)}")
        if files:
            shutil.rmtree(self.root, ignore_errors=True)


def pg_execute(db, connstr, sql):
    """Runs `sql` on the Postgres server itself (postgres_scanner's postgres_execute)."""
    names = [r[0] for r in db.execute("SELECT database_name FROM duckdb_databases()").fetchall()]
    if "bench_pg" not in names:
        db.execute(f"ATTACH {lit(connstr)} AS bench_pg (TYPE postgres)")
    db.execute(f"CALL postgres_execute('bench_pg', {lit(sql)})")


def pg_copy_schema(db, connstr, src, dst):
    """Copies every table of Postgres schema `src` (a DuckLake catalog) into a new schema."""
    sql = f"""
DO $bench$
DECLARE r record;
BEGIN
  EXECUTE format('DROP SCHEMA IF EXISTS %I CASCADE', {lit(dst)});
  EXECUTE format('CREATE SCHEMA %I', {lit(dst)});
  FOR r IN SELECT tablename FROM pg_tables WHERE schemaname = {lit(src)} LOOP
    EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING ALL)', {lit(dst)}, r.tablename, {lit(src)}, r.tablename);
    EXECUTE format('INSERT INTO %I.%I SELECT * FROM %I.%I', {lit(dst)}, r.tablename, {lit(src)}, r.tablename);
  END LOOP;
END
$bench$"""
    pg_execute(db, connstr, sql)


def new_lake(args, name):
    root = os.path.join(args.dir, name)
    os.makedirs(root, exist_ok=True)
    schema = None
    if args.catalog == "postgres":
        # a fresh lake: a schema of its own, created first (DuckLake then fills it)
        schema = f"moraine_bench_{uuid.uuid4().hex[:12]}_{name}".replace("-", "_")
    return Lake(args.catalog, root, args.postgres, schema)


def prepare_lake(db, lake):
    if lake.catalog == "postgres":
        pg_execute(db, lake.postgres, f"CREATE SCHEMA IF NOT EXISTS {ident(lake.pg_schema)}")


# ---- lakes kept for the turns workload --------------------------------------------------------

def catalog_files(catalog, root):
    """The names under a local lake's root that hold its catalog (not its data files)."""
    prefix = {"moraine": "meta", "duckdb": "meta.ducklake", "sqlite": "meta.sqlite"}[catalog]
    return [n for n in sorted(os.listdir(root)) if n == prefix or n.startswith(prefix + ".")
            or n.startswith(prefix + "-")]


def catalog_bytes(catalog, root):
    """How many bytes the catalog of the local lake rooted at `root` takes on storage."""
    total = 0
    for name in catalog_files(catalog, root):
        path = os.path.join(root, name)
        if os.path.isdir(path):
            for d, _, files in os.walk(path):
                total += sum(os.path.getsize(os.path.join(d, f)) for f in files)
        else:
            total += os.path.getsize(path)
    return total


def copy_catalog(catalog, src, dst):
    """Copies the catalog of the lake rooted at `src` (not its data files) to a new root `dst`."""
    os.makedirs(dst, exist_ok=True)
    for name in catalog_files(catalog, src):
        a, b = os.path.join(src, name), os.path.join(dst, name)
        if os.path.isdir(a):
            shutil.copytree(a, b)
        else:
            shutil.copy2(a, b)


def keep_lake(args, slug, label, lake, query, expect):
    """With --keep: a copy of the (detached) lake's catalog for the turns workload, which
    attaches copies of it beside the other catalogs' and times `query` again. Its data files
    stay where they are: the copy's catalog names them. Local lakes only (not on S3, not
    Postgres). Called after the lake's timed figures at that point, never between them."""
    if not args.keep or S3_ENDPOINT or lake.catalog == "postgres":
        return
    root = os.path.join(args.keep, f"{slug}-{lake.catalog}")
    if os.path.exists(root):
        shutil.rmtree(root)
    copy_catalog(lake.catalog, lake.root, root)
    # the copy on disk now, not while a later figure is timed
    os.sync()
    record = {"slug": slug, "label": label, "catalog": lake.catalog, "root": root,
              "query": query, "expect": expect, "seq": time.time()}
    with open(root + ".json", "w") as f:
        json.dump(record, f)


# ---- fresh-process probes ---------------------------------------------------------------------

def spawn(args, role, extra, catalog=None):
    cmd = [sys.executable, THIS, "--role", role, "--catalog", catalog or args.catalog,
           "--dir", args.dir]
    if S3_ENDPOINT:
        cmd += ["--store", "s3", "--s3-endpoint", S3_ENDPOINT]
    if args.postgres:
        cmd += ["--postgres", args.postgres]
    return subprocess.Popen(cmd + extra, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, bufsize=1)


def ask(p, msg=None):
    """Sends one JSON line (if any) and reads one JSON line back."""
    if msg is not None:
        p.stdin.write(json.dumps(msg) + "\n")
        p.stdin.flush()
    line = p.stdout.readline()
    if not line:
        p.wait()
        raise RuntimeError(f"child process exited ({p.returncode}) without an answer")
    return json.loads(line)


def run_probes(args, probes):
    """One fresh process per (catalog, attach_sql, query) of `probes` (catalog None: the
    workload's), one after another, each timing ATTACH + its query (nothing else).

    They are started (and load their extensions) together before any is timed; only one is
    ever attached, and each has exited before the next one attaches. Returns each one's answer,
    in order: {"ok": True, "ms": ..., "row": ..., ...} or {"ok": False, "error": ...}; a probe
    that fails leaves the others to run."""
    procs, results = [], []

    def stop(p):
        if isinstance(p, subprocess.Popen) and p.poll() is None:
            p.kill()
            p.wait()

    def ready(p):
        if isinstance(p, Exception):
            return {"ok": False, "error": err_text(p)}
        try:
            return ask(p)
        except Exception as e:
            return {"ok": False, "error": err_text(e)}

    try:
        for catalog, attach_sql, query in probes:
            try:
                procs.append(spawn(args, "probe", ["--attach-sql", attach_sql, "--query", query],
                                   catalog))
            except Exception as e:
                procs.append(e)
        for p, r in [(p, ready(p)) for p in procs]:
            if not r.get("ok"):
                results.append(r)
                continue
            try:
                before = s3_requests()
                res = ask(p, {"go": True})
                answered = s3_requests()
                p.stdin.close()
                p.wait(timeout=60)
            except Exception as e:
                results.append({"ok": False, "error": err_text(e)})
                stop(p)
                continue
            res["rss_before_kb"] = r.get("rss_kb")
            if res.get("ok") and before is not None:
                # the server's requests while the probe attached and queried, and while it
                # closed (DETACH: a writer's flush, checkpoint and collection)
                res["requests"] = (before, answered, s3_requests())
            results.append(res)
    finally:
        for p in procs:
            stop(p)
    return results


def role_probe(args):
    try:
        db = connect(args.catalog, os.path.join(args.dir, f"ext-{os.getpid()}"))
    except Exception as e:
        print(json.dumps({"ok": False, "error": err_text(e)}), flush=True)
        return
    print(json.dumps({"ok": True, "rss_kb": proc_status_kb("VmRSS")}), flush=True)
    if not sys.stdin.readline():
        return
    try:
        t0 = time.perf_counter()
        db.execute(args.attach_sql)
        row = db.execute(args.query).fetchall()[0]
        t1 = time.perf_counter()
        out = {"ok": True, "ms": ms(t1 - t0), "hwm_kb": proc_status_kb("VmHWM"), "row": list(row)}
    except Exception as e:
        out = {"ok": False, "error": err_text(e)}
    print(json.dumps(out, default=str), flush=True)
    db.close()


# ---- workload: commit -------------------------------------------------------------------------

def w_commit(args, out):
    lake = new_lake(args, "lake")
    db = connect(args.catalog, os.path.join(args.dir, "ext"))
    try:
        prepare_lake(db, lake)
        db.execute(lake.attach_sql())
        db.execute("CREATE TABLE lake.t1 (id BIGINT, v VARCHAR)")
        db.execute("CREATE TABLE lake.t10 (id BIGINT, v VARCHAR)")
        db.execute("CALL lake.set_option('data_inlining_row_limit', 0, table_name => 't10')")

        def measure(figure, stmt, params):
            total, commit = [], []
            warmup = 3
            mark = None
            for k in range(warmup + args.reps):
                if k == warmup:
                    mark = s3_requests()
                db.execute("BEGIN")
                t0 = time.perf_counter()
                db.execute(stmt, params(k)).fetchall()
                t1 = time.perf_counter()
                db.execute("COMMIT")
                t2 = time.perf_counter()
                if k >= warmup:
                    total.append(ms(t2 - t0))
                    commit.append(ms(t2 - t1))
            request_figures(out, f"{figure}: per INSERT + COMMIT", mark, lake, args.reps)
            out.value(f"{figure}: INSERT + COMMIT", median(total), "ms")
            out.value(f"{figure}: COMMIT alone", median(commit), "ms")

        for figure, stmt, params in [
            ("one-row INSERT (inlined)", "INSERT INTO lake.t1 VALUES (?, 'x')", lambda k: [k]),
            ("10-row INSERT (one Parquet file)",
             "INSERT INTO lake.t10 SELECT i, 'x' FROM range(?, ? + 10) r(i)",
             lambda k: [10 * k, 10 * k]),
        ]:
            try:
                measure(figure, stmt, params)
            except Exception as e:
                out.error(f"{figure}: INSERT + COMMIT", e)
                try_execute(db, "ROLLBACK")
        # sanity: the 10-row inserts did write files, the one-row inserts did not
        files = db.execute("SELECT count(*) FROM ducklake_list_files('lake', 't10')").fetchall()[0][0]
        inlined = db.execute("SELECT count(*) FROM ducklake_list_files('lake', 't1')").fetchall()[0][0]
        log(f"commit: t10 has {files} data files, t1 has {inlined}")
        if files == 0 or inlined != 0:
            out.text("note", f"unexpected data files: t10 {files}, t1 {inlined}")
        db.execute("DETACH lake")
        if args.catalog == "moraine":
            reclaim_figure(args, out, db)
    finally:
        lake.remove(db, files=False)
        db.close()


def reclaim_figure(args, out, db):
    """moraine only: `CALL moraine_reclaim` of a lake of two commits, the lake the session's
    default database (as a withdrawal runs it, RFC 0003), and the requests it makes on S3."""
    lake = new_lake(args, "reclaim")
    figure = "moraine_reclaim of a 2-commit lake, after USE"
    try:
        db.execute(lake.attach_sql(alias="reclaim"))
        db.execute("USE reclaim")
        db.execute("CREATE TABLE t (id BIGINT)")
        db.execute("INSERT INTO t VALUES (1)")
        mark = s3_requests()
        t0 = time.perf_counter()
        db.execute("CALL moraine_reclaim('reclaim')").fetchall()
        took = ms(time.perf_counter() - t0)
        request_figures(out, figure, mark, lake, 1)
        out.value(figure, took, "ms")
    except Exception as e:
        out.error(figure, e)
    finally:
        try_execute(db, "USE memory")
        try_execute(db, "DETACH reclaim")


# ---- workload: history (and expiry) -----------------------------------------------------------

def try_execute(db, sql):
    """Runs `sql`, ignoring its error (tidying up after a failed figure)."""
    try:
        db.execute(sql)
    except Exception:
        pass


def warm_query(db, query, reps, expect=None):
    """Median of `reps` autocommit runs of `query`, after one untimed run."""
    first = db.execute(query).fetchall()[0]
    if expect is not None and first[0] != expect:
        raise RuntimeError(f"{query} returned {first[0]}, want {expect}")
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        db.execute(query).fetchall()[0]
        times.append(ms(time.perf_counter() - t0))
    return median(times)


def probe_figures(args, out, label, attach_sql, query, expect, catalog=None):
    try:
        res = run_probes(args, [(catalog, attach_sql, query)] * args.probe_reps)
        for r in res:
            if not r.get("ok"):
                raise RuntimeError(r.get("error"))
        bad = [r["row"] for r in res if r["row"][0] != expect]
        if bad:
            raise RuntimeError(f"fresh process counted {bad[0][0]}, want {expect}")
        out.value(label, median([r["ms"] for r in res]), "ms")
        return res
    except Exception as e:
        out.error(label, e)
        return None


def w_history(args, out):
    ns = sorted(int(x) for x in args.commits.split(","))
    lake = new_lake(args, "lake")
    db = connect(args.catalog, os.path.join(args.dir, "ext"))
    query = "SELECT count(*) FROM lake.t"
    try:
        prepare_lake(db, lake)
        db.execute(lake.attach_sql())
        db.execute("CREATE TABLE lake.t (i BIGINT)")
        done, commit_ms = 0, []
        for n in ns:
            log(f"history: {args.catalog}: committing up to N={n}")
            t_build = time.perf_counter()
            built_from, mark = done, s3_requests()
            while done < n:
                t0 = time.perf_counter()
                db.execute("INSERT INTO lake.t VALUES (?)", [done]).fetchall()
                commit_ms.append(ms(time.perf_counter() - t0))
                done += 1
            log(f"history: {done} commits in {time.perf_counter() - t_build:.1f} s")
            last = commit_ms[-min(50, len(commit_ms)):]
            request_figures(out, f"N={n}: one-row commits {built_from + 1}..{n}, per commit",
                            mark, lake, n - built_from)
            out.value(f"N={n}: one-row commit (median of last {len(last)})", median(last), "ms")
            try:
                mark = s3_requests()
                out.value(f"N={n}: warm query", warm_query(db, query, args.warm_reps, n), "ms")
                request_figures(out, f"N={n}: warm query, per query", mark, lake,
                                args.warm_reps + 1)
            except Exception as e:
                out.error(f"N={n}: warm query", e)
            db.execute("DETACH lake")
            if not S3_ENDPOINT and lake.catalog != "postgres":
                out.value(f"N={n}: catalog on storage, after DETACH",
                          catalog_bytes(lake.catalog, lake.root) / 2**20, "MB")
            res = probe_figures(args, out, f"N={n}: attach + first query (fresh process)",
                                lake.attach_sql(), query, n)
            probe_request_figures(out, f"N={n}", res, lake)
            # a process that only reads (a job, a notebook, a function) attaches READ_ONLY
            res = probe_figures(args, out,
                                f"N={n}: READ_ONLY attach + first query (fresh process)",
                                lake.attach_sql(read_only=True), query, n)
            probe_request_figures(out, f"N={n}: READ_ONLY", res, lake)
            keep_lake(args, f"history-{n}", f"history N={n}", lake, query, n)
            if S3_ENDPOINT:
                idle_reader_figures(args, out, f"N={n}", lake, query)
                # expiry runs on copies of the lake, which are local lakes' business
                db.execute(lake.attach_sql())
                continue

            # expiry on copies, so the next N continues on the unexpired lake; the figures after
            # expiry come from the last copy
            expire_ms, cleanup_ms = [], []
            for rep in range(args.expiry_reps):
                last_rep = rep + 1 == args.expiry_reps
                copy = lake.copy_to(os.path.join(args.dir, "copy"), db)
                try:
                    db.execute(copy.attach_sql())
                    ids = [r[0] for r in db.execute(
                        "SELECT snapshot_id FROM lake.snapshots() ORDER BY snapshot_id").fetchall()]
                    expire = ids[:-10]
                    t0 = time.perf_counter()
                    db.execute("SELECT count(*) FROM ducklake_expire_snapshots('lake', versions => "
                               f"[{', '.join(str(i) for i in expire)}])").fetchall()[0]
                    expire_ms.append(ms(time.perf_counter() - t0))
                    t0 = time.perf_counter()
                    db.execute("SELECT count(*) FROM "
                               "ducklake_cleanup_old_files('lake', cleanup_all => true)").fetchall()[0]
                    cleanup_ms.append(ms(time.perf_counter() - t0))
                    left = db.execute("SELECT count(*) FROM lake.snapshots()").fetchall()[0][0]
                    if left != 10:
                        out.text(f"N={n}: note", f"{left} snapshots left after expiry, want 10")
                    if last_rep:
                        out.value(f"N={n}: expire all but the last 10 snapshots (median of "
                                  f"{args.expiry_reps} runs, each on a copy)", median(expire_ms), "ms")
                        out.value(f"N={n}: cleanup_old_files after it", median(cleanup_ms), "ms")
                        out.value(f"N={n}: after expiry: warm query",
                                  warm_query(db, query, args.warm_reps, n), "ms")
                    db.execute("DETACH lake")
                    if last_rep:
                        probe_figures(args, out,
                                      f"N={n}: after expiry: attach + first query (fresh process)",
                                      copy.attach_sql(), query, n)
                except Exception as e:
                    out.error(f"N={n}: expire all but the last 10 snapshots", e)
                    try_execute(db, "DETACH lake")
                    break
                finally:
                    copy.remove(db)
            db.execute(lake.attach_sql())
        db.execute("DETACH lake")
    finally:
        lake.remove(db, files=False)
        db.close()


# ---- workload: files (and memory) -------------------------------------------------------------

def live_catalog_rows(db, schema):
    """Live rows over the lake's catalog tables (end_snapshot IS NULL where there is one)."""
    meta = f"__ducklake_metadata_lake.{ident(schema)}" if schema != "main" else "__ducklake_metadata_lake"
    tables = dict(CATALOG_TABLES)
    for (name,) in db.execute(f"SELECT table_name FROM {meta}.ducklake_inlined_data_tables").fetchall():
        tables[name] = True
    total = 0
    for name, versioned in sorted(tables.items()):
        where = " WHERE end_snapshot IS NULL" if versioned else ""
        total += db.execute(f"SELECT count(*) FROM {meta}.{ident(name)}{where}").fetchall()[0][0]
    return total


def w_files(args, out):
    files_lake(args, out, "files", commit_reps=0)


def w_scale(args, out):
    files_lake(args, out, "scale", commit_reps=args.commit_reps)


def one_file_commits(db, table, reps):
    """Median of `reps` autocommit INSERTs of one row into a partitioned table, each into a
    partition of its own (no inlining): a commit that adds one data file to the lake."""
    times = []
    for k in range(reps):
        t0 = time.perf_counter()
        db.execute(f"INSERT INTO {table} VALUES ({-1 - k}, {k})").fetchall()
        times.append(ms(time.perf_counter() - t0))
    return median(times)


def files_lake_shape(args):
    """(files per table, rows per table, the table counted) of a files lake."""
    per = args.files // args.tables
    return per, per * 10, min(17, args.tables - 1)  # ten rows per file


def build_files(args, out, db):
    """Fills the lake attached as `lake` with --tables partitioned tables of --files data files
    in all, one INSERT per table, and reports the build time."""
    per, rows, _ = files_lake_shape(args)
    t_build = time.perf_counter()
    for k in range(args.tables):
        db.execute(f"CREATE TABLE lake.t{k} (p INTEGER, i BIGINT)")
        db.execute(f"ALTER TABLE lake.t{k} SET PARTITIONED BY (p)")
        db.execute(f"INSERT INTO lake.t{k} SELECT i % {per} AS p, i FROM range({rows}) r(i)").fetchall()
        if (k + 1) % 10 == 0 or k + 1 == args.tables:
            log(f"{args.workload}: {args.catalog}: {k + 1}/{args.tables} tables "
                f"({(k + 1) * per} files, {time.perf_counter() - t_build:.1f} s)")
    out.value(f"build: {args.tables} tables x {per} files (create, partition, insert)",
              time.perf_counter() - t_build, "s")


def files_lake(args, out, slug, commit_reps):
    """files and scale: a lake of F data files over T partitioned tables; scale also times a
    one-file commit (into another table than the one counted)."""
    lake = new_lake(args, "lake")
    db = connect(args.catalog, os.path.join(args.dir, "ext"))
    per, rows, q = files_lake_shape(args)
    query = f"SELECT count(*) FROM lake.t{q}"
    try:
        prepare_lake(db, lake)
        db.execute(lake.attach_sql(options=["DATA_INLINING_ROW_LIMIT 0"]))
        build_files(args, out, db)
        n_files = db.execute(f"SELECT count(*) FROM ducklake_list_files('lake', 't{q}')").fetchall()[0][0]
        if n_files != per:
            out.text("note", f"t{q} has {n_files} data files, want {per}")
        try:
            out.value(f"count(*) of one table (t{q}), warm", warm_query(db, query, args.warm_reps, rows), "ms")
        except Exception as e:
            out.error(f"count(*) of one table (t{q}), warm", e)
        if commit_reps:
            other = f"lake.t{(q + 1) % args.tables}"
            try:
                out.value("one-file commit (INSERT of one row into a new partition)",
                          one_file_commits(db, other, commit_reps), "ms")
            except Exception as e:
                out.error("one-file commit (INSERT of one row into a new partition)", e)
        try:
            live = live_catalog_rows(db, lake.metadata_schema())
        except Exception as e:
            live = None
            out.error("live catalog rows", e)
        hwm = proc_status_kb("VmHWM")
        db.execute("DETACH lake")
        if not S3_ENDPOINT and lake.catalog != "postgres":
            out.value("catalog on storage, after DETACH", catalog_bytes(lake.catalog, lake.root) / 2**20, "MB")
        res = probe_figures(args, out, f"count(*) of one table (t{q}), attach + query (fresh process)",
                            lake.attach_sql(), query, rows)
        # a process that only reads attaches READ_ONLY (moraine then starts from its checkpoint)
        ro = probe_figures(args, out,
                           f"count(*) of one table (t{q}), READ_ONLY attach + query (fresh process)",
                           lake.attach_sql(read_only=True), query, rows)
        if ro:
            out.value("fresh READ_ONLY process: peak RSS (attach + query)",
                      median([r["hwm_kb"] for r in ro]) / 1024.0, "MB")
        if slug == "files":
            keep_lake(args, "files", f"files: count(*) of one table (t{q})", lake, query, rows)
        if lake.catalog == "moraine" and not S3_ENDPOINT:
            # what the store holds once compacted and collected: its live size
            db.execute(lake.attach_sql())
            db.execute("SELECT * FROM moraine_reclaim('lake')").fetchall()
            db.execute("DETACH lake")
            out.value("catalog on storage, after moraine_reclaim", catalog_bytes(lake.catalog, lake.root) / 2**20, "MB")
        out.value("writer process: peak RSS (VmHWM; built the lake, ran the queries)", hwm / 1024.0, "MB")
        if res:
            fresh = median([r["hwm_kb"] for r in res])
            base = median([r["rss_before_kb"] for r in res])
            out.value("fresh process: peak RSS (attach + query)", fresh / 1024.0, "MB")
            out.value("fresh process: RSS before ATTACH (extensions loaded)", base / 1024.0, "MB")
        if live is not None:
            out.value("live catalog rows", live, "rows")
            out.value("writer peak RSS per live catalog row", hwm * 1024.0 / live, "B")
            if res:
                out.value("fresh process: (peak RSS - RSS before ATTACH) per live catalog row",
                          (fresh - base) * 1024.0 / live, "B")
    finally:
        lake.remove(db, files=False)
        db.close()


# ---- workload: move ---------------------------------------------------------------------------

def catalog_database(catalog, root):
    """DuckDB's ATTACH URL of the database that holds a local lake's catalog (not DuckLake's)."""
    return {"moraine": f"moraine:{root}/meta", "duckdb": f"{root}/meta.ducklake",
            "sqlite": f"sqlite:{root}/meta.sqlite"}[catalog]


def move_step(args, out, label, statements):
    """Runs `statements` in a fresh process with moraine and sqlite loaded (`--role move`);
    reports the last one's time and the process's peak RSS. Returns the peak in KB or None."""
    p = spawn(args, "move", ["--query", json.dumps(statements)], catalog="moraine")
    try:
        answer = ask(p)
        if not answer.get("ok"):
            raise RuntimeError(answer.get("error"))
    except Exception as e:
        out.error(label, e)
        return None
    finally:
        p.stdin.close()
        p.wait()
    out.value(label, answer["s"], "s")
    out.value(f"{label}: peak RSS", answer["hwm_kb"] / 1024.0, "MB")
    return answer["hwm_kb"]


def role_move(args):
    """A fresh process that runs the statements of --query (JSON) and reports the time of the
    last (COPY FROM DATABASE) and its peak RSS (VmHWM)."""
    db = None
    try:
        db = connect("moraine", os.path.join(args.dir, f"ext-{os.getpid()}"))
        db.execute(f"LOAD {lit(os.environ['SQLITE_EXT'])}")
        statements = json.loads(args.query)
        for sql in statements[:-1]:
            db.execute(sql)
        t0 = time.perf_counter()
        db.execute(statements[-1]).fetchall()
        out = {"ok": True, "s": time.perf_counter() - t0, "hwm_kb": proc_status_kb("VmHWM")}
    except Exception as e:
        out = {"ok": False, "error": err_text(e)}
    print(json.dumps(out), flush=True)
    if db is not None:
        db.close()


def w_move(args, out):
    """A files lake (--files over --tables) on the catalog, moved onto moraine and back with
    COPY FROM DATABASE (RFC 0014), each move in a fresh process: its time and peak RSS, beside
    the peak RSS of a fresh process that attaches the imported lake and counts one table. On
    moraine the lake moves from one moraine store into another, and back into a third."""
    if args.catalog == "postgres":
        out.text("note", "not measured: the move workload runs on local catalogs")
        return
    lake = new_lake(args, "lake")
    db = connect(args.catalog, os.path.join(args.dir, "ext"))
    per, rows, q = files_lake_shape(args)
    try:
        db.execute(lake.attach_sql(options=["DATA_INLINING_ROW_LIMIT 0"]))
        build_files(args, out, db)
        db.execute("DETACH lake")
    finally:
        db.close()
    imported = os.path.join(args.dir, "imported")
    source = catalog_database(args.catalog, lake.root)
    into = f"moraine:{imported}/meta"
    # DuckLake's own way to copy a catalog (its backup guide: into another DuckDB file), from
    # the same source: what a move costs without moraine
    reference = os.path.join(args.dir, "reference.ducklake")
    move_step(args, out, "reference: the same COPY FROM DATABASE into a new DuckDB file (fresh process)", [
        f"ATTACH {lit(source)} AS src (READ_ONLY)", f"ATTACH {lit(reference)} AS dst",
        "COPY FROM DATABASE src TO dst"])
    import_kb = move_step(args, out, "import into moraine (COPY FROM DATABASE, fresh process)", [
        f"ATTACH {lit(source)} AS src (READ_ONLY)", f"ATTACH {lit(into)} AS m",
        "COPY FROM DATABASE src TO m"])
    if import_kb is None:
        return
    attach = Lake("moraine", imported)
    res = probe_figures(args, out, f"imported lake: READ_ONLY attach + count(*) of t{q} (fresh process)",
                        attach.attach_sql(read_only=True), f"SELECT count(*) FROM lake.t{q}", rows,
                        catalog="moraine")
    if res:
        attach_kb = median([r["hwm_kb"] for r in res])
        out.value("imported lake: attach + count(*): peak RSS", attach_kb / 1024.0, "MB")
        out.value("import peak RSS / imported lake's attach peak RSS", import_kb / attach_kb, "x")
    exported = os.path.join(args.dir, "exported")
    os.makedirs(exported, exist_ok=True)
    back = catalog_database(args.catalog, exported)
    move_step(args, out, f"export back into a new {args.catalog} catalog (COPY FROM DATABASE, fresh process)", [
        f"ATTACH {lit(into)} AS m (READ_ONLY)", f"ATTACH {lit(back)} AS dst",
        "COPY FROM DATABASE m TO dst"])
    probe_figures(args, out, f"exported lake: READ_ONLY attach + count(*) of t{q} (fresh process)",
                  Lake(args.catalog, exported).attach_sql(read_only=True),
                  f"SELECT count(*) FROM lake.t{q}", rows)


# ---- workload: readers ------------------------------------------------------------------------

def attach_and_wait(args, setup=None):
    """A child role's start: attach (and run `setup`), report ready on stdout, then wait for the
    deadline on stdin. Returns (connection, deadline), or None after reporting a failure."""
    try:
        db = connect(args.catalog, os.path.join(args.dir, f"ext-{os.getpid()}"))
        db.execute(args.attach_sql)
        if setup:
            db.execute(setup)
        print(json.dumps({"ok": True}), flush=True)
    except Exception as e:
        print(json.dumps({"ok": False, "error": err_text(e)}), flush=True)
        return None
    line = sys.stdin.readline()
    if not line:
        return None
    return db, json.loads(line)["until"]


def role_writer(args):
    """Attaches read-write (creating lake.<table> unless --no-create), then commits one-row
    inserts at --rate until told."""
    table = args.table or "t"
    setup = None if args.no_create else f"CREATE TABLE lake.{table} (id BIGINT, t_ms BIGINT)"
    started = attach_and_wait(args, setup)
    if started is None:
        return
    db, until = started
    # DuckLake logs every metadata query: each try of a commit inserts a snapshot once
    db.execute("CALL enable_logging('DuckLakeMetadata')")
    commits, errors, first_error, latencies, kinds = [], 0, None, [], {}
    period = 1.0 / args.rate
    # each commit at a random moment of its slot, as independent writers commit: writers at
    # one fixed period and fixed phases would race at every slot or never, by the luck of
    # their phases, and a run would measure that luck
    start = time.time()
    k = 0
    while True:
        due = start + (k + random.random()) * period
        if due >= until or time.time() >= until:  # late slots after the deadline are dropped
            break
        now = time.time()
        if due > now:
            time.sleep(due - now)
        k += 1
        t0 = time.perf_counter()
        try:
            db.execute(f"INSERT INTO lake.{table} VALUES (?, ?)", [k, int(time.time() * 1000)]).fetchall()
            commits.append([k, time.time()])
            latencies.append(ms(time.perf_counter() - t0))
        except Exception as e:
            errors += 1
            first_error = first_error or err_text(e)
            kind = err_text(e).splitlines()[-1][:120]
            kinds[kind] = kinds.get(kind, 0) + 1
    # (DuckLake's Postgres catalog sends its commits past this log: no count there)
    tries = sum("ducklake_snapshot VALUES" in m for (m,) in db.execute(
        "SELECT message FROM duckdb_logs WHERE type = 'DuckLakeMetadata'").fetchall())
    retries = max(0, tries - len(commits) - errors) if tries else None
    print(json.dumps({"ok": True, "commits": commits, "errors": errors, "first_error": first_error,
                      "latencies": latencies, "attempts": k, "error_kinds": kinds,
                      "retries": retries,
                      "hwm_kb": proc_status_kb("VmHWM")}), flush=True)
    db.close()


def role_maintenance(args):
    """Attaches read-write, then flushes inlined data, expires snapshots older than a few
    seconds and cleans up old files, every --period seconds, until told."""
    started = attach_and_wait(args)
    if started is None:
        return
    db, until = started
    runs, errors, first_error = 0, 0, None
    while time.time() < until:
        # (counted in SQL: their rows hold timestamps with time zone, which Python converts
        # only with pytz)
        for stmt in ("SELECT count(*) FROM ducklake_flush_inlined_data('lake')",
                     "SELECT count(*) FROM ducklake_expire_snapshots('lake', "
                     "older_than => now() - INTERVAL 5 SECOND)",
                     "SELECT count(*) FROM ducklake_cleanup_old_files('lake', "
                     "older_than => now() - INTERVAL 5 SECOND)"):
            runs += 1
            try:
                db.execute(stmt).fetchall()
            except Exception as e:
                errors += 1
                first_error = first_error or err_text(e)
        time.sleep(max(0.0, min(args.period, until - time.time())))
    print(json.dumps({"ok": True, "runs": runs, "errors": errors, "first_error": first_error}),
          flush=True)
    db.close()


def role_reader(args):
    """Attaches READ_ONLY, then loops two-read transactions until the deadline it is sent."""
    started = attach_and_wait(args)
    if started is None:
        return
    db, until = started
    q = args.query or "SELECT count(*), max(id) FROM lake.t"
    txns, errors, inconsistent, error_kinds = 0, 0, 0, {}
    seen = []  # [max_id, wall time], max_id increasing
    last = -1
    # a transaction still running at the deadline is interrupted and not counted (on SQLite
    # one can wait seconds for the writer's lock)
    stop = threading.Event()

    def deadline():
        stop.set()
        db.interrupt()

    timer = threading.Timer(max(0.0, until - time.time()), deadline)
    timer.start()
    while not stop.is_set():
        try:
            db.execute("BEGIN")
            a = db.execute(q).fetchall()[0]
            t_seen = time.time()
            b = db.execute(q).fetchall()[0]
            db.execute("COMMIT")
        except Exception as e:
            if stop.is_set():
                break
            txns += 1
            errors += 1
            msg = err_text(e)[:160]
            error_kinds[msg] = error_kinds.get(msg, 0) + 1
            try:
                db.execute("ROLLBACK")
            except Exception:
                pass
            continue
        txns += 1
        if a != b:
            inconsistent += 1
            continue
        m = a[1] if a[1] is not None else 0
        if m > last:
            seen.append([m, t_seen])
            last = m
    timer.cancel()
    try:
        db.execute("ROLLBACK")
    except Exception:
        pass
    print(json.dumps({"ok": True, "txns": txns, "errors": errors, "inconsistent": inconsistent,
                      "error_kinds": error_kinds, "seen": seen}), flush=True)
    db.close()


def freshness(commits, readers):
    """Per (reader, commit): when the reader first saw max(id) >= the commit's id, minus the
    time the writer's COMMIT returned. Returns (latencies in ms, pairs never seen)."""
    lat, unseen = [], 0
    for seen in readers:
        ids = [s[0] for s in seen]
        for cid, ct in commits:
            i = bisect.bisect_left(ids, cid)
            if i == len(ids):
                unseen += 1
            else:
                lat.append(ms(seen[i][1] - ct))
    return lat, unseen


def w_readers(args, out):
    lake = new_lake(args, "lake")
    db = connect(args.catalog, os.path.join(args.dir, "ext"))
    writer, readers = None, []
    try:
        prepare_lake(db, lake)
        writer = spawn(args, "writer", ["--attach-sql", lake.attach_sql(), "--rate", str(args.rate)])
        w = ask(writer)
        if not w.get("ok"):
            out.error("reader attach", "writer: " + w.get("error", "?"))
            return
        ro = lake.attach_sql(read_only=True)
        readers = [spawn(args, "reader", ["--attach-sql", ro]) for _ in range(args.readers)]
        ready = [ask(p) for p in readers]
        failed = [r for r in ready if not r.get("ok")]
        rate = f"{args.rate:g}/s for {args.seconds:g} s"
        f_commits = f"writer commits (target {rate})"
        f_p50 = "freshness p50 (writer's COMMIT returned -> a reader saw it)"
        f_p99 = "freshness p99"
        f_share = "reader transactions failed, share"
        f_unseen = "(reader, commit) pairs never seen"
        figures = [f_commits, "writer commit errors", "reader transactions",
                   "reader transactions failed", f_share, "inconsistent views", f_p50, f_p99,
                   f_unseen]
        if failed:
            msg = failed[0]["error"]
            if args.catalog == "duckdb" and len(failed) == len(readers):
                out.text("reader attach", f"n/a (single process file lock): {msg}")
                for f in figures:
                    out.text(f, "n/a (single process file lock)")
                return
            out.text("reader attach", f"{len(failed)} of {len(readers)} failed: {msg}")
            if len(failed) == len(readers):
                for f in figures:
                    out.text(f, "n/a (no reader attached)")
                return
        else:
            out.text("reader attach", "ok")
        log(f"readers: {args.catalog}: {len(readers) - len(failed)} readers, one writer at {rate}")
        until = time.time() + 0.5 + args.seconds
        live = [p for p, r in zip(readers, ready) if r.get("ok")]
        for p in live:
            p.stdin.write(json.dumps({"until": until + 0.5}) + "\n")
            p.stdin.flush()
        wres = ask(writer, {"until": until})
        log(f"readers: writer done, {time.time() - until:+.1f} s after the deadline")
        rres = [ask(p) for p in live]
        log(f"readers: readers done, {time.time() - until:+.1f} s after the deadline")
        commits = wres["commits"]
        out.value(f_commits, len(commits), "count")
        out.value("writer commit errors", wres["errors"], "count")
        txns = sum(r["txns"] for r in rres)
        errs = sum(r["errors"] for r in rres)
        out.value("reader transactions", txns, "count")
        out.value("reader transactions failed", errs, "count")
        out.value(f_share, 100.0 * errs / txns if txns else None, "%")
        out.value("inconsistent views", sum(r["inconsistent"] for r in rres), "count")
        lat, unseen = freshness(commits, [r["seen"] for r in rres])
        if lat:
            out.value(f_p50, percentile(lat, 50), "ms")
            out.value(f_p99, percentile(lat, 99), "ms")
        else:
            out.error(f_p50, "no commit was seen")
        out.value(f_unseen, unseen, "count")
        if wres["first_error"]:
            out.text("writer: first error", wres["first_error"])
        kinds = {}
        for r in rres:
            for msg, n in r["error_kinds"].items():
                kinds[msg] = kinds.get(msg, 0) + n
        if kinds:
            msg, n = max(kinds.items(), key=lambda kv: kv[1])
            out.text("readers: most frequent error", f"{n}x {msg}")
    finally:
        stop_children(([writer] if writer else []) + readers)
        lake.remove(db, files=False)
        db.close()


def stop_children(procs, timeout=30):
    """Closes each child's stdin (its signal to finish), then waits for each, killing one that
    does not end within `timeout` seconds."""
    for p in procs:
        try:
            p.stdin.close()
        except Exception:
            pass
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


# ---- workload: writers ------------------------------------------------------------------------

def writer_attach_options(catalog):
    """The ATTACH options of the writers workload: SQLite in WAL mode with a busy timeout, as
    DuckLake's documentation advises for several local clients."""
    if catalog == "sqlite":
        return ("META_JOURNAL_MODE 'WAL'", "META_BUSY_TIMEOUT 5000")
    return ()


def w_writers(args, out):
    """For each K of --writers: K writer processes (each committing one-row inserts into a
    table of its own at --rate), a maintenance process (DuckLake's flush of inlined data,
    expiry and cleanup every --period seconds) and --readers READ_ONLY readers, for --seconds;
    then a fresh attach checks every acknowledged commit is there, once."""
    for k in [int(x) for x in str(args.writers).split(",")]:
        writers_round(args, out, k)


def writers_round(args, out, k):
    lake = new_lake(args, f"lake-k{k}")
    db = connect(args.catalog, os.path.join(args.dir, "ext"))
    opts = writer_attach_options(args.catalog)
    attach = lake.attach_sql(options=opts)
    procs = []
    label = f"K={k}"
    try:
        prepare_lake(db, lake)
        db.execute(attach)
        tables = [f"w{i}" for i in range(k)]
        for t in tables:
            db.execute(f"CREATE TABLE lake.{t} (id BIGINT, t_ms BIGINT)")
        db.execute("DETACH lake")
        writers = [spawn(args, "writer", ["--attach-sql", attach, "--rate", str(args.rate),
                                          "--table", t, "--no-create"]) for t in tables]
        procs += writers
        maint = spawn(args, "maintenance", ["--attach-sql", attach, "--period", str(args.period)])
        procs.append(maint)
        readers = [spawn(args, "reader", ["--attach-sql", lake.attach_sql(read_only=True, options=opts),
                                          "--query", f"SELECT count(*), max(id) FROM lake.{tables[0]}"])
                   for _ in range(args.readers)]
        procs += readers
        ready = [ask(p) for p in procs]
        attached = [r.get("ok") for r in ready]
        failed = [r.get("error", "?") for r in ready if not r.get("ok")]
        out.text(f"{label}: attach", "ok" if not failed else f"{len(failed)} of {len(procs)} failed: {failed[0]}")
        log(f"writers: {args.catalog}: K={k}: {sum(attached)} of {len(procs)} processes attached")
        until = time.time() + 0.5 + args.seconds
        mark = s3_requests()
        for p, ok in zip(procs, attached):
            if ok:
                p.stdin.write(json.dumps({"until": until}) + "\n")
                p.stdin.flush()
        res = [ask(p) if ok else {} for p, ok in zip(procs, attached)]
        counted = requests_since(mark, lake)
        wres, mres, rres = res[:k], res[k], res[k + 1:]
        acked = {t: [c[0] for c in r.get("commits", [])] for t, r in zip(tables, wres)}
        n_acked = sum(len(v) for v in acked.values())
        offered = sum(r.get("attempts", 0) for r in wres)
        out.value(f"{label}: commits acknowledged ({k} writers at {args.rate:g}/s for "
                  f"{args.seconds:g} s)", n_acked, "count")
        out.value(f"{label}: commits offered", offered, "count")
        out.value(f"{label}: throughput", n_acked / args.seconds, "commits/s")
        if counted is not None:
            # every process's: the writers', the maintenance process's and the readers'
            catalog, data = counted
            out.value(f"{label}: requests to the catalog, all processes, per second",
                      catalog / args.seconds, "requests")
            out.value(f"{label}: requests to the catalog, all processes, per acknowledged commit",
                      catalog / max(1, n_acked), "requests")
            out.value(f"{label}: requests to the data path, per acknowledged commit",
                      data / max(1, n_acked), "requests")
        errors = sum(r.get("errors", 0) for r in wres)
        out.value(f"{label}: commit errors", errors, "count")
        if all(r.get("retries") is not None for r in wres):
            out.value(f"{label}: DuckLake retries", sum(r["retries"] for r in wres), "count")
        lat = [x for r in wres for x in r.get("latencies", [])]
        if lat:
            out.value(f"{label}: commit latency p50", percentile(lat, 50), "ms")
            out.value(f"{label}: commit latency p99", percentile(lat, 99), "ms")
        kinds = {}
        for r in wres:
            for msg, n in r.get("error_kinds", {}).items():
                kinds[msg] = kinds.get(msg, 0) + n
        if kinds:
            out.text(f"{label}: commit errors by message",
                     "; ".join(f"{n}x {m}" for m, n in sorted(kinds.items(), key=lambda kv: -kv[1]))[:400])
        if mres:
            out.value(f"{label}: maintenance calls failed (of {mres['runs']})", mres["errors"], "count")
            if mres["first_error"]:
                out.text(f"{label}: maintenance: first error", mres["first_error"][:300])
        if rres and all(rres):
            out.value(f"{label}: reader transactions", sum(r["txns"] for r in rres), "count")
            out.value(f"{label}: reader transactions failed", sum(r["errors"] for r in rres), "count")
        # every acknowledged commit is there; count what landed twice or without an
        # acknowledgment
        stop_children(procs, timeout=60)
        procs = []
        db.execute(attach)
        lost = extra = twice = 0
        for t in tables:
            ids = [r[0] for r in db.execute(f"SELECT id FROM lake.{t}").fetchall()]
            held = set(ids)
            lost += len(set(acked[t]) - held)
            extra += len(held - set(acked[t]))
            twice += len(ids) - len(held)
        out.value(f"{label}: acknowledged commits missing afterwards", lost, "count")
        out.value(f"{label}: commits duplicated", twice, "count")
        out.value(f"{label}: rows landed without an acknowledgment", extra, "count")
        db.execute("DETACH lake")
    except Exception as e:
        out.error(f"{label}: writers", e)
    finally:
        stop_children(procs)
        lake.remove(db, files=False)
        db.close()


# ---- workload: turns --------------------------------------------------------------------------

def role_turn(args):
    """A turns child: attach, check and warm up the query, report ready; then run the query
    as many times as each line asks, answering with the times."""
    try:
        db = connect(args.catalog, os.path.join(args.dir, f"ext-{os.getpid()}"))
        db.execute(args.attach_sql)
        first = db.execute(args.query).fetchall()[0][0]
        if args.expect is not None and first != args.expect:
            raise RuntimeError(f"{args.query} returned {first}, want {args.expect}")
        for _ in range(10):
            db.execute(args.query).fetchall()
    except Exception as e:
        print(json.dumps({"ok": False, "error": err_text(e)}), flush=True)
        return
    print(json.dumps({"ok": True}), flush=True)
    for line in sys.stdin:
        try:
            times = []
            for _ in range(json.loads(line)["n"]):
                t0 = time.perf_counter()
                db.execute(args.query).fetchall()
                times.append(ms(time.perf_counter() - t0))
            print(json.dumps({"ok": True, "ms": times}), flush=True)
        except Exception as e:
            print(json.dumps({"ok": False, "error": err_text(e)}), flush=True)
    db.close()


def kept_lakes(keep):
    """The records keep_lake wrote, grouped by label in the order they were kept."""
    records = []
    if keep and os.path.isdir(keep):
        for name in sorted(os.listdir(keep)):
            if name.endswith(".json"):
                with open(os.path.join(keep, name)) as f:
                    records.append(json.load(f))
    groups = {}
    for r in sorted(records, key=lambda r: r["seq"]):
        groups.setdefault(r["label"], []).append(r)
    return groups


def w_turns(args, out):
    catalogs = args.catalogs.split(",")
    groups = kept_lakes(args.keep)
    if not groups:
        log("turns: no lakes kept (the history and files workloads keep them, on local disk)")
        return
    for label, records in groups.items():
        recs = {r["catalog"]: r for r in records if r["catalog"] in catalogs}
        figure = (f"{label}: warm query ({args.procs} processes per catalog, "
                  f"{args.turns} turns of {args.block})")
        procs, failed = [], {}

        def turn(c, p, msg=None):
            """One exchange with a child; a child that fails or dies fails its catalog only."""
            if c in failed:
                return None
            try:
                r = ask(p, msg)
            except Exception as e:
                r = {"ok": False, "error": err_text(e)}
            if not r.get("ok"):
                failed[c] = r.get("error")
                return None
            return r

        try:
            # the catalogs' processes interleaved (m0 d0 s0 m1 d1 s1 ...)
            for i in range(args.procs):
                for c in catalogs:
                    if c not in recs:
                        continue
                    r = recs[c]
                    root = os.path.join(args.dir, f"{r['slug']}-{c}-{i}")
                    copy_catalog(c, r["root"], root)
                    # no DATA_PATH: the copy's catalog names the original lake's data files
                    attach = f"ATTACH {lit(Lake(c, root).url())} AS lake"
                    cmd = [sys.executable, THIS, "--role", "turn", "--catalog", c, "--dir", args.dir,
                           "--attach-sql", attach, "--query", r["query"], "--expect", str(r["expect"])]
                    procs.append((c, subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                      text=True, bufsize=1)))
            os.sync()
            # every process loads, attaches and warms up before any is timed; then they sit
            # for a while, so that what an open starts in the background (moraine's compactor)
            # is done before the first turn
            for c, p in procs:
                turn(c, p)
            time.sleep(args.settle)
            times = {c: [] for c in recs}
            for t in range(args.turns):
                # each turn starts one process further on: every process takes every place in
                # the order, and none runs two blocks back to back across turns
                k = t % len(procs)
                for c, p in procs[k:] + procs[:k]:
                    r = turn(c, p, {"n": args.block})
                    if r:
                        times[c] += r["ms"]
            for c in recs:
                if c in failed:
                    out.of(c).error(figure, failed[c])
                else:
                    out.of(c).value(figure, median(times[c]), "ms")
        except Exception as e:
            for c in recs:
                out.of(c).error(figure, e)
        finally:
            stop_children([p for _, p in procs], timeout=60)
        # the warm query's processes have exited: nothing else runs while a fresh process is timed
        try:
            probe_turns(args, out, label, recs)
        except Exception as e:
            for c in recs:
                out.of(c).error(f"{label}: attach + first query (fresh process, "
                                f"{args.probe_reps} turns)", e)


def probe_turns(args, out, label, recs):
    """Attach + first query in fresh processes (as history and files time them), the catalogs
    taking turns: each round runs one process per catalog (`run_probes`: loaded together, timed
    one after another). The rounds go through every order of the catalogs in turn, so each
    catalog takes every place and follows every other. Each catalog attaches its own copy of
    the kept lake (no DATA_PATH: the copy's catalog names the original data files), every round
    the same copy, as history's probes attach the same lake one after another. A failure fails
    its catalog only."""
    figure = f"{label}: attach + first query (fresh process, {args.probe_reps} turns)"
    times, failed, attach = {c: [] for c in recs}, {}, {}
    for c, r in recs.items():
        try:
            root = os.path.join(args.dir, f"{r['slug']}-{c}-probe")
            copy_catalog(c, r["root"], root)
            attach[c] = f"ATTACH {lit(Lake(c, root).url())} AS lake"
        except Exception as e:
            failed[c] = err_text(e)
    os.sync()
    orders = list(itertools.permutations(recs))
    for t in range(args.probe_reps):
        order = [c for c in orders[t % len(orders)] if c not in failed]
        probes = [(c, attach[c], recs[c]["query"]) for c in order]
        for c, res in zip(order, run_probes(args, probes)):
            if not res.get("ok"):
                failed[c] = res.get("error")
            elif res["row"][0] != recs[c]["expect"]:
                failed[c] = f"fresh process counted {res['row'][0]}, want {recs[c]['expect']}"
            else:
                times[c].append(res["ms"])
    for c in recs:
        if c in failed:
            out.of(c).error(figure, failed[c])
        else:
            out.of(c).value(figure, median(times[c]), "ms")


# ---- main -------------------------------------------------------------------------------------

WORKLOADS = {"commit": w_commit, "history": w_history, "files": w_files, "scale": w_scale,
             "readers": w_readers, "writers": w_writers, "turns": w_turns, "move": w_move,
             "move-scale": w_move}
ROLES = {"probe": role_probe, "writer": role_writer, "reader": role_reader, "turn": role_turn,
         "maintenance": role_maintenance, "move": role_move}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--catalog", required=True, choices=["moraine", "duckdb", "sqlite", "postgres"])
    ap.add_argument("--dir", required=True, help="a fresh work directory (lakes live under it)")
    ap.add_argument("--workload", choices=sorted(WORKLOADS))
    ap.add_argument("--role", choices=sorted(ROLES), help=argparse.SUPPRESS)
    ap.add_argument("--attach-sql", help=argparse.SUPPRESS)
    ap.add_argument("--query", help=argparse.SUPPRESS)
    ap.add_argument("--expect", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--keep", help="history, files: keep a copy of each measured lake's catalog "
                                   "here; turns: the lakes to time again")
    ap.add_argument("--catalogs", default="moraine,duckdb,sqlite",
                    help="turns: the catalogs taking turns (moraine,duckdb,sqlite)")
    ap.add_argument("--procs", type=int, help="turns: processes per catalog (3; quick 2)")
    ap.add_argument("--turns", type=int, help="turns: turns each process takes (12; quick 4)")
    ap.add_argument("--block", type=int, help="turns: queries per turn (25; quick 5)")
    ap.add_argument("--settle", type=float, default=5.0,
                    help="turns: seconds every process sits attached before the first turn (5)")
    ap.add_argument("--postgres", help="libpq connection string (catalog postgres)")
    ap.add_argument("--store", choices=["local", "s3"], default="local",
                    help="s3: the lakes' data (and moraine's catalog) on a moto_server started "
                         "for the run (commit and history only)")
    ap.add_argument("--s3-endpoint", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="small sizes (the defaults below shrink)")
    ap.add_argument("--reps", type=int, help="commit: repetitions (50; quick 10)")
    ap.add_argument("--commits", help="history: N values (100,1000,4000; quick 20,100)")
    ap.add_argument("--warm-reps", type=int, help="warm query repetitions (200; quick 10)")
    ap.add_argument("--probe-reps", type=int, help="fresh processes per figure (9; quick 3)")
    ap.add_argument("--expiry-reps", type=int, help="history: lake copies expired per N (3; quick 1)")
    ap.add_argument("--files", type=int, help="files: data files (20000; quick 2000)")
    ap.add_argument("--tables", type=int, help="files: tables (50; quick 10)")
    ap.add_argument("--commit-reps", type=int, help="scale: one-file commits timed (20; quick 5)")
    ap.add_argument("--seconds", type=float, help="readers: duration (60; quick 10)")
    ap.add_argument("--readers", type=int, default=3, help="readers: reader processes (3)")
    ap.add_argument("--rate", type=float, default=15.0,
                    help="readers, writers: each writer's commits per second")
    ap.add_argument("--writers", default="4",
                    help="writers: writer processes, a comma-separated list, one run per "
                         "value (4; cargo xtask bench passes 1,2,4)")
    ap.add_argument("--period", type=float, default=10.0,
                    help="writers: seconds between the maintenance process's calls (10)")
    ap.add_argument("--rtt", type=float, default=0.0,
                    help="--store s3: milliseconds added to every request's round trip (0)")
    ap.add_argument("--table", help=argparse.SUPPRESS)
    ap.add_argument("--no-create", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.dir = os.path.abspath(args.dir)
    q = args.quick
    defaults = {
        "reps": 10 if q else 50,
        "commits": "20,100" if q else "100,1000,4000",
        "warm_reps": 10 if q else 200,
        "probe_reps": 3 if q else 9,
        "expiry_reps": 1 if q else 3,
        "files": 2000 if q else 20000,
        "tables": 10 if q else 50,
        "commit_reps": 5 if q else 20,
        "seconds": 10.0 if q else 60.0,
        "procs": 2 if q else 3,
        "turns": 4 if q else 12,
        "block": 5 if q else 25,
    }
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.catalog == "postgres" and not args.postgres:
        ap.error("--catalog postgres needs --postgres CONNSTR")
    global S3_ENDPOINT, LINE
    if args.role:
        S3_ENDPOINT = args.s3_endpoint
        ROLES[args.role](args)
        return 0
    if not args.workload:
        ap.error("--workload is required")
    os.makedirs(args.dir, exist_ok=True)
    if args.store == "s3":
        if args.workload not in ("commit", "history", "readers", "writers"):
            ap.error(f"--store s3 runs the commit, history, readers and writers workloads, not "
                     f"{args.workload}")
        S3_ENDPOINT = start_moto(args).endpoint
        if args.rtt > 0:
            LINE = s3_helpers().FaultProxy(MOTO.port)
            LINE.RTT = args.rtt / 1000.0
            LINE.set("rtt")
            S3_ENDPOINT = LINE.endpoint
            log(f"every request to the S3 server takes {args.rtt:g} ms more")
        log(f"lakes on S3: s3://{S3_BUCKET}/ on moto_server at {S3_ENDPOINT}")
    if args.keep:
        args.keep = os.path.abspath(args.keep)
        if args.workload != "turns":
            os.makedirs(args.keep, exist_ok=True)
    try:
        WORKLOADS[args.workload](args, Out(args.workload))
    finally:
        if MOTO is not None:
            MOTO.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
