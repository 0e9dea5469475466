#!/usr/bin/env python3
"""DuckLake's sqllogictest suite against moraine, DuckLake's DuckDB-file catalog and its SQLite catalog.

Usage (normally through `cargo xtask conformance`, which installs the pinned pieces and passes
their paths):

    runner.py [--catalog moraine|duckdb|sqlite|all ...] [--suite DIR] [-j N] [--timeout S]
              [--slow] [--run-skipped] [--keep] [--out DIR] [-v] [--store local|s3]
              [PATH_OR_GLOB ...]
              --ducklake-ext PATH [--sqlite-ext PATH] [--moraine-ext PATH] [--ext NAME=PATH ...]

Every test file runs in its own Python process holding a fresh in-memory DuckDB (the pinned
`duckdb` package on PYTHONPATH), with its own work directory as the current directory (`data/`
and `test/` link to the suite; `__TEST_DIR__` is `duckdb_unittest_tempdir/<pid>` inside it, as
in DuckDB's runner). The catalog is chosen the way DuckLake's own test configs choose it, through
the DUCKLAKE_CONNECTION test variable:

    moraine  moraine:__TEST_DIR__/{BASE_TEST_NAME}_meta       skip list tests/conformance/skip-moraine.json
    sqlite   sqlite:__TEST_DIR__/{BASE_TEST_NAME}.db          (from the suite's test/configs/sqlite.json,
                                                              with its skip list and skip_error_messages)
    duckdb   the file's own `test-env` default (a DuckDB file), no skip list

Files that attach a hard-coded path instead of ${DUCKLAKE_CONNECTION} run unchanged on every
catalog, as under DuckLake's configs.

With --store s3, moraine's lakes live on a moto_server this run starts on 127.0.0.1 (MOTO_PYTHONPATH
or --moto-pythonpath; it is stopped at the end): DUCKLAKE_CONNECTION is
moraine:s3://moraine-conformance/{BASE_TEST_NAME}_meta, every instance loads httpfs and holds a
secret for the server; data files stay local. The suite's ATTACHes name no access mode, as a
user's would: moraine opens an s3:// store read-write then, as it does a local one.
tests/conformance/skip-moraine-s3.json lists the one test that differs on S3, and why.

tests/conformance/rerun-once.json names the tests run a second time when a statement or query
of theirs fails with one named error (a commit that exhausted DuckLake's retry budget), in
every thread that failed; any other failure, or a second one, fails them. The first failure is
printed (`RERUN ...`, and written to <out>/logs/<catalog>/<test>.run1.log), and a line before
the per-catalog lines names the tests that passed only on their second run.

Output: one line per failing test (`FAIL <catalog> <test>:<line>: <first mismatch>`, with up to
20 lines of its detail, the whole error of a failed statement for one, under it), a
per-directory table, where the suite came from (`suite: <dir> (<how found>; commit <sha>)`), and
last one line per catalog: `<catalog>: N passed, N failed, N skipped`.
Exit status 0 only if moraine (when it ran; otherwise every catalog that ran) had no failures.
Details of every failure go to <out>/logs/<catalog>/, all results to <out>/results.json. A
crashed worker's Python stacks and, from its core file when gdb is installed, its native stacks
are printed under its FAIL line.
"""

import argparse
import fnmatch
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CATALOG_ORDER = ["moraine", "duckdb", "sqlite"]
MORAINE_CONNECTION = "moraine:__TEST_DIR__/{BASE_TEST_NAME}_meta"
S3_BUCKET = "moraine-conformance"
MORAINE_S3_CONNECTION = "moraine:s3://" + S3_BUCKET + "/{BASE_TEST_NAME}_meta"


# ---- worker: one test file ------------------------------------------------------------------

def worker_main():
    # a crash (SIGSEGV, SIGABRT) prints every thread's Python stack to stderr, which the
    # parent shows under the test's FAIL line
    import faulthandler
    faulthandler.enable(all_threads=True)
    # and it leaves a core file in the work directory (where the kernel's core pattern allows),
    # from which the parent prints every thread's native stack
    try:
        import resource
        hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
        resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass
    spec = json.loads(sys.stdin.read())
    sys.path.insert(0, HERE)
    from slt import runtime

    out = sys.stdout

    def progress(line):
        out.write(f"@@AT {line}\n")
        out.flush()

    result = {"status": "pass"}
    t = None
    try:
        t = runtime.TestFile(spec["name"], spec["path"], spec["opts"], progress)
        t.run()
    except runtime.SkipTest as s:
        result = {"status": "skip", "reason": str(s)}
    except runtime.Failure as f:
        result = {"status": "fail", "line": f.line, "message": f.message, "detail": f.detail,
                  "sql": f.sql, "errors": f.errors}
    except Exception as e:  # noqa: BLE001 - a runner bug must not look like a pass
        import traceback
        result = {"status": "fail", "line": 0, "message": f"runner error: {type(e).__name__}: {e}",
                  "detail": traceback.format_exc()}
    if t is not None:
        result["executed"] = t.executed
        out.write("@@AT shutdown\n")
        out.flush()
        t.close_db()
    out.write("@@RESULT " + json.dumps(result) + "\n")
    out.flush()
    # skip interpreter teardown: extensions' static destructors are not what is being tested
    os._exit(0)


# ---- orchestrator ---------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--catalog", action="append", default=[],
                   help="moraine, duckdb, sqlite or all; repeatable or comma-separated "
                        "(default: moraine)")
    p.add_argument("--suite", help="DuckLake checkout holding test/sql and data/ "
                                   "(default: $MORAINE_DUCKLAKE_TESTS or ../shared/ducklake-tests; "
                                   "`cargo xtask conformance` fetches one when neither exists)")
    p.add_argument("--suite-from", help="how the suite was found, for the summary "
                                        "(cargo xtask passes it)")
    p.add_argument("-j", "--jobs", type=int, default=2, help="test files run at once (default 2)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds per *.test file (default 300)")
    p.add_argument("--slow", action="store_true", help="also run *.test_slow files")
    p.add_argument("--slow-timeout", type=float, default=900.0,
                   help="seconds per *.test_slow file (default 900)")
    p.add_argument("--run-skipped", action="store_true",
                   help="run the tests on the skip lists too (they then count as pass/fail)")
    p.add_argument("--keep", action="store_true", help="keep every test's work directory")
    p.add_argument("--out", help="where results.json and logs/ go (default <repo>/target/conformance)")
    p.add_argument("-v", "--verbose", action="store_true", help="print every test's outcome")
    p.add_argument("--ducklake-ext", default=os.environ.get("DUCKLAKE_EXT"))
    p.add_argument("--sqlite-ext", default=os.environ.get("SQLITE_EXT"))
    p.add_argument("--moraine-ext", default=os.environ.get("MORAINE_EXT"))
    p.add_argument("--ext", action="append", default=[], metavar="NAME=PATH",
                   help="an extension that `require NAME` may LOAD (httpfs, tpch, spatial, ...)")
    p.add_argument("--store", choices=["local", "s3"], default="local",
                   help="where moraine's lakes live: local (a directory per test) or s3 (a key "
                        "prefix per test in a bucket of a moto_server started on 127.0.0.1 for "
                        "the run; needs --moto-pythonpath and --ext httpfs=PATH)")
    p.add_argument("--moto-pythonpath", default=os.environ.get("MOTO_PYTHONPATH"),
                   help="the pinned moto (cargo xtask deps installs it)")
    p.add_argument("--skip-list", default=os.path.join(HERE, "skip-moraine.json"),
                   help="moraine's skip list (DuckLake config format)")
    p.add_argument("--s3-skip-list", default=os.path.join(HERE, "skip-moraine-s3.json"),
                   help="moraine's further skips with --store s3")
    p.add_argument("--rerun-list", default=os.path.join(HERE, "rerun-once.json"),
                   help="tests run a second time when they fail with the error the list names")
    p.add_argument("--host-skip-list", default=os.path.join(HERE, "skip-host.json"),
                   help="tests no catalog can run in this host (applied to every catalog)")
    p.add_argument("--selftest", action="store_true",
                   help="check the runner itself: run selftest/test/sql/*.test on DuckLake's "
                        "DuckDB catalog and compare each outcome with the file's `# expect:` line")
    p.add_argument("paths", nargs="*", metavar="PATH_OR_GLOB")
    return p.parse_args(argv)


def find_suite(arg):
    """The suite directory and how it was found."""
    cands = [(arg, "--suite"), (os.environ.get("MORAINE_DUCKLAKE_TESTS"), "$MORAINE_DUCKLAKE_TESTS"),
             (os.path.join(os.path.dirname(REPO), "shared", "ducklake-tests"),
              "shared/ducklake-tests beside the clone")]
    for c, how in cands:
        if c:
            c = os.path.abspath(c)
            if os.path.isdir(os.path.join(c, "test", "sql")):
                return c, how
            if arg and c == os.path.abspath(arg):
                sys.exit(f"conformance: {arg} has no test/sql directory")
    sys.exit("conformance: DuckLake test suite not found; pass --suite DIR or set "
             "MORAINE_DUCKLAKE_TESTS (`cargo xtask conformance` also fetches it)")


def suite_commit(suite):
    """The commit `suite` is checked out at, or None if it is not the top of a git checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}

    def git(*args):
        r = subprocess.run(["git", "-C", suite, *args], capture_output=True, text=True,
                           env=env, timeout=60)
        return r.stdout.strip() if r.returncode == 0 else None

    try:
        top = git("rev-parse", "--show-toplevel")
        if not top or os.path.realpath(top) != os.path.realpath(suite):
            return None
        return git("rev-parse", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return None


def describe_suite(suite, how, commit):
    return f"{suite} ({how}; commit {commit or 'unknown, not a git checkout'})"


def is_test(name, slow):
    return name.endswith(".test") or (slow and name.endswith(".test_slow"))


def all_tests(suite, slow):
    out = []
    base = os.path.join(suite, "test", "sql")
    for root, _, files in os.walk(base):
        for f in files:
            if is_test(f, slow):
                out.append(os.path.relpath(os.path.join(root, f), suite))
    return sorted(out)


def select_tests(suite, patterns, slow):
    everything = all_tests(suite, True)
    if not patterns:
        return [t for t in everything if is_test(t, slow)]
    chosen = []
    for pat in patterns:
        hits = []
        for cand in (pat, os.path.join(suite, pat), os.path.join(suite, "test", "sql", pat)):
            if os.path.exists(cand):
                rel = os.path.relpath(os.path.abspath(cand), suite)
                if rel.startswith(".."):
                    sys.exit(f"conformance: {pat} is outside the suite {suite}")
                if os.path.isdir(cand):
                    hits = [t for t in everything
                            if t.startswith(rel.rstrip("/") + "/") and is_test(t, slow)]
                else:
                    hits = [rel]
                break
        if not hits:
            for g in (pat, "test/sql/" + pat, "test/sql/**/" + pat):
                hits = [t for t in everything if fnmatch.fnmatch(t, g)]
                if hits:
                    break
        if not hits:
            sys.exit(f"conformance: no test matches {pat!r}")
        chosen.extend(h for h in hits if h not in chosen)
    return chosen


def load_config(path):
    with open(path) as f:
        return json.load(f)


def listed_paths(config, key, suite, label, verb, fields):
    """test path -> its entry of `config[key]`, each entry holding every one of `fields`
    (`reason` first); a path not in the suite is warned about."""
    out = {}
    for entry in config.get(key, []):
        if not all(entry.get(f, "").strip() for f in fields):
            sys.exit(f"conformance: {label}: {verb} entry without "
                     f"{' or '.join(fields)}: {entry}")
        for p in entry.get("paths", []):
            if not os.path.exists(os.path.join(suite, p)):
                print(f"warning: {label} {verb}s {p}, which is not in the suite", file=sys.stderr)
            out[p] = entry
    return out


def skip_map(config, suite, label):
    """test -> why it is skipped."""
    listed = listed_paths(config, "skip_tests", suite, label, "skip", ["reason"])
    return {p: e["reason"].strip() for p, e in listed.items()}


def run_rerunning(cat, name, setup, suite, work_root, args, reruns, print_lock):
    """`run_one`, and once more when the first run fails with the error `reruns` names for the
    test (the first failure is printed as a RERUN line and kept in the result as `first_run`);
    a second failure of any kind is the result."""
    res = run_one(cat, name, setup, suite, work_root, args)
    marker = reruns.get(name)
    # only a statement or query that failed with the named error, in every thread that failed:
    # never a wrong result, nor an expected error that did not come (whose text may name it)
    errors = res.get("errors") or []
    if res["status"] != "fail" or not marker or not errors or \
            not all(marker in e for e in errors):
        return res
    with print_lock:
        print(f"RERUN {cat} {name}:{res.get('line', 0)}: {res['message']} "
              f"(failed with '{marker}'; running it again)", flush=True)
    second = run_one(cat, name, setup, suite, work_root, args, attempt=2)
    second["first_run"] = {k: res.get(k) for k in ("line", "message", "detail", "sql",
                                                    "stderr", "elapsed")}
    return second


def rerun_map(config, suite, label):
    """test -> the text its failure must contain to be run again."""
    listed = listed_paths(config, "rerun_tests", suite, label, "rerun", ["reason", "on_error"])
    return {p: e["on_error"].strip() for p, e in listed.items()}


def catalog_setup(cat, args, suite, extras):
    ducklake = ("ducklake", args.ducklake_ext)
    if cat == "duckdb":
        return {"opts": {"catalog_env": {}, "preload": [ducklake], "available": dict(extras),
                         "skip_messages": []}, "skips": {}}
    if cat == "sqlite":
        if not args.sqlite_ext:
            sys.exit("conformance: --catalog sqlite needs --sqlite-ext")
        cfg = load_config(os.path.join(suite, "test", "configs", "sqlite.json"))
        env = {e["env_name"]: e["env_value"] for e in cfg.get("test_env", [])}
        return {"opts": {"catalog_env": env,
                         "preload": [ducklake, ("sqlite_scanner", args.sqlite_ext)],
                         "available": dict(extras),
                         "skip_messages": list(cfg.get("skip_error_messages", []))},
                "skips": skip_map(cfg, suite, "test/configs/sqlite.json")}
    if cat == "moraine":
        if not args.moraine_ext:
            sys.exit("conformance: --catalog moraine needs --moraine-ext (or MORAINE_EXT)")
        cfg = load_config(args.skip_list)
        # DuckLake's CI has sqlite_scanner only in its sqlite config, so the duckdb column skips
        # `require sqlite_scanner`. moraine's run loads it on `require`, so the tests that
        # attach a SQLite-backed lake themselves (passed in the sqlite column) run here too.
        available = dict(extras)
        if args.sqlite_ext:
            available.setdefault("sqlite_scanner", args.sqlite_ext)
        opts = {"catalog_env": {"DUCKLAKE_CONNECTION": MORAINE_CONNECTION},
                "preload": [ducklake, ("moraine", args.moraine_ext)],
                "available": available, "skip_messages": []}
        skips = skip_map(cfg, suite, os.path.relpath(args.skip_list, REPO))
        if args.store == "s3":
            opts = s3_store_opts(opts, extras, args.moto)
            s3_skips = skip_map(load_config(args.s3_skip_list), suite,
                                os.path.relpath(args.s3_skip_list, REPO))
            for t, r in s3_skips.items():
                skips.setdefault(t, "on S3: " + r)
        return {"opts": opts, "skips": skips}
    sys.exit(f"conformance: unknown catalog {cat!r} (moraine, duckdb, sqlite, all)")


def start_moto(args, extras):
    """moto_server on 127.0.0.1 for an --store s3 run (the e2e scenarios' `_s3.Moto`), with the
    bucket every test's lake goes in."""
    if not args.moto_pythonpath:
        sys.exit("conformance: --store s3 needs --moto-pythonpath (or MOTO_PYTHONPATH)")
    if "httpfs" not in extras:
        sys.exit("conformance: --store s3 needs --ext httpfs=PATH (DuckDB opens s3:// with it)")
    os.environ["MOTO_PYTHONPATH"] = args.moto_pythonpath
    os.environ["HTTPFS_EXT"] = extras["httpfs"]
    sys.path.insert(0, os.path.join(REPO, "tests", "e2e", "python"))
    import _s3
    moto = _s3.Moto(tempfile.mkdtemp(prefix="moraine-conformance-moto-"))
    moto.create_bucket(S3_BUCKET)
    return moto


def s3_store_opts(opts, extras, moto):
    """moraine's options on the S3 store: each lake is a key prefix in the run's bucket; every
    instance loads httpfs and holds a secret for the server."""
    opts = dict(opts)
    opts["catalog_env"] = {"DUCKLAKE_CONNECTION": MORAINE_S3_CONNECTION}
    opts["preload"] = opts["preload"] + [("httpfs", extras["httpfs"])]
    opts["setup_sql"] = [moto.secret_sql(name="moraine_conformance_s3")]
    return opts


def slug(name):
    return name.replace("/", "_")


def native_stacks(work):
    """Every thread's native stack from a crashed worker's core file in `work` (gdb), or ''.
    The core is removed afterwards: it is large, and the stacks are what is kept."""
    cores = [os.path.join(work, f) for f in os.listdir(work)
             if f == "core" or f.startswith("core.")]
    if not cores or not shutil.which("gdb"):
        return ""
    try:
        out = subprocess.run(["gdb", "-batch", "-nx", "-ex", "thread apply all bt 30",
                              sys.executable, cores[0]],
                             capture_output=True, text=True, timeout=180).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    finally:
        for core in cores:
            try:
                os.remove(core)
            except OSError:
                pass
    frames = [l for l in out.splitlines() if l.startswith(("#", "Thread "))]
    return "\n".join(frames[:300])


def run_one(cat, name, setup, suite, work_root, args, attempt=1):
    path = os.path.join(suite, name)
    work = os.path.join(work_root, cat, slug(name) + ("" if attempt == 1 else f".run{attempt}"))
    os.makedirs(work)
    opts = setup["opts"]
    if attempt > 1:
        # a second run starts from nothing: its own directory, and its own S3 key prefix
        env = {k: v.replace("{BASE_TEST_NAME}", f"{{BASE_TEST_NAME}}_run{attempt}")
               for k, v in opts["catalog_env"].items()}
        opts = dict(opts, catalog_env=env)
    for link in ("data", "test"):
        if os.path.exists(os.path.join(suite, link)):
            os.symlink(os.path.join(suite, link), os.path.join(work, link))
    spec = {"name": name, "path": path, "opts": opts}
    timeout = args.slow_timeout if name.endswith(".test_slow") else args.timeout
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=work, start_new_session=True)
    timed_out = False
    try:
        stdout, stderr = proc.communicate(json.dumps(spec).encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        stdout, stderr = proc.communicate()
    elapsed = time.time() - t0
    stdout = stdout.decode("utf-8", "replace")
    stderr = stderr.decode("utf-8", "replace")
    last_at = None
    result = None
    for line in stdout.splitlines():
        # (a report may follow other output on the same line)
        if "@@AT " in line:
            last_at = line[line.rindex("@@AT ") + 5:]
        elif "@@RESULT " in line:
            result = json.loads(line[line.index("@@RESULT ") + 9:])
    if result is None:
        where = "during shutdown" if last_at == "shutdown" else \
            (f"at line {last_at}" if last_at else "before the first statement")
        if timed_out:
            msg = f"timeout after {timeout:.0f}s {where}"
        elif proc.returncode < 0:
            msg = f"crashed ({signal.Signals(-proc.returncode).name}) {where}"
        else:
            msg = f"worker exited with status {proc.returncode} {where}"
        lines = stderr.strip().splitlines()
        # a crash's Python stacks (faulthandler) start at "Fatal Python error": keep them whole
        fatal = next((i for i, l in enumerate(lines) if l.startswith("Fatal Python error")), None)
        tail = "\n".join(lines[fatal:fatal + 200] if fatal is not None else lines[-20:])
        if proc.returncode < 0:
            native = native_stacks(work)
            if native:
                tail += "\nnative stacks (gdb, from the core file):\n" + native
        line_no = int(last_at) if last_at and last_at.isdigit() else 0
        result = {"status": "fail", "line": line_no, "message": msg, "detail": tail}
    elif result["status"] == "pass" and proc.returncode not in (0, None):
        result = {"status": "fail", "line": 0,
                  "message": f"worker exited with status {proc.returncode} after passing"}
    if stderr.strip():
        result.setdefault("stderr", "\n".join(stderr.strip().splitlines()[-40:]))
    result["elapsed"] = round(elapsed, 2)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        result["work_dir"] = work
    return result


def directory_of(name):
    parts = name.split("/")
    # test/sql/<dir>/...; files directly in test/sql count as "(top)"
    return parts[2] if len(parts) > 3 else "(top)"


def write_log(out_dir, cat, name, res, suffix=""):
    d = os.path.join(out_dir, "logs", cat)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, slug(name) + suffix + ".log"), "w") as f:
        f.write(f"{name}:{res.get('line', 0)}: {res.get('message', '')}\n\n")
        if res.get("sql"):
            f.write("SQL:\n" + res["sql"] + "\n\n")
        if res.get("detail"):
            f.write(res["detail"] + "\n\n")
        if res.get("stderr"):
            f.write("stderr:\n" + res["stderr"] + "\n")


def uses_connection_variable(suite, name):
    """Whether the file attaches through DUCKLAKE_CONNECTION; a file that does not attaches a
    fixed path (DuckLake's DuckDB-file catalog, or :memory:) whatever the catalog."""
    with open(os.path.join(suite, name), encoding="utf-8", errors="replace") as f:
        return "DUCKLAKE_CONNECTION}" in f.read()


def format_table(cats, tests, results, fixed):
    dirs = sorted({directory_of(t) for t in tests}, key=lambda d: (d == "(top)", d))
    header = ("| directory | tests | fixed catalog | " +
              " | ".join(f"{c} pass / fail / skip" for c in cats) + " |")
    lines = [header, "|" + "---|" * (3 + len(cats))]
    totals = {c: [0, 0, 0] for c in cats}
    for d in dirs:
        in_dir = [t for t in tests if directory_of(t) == d]
        cells = []
        for c in cats:
            n = [0, 0, 0]
            for t in in_dir:
                st = results[c][t]["status"]
                n[{"pass": 0, "fail": 1, "skip": 2}[st]] += 1
            for i in range(3):
                totals[c][i] += n[i]
            cells.append(f"{n[0]} / {n[1]} / {n[2]}")
        nfixed = sum(1 for t in in_dir if t in fixed)
        lines.append(f"| {d} | {len(in_dir)} | {nfixed} | " + " | ".join(cells) + " |")
    lines.append(f"| **total** | {len(tests)} | {len(fixed)} | " +
                 " | ".join(f"**{totals[c][0]} / {totals[c][1]} / {totals[c][2]}**"
                            for c in cats) + " |")
    return "\n".join(lines)


def selftest(args):
    """Each selftest file starts with `# expect: pass|fail|skip [text in the message]`."""
    suite = os.path.join(HERE, "selftest")
    tests = select_tests(suite, args.paths, True)
    setup = catalog_setup("duckdb", args, suite, {})
    # a catalog value naming the test, as moraine's lakes do: a second run must get its own
    setup["opts"]["catalog_env"] = dict(setup["opts"]["catalog_env"],
                                        SELFTEST_LAKE="lakes/{BASE_TEST_NAME}_meta")
    work_root = tempfile.mkdtemp(prefix="moraine-conformance-selftest-")
    reruns = rerun_map(load_config(os.path.join(suite, "rerun-once.json")), suite, "selftest")
    lock = threading.Lock()
    ok = bad = 0
    for name in tests:
        with open(os.path.join(suite, name)) as f:
            first = f.readline().strip()
        if not first.startswith("# expect: "):
            sys.exit(f"selftest: {name} lacks an `# expect:` first line")
        want, _, text = first[len("# expect: "):].partition(" ")
        one = argparse.Namespace(**vars(args))
        if "timeout" in text:
            one.timeout = one.slow_timeout = 3.0
        res = run_rerunning("duckdb", name, setup, suite, work_root, one, reruns, lock)
        got_text = res.get("message", "") or res.get("reason", "")
        if res["status"] == want and text in got_text:
            ok += 1
            if args.verbose:
                print(f"ok   {name}: {res['status']} {got_text}")
        else:
            bad += 1
            print(f"BAD  {name}: want {want} {text!r}, got {res['status']} "
                  f"{res.get('line', '')} {got_text}\n{res.get('detail', '')}")
    shutil.rmtree(work_root, ignore_errors=True)
    print(f"selftest: {ok} passed, {bad} failed")
    return 0 if bad == 0 else 1


def main(argv):
    args = parse_args(argv)
    if args.selftest:
        if not args.ducklake_ext:
            sys.exit("conformance: --ducklake-ext (or DUCKLAKE_EXT) is required")
        return selftest(args)
    cats = []
    for c in args.catalog or ["moraine"]:
        for x in c.split(","):
            x = x.strip()
            for y in (CATALOG_ORDER if x == "all" else [x]):
                if y not in cats:
                    cats.append(y)
    cats.sort(key=lambda c: CATALOG_ORDER.index(c) if c in CATALOG_ORDER else 99)
    if not args.ducklake_ext:
        sys.exit("conformance: --ducklake-ext (or DUCKLAKE_EXT) is required")
    extras = {}
    for e in args.ext:
        name, _, path = e.partition("=")
        if not path:
            sys.exit(f"conformance: --ext wants NAME=PATH, got {e!r}")
        extras[name] = os.path.abspath(path)
    suite, how = find_suite(args.suite)
    how = args.suite_from or how
    commit = suite_commit(suite)
    tests = select_tests(suite, args.paths, args.slow)
    unselected_slow = 0 if args.slow or args.paths else \
        len([t for t in all_tests(suite, True) if t.endswith(".test_slow")])
    work_root = tempfile.mkdtemp(prefix="moraine-conformance-")
    moraine_info = None
    if "moraine" in cats and args.moraine_ext:
        # one build for the whole run, even if the file is rebuilt meanwhile; the name must
        # stay moraine.duckdb_extension (DuckDB derives the init symbol from it)
        snap = os.path.join(work_root, "ext", "moraine.duckdb_extension")
        os.makedirs(os.path.dirname(snap))
        shutil.copyfile(args.moraine_ext, snap)
        st = os.stat(args.moraine_ext)
        with open(snap, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        moraine_info = {"path": os.path.abspath(args.moraine_ext), "sha256": digest,
                        "mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(st.st_mtime))}
        args.moraine_ext = snap
    args.moto = None
    if args.store == "s3":
        if "moraine" not in cats:
            sys.exit("conformance: --store s3 is moraine's store (add --catalog moraine)")
        args.moto = start_moto(args, extras)
        print(f"conformance: moraine's lakes in s3://{S3_BUCKET}/ on moto_server at "
              f"{args.moto.endpoint}", file=sys.stderr)
    try:
        return run_catalogs(args, cats, extras, suite, how, commit, tests, unselected_slow,
                            work_root, moraine_info)
    finally:
        if args.moto:
            args.moto.stop()


def run_catalogs(args, cats, extras, suite, how, commit, tests, unselected_slow, work_root,
                 moraine_info):
    setups = {c: catalog_setup(c, args, suite, extras) for c in cats}
    host_skips = skip_map(load_config(args.host_skip_list), suite,
                          os.path.relpath(args.host_skip_list, REPO))
    for c in cats:
        listed = {t: "skip list: " + r for t, r in setups[c]["skips"].items()}
        for t, r in host_skips.items():
            listed.setdefault(t, "host: " + r)
        setups[c]["skips"] = listed
    reruns = rerun_map(load_config(args.rerun_list), suite,
                       os.path.relpath(args.rerun_list, REPO))
    out_dir = os.path.abspath(args.out or os.path.join(REPO, "target", "conformance"))
    shutil.rmtree(os.path.join(out_dir, "logs"), ignore_errors=True)
    os.makedirs(out_dir, exist_ok=True)
    if moraine_info:
        print(f"conformance: moraine extension {moraine_info['path']} (built "
              f"{moraine_info['mtime']}, sha256 {moraine_info['sha256'][:16]}...)", file=sys.stderr)
    print(f"conformance: suite {describe_suite(suite, how, commit)}", file=sys.stderr)
    print(f"conformance: {len(tests)} test files from {suite}; catalogs {', '.join(cats)}; "
          f"-j {args.jobs}; timeout {args.timeout:.0f}s ({args.slow_timeout:.0f}s for *.test_slow); "
          f"work dir {work_root}", file=sys.stderr)
    if unselected_slow:
        print(f"conformance: {unselected_slow} *.test_slow files not selected (add --slow)",
              file=sys.stderr)

    results = {c: {} for c in cats}
    durations = {}
    print_lock = threading.Lock()
    for cat in cats:
        setup = setups[cat]
        todo = []
        for t in tests:
            if t in setup["skips"] and not args.run_skipped:
                results[cat][t] = {"status": "skip", "reason": setup["skips"][t]}
            else:
                todo.append(t)
        done = [0]
        t0 = time.time()

        def task(name, cat=cat, setup=setup, t0=t0, total=len(todo), done=done):
            res = run_rerunning(cat, name, setup, suite, work_root, args, reruns, print_lock)
            with print_lock:
                results[cat][name] = res
                done[0] += 1
                if "first_run" in res:
                    write_log(out_dir, cat, name, res["first_run"], suffix=".run1")
                if res["status"] == "fail":
                    write_log(out_dir, cat, name, res)
                    print(f"FAIL {cat} {name}:{res.get('line', 0)}: {res['message']}", flush=True)
                    if res.get("detail"):
                        # a crash is rarely reproducible: its stderr is all there is to go on,
                        # whole; other details are often DuckLake's wrapper ("Failed to commit
                        # DuckLake transaction.") with the cause after it, and CI shows only
                        # this output
                        crashed = res["message"].startswith(("crashed", "worker exited"))
                        lines = str(res["detail"]).splitlines()
                        shown = lines if crashed else lines[:20]
                        print("\n".join("    | " + l for l in shown), flush=True)
                        if len(lines) > len(shown):
                            print(f"    | ({len(lines) - len(shown)} more lines in the log)",
                                  flush=True)
                elif args.verbose:
                    extra = f" ({res['reason']})" if res["status"] == "skip" else ""
                    print(f"{res['status'].upper()} {cat} {name}{extra} [{res['elapsed']}s]",
                          flush=True)
                if sys.stderr.isatty() or done[0] % 25 == 0 or done[0] == total:
                    print(f"  [{cat}] {done[0]}/{total} done, {time.time() - t0:.0f}s",
                          file=sys.stderr, flush=True)
            return res

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            list(pool.map(task, todo))
        durations[cat] = time.time() - t0

    if not args.keep:
        shutil.rmtree(work_root, ignore_errors=True)

    fixed = {t for t in tests if not uses_connection_variable(suite, t)}
    table = format_table(cats, tests, results, fixed)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"suite": suite, "suite_from": how, "suite_commit": commit,
                   "catalogs": cats, "jobs": args.jobs, "moraine": moraine_info,
                   "seconds": {c: round(durations[c], 1) for c in cats},
                   "fixed_catalog": sorted(fixed),
                   "results": results}, f, indent=1, sort_keys=True)
    with open(os.path.join(out_dir, "table.md"), "w") as f:
        f.write(table + "\n")
    print()
    print(table)
    print()
    print(f"fixed catalog: {len(fixed)} of the {len(tests)} files never use "
          f"DUCKLAKE_CONNECTION; they attach a fixed path (DuckLake's DuckDB-file catalog or "
          f":memory:) and run the same under every --catalog")
    for c in cats:
        print(f"{c}: ran in {durations[c]:.0f}s with -j {args.jobs}")
    print(f"details: {out_dir}/results.json, failure logs in {out_dir}/logs/")
    print()
    print(f"suite: {describe_suite(suite, how, commit)}")
    if args.store == "s3":
        print(f"store: moraine's lakes in s3://{S3_BUCKET}/ on moto_server (127.0.0.1)")
    for c in cats:
        again = sorted(t for t in tests if results[c][t]["status"] == "pass"
                       and "first_run" in results[c][t])
        if again:
            print(f"{c}: passed only on a second run (rerun-once.json): {', '.join(again)}")
    failed = {}
    for c in cats:
        n = {"pass": 0, "fail": 0, "skip": 0}
        for t in tests:
            n[results[c][t]["status"]] += 1
        # with --run-skipped, failures of listed tests are shown but do not fail the run
        failed[c] = sum(1 for t in tests if results[c][t]["status"] == "fail"
                        and t not in setups[c]["skips"])
        print(f"{c}: {n['pass']} passed, {n['fail']} failed, {n['skip']} skipped")
    if "moraine" in cats:
        return 0 if failed["moraine"] == 0 else 1
    return 0 if not any(failed.values()) else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main()
    else:
        sys.exit(main(sys.argv[1:]))
