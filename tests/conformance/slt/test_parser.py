"""Unit tests of the sqllogictest parser and its JSON dump, with no DuckDB.

Run from tests/conformance: `python -m unittest slt.test_parser` (`cargo test -p xtask` runs it).
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from .dump import dump
from .parser import Loop, ParseError, Parser, SkippedRecord

HERE = os.path.dirname(os.path.abspath(__file__))
CONFORMANCE = os.path.dirname(HERE)


def parse(text):
    return list(Parser(text, lambda s: s).records())


def dumped(text):
    out = []
    dump(text, out.append)
    return [json.loads(line) for line in out]


SAMPLE = """\
# header comment
require ducklake

statement ok
ATTACH 'ducklake:__TEST_DIR__/m.ducklake' AS lake
  (DATA_PATH '__TEST_DIR__/d/')

statement error
SELECT * FROM nope
----
does not exist

query IT rowsort
SELECT 1, 'a'
UNION ALL SELECT 2, NULL
----
1\ta
2\tNULL

query I
SELECT 1 WHERE false
----

query I
SELECT 42

restart

statement ok con2
SELECT 1

loop i 0 10

onlyif i=3
statement ok
SELECT ${i}

endloop

mode skip

statement ok
SELECT 'skipped'

mode unskip

skipif duckdb
query I
SELECT 'not for duckdb'
----
x

query I valuesort mylabel
SELECT 1

halt

statement ok
SELECT 'after halt'
"""


class ParserTest(unittest.TestCase):
    def test_records(self):
        r = parse(SAMPLE)
        kinds = [type(x).__name__ for x in r]
        self.assertEqual(kinds, ["Directive", "Statement", "Statement", "Query", "Query", "Query",
                                 "Directive", "Statement", "Loop", "Directive", "SkippedRecord",
                                 "Query"])
        self.assertEqual((r[0].line, r[0].name, r[0].params), (2, "require", ["ducklake"]))
        self.assertEqual(r[1].sql, "ATTACH 'ducklake:__TEST_DIR__/m.ducklake' AS lake\n"
                                   "  (DATA_PATH '__TEST_DIR__/d/')")
        self.assertEqual((r[2].expect, r[2].expected_error), ("error", "does not exist"))
        q = r[3]
        self.assertEqual((q.line, q.types, q.column_count, q.sort, q.has_result),
                         (13, "IT", 2, "rowsort", True))
        self.assertEqual(q.expected, ["1\ta", "2\tNULL"])
        self.assertEqual((r[4].expected, r[4].has_result), ([], True))
        self.assertEqual((r[5].expected, r[5].has_result), ([], False))
        self.assertEqual(r[6].name, "restart")
        self.assertEqual(r[7].connection, "con2")
        loop = r[8]
        self.assertIsInstance(loop, Loop)
        self.assertEqual((loop.var, loop.start, loop.end, loop.tokens), ("i", 0, 10, None))
        self.assertEqual(len(loop.body), 1)
        self.assertEqual(loop.body[0].sql, "SELECT ${i}")
        self.assertEqual(loop.body[0].conditions[0].keyword, "i")
        self.assertEqual(r[9].name, "mode-skip")
        self.assertIsInstance(r[10], SkippedRecord)
        self.assertEqual((r[11].sort, r[11].label), ("valuesort", "mylabel"))

    def test_malformed(self):
        for text in [
            "statement maybe_not\nSELECT 1\n",   # unknown statement kind
            "statement ok\n\n",                  # no SQL
            "statement ok\nSELECT 1\n----\nx\n",  # ok with an error section
            "statement error\nSELECT 1\n",       # error without its message (as in DuckDB)
            "query\nSELECT 1\n",                 # no types
            "query IX\nSELECT 1\n",              # unknown type letter
            "loop i 0 2\n",                      # no endloop
            "endloop\n",
            "frobnicate\n",
            "restart\nSELECT 1\n",               # a one-line command with a body
        ]:
            with self.assertRaises(ParseError, msg=text):
                parse(text)


class DumpTest(unittest.TestCase):
    def test_json_lines(self):
        d = dumped(SAMPLE)
        self.assertEqual([x["kind"] for x in d],
                         ["directive", "statement", "statement", "query", "query", "query",
                          "directive", "statement", "loop", "directive", "skipped", "query"])
        self.assertEqual(d[0], {"line": 2, "header": "require ducklake", "kind": "directive",
                                "name": "require", "params": ["ducklake"], "conditions": []})
        self.assertEqual(d[1]["error"], None)
        self.assertEqual(d[2]["error"], "does not exist")
        self.assertEqual(d[3]["expected"], ["1\ta", "2\tNULL"])
        self.assertEqual((d[3]["types"], d[3]["sort"], d[3]["label"], d[3]["connection"]),
                         ("IT", "rowsort", None, None))
        self.assertEqual(d[4]["expected"], [])
        self.assertIsNone(d[5]["expected"])
        self.assertEqual(d[7]["connection"], "con2")
        loop = d[8]
        self.assertEqual((loop["header"], loop["var"], loop["tokens"], loop["parallel"]),
                         ("loop i 0 10", "i", None, False))
        self.assertEqual(loop["body"][0]["conditions"],
                         [{"keyword": "i", "op": "=", "value": "3", "skip_if": False}])
        self.assertEqual(d[11]["label"], "mylabel")

    def test_command_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            good = os.path.join(tmp, "good.test")
            with open(good, "w", encoding="utf-8") as f:
                f.write("statement ok\nSELECT '\u00e9\U0001f986'\n")
            p = subprocess.run([sys.executable, "-m", "slt.dump", good], cwd=CONFORMANCE,
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(json.loads(p.stdout)["sql"], "SELECT '\u00e9\U0001f986'")
            self.assertTrue(p.stdout.isascii())
            bad = os.path.join(tmp, "bad.test")
            with open(bad, "w", encoding="utf-8") as f:
                f.write("statement ok\nSELECT 1\n\nstatement error\nSELECT 2\n")
            p = subprocess.run([sys.executable, "-m", "slt.dump", bad], cwd=CONFORMANCE,
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 1)
            self.assertEqual(len(p.stdout.splitlines()), 1)  # the record before the error
            self.assertIn("bad.test:6: statement error/maybe needs", p.stderr)


if __name__ == "__main__":
    unittest.main()
