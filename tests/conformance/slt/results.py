"""Query results as DuckDB's sqllogictest runner sees them, and the comparison it makes.

Rendering: every value is DuckDB's own cast to VARCHAR (done in SQL, so nested types, floats,
timestamps, intervals and decimals print exactly as DuckDB prints them), then NULL -> `NULL`,
'' -> `(empty)`, a NUL byte -> `\\0`, and a BOOLEAN column -> `1`/`0` (the comparison accepts
`true`/`false` for those).

Comparison (per value, after the sort mode is applied to the result only): equal strings; equal
after keyword substitution of the expected text; `<REGEX>:`/`<!REGEX>:` full match (dot matches
newline); for a numeric column both sides cast to the column type and compared (FLOAT/DOUBLE
within 1% + 1e-8 of the expected value, as DuckDB's ApproxEqual); for BOOLEAN true/1 and false/0.
Expected rows are tab-separated when the query has several columns, or one value per line.
A single expected line `N values hashing to <md5>` compares the MD5 of all rendered values, each
followed by a newline; so does a query label (`query I nosort label`), against the first result
seen under that label.
"""

import hashlib
import re
import threading

NUMERIC_IDS = {
    "tinyint", "smallint", "integer", "bigint", "hugeint", "utinyint", "usmallint", "uinteger",
    "ubigint", "uhugeint", "float", "double", "decimal",
}

_HASH_RE = re.compile(r"^[0-9]+ values hashing to [0-9a-z]{32}$")


class Mismatch(Exception):
    """A query whose result differs; message is one line, detail the full picture."""

    def __init__(self, message: str, detail: str = ""):
        super().__init__(message)
        self.message = message
        self.detail = detail


def type_id(t) -> str:
    try:
        return str(t.id).lower()
    except Exception:
        return str(t).split("(")[0].lower()


def render_cell(value, tid: str) -> str:
    """value is the VARCHAR cast of the cell (or None)."""
    if value is None:
        return "NULL"
    if tid == "boolean":
        return "1" if value == "true" else "0"
    if value == "":
        return "(empty)"
    return value.replace("\0", "\\0")


def render_python(value, tid: str) -> str:
    """For results only available as Python values (DML statements: a row count)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        s = repr(value)
        return s
    s = str(value)
    if s == "":
        return "(empty)"
    return s.replace("\0", "\\0")


def result_is_hash(text: str) -> bool:
    return bool(_HASH_RE.match(text))


def hash_values(values) -> str:
    m = hashlib.md5()
    for v in values:
        m.update(v.encode("utf-8", "surrogateescape"))
        m.update(b"\n")
    return f"{len(values)} values hashing to {m.hexdigest()}"


def sort_values(values, sort, ncols):
    if sort == "nosort":
        return values
    if sort == "valuesort":
        return sorted(values)
    if len(values) % ncols != 0:
        raise Mismatch(f"failed to sort query result: {len(values)} values do not fill "
                       f"{ncols} columns")
    rows = [values[i:i + ncols] for i in range(0, len(values), ncols)]
    rows.sort()
    return [v for r in rows for v in r]


def matches_regex(actual: str, pattern: str) -> bool:
    want = pattern.startswith("<REGEX>:")
    body = pattern.replace("<REGEX>:", "").replace("<!REGEX>:", "")
    try:
        ok = re.fullmatch(body, actual, re.DOTALL) is not None
    except re.error:
        return False
    return ok == want


class Comparator:
    """Numeric comparisons cast through DuckDB itself (a private in-memory database)."""

    def __init__(self):
        self._con = None
        self._lock = threading.Lock()

    def _cast(self, text: str, type_sql: str):
        import duckdb
        with self._lock:
            if self._con is None:
                self._con = duckdb.connect()
            return self._con.execute(f"SELECT TRY_CAST($1::VARCHAR AS {type_sql})",
                                     [text]).fetchone()[0]

    def load_result_file(self, fname, names):
        """A `<FILE>:` result: a '|'-separated CSV with a header, every column read as text
        (NULL stays `NULL`, an empty field stays empty, as in DuckDB's runner)."""
        import duckdb
        cols = "{" + ", ".join("'%s': 'VARCHAR'" % n.replace("'", "''") for n in names) + "}"
        try:
            with self._lock:
                if self._con is None:
                    self._con = duckdb.connect()
                rows = self._con.execute(
                    f"SELECT * FROM read_csv($1, header=true, sep='|', columns={cols}, "
                    f"auto_detect=false)", [fname]).fetchall()
        except duckdb.Error as e:
            raise Mismatch(f"could not read the result file {fname}: {str(e).splitlines()[0]}")
        return ["NULL" if v is None else v for r in rows for v in r], len(names)

    def values_equal(self, actual: str, expected: str, col_type, substitute) -> bool:
        if actual == expected or actual == substitute(expected):
            return True
        if expected.startswith("<REGEX>:") or expected.startswith("<!REGEX>:"):
            if matches_regex(actual, expected):
                return True
        tid = type_id(col_type)
        if tid in NUMERIC_IDS:
            type_sql = str(col_type)
            try:
                lv = None if actual == "NULL" else self._cast(actual, type_sql)
                rv = None if expected == "NULL" else self._cast(expected, type_sql)
            except Exception:
                return False
            if (actual != "NULL" and lv is None) or (expected != "NULL" and rv is None):
                return False
            if lv is None or rv is None:
                return lv is None and rv is None
            if tid in ("float", "double"):
                return approx_equal(float(lv), float(rv))
            return lv == rv
        if tid == "boolean":
            def as_bool(s):
                low = s.lower()
                if low == "true" or s == "1":
                    return 1
                if low == "false" or s == "0":
                    return 0
                return None
            lb, rb = as_bool(actual), as_bool(expected)
            return lb is not None and lb == rb
        return False


def approx_equal(l: float, r: float) -> bool:
    import math
    if math.isnan(l) and math.isnan(r):
        return True
    if not math.isfinite(l) or not math.isfinite(r):
        return l == r
    eps = abs(r) * 0.01 + 0.00000001
    return abs(l - r) <= eps


def _table(values, ncols, limit=40):
    rows = [values[i:i + ncols] for i in range(0, len(values), ncols)] if ncols else []
    lines = ["\t".join(r) for r in rows[:limit]]
    if len(rows) > limit:
        lines.append(f"... ({len(rows) - limit} more rows)")
    return "\n".join(lines)


class LabelMap:
    def __init__(self):
        self.lock = threading.Lock()
        self.map = {}


def check_query(query, names, types, actual, comparator, substitute, hash_threshold,
                labels: LabelMap, output_hash_mode=False, file_loader=None):
    """actual: rendered values, row-major. Raises Mismatch.
    file_loader.substitute(text) resolves the path of a `<FILE>:` result."""
    ncols = len(types)
    total = len(actual)
    values = list(query.expected)
    compare_hash = bool(query.label) or (hash_threshold > 0 and total > hash_threshold)
    is_hash = len(values) == 1 and result_is_hash(values[0])
    if is_hash:
        compare_hash = True
    actual = sort_values(actual, query.sort, ncols) if ncols else actual
    if len(values) == 1 and values[0].startswith("<FILE>:"):
        fname = file_loader.substitute(values[0][len("<FILE>:"):])
        values, csv_cols = comparator.load_result_file(fname, names)
        query = _with_columns(query, csv_cols)

    if output_hash_mode or compare_hash:
        digest = hash_values(actual)
        if output_hash_mode:
            return
    if not compare_hash:
        expected_cols = query.column_count
        col_mismatch = False
        if expected_cols != ncols:
            expected_cols = ncols
            col_mismatch = True
        if expected_cols == 0:
            raise Mismatch("query returned no columns")
        row_wise = expected_cols > 1 and len(values) == total // max(ncols, 1)
        if not row_wise:
            row_wise = all("\t" in v for v in values)
        nrows_actual = total // ncols
        header = (f"expected {query.column_count} column(s), got {ncols} "
                  f"({', '.join(names)})")
        if row_wise:
            expected_rows = len(values)
        else:
            if len(values) % expected_cols != 0:
                if col_mismatch:
                    raise Mismatch(header, _detail(values, actual, ncols))
                raise Mismatch(f"{len(values)} expected values do not fill {expected_cols} "
                               f"columns", _detail(values, actual, ncols))
            expected_rows = len(values) // expected_cols
        if expected_rows != nrows_actual:
            if col_mismatch:
                raise Mismatch(header, _detail(values, actual, ncols))
            raise Mismatch(f"wrong row count: expected {expected_rows}, got {nrows_actual}",
                           _detail(values, actual, ncols))
        if row_wise:
            split = []
            for i, v in enumerate(values):
                parts = v.split("\t")
                if len(parts) != expected_cols:
                    if col_mismatch:
                        raise Mismatch(header, _detail(values, actual, ncols))
                    raise Mismatch(f"expected row {i + 1} has {len(parts)} values, the query "
                                   f"returned {expected_cols} columns",
                                   _detail(values, actual, ncols))
                split.extend(parts)
            values = split
        for i in range(min(total, len(values))):
            r, c = divmod(i, expected_cols)
            if not comparator.values_equal(actual[i], values[i], types[c], substitute):
                raise Mismatch(
                    f"wrong result at row {r + 1}, column {c + 1} ({names[c]}): "
                    f"got {actual[i]!r}, expected {values[i]!r}",
                    _detail(values, actual, ncols))
        if col_mismatch:
            raise Mismatch(header + " (values match otherwise)", _detail(values, actual, ncols))
        return

    mismatch = False
    previous = None
    if query.label:
        with labels.lock:
            if query.label in labels.map:
                previous = labels.map[query.label]
                mismatch = previous[0] != digest
            else:
                labels.map[query.label] = (digest, _table(actual, ncols))
    if is_hash:
        mismatch = values[0] != digest
    if mismatch:
        want = values[0] if is_hash else f"{previous[0]} (label {query.label})"
        detail = "actual:\n" + _table(actual, ncols)
        if previous is not None:
            detail = "result stored under the label:\n" + previous[1] + "\n" + detail
        raise Mismatch(f"hash mismatch: got {digest!r}, expected {want!r}", detail)


def _with_columns(query, n):
    import copy
    q = copy.copy(query)
    q.column_count = n
    return q


def _detail(expected, actual, ncols):
    exp_cols = ncols if ncols and len(expected) % ncols == 0 and \
        not any("\t" in v for v in expected) else 1
    return ("expected:\n" + _table(expected, exp_cols) + "\nactual:\n" + _table(actual, ncols))
