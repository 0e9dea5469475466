"""`python -m slt.dump FILE` (from tests/conformance): a .test file's records as JSON lines.

This is how `cargo xtask e2e` reads its scenario files: the Rust runner (xtask/src/slt.rs) runs
this module with the interpreter xtask uses for the Python tests and reads one JSON object per
line, so the parser in `slt/parser.py` is the only reader of the sqllogictest dialect in the
repository. Nothing is substituted: `__TEST_DIR__` and `${VAR}` reach the caller as written.

Every object has `kind` and `line` (1-based, the record's header line) and `header` (that line's
text). By kind:

* `statement`: `expect` (ok | error | maybe | debug), `sql`, `error` (the expected error text;
  null when the record has none), `connection` (null for the default one), `conditions`;
* `query`: `types` (the type letters, one per column), `sort` (nosort | rowsort | valuesort),
  `label` (null when none), `sql`, `expected` (the lines after `----`; null when the record has
  no `----` line), `connection`, `conditions`;
* `loop`: `var`, `start`, `end`, `tokens` (the foreach values; null for a numeric loop),
  `parallel`, `body` (the records inside, as objects of this same form), `conditions`;
* `directive`: `name` and `params`, for every other command (`require`, `restart`, `mode`,
  `load`, `set`, ...). `mode skip` is applied by the parser: it appears as `mode-skip` and the
  statements and queries it covers as `skipped`; `halt` ends the output;
* `skipped`: a statement or query under `mode skip`.

`conditions` lists the `skipif`/`onlyif` conditions on loop variables, each as `keyword`, `op`,
`value`, `skip_if` (`skipif duckdb` and the like are applied by the parser).

A parse error is printed to stderr as `FILE:LINE: message`, after the records before it, and
the exit status is 1.
"""

import json
import sys

from .parser import Directive, Loop, ParseError, Parser, Query, SkippedRecord, Statement


def _conditions(conds):
    return [{"keyword": c.keyword, "op": c.op, "value": c.value, "skip_if": c.skip_if}
            for c in conds]


def _or_none(s: str):
    return s if s else None


def record(rec, lines) -> dict:
    """One parsed record as a JSON-ready dict; `lines` are the file's lines, for `header`."""
    out = {"line": rec.line,
           "header": lines[rec.line - 1] if 0 < rec.line <= len(lines) else ""}
    if isinstance(rec, Statement):
        out.update(kind="statement", expect=rec.expect, sql=rec.sql,
                   error=rec.expected_error if rec.expect in ("error", "maybe") else None,
                   connection=_or_none(rec.connection), conditions=_conditions(rec.conditions))
    elif isinstance(rec, Query):
        out.update(kind="query", types=rec.types, sort=rec.sort, label=_or_none(rec.label),
                   sql=rec.sql, expected=rec.expected if rec.has_result else None,
                   connection=_or_none(rec.connection), conditions=_conditions(rec.conditions))
    elif isinstance(rec, Loop):
        out.update(kind="loop", var=rec.var, start=rec.start, end=rec.end, tokens=rec.tokens,
                   parallel=rec.parallel, body=[record(r, lines) for r in rec.body],
                   conditions=_conditions(rec.conditions))
    elif isinstance(rec, Directive):
        out.update(kind="directive", name=rec.name, params=rec.params,
                   conditions=_conditions(rec.conditions))
    elif isinstance(rec, SkippedRecord):
        out.update(kind="skipped")
    else:
        raise TypeError(f"unknown record {rec!r}")
    return out


def dump(text: str, write) -> None:
    """Parse `text` and call `write` with one JSON line per top-level record."""
    parser = Parser(text, lambda s: s)
    for rec in parser.records():
        write(json.dumps(record(rec, parser.lines)) + "\n")


def main(argv) -> int:
    if len(argv) != 1:
        print("usage: python -m slt.dump FILE", file=sys.stderr)
        return 2
    path = argv[0]
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 1
    try:
        dump(text, sys.stdout.write)
    except ParseError as e:
        sys.stdout.flush()
        print(f"{path}:{e.line}: {e.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
