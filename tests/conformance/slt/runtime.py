"""Running one sqllogictest file in a fresh DuckDB instance (the pinned `duckdb` Python package).

One `TestFile` per file, in its own process (the orchestrator starts one per file, with the
file's work directory as the current directory). The database is in memory unless the file
says `load`; `restart` closes it and opens a new one, loading the same extensions again;
`reconnect` gives the default connection a new DuckDB connection; `statement ok con1` /
`query I con1` use named connections, created on first use; `concurrentloop` runs each
iteration on its own thread with its own connection.

Keyword substitution follows DuckDB 1.5.5's runner: `${NAME}` and `{NAME}` for test-env
variables (the catalog's settings first, then the file's `test-env` defaults), then
`{TEST_DIR}`, `{UUID}` (a fresh UUID each time a text is substituted), `{TEST_NAME}`,
`{BASE_TEST_NAME}` (the test path with `/` -> `_`), `__TEST_DIR__`, `__WORKING_DIRECTORY__`;
loop variables as `${i}` / `{i}` when the command runs.
"""

import gzip
import os
import random
import shutil
import sys
import threading
import time
import uuid

from . import results
from .parser import Directive, Loop, ParseError, Parser, Query, SkippedRecord, Statement


class Failure(Exception):
    def __init__(self, line, message, detail="", sql="", error=None):
        super().__init__(message)
        self.line = line
        self.message = message
        self.detail = detail
        self.sql = sql
        # the errors DuckDB raised that made the test fail (a statement or query that should
        # have run did not), one per failing thread of a concurrent loop; empty for a wrong
        # result or an expected error that did not come
        self.errors = [error] if error is not None else []


class SkipTest(Exception):
    pass


# `require X` parameters that are properties of the build, not extensions
_BUILD_PROPERTIES = {
    "notwindows": True, "windows": False, "mingw": False, "64bit": True, "longdouble": True,
    "noforcestorage": True, "no_force_storage": True, "nothreadsan": True, "strinline": True,
    "skip_reload": True, "no_alternative_verify": True, "no_latest_storage": True,
    "no_vector_verification": True, "allow_unsigned_extensions": True,
    "vacuum_rebuild_indexes": False,
}
_EXTENSION_ALIASES = {"sqlite": "sqlite_scanner", "postgres": "postgres_scanner"}
STANDARD_VECTOR_SIZE = 2048
DEFAULT_BLOCK_SIZE = 262144


class LoopState:
    __slots__ = ("var", "idx", "tokens", "skipped")

    def __init__(self, var, idx, tokens):
        self.var = var
        self.idx = idx
        self.tokens = tokens
        self.skipped = False

    def value(self):
        return self.tokens[self.idx] if self.tokens is not None else str(self.idx)


class Context:
    def __init__(self, loops=None, con=None, parallel=False):
        self.loops = loops or []
        self.con = con
        self.parallel = parallel


class TestFile:
    def __init__(self, name, path, opts, progress=None):
        """opts: dict with
        catalog_env     {name: value} the catalog's test_env (DUCKLAKE_CONNECTION...)
        preload         [(extension name, path)] LOADed into every instance
        available       {extension name: path} LOADed on `require`
        skip_messages   [str] errors that turn the file into a skip (DuckLake's configs)
        setup_sql       [str] run in every instance once its extensions are loaded (optional)
        """
        import duckdb  # the pinned package, via PYTHONPATH
        import duckdb.sqltypes  # noqa: F401
        self.duckdb = duckdb
        self.name = name
        self.path = path
        self.opts = opts
        self.progress = progress or (lambda line: None)
        self.cwd = os.getcwd()
        self.test_dir = os.path.join("duckdb_unittest_tempdir", str(os.getpid()))
        os.makedirs(self.test_dir, exist_ok=True)
        run_uuid = str(uuid.uuid4())
        self.env = {
            "TEST_UUID": run_uuid,
            "BUILD_DIR": "",
            "WORKING_DIR": self.cwd,
            "DATA_DIR": os.path.join(self.cwd, "data"),
            "TEMP_DIR": self.test_dir,
            "CATALOG_DIR": self.test_dir + "/" + run_uuid,
        }
        self.env.update(opts.get("catalog_env", {}))
        self.env["TEST_NAME"] = name
        self.env["TEST_NAME__NO_SLASH"] = name.replace("/", "_")
        self.ignore_errors = set(opts.get("skip_messages", []))
        self.always_fail = {"differs from original result!", "INTERNAL"}
        self.hash_threshold = 0
        self.labels = results.LabelMap()
        self.comparator = results.Comparator()
        self.output_hash = False
        self.output_result = False
        self.lock = threading.Lock()
        self.finished = False  # a skip-error message ended the file
        self.skip_reason = None
        self.mode_skip = False
        self.executed = 0
        self.skipped_records = 0
        self.required = []  # (name, path) loaded by `require`, reloaded after restart
        self.dbpath = ""
        self.read_only = False
        self.root = None
        self.con = None
        self.named = {}

    # -- substitution ---------------------------------------------------------------------
    def substitute(self, text: str) -> str:
        for k, v in list(self.env.items()):
            text = text.replace("${%s}" % k, v).replace("{%s}" % k, v)
        text = text.replace("{TEST_DIR}", self.test_dir)
        if "{UUID}" in text:
            text = text.replace("{UUID}", str(uuid.uuid4()))
        text = text.replace("{TEST_NAME}", self.name)
        text = text.replace("{BASE_TEST_NAME}", self.name.replace("/", "_"))
        text = text.replace("__TEST_DIR__", self.test_dir)
        text = text.replace("__WORKING_DIRECTORY__", self.cwd)
        text = text.replace("__BUILD_DIRECTORY__", "")
        return text

    def loop_substitute(self, text: str, loops) -> str:
        for lp in loops:
            value = self.substitute(lp.value())
            names = lp.var.split(",") if "," in lp.var else [lp.var]
            vals = value.split(",") if len(names) > 1 else [value]
            if len(names) != len(vals):
                raise Failure(0, f"foreach: {lp.var} does not match {value}")
            for n, v in zip(names, vals):
                text = text.replace("${%s}" % n, v).replace("{%s}" % n, v)
        return text

    # -- database lifecycle ---------------------------------------------------------------
    def _config(self):
        return {
            "allow_unsigned_extensions": "true",
            "allow_unredacted_secrets": "true",
            "autoinstall_known_extensions": "false",
            "autoload_known_extensions": "false",
            "extension_directory": os.path.join(self.cwd, ".duckdb_extensions"),
        }

    def _load(self, con, path):
        con.execute("LOAD '%s'" % path.replace("'", "''"))

    def open_db(self, load_required=True):
        d = self.duckdb
        self.root = d.connect(self.dbpath or ":memory:", read_only=self.read_only,
                              config=self._config())
        for _, path in self.opts.get("preload", []):
            self._load(self.root, path)
        if load_required:
            for _, path in self.required:
                self._load(self.root, path)
        self.root.execute("SET secret_directory='%s'" %
                          os.path.join(self.test_dir, "test_secret_dir").replace("'", "''"))
        for sql in self.opts.get("setup_sql", []):
            self.root.execute(sql)
        self._quiet(self.root)
        self.con = self.root
        self.named = {}

    @staticmethod
    def _quiet(con):
        """No progress bar on stdout, where the orchestrator reads this worker's reports
        (DuckDB's runner likewise keeps the progress bar from printing)."""
        con.execute("SET enable_progress_bar_print = false")
        return con

    def close_db(self):
        for c in list(self.named.values()) + [self.con, self.root]:
            if c is None:
                continue
            try:
                c.close()
            except Exception:
                pass
        self.named = {}
        self.con = self.root = None

    def _settings(self):
        try:
            return dict(self.root.execute("SELECT name, value FROM duckdb_settings()").fetchall())
        except Exception:
            return {}

    def restart(self, load_extensions=True):
        before = self._settings()
        self.close_db()
        self.open_db(load_required=load_extensions)
        fresh = self._settings()
        for k, v in before.items():
            if k in fresh and fresh[k] != v and v is not None:
                try:
                    self.root.execute("SET GLOBAL %s = '%s'" % (k, str(v).replace("'", "''")))
                except Exception:
                    pass

    def connection(self, name, ctx):
        if not name:
            return ctx.con if ctx.parallel else self.con
        if ctx.parallel:
            raise Failure(0, "named connections are not supported in a concurrent loop")
        if name not in self.named:
            self.named[name] = self._quiet(self.root.cursor())
        return self.named[name]

    def loaded_extensions(self):
        rows = self.root.execute(
            "SELECT extension_name FROM duckdb_extensions() WHERE loaded").fetchall()
        return {r[0] for r in rows}

    # -- running --------------------------------------------------------------------------
    def run(self):
        with open(self.path, encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
        self.open_db()
        parser = Parser(text, self.substitute)
        try:
            for rec in parser.records():
                if self.finished:
                    break
                self.execute(rec, Context())
        except ParseError as e:
            raise Failure(e.line, "parse error: " + e.message)
        if self.finished or self.skip_reason:
            raise SkipTest(self.skip_reason)
        if self.executed == 0 and self.mode_skip:
            raise SkipTest("mode skip")

    def execute(self, rec, ctx):
        if self.finished:
            return
        if isinstance(rec, SkippedRecord):
            self.skipped_records += 1
            return
        if isinstance(rec, Statement):
            return self.run_statement(rec, ctx)
        if isinstance(rec, Query):
            return self.run_query(rec, ctx)
        if isinstance(rec, Loop):
            return self.run_loop(rec, ctx)
        assert isinstance(rec, Directive)
        if not ctx.parallel:
            self.progress(rec.line)
        handler = getattr(self, "do_" + rec.name.replace("-", "_"), None)
        if handler is None:
            raise Failure(rec.line, f"unsupported command {rec.name}")
        if rec.name in ("restart", "reconnect", "load") and ctx.parallel:
            raise Failure(rec.line, f"cannot {rec.name} in a concurrent loop")
        handler(rec, ctx)

    def conditions_hold(self, rec, ctx):
        if not rec.conditions:
            return True
        if not ctx.loops:
            raise Failure(rec.line, "onlyif/skipif conditions on loop variables outside a loop")
        for cond in rec.conditions:
            found = False
            holds = False
            for lp in ctx.loops:
                if lp.var != cond.keyword:
                    continue
                found = True
                val = lp.value()
                if cond.op == "=":
                    holds = val == cond.value
                elif cond.op == "<>":
                    holds = val != cond.value
                else:
                    a, b = int(val), int(cond.value)
                    holds = {">": a > b, "<": a < b, ">=": a >= b, "<=": a <= b}[cond.op]
            if not found:
                raise Failure(rec.line, f"condition on {cond.keyword}, which is no loop variable")
            if holds == cond.skip_if:
                return False
        return True

    def _mark_skip(self, err):
        for m in self.ignore_errors:
            if m in err:
                with self.lock:
                    self.skip_reason = f"error message matches the skip list: {m!r}"
                return True
        return False

    # statements ----------------------------------------------------------------------------
    def _prepare(self, rec, ctx):
        """(sql, connection) for a record whose conditions hold, else None."""
        if not self.conditions_hold(rec, ctx):
            return None
        sql = self.loop_substitute(rec.sql, ctx.loops) if ctx.loops else rec.sql
        con = self.connection(rec.connection, ctx)
        if not ctx.parallel:
            self.progress(rec.line)
        return sql, con

    def _attempt(self, run):
        """(run()'s result, None) or (None, the error message); counts the execution."""
        result, err = None, None
        try:
            result = run()
        except self.duckdb.Error as e:
            err = str(e)
        except Exception as e:  # noqa: BLE001 - anything the client raises is the result
            err = f"{type(e).__name__}: {e}"
        with self.lock:
            self.executed += 1
        return result, err

    def run_statement(self, rec, ctx):
        prepared = self._prepare(rec, ctx)
        if prepared is None:
            return
        sql, con = prepared

        def run():
            if self.output_result:
                self._print_result(rec.line, sql, *self._fetch(con, sql))
            else:
                for st in con.extract_statements(sql):
                    self._drain(con, st)

        _, err = self._attempt(run)
        expect = rec.expect
        failed = err is not None
        if expect != "ok":
            if err is not None and any(m in err for m in self.always_fail):
                raise Failure(rec.line, "internal error: " + _first(err), err, sql)
            failed = False if expect in ("maybe", "debug") else not failed
            if err is not None and rec.expected_error:
                want = rec.expected_error
                if want not in err and self.substitute(want) not in err:
                    ok = False
                    if want.startswith("<REGEX>:") or want.startswith("<!REGEX>:"):
                        ok = results.matches_regex(err + "\n", want)
                    if not ok and not self._mark_skip(err):
                        raise Failure(rec.line,
                                      f"expected error {_first(want)!r}, got: {_first(err)}",
                                      f"expected error:\n{want}\nactual error:\n{err}", sql)
                    return
        if failed:
            if expect == "ok" and self._mark_skip(err):
                self.finished = True
                return
            if expect == "ok":
                raise Failure(rec.line, "statement failed: " + _first(err), err, sql, error=err)
            raise Failure(rec.line,
                          "statement succeeded, expected error: " + _first(rec.expected_error),
                          rec.expected_error, sql)

    # queries -------------------------------------------------------------------------------
    def _drain(self, con, st):
        """Run one statement to completion, as DuckDB's runner does (it materializes every
        result). `sql()` runs and materializes anything but a SELECT; a SELECT relation is
        lazy, and the client would stream its rows: a table function such as
        ducklake_merge_adjacent_files() does its work only as its rows are read."""
        rel = con.sql(st)
        if rel is not None and st.type == self.duckdb.StatementType.SELECT:
            n = len(rel.columns)
            cur = rel.project(", ".join("CAST(#%d AS VARCHAR)" % (i + 1) for i in range(n)))
            while cur.fetchmany(10000):
                pass

    def _fetch(self, con, sql):
        """(names, types, rendered values) of the last statement in sql; the ones before it
        run to completion first."""
        stmts = con.extract_statements(sql)
        if not stmts:
            return ["Count"], [self.duckdb.sqltypes.BIGINT], []
        for st in stmts[:-1]:
            self._drain(con, st)
        last = stmts[-1]
        if any("CHANGED_ROWS" in str(t) for t in last.expected_result_type):
            # INSERT/UPDATE/DELETE/MERGE/COPY: the row count (or RETURNING rows) is only
            # available through execute(), as Python values
            cur = con.execute(last)
            desc = cur.description or []
            rows = cur.fetchall() if desc else []
            names = [d[0] for d in desc]
            types = [d[1] for d in desc]
            tids = [results.type_id(t) for t in types]
            vals = [results.render_python(v, tids[i]) for r in rows for i, v in enumerate(r)]
            return names, types, vals
        rel = con.sql(last)
        if rel is None:
            # a statement without a result set (DROP, CREATE, ...): DuckDB's result for it
            # has one column and no rows
            return ["Count"], [self.duckdb.sqltypes.BIGINT], []
        names = list(rel.columns)
        types = list(rel.types)
        tids = [results.type_id(t) for t in types]
        proj = rel.project(", ".join("CAST(#%d AS VARCHAR)" % (i + 1) for i in range(len(names))))
        rows = proj.fetchall()
        vals = [results.render_cell(v, tids[i]) for r in rows for i, v in enumerate(r)]
        return names, types, vals

    def _print_result(self, line, sql, names, types, vals):
        n = max(len(names), 1)
        rows = ["\t".join(vals[i:i + n]) for i in range(0, len(vals), n)]
        sys.stderr.write(f"-- line {line}: {sql}\n" + "\t".join(names) + "\n" +
                         "".join(r + "\n" for r in rows))
        sys.stderr.flush()

    def run_query(self, rec, ctx):
        prepared = self._prepare(rec, ctx)
        if prepared is None:
            return
        sql, con = prepared
        fetched, err = self._attempt(lambda: self._fetch(con, sql))
        if err is not None:
            if self._mark_skip(err):
                self.finished = True
                return
            raise Failure(rec.line, "query failed: " + _first(err), err, sql, error=err)
        names, types, vals = fetched
        if self.output_result:
            self._print_result(rec.line, sql, names, types, vals)
        try:
            results.check_query(rec, names, types, vals, self.comparator, self.substitute,
                                self.hash_threshold, self.labels, self.output_hash,
                                _FileResolver(self, ctx.loops))
        except results.Mismatch as m:
            raise Failure(rec.line, m.message, m.detail, sql)

    # loops ---------------------------------------------------------------------------------
    def run_loop(self, rec, ctx):
        if rec.parallel:
            return self.run_parallel_loop(rec, ctx)
        idx = rec.start
        while not self.finished:
            state = LoopState(rec.var, idx, rec.tokens)
            inner = Context(ctx.loops + [state], ctx.con, ctx.parallel)
            for cmd in rec.body:
                self.execute(cmd, inner)
                if state.skipped or self.finished:
                    break
            idx += 1
            if idx >= rec.end:
                break

    def run_parallel_loop(self, rec, ctx):
        if ctx.parallel:
            raise Failure(rec.line, "nested concurrent loops are not supported")
        for cmd in _walk(rec.body):
            if isinstance(cmd, Directive) and cmd.name in ("continue", "restart", "reconnect",
                                                           "load"):
                raise Failure(cmd.line, f"{cmd.name} is not supported in a concurrent loop")
        indexes = list(range(rec.start, max(rec.end, rec.start + 1)))
        random.shuffle(indexes)
        failures = []

        def worker(i):
            cur = None
            try:
                cur = self._quiet(self.root.cursor())
                inner = Context(ctx.loops + [LoopState(rec.var, i, rec.tokens)], cur, True)
                for cmd in rec.body:
                    if self.finished:
                        break
                    self.execute(cmd, inner)
            except Failure as f:
                with self.lock:
                    failures.append(f)
                    self.finished = True
            except Exception as e:  # noqa: BLE001
                with self.lock:
                    failures.append(Failure(rec.line, f"concurrent loop thread raised "
                                                      f"{type(e).__name__}: {e}"))
                    self.finished = True
            finally:
                if cur is not None:
                    try:
                        cur.close()
                    except Exception:
                        pass

        self.progress(rec.line)
        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in indexes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failures:
            f = failures[0]
            f.message = f"(in concurrentloop {rec.var}) " + f.message
            for other in failures[1:]:
                # every thread's failure is kept: one thread's cannot hide another's
                f.detail = (f.detail or "") + f"\n\nanother thread, line {other.line}: " + \
                    other.message + ("\n" + other.detail if other.detail else "")
            # the errors raised, only when every failing thread failed by one
            f.errors = [e for x in failures for e in x.errors] \
                if all(x.errors for x in failures) else []
            raise f

    # directives ----------------------------------------------------------------------------
    def do_require(self, rec, ctx):
        if not rec.params:
            raise Failure(rec.line, "require needs a parameter")
        param = rec.params[0]
        if param in _BUILD_PROPERTIES:
            if not _BUILD_PROPERTIES[param]:
                raise SkipTest(f"requires {param}")
            return
        if param == "no_extension_autoloading":
            return  # autoloading is off in every configuration here
        if param in ("vector_size", "exact_vector_size", "block_size", "ram", "disk_space"):
            if len(rec.params) != 2:
                raise Failure(rec.line, f"require {param} needs a value")
            if not _require_size(param, rec.params[1]):
                raise SkipTest(f"requires {param} {rec.params[1]}")
            return
        name = _EXTENSION_ALIASES.get(param, param)
        if name in self.loaded_extensions():
            return
        path = self.opts.get("available", {}).get(name)
        if path is None:
            raise SkipTest(f"requires {param}")
        try:
            self._load(self.root, path)
        except Exception as e:  # noqa: BLE001
            raise Failure(rec.line, f"require {param}: LOAD failed: {_first(str(e))}")
        self.required.append((name, path))

    def do_require_env(self, rec, ctx):
        if len(rec.params) not in (1, 2):
            raise Failure(rec.line, "require-env needs <name> [value]")
        name = rec.params[0]
        in_config = name in self.opts.get("catalog_env", {})
        actual = self.opts["catalog_env"][name] if in_config else os.environ.get(name)
        if actual is None:
            raise SkipTest(f"require-env {name}")
        if len(rec.params) == 2 and actual != rec.params[1]:
            raise SkipTest(f"require-env {name} {rec.params[1]}")
        if not in_config and name in self.env:
            raise Failure(rec.line, f"environment variable {name} has already been defined")
        self.env[name] = actual

    def do_test_env(self, rec, ctx):
        if len(rec.params) != 2:
            raise Failure(rec.line, "test-env needs <name> <default value>")
        name, default = rec.params
        self.env[name] = self.opts.get("catalog_env", {}).get(name, default)

    def do_set(self, rec, ctx):
        if not rec.params:
            raise Failure(rec.line, "set needs a parameter")
        what = rec.params[0]
        if what in ("ignore_error_messages", "always_fail_error_messages"):
            items = {s.strip() for s in " ".join(rec.params[1:]).split(",")} - {""}
            if what == "ignore_error_messages":
                self.ignore_errors = items
            else:
                self.always_fail = items
        elif what == "seed":
            self.root.execute("SELECT SETSEED(%s)" % float(rec.params[1]))
        elif what == "variable":
            if len(rec.params) != 3:
                raise Failure(rec.line, "set variable needs <name> <value>")
            self.env[rec.params[1]] = rec.params[2]
        else:
            raise Failure(rec.line, f"unrecognized set parameter {what}")

    def do_hash_threshold(self, rec, ctx):
        self.hash_threshold = int(rec.params[0])

    def do_tags(self, rec, ctx):
        pass

    def do_include(self, rec, ctx):
        raise Failure(rec.line, "include is not supported")

    def do_mode_skip(self, rec, ctx):
        self.mode_skip = True

    def do_mode(self, rec, ctx):
        p = rec.params[0] if rec.params else ""
        if p == "output_hash":
            self.output_hash = True
        elif p in ("output_result", "debug"):
            self.output_result = True  # results go to the worker's stderr (kept in the log)
        elif p == "no_output":
            self.output_hash = False
            self.output_result = False
        else:
            raise Failure(rec.line, f"unrecognized mode {p}")

    def do_reset(self, rec, ctx):
        if len(rec.params) != 2 or rec.params[0].lower() != "label":
            raise Failure(rec.line, "expected reset label <name>")
        with self.labels.lock:
            if rec.params[1] not in self.labels.map:
                raise Failure(rec.line, f"reset label {rec.params[1]}: no such label")
            del self.labels.map[rec.params[1]]

    def do_continue(self, rec, ctx):
        if not self.conditions_hold(rec, ctx):
            return
        ctx.loops[-1].skipped = True

    def do_sleep(self, rec, ctx):
        n = int(rec.params[0])
        unit = rec.params[1] if len(rec.params) > 1 else "second"
        scale = {"second": 1, "seconds": 1, "sec": 1, "millisecond": 1e-3, "milliseconds": 1e-3,
                 "milli": 1e-3, "microsecond": 1e-6, "microseconds": 1e-6, "micro": 1e-6,
                 "nanosecond": 1e-9, "nanoseconds": 1e-9, "nano": 1e-9}.get(unit)
        if scale is None:
            raise Failure(rec.line, f"unknown sleep unit {unit}")
        time.sleep(n * scale)

    def do_unzip(self, rec, ctx):
        if len(rec.params) not in (1, 2):
            raise Failure(rec.line, "unzip needs <file.gz> [destination]")
        src = self.loop_substitute(rec.params[0], ctx.loops)
        if not src.endswith(".gz"):
            raise Failure(rec.line, "unzip: input has no .gz extension")
        default = self.substitute("{TEST_DIR}/" + os.path.basename(src)[:-3])
        dst = rec.params[1] if len(rec.params) == 2 and rec.params[1] != "NULL" else default
        dst = self.loop_substitute(dst, ctx.loops)
        try:
            with gzip.open(src, "rb") as fi, open(dst, "wb") as fo:
                shutil.copyfileobj(fi, fo)
        except OSError as e:
            raise Failure(rec.line, f"unzip {src} -> {dst}: {e}")

    def do_load(self, rec, ctx):
        path = self.loop_substitute(rec.params[0], ctx.loops) if rec.params else ""
        mode = rec.params[1].lower() if len(rec.params) > 1 else "readwrite"
        if mode not in ("readonly", "readwrite"):
            raise Failure(rec.line, f"load: unknown mode {mode}")
        self.read_only = mode == "readonly"
        if not self.read_only and path:
            for p in (path, path + ".wal"):
                if os.path.exists(p):
                    os.remove(p)
        self.dbpath = path
        self.close_db()
        self.open_db()

    def do_restart(self, rec, ctx):
        self.restart(load_extensions=not (rec.params and rec.params[0] == "no_extension_load"))

    def do_reconnect(self, rec, ctx):
        if self.con is not None and self.con is not self.root:
            try:
                self.con.close()
            except Exception:
                pass
        self.con = self._quiet(self.root.cursor())


class _FileResolver:
    """Path of a `<FILE>:` result: keywords, then loop variables (as DuckDB does)."""

    def __init__(self, test, loops):
        self.test = test
        self.loops = loops

    def substitute(self, text):
        return self.test.loop_substitute(self.test.substitute(text), self.loops)


def _walk(cmds):
    for c in cmds:
        yield c
        if isinstance(c, Loop):
            yield from _walk(c.body)


def _first(text, limit=300):
    text = (text or "").strip()
    line = text.split("\n", 1)[0]
    return line if len(line) <= limit else line[:limit] + "..."


def _parse_size(text):
    units = {"kb": 1000, "mb": 1000 ** 2, "gb": 1000 ** 3, "tb": 1000 ** 4,
             "kib": 1024, "mib": 1024 ** 2, "gib": 1024 ** 3, "tib": 1024 ** 4, "b": 1}
    t = text.strip().lower()
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz ")
    unit = t[len(num):].strip() or "b"
    return float(num) * units.get(unit, 1)


def _require_size(param, value):
    if param == "vector_size":
        return STANDARD_VECTOR_SIZE >= int(value)
    if param == "exact_vector_size":
        return STANDARD_VECTOR_SIZE == int(value)
    if param == "block_size":
        return DEFAULT_BLOCK_SIZE == int(value)
    if param == "ram":
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemTotal:"):
                        return int(line.split()[1]) * 1024 >= _parse_size(value)
        except OSError:
            return False
        return False
    if param == "disk_space":
        return shutil.disk_usage(".").free >= _parse_size(value)
    return False
