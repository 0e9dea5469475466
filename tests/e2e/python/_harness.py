"""Shared pieces of the Python-hosted e2e scenarios (not a scenario itself: the runner skips
files whose name starts with "_").

The runner sets MORAINE_EXT, DUCKLAKE_EXT and TEST_DIR. A scenario reports one line per check
(`ok   <name>` / `FAIL <name>: <detail>`) and ends with `finish(<name>)`.
"""
import os
import sys

import duckdb

MORAINE = os.environ["MORAINE_EXT"]
DUCKLAKE = os.environ["DUCKLAKE_EXT"]
TEST_DIR = os.environ["TEST_DIR"]

_failures = []


def connect():
    """A fresh stock DuckDB with DuckLake and moraine loaded by path; nothing is downloaded."""
    db = duckdb.connect(config={
        "allow_unsigned_extensions": "true",
        "autoinstall_known_extensions": "false",
        "autoload_known_extensions": "false",
    })
    db.execute(f"LOAD '{DUCKLAKE}'")
    db.execute(f"LOAD '{MORAINE}'")
    return db


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail and not cond else ""))
    if not cond:
        _failures.append(name)


def error_of(fn):
    """(exception class name, message) of the DuckDB error fn raises, or (None, None)."""
    try:
        fn()
    except duckdb.Error as e:
        return type(e).__name__, str(e)
    return None, None


def expect_error(name, fn, needle):
    """Runs fn; the check passes if it raises a DuckDB error whose text contains `needle`."""
    try:
        fn()
    except duckdb.Error as e:
        check(name, needle in str(e).lower(), f"error {e!r} lacks {needle!r}")
        return
    check(name, False, "no error raised")


def finish(scenario):
    print(f"{scenario}: {0 if _failures else 1} passed, {1 if _failures else 0} failed")
    sys.exit(1 if _failures else 0)
