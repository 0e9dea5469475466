"""Reading DuckDB's sqllogictest dialect: the repository's one parser of it.

The conformance runner (runtime.py) uses it directly; `cargo xtask e2e` reads its scenario files
through it too, as JSON lines from `python -m slt.dump FILE` (dump.py), so both runners read a
file the same way. DuckDB's own Python package for this (`scripts/sqllogictest/` in DuckDB's
repository) is not published on PyPI, so it cannot be pinned like the rest of the test stack.

The file is read line by line the way DuckDB's own runner reads it:

* a record starts at the first line that is neither empty nor a comment (`#` in column 0) and
  its header is split on whitespace;
* SQL runs until an empty line, a comment line or `----`;
* an expected error runs from `----` to the next empty line (comment lines included);
* an expected result runs from `----` to the next empty line. Without `----`, whatever follows
  the SQL up to the next empty line is taken as the result (so a comment right under a query is
  "expected output", as in DuckDB); `Query.has_result` tells whether there was a `----`;
* a line holding only spaces is not empty.

`records()` is a generator and takes the runner's keyword substitution as a callback, because
DuckDB substitutes `${VAR}`/`{VAR}` while it parses: a `test-env` line changes what the
statements after it see, and directives that DuckDB evaluates at parse time (`require`,
`require-env`, `test-env`, `set`, `hash-threshold`, `tags`) are yielded as soon as they are read,
even from inside a loop body, before the loop that holds them runs. Commands inside a loop body
are collected into the `Loop` record, which is yielded once its outermost `endloop` is read.
"""

from dataclasses import dataclass, field
from typing import Callable, List, Optional


class ParseError(Exception):
    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


@dataclass
class Condition:
    """`skipif i=1` / `onlyif threadid<3`: a condition on a loop variable."""
    keyword: str
    op: str  # one of = <> > >= < <=
    value: str
    skip_if: bool


@dataclass
class Statement:
    line: int
    expect: str  # ok | error | maybe | debug
    sql: str
    expected_error: str  # '' when none was given
    connection: str = ""
    conditions: List[Condition] = field(default_factory=list)


@dataclass
class Query:
    line: int
    column_count: int
    sort: str  # nosort | rowsort | valuesort
    sql: str
    expected: List[str]
    connection: str = ""
    label: str = ""
    conditions: List[Condition] = field(default_factory=list)
    types: str = ""  # the header's type letters (`ITT`), one per column
    has_result: bool = True  # False when the record has no `----` line


@dataclass
class Loop:
    line: int
    var: str
    start: int
    end: int
    tokens: Optional[List[str]]  # foreach values; None for a numeric loop
    parallel: bool
    body: list = field(default_factory=list)
    conditions: List[Condition] = field(default_factory=list)


@dataclass
class Directive:
    """Any other command: name is the first word, params the rest."""
    line: int
    name: str
    params: List[str]
    conditions: List[Condition] = field(default_factory=list)


@dataclass
class SkippedRecord:
    """A statement or query inside `mode skip`: counted, not run."""
    line: int


# directives that must stand alone on their line (DuckDB fails the file otherwise)
SINGLE_LINE = {
    "hash-threshold", "halt", "mode", "set", "reset", "loop", "foreach", "concurrentloop",
    "concurrentforeach", "endloop", "require", "require-env", "test-env", "load", "restart",
    "reconnect", "sleep", "unzip", "tags", "continue",
}
# evaluated when read (DuckDB does these in its parse loop, not as commands)
IMMEDIATE = {"hash-threshold", "set", "require", "require-env", "test-env", "tags", "include"}
# run as commands: at top level right away, inside a loop once per iteration
COMMANDS = {"reset", "load", "restart", "reconnect", "sleep", "unzip", "continue", "mode"}
KNOWN = SINGLE_LINE | {"skipif", "onlyif", "statement", "query", "include"}

SORT_STYLES = {"nosort": "nosort", "none": "nosort", "rowsort": "rowsort", "sort": "rowsort",
               "valuesort": "valuesort"}

_COMPARATORS = ["<>", ">=", ">", "<=", "<", "="]


def _empty_or_comment(line: str) -> bool:
    return line == "" or line.startswith("#")


def _parse_conditions(text: str, skip_if: bool) -> Optional[List[Condition]]:
    """`i=1&&j>2` -> conditions; None when the text is a system name (`skipif duckdb`)."""
    if not any(c in text for c in "=<>"):
        return None
    out = []
    for part in text.split("&&"):
        for op in _COMPARATORS:
            if op in part:
                pieces = part.split(op)
                if len(pieces) != 2:
                    raise ValueError("skipif/onlyif must be of the form x=y or x>y")
                out.append(Condition(pieces[0].strip(), op, pieces[1].strip(), skip_if))
                break
    return out


class Parser:
    def __init__(self, text: str, substitute: Callable[[str], str]):
        self.lines = [l.replace("\r", "") for l in text.split("\n")]
        if self.lines and self.lines[-1] == "":
            self.lines.pop()  # the newline that ends the last line
        self.substitute = substitute
        self.pos = 0
        self.seen = False
        self.skip_level = 0
        self.loop_stack: List[Loop] = []

    # -- line helpers ---------------------------------------------------------------------
    def fail(self, message: str):
        raise ParseError(self.pos + 1, message)

    def _next_record(self) -> bool:
        n = len(self.lines)
        if self.seen:
            while self.pos < n and not _empty_or_comment(self.lines[self.pos]):
                self.pos += 1
        self.seen = True
        while self.pos < n and _empty_or_comment(self.lines[self.pos]):
            self.pos += 1
        return self.pos < n

    def _tokens(self) -> List[str]:
        if self.pos >= len(self.lines):
            return []
        toks = self.lines[self.pos].split()
        if not toks:
            self.fail("empty line (only whitespace) where a record header was expected")
        return toks

    def _extract_sql(self) -> str:
        out = []
        while self.pos < len(self.lines) and not _empty_or_comment(self.lines[self.pos]):
            if self.lines[self.pos] == "----":
                break
            out.append(self.lines[self.pos])
            self.pos += 1
        return "\n".join(out)

    def _extract_result(self) -> List[str]:
        if self.pos < len(self.lines) and self.lines[self.pos] == "----":
            self.pos += 1
        out = []
        while self.pos < len(self.lines) and self.lines[self.pos] != "":
            out.append(self.lines[self.pos])
            self.pos += 1
        return out

    def _extract_error(self, expect: str) -> str:
        wants_message = expect in ("error", "maybe")
        if self.pos >= len(self.lines) or self.lines[self.pos] != "----":
            if wants_message:
                self.fail("statement error/maybe needs an expected error message after ----")
            return ""
        if not wants_message:
            self.fail("only statement error or maybe can have an expected error message")
        self.pos += 1
        out = []
        while self.pos < len(self.lines) and self.lines[self.pos] != "":
            out.append(self.lines[self.pos])
            self.pos += 1
        return "\n".join(out)

    # -- records --------------------------------------------------------------------------
    def _emit(self, rec):
        """Commands go into the innermost open loop; returns the record to yield, if any."""
        if self.loop_stack:
            self.loop_stack[-1].body.append(rec)
            return None
        return rec

    def records(self):
        while self._next_record():
            toks = self._tokens()
            cmd = toks[0]
            if cmd not in KNOWN:
                self.fail(f"unrecognized command {cmd!r}")
            if cmd in SINGLE_LINE:
                nxt = self.pos + 1
                if nxt < len(self.lines) and not _empty_or_comment(self.lines[nxt]):
                    self.fail("all test records need to be separated by an empty line")
            header_line = self.pos + 1

            conditions: List[Condition] = []
            skip = False
            while cmd in ("skipif", "onlyif"):
                if len(toks) < 2:
                    self.fail("skipif/onlyif requires a parameter (e.g. skipif duckdb)")
                skip_if = cmd == "skipif"
                try:
                    conds = _parse_conditions(toks[1].lower(), skip_if)
                except ValueError as e:
                    self.fail(str(e))
                if conds is None:
                    ours = toks[1].lower() == "duckdb"
                    if ours == skip_if:
                        skip = True
                        break
                else:
                    # loop-variable names keep their case
                    conditions.extend(_parse_conditions(toks[1], skip_if))
                self.pos += 1
                toks = self._tokens()
                if not toks:
                    self.fail("skipif/onlyif at the end of the file")
                cmd = toks[0]
                header_line = self.pos + 1
                if cmd not in KNOWN:
                    self.fail(f"unrecognized command {cmd!r}")
            if skip:
                continue
            params = toks[1:]

            if self.skip_level > 0 and cmd != "mode":
                if cmd in ("statement", "query"):
                    yield SkippedRecord(header_line)
                continue

            if cmd == "statement":
                if not params:
                    self.fail("statement requires a parameter (ok/error/maybe)")
                expect = params[0]
                if expect == "debug_skip":
                    expect = "debug"
                    self.skip_level += 1
                if expect not in ("ok", "error", "maybe", "debug"):
                    self.fail("statement argument should be 'ok', 'error' or 'maybe'")
                self.pos += 1
                sql = self._extract_sql()
                if sql == "":
                    self.fail("unexpected empty statement text")
                err = self._extract_error(expect)
                rec = Statement(header_line, expect, self.substitute(sql), err,
                                params[1] if len(params) >= 2 else "", conditions)
                out = self._emit(rec)
                if out is not None:
                    yield out
            elif cmd == "query":
                if not params:
                    self.fail("query requires a parameter (e.g. query III)")
                types = params[0]
                if not types or any(c not in "TIR" for c in types):
                    self.fail(f"unknown type character in {types!r}, expected T, I or R only")
                self.pos += 1
                sql = self._extract_sql()
                has_result = self.pos < len(self.lines) and self.lines[self.pos] == "----"
                expected = self._extract_result()
                sort = "nosort"
                con = ""
                if len(params) > 1:
                    if params[1] in SORT_STYLES:
                        sort = SORT_STYLES[params[1]]
                    else:
                        con = params[1]
                label = params[2] if len(params) > 2 else ""
                rec = Query(header_line, len(types), sort, self.substitute(sql), expected, con,
                            label, conditions, types, has_result)
                out = self._emit(rec)
                if out is not None:
                    yield out
            elif cmd == "halt":
                return
            elif cmd == "mode" and params and params[0] in ("skip", "unskip"):
                self.skip_level += 1 if params[0] == "skip" else -1
                if params[0] == "skip":
                    yield Directive(header_line, "mode-skip", params[1:])
            elif cmd in ("loop", "concurrentloop"):
                if len(params) != 3:
                    self.fail("expected loop <name> <start> <end>")
                try:
                    start, end = int(params[1]), int(params[2])
                except ValueError:
                    self.fail("loop start and end must be numbers")
                self.loop_stack.append(Loop(header_line, params[0], start, end, None,
                                            cmd == "concurrentloop", [], conditions))
            elif cmd in ("foreach", "concurrentforeach"):
                if len(params) < 2:
                    self.fail("expected foreach <name> <value> [value ...]")
                self.loop_stack.append(Loop(header_line, params[0], 0, len(params) - 1, params[1:],
                                            cmd == "concurrentforeach", [], conditions))
            elif cmd == "endloop":
                if not self.loop_stack:
                    self.fail("endloop without loop")
                loop = self.loop_stack.pop()
                out = self._emit(loop)
                if out is not None:
                    yield out
            elif cmd in IMMEDIATE:
                if cmd in ("test-env", "require-env") and self.loop_stack:
                    self.fail(f"{cmd} cannot be used in a loop")
                yield Directive(header_line, cmd, params, conditions)
            elif cmd in COMMANDS:
                if cmd == "continue" and not self.loop_stack:
                    self.fail("continue outside of a loop")
                if cmd in ("load", "unzip"):
                    params = [self.substitute(p) for p in params]
                out = self._emit(Directive(header_line, cmd, params, conditions))
                if out is not None:
                    yield out
            else:
                self.fail(f"unsupported command {cmd!r}")
        if self.loop_stack:
            raise ParseError(self.loop_stack[-1].line, "missing endloop")
