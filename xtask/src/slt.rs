//! The records of a sqllogictest file, as `cargo xtask e2e` runs them.
//!
//! The repository has one parser of DuckDB's sqllogictest dialect:
//! `tests/conformance/slt/parser.py`, which the conformance runner uses directly. This module
//! does not parse `.test` files itself: it runs `python -m slt.dump FILE` in
//! `tests/conformance` with the interpreter xtask uses for its Python tests
//! ([`crate::deps::python`]: `$PYTHON`, else `python3`; the parser needs nothing beyond the
//! standard library) and turns the JSON lines it prints (see `slt/dump.py`) into [`Record`]s.
//!
//! What the e2e runner does with a record:
//!
//! ```text
//! statement ok|error  [conN]           -- error: the text after ---- must be in the message
//! query <types> [nosort|rowsort|valuesort] [label]
//!                                      -- expected rows after ----; none: not checked
//! restart                              -- a new CLI process; only on-disk state survives
//! require <name>                       -- skip the file unless <name> is available
//! ```
//!
//! The parser itself applies `mode skip`/`mode unskip`, `skipif duckdb`/`onlyif duckdb` and
//! `halt` (the records they drop never reach this module). Everything else the dialect has
//! (loops and foreach, `statement maybe`, conditions on loop variables, `load`, `set`, ...)
//! comes through as [`Kind::Unsupported`] with its header line, so the runner can say exactly
//! what it lacks; named connections come through and the runner refuses them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::json::{self, Json};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    pub path: PathBuf,
    pub records: Vec<Record>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// 1-based line of the record's header.
    pub line: usize,
    pub kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)] // named after sqllogictest's nosort/rowsort/valuesort
pub enum SortMode {
    NoSort,
    RowSort,
    ValueSort,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    Ok,
    /// An error; if `Some`, its message must contain this text.
    Error(Option<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Statement {
        expect: Expect,
        sql: String,
        /// A named connection (`statement ok con1`); `None` is the default one.
        connection: Option<String>,
    },
    Query {
        /// The column type letters, e.g. `II` or `ITT`: their count is the column count.
        types: String,
        sort: SortMode,
        label: Option<String>,
        sql: String,
        /// Expected result lines; `None` when the record has no `----` section.
        expected: Option<Vec<String>>,
        connection: Option<String>,
    },
    Restart,
    Require(String),
    /// `mode <m>` for any `m` but skip/unskip, which the parser applies.
    Mode(String),
    /// A record the e2e runner cannot run: its header line.
    Unsupported(String),
}

/// The directory `python -m slt.dump` runs in.
fn conformance_dir() -> PathBuf {
    crate::paths::workspace_root().join("tests/conformance")
}

/// Parse `path` with the repository's sqllogictest parser (`python -m slt.dump`).
pub fn parse_file(path: &Path) -> Result<Script, String> {
    let abs = std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let python = crate::deps::python();
    let out = Command::new(&python)
        .args(["-m", "slt.dump"])
        .arg(&abs)
        .current_dir(conformance_dir())
        .output()
        .map_err(|e| {
            format!(
                "running {} -m slt.dump (the sqllogictest parser): {e}",
                python.to_string_lossy()
            )
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let msg = stderr.trim();
        return Err(if msg.is_empty() {
            format!("{}: python -m slt.dump: {}", path.display(), out.status)
        } else {
            msg.to_string()
        });
    }
    let stdout = String::from_utf8(out.stdout)
        .map_err(|e| format!("{}: slt.dump printed non-UTF-8: {e}", path.display()))?;
    let records = from_dump(&stdout).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Script {
        path: path.to_path_buf(),
        records,
    })
}

/// The records in `slt.dump`'s output, one JSON object per line.
pub fn from_dump(text: &str) -> Result<Vec<Record>, String> {
    let mut records = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v = json::parse(line).map_err(|e| format!("slt.dump line {}: {e}", n + 1))?;
        if let Some(r) = record(&v).map_err(|e| format!("slt.dump line {}: {e}", n + 1))? {
            records.push(r);
        }
    }
    Ok(records)
}

fn str_field<'a>(v: &'a Json, key: &str) -> Result<&'a str, String> {
    v.get(key)
        .and_then(Json::as_str)
        .ok_or_else(|| format!("no string {key:?}"))
}

/// A string field that may be null (or absent).
fn opt_str(v: &Json, key: &str) -> Result<Option<String>, String> {
    match v.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::Str(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("{key:?} is not a string: {other:?}")),
    }
}

fn str_list(v: &Json, key: &str) -> Result<Option<Vec<String>>, String> {
    match v.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::Arr(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(String::from)
                    .ok_or_else(|| format!("{key:?} holds a non-string: {i:?}"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(format!("{key:?} is not a list: {other:?}")),
    }
}

/// One dumped record; `None` for what the parser already applied (`mode skip` and the
/// records it covers).
fn record(v: &Json) -> Result<Option<Record>, String> {
    let line = v
        .get("line")
        .and_then(Json::as_f64)
        .filter(|l| *l >= 1.0 && l.fract() == 0.0)
        .ok_or("no line number")? as usize;
    let header = str_field(v, "header")?.trim().to_string();
    let kind = str_field(v, "kind")?;
    let unsupported = |why: &str| {
        Ok(Some(Record {
            line,
            kind: Kind::Unsupported(if why.is_empty() {
                header.clone()
            } else {
                format!("{header} ({why})")
            }),
        }))
    };
    // `skipif i=1` / `onlyif i<3`: only loops have variables, and the runner has no loops
    let has_conditions = v
        .get("conditions")
        .and_then(Json::as_array)
        .is_some_and(|c| !c.is_empty());
    if has_conditions {
        return unsupported("skipif/onlyif on a loop variable");
    }
    let kind = match kind {
        "statement" => {
            let expect = match str_field(v, "expect")? {
                "ok" => Expect::Ok,
                "error" => Expect::Error(opt_str(v, "error")?.filter(|e| !e.is_empty())),
                _ => return unsupported(""),
            };
            Kind::Statement {
                expect,
                sql: str_field(v, "sql")?.to_string(),
                connection: opt_str(v, "connection")?,
            }
        }
        "query" => Kind::Query {
            types: str_field(v, "types")?.to_string(),
            sort: match str_field(v, "sort")? {
                "nosort" => SortMode::NoSort,
                "rowsort" => SortMode::RowSort,
                "valuesort" => SortMode::ValueSort,
                other => return Err(format!("unknown sort mode {other:?}")),
            },
            label: opt_str(v, "label")?,
            sql: str_field(v, "sql")?.to_string(),
            expected: str_list(v, "expected")?,
            connection: opt_str(v, "connection")?,
        },
        "directive" => {
            let params = str_list(v, "params")?.unwrap_or_default();
            match str_field(v, "name")? {
                "require" => Kind::Require(params.join(" ")),
                "restart" if params.is_empty() => Kind::Restart,
                "mode" => Kind::Mode(params.join(" ")),
                "mode-skip" => return Ok(None),
                _ => return unsupported(""),
            }
        }
        "skipped" => return Ok(None),
        "loop" => return unsupported(""),
        other => return Err(format!("unknown record kind {other:?}")),
    };
    Ok(Some(Record { line, kind }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parse `text` as a .test file, through python.
    fn parse_text(text: &str) -> Result<Script, String> {
        let dir = crate::paths::fresh_temp_dir("moraine-slt").unwrap();
        let file = dir.join("x.test");
        std::fs::write(&file, text).unwrap();
        let r = parse_file(&file);
        let _ = std::fs::remove_dir_all(&dir);
        r
    }

    #[test]
    fn parses_the_supported_records() {
        let text = "\
# header comment
require ducklake

statement ok
ATTACH 'ducklake:__TEST_DIR__/m.ducklake' AS lake
  (DATA_PATH '__TEST_DIR__/d/')

statement error
SELECT * FROM nope
----
does not exist

statement error
SELECT broken(
----

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

statement ok
SELECT 1

endloop

mode skip

statement ok
SELECT 'skipped'

mode unskip

mode output_result

statement maybe
SELECT 1
----
whatever

query I valuesort mylabel
SELECT 1

halt

statement ok
SELECT 'after halt'
";
        let s = parse_text(text).unwrap();
        let k: Vec<&Kind> = s.records.iter().map(|r| &r.kind).collect();
        assert_eq!(s.records[0].line, 2);
        assert_eq!(k[0], &Kind::Require("ducklake".into()));
        assert_eq!(
            k[1],
            &Kind::Statement {
                expect: Expect::Ok,
                sql: "ATTACH 'ducklake:__TEST_DIR__/m.ducklake' AS lake\n  (DATA_PATH '__TEST_DIR__/d/')"
                    .into(),
                connection: None
            }
        );
        assert_eq!(s.records[1].line, 4);
        assert_eq!(
            k[2],
            &Kind::Statement {
                expect: Expect::Error(Some("does not exist".into())),
                sql: "SELECT * FROM nope".into(),
                connection: None
            }
        );
        // an empty ---- section: any error will do
        assert_eq!(
            k[3],
            &Kind::Statement {
                expect: Expect::Error(None),
                sql: "SELECT broken(".into(),
                connection: None
            }
        );
        assert_eq!(
            k[4],
            &Kind::Query {
                types: "IT".into(),
                sort: SortMode::RowSort,
                label: None,
                sql: "SELECT 1, 'a'\nUNION ALL SELECT 2, NULL".into(),
                expected: Some(vec!["1\ta".into(), "2\tNULL".into()]),
                connection: None,
            }
        );
        assert_eq!(s.records[4].line, 17);
        match k[5] {
            Kind::Query { expected, .. } => assert_eq!(expected, &Some(vec![])),
            other => panic!("{other:?}"),
        }
        match k[6] {
            Kind::Query { expected, .. } => assert_eq!(expected, &None),
            other => panic!("{other:?}"),
        }
        assert_eq!(k[7], &Kind::Restart);
        match k[8] {
            Kind::Statement { connection, .. } => assert_eq!(connection.as_deref(), Some("con2")),
            other => panic!("{other:?}"),
        }
        assert_eq!(k[9], &Kind::Unsupported("loop i 0 10".into()));
        // mode skip ... mode unskip is applied by the parser
        assert_eq!(k[10], &Kind::Mode("output_result".into()));
        assert_eq!(k[11], &Kind::Unsupported("statement maybe".into()));
        match k[12] {
            Kind::Query { sort, label, .. } => {
                assert_eq!(*sort, SortMode::ValueSort);
                assert_eq!(label.as_deref(), Some("mylabel"));
            }
            other => panic!("{other:?}"),
        }
        // halt ends the file
        assert_eq!(k.len(), 13);
    }

    #[test]
    fn rejects_malformed_files() {
        for text in [
            "statement maybe_not\nSELECT 1\n",
            "statement ok\n\n",
            "statement ok\nSELECT 1\n----\nx\n",
            "statement error\nSELECT 1\n", // DuckDB needs the expected message
            "loop i 0 2\n",
            "frobnicate\n",
        ] {
            let e = parse_text(text).unwrap_err();
            // the parser's message names the file and line
            assert!(e.contains("x.test:"), "{text:?}: {e}");
        }
        let e = parse_file(Path::new("/nonexistent/y.test")).unwrap_err();
        assert!(e.contains("y.test"), "{e}");
    }

    #[test]
    fn conditions_on_loop_variables_are_unsupported() {
        let r = from_dump(
            r#"{"line": 3, "header": "statement ok", "kind": "statement", "expect": "ok", "sql": "SELECT 1", "error": null, "connection": null, "conditions": [{"keyword": "i", "op": "=", "value": "1", "skip_if": true}]}"#,
        )
        .unwrap();
        assert_eq!(
            r,
            vec![Record {
                line: 3,
                kind: Kind::Unsupported("statement ok (skipif/onlyif on a loop variable)".into())
            }]
        );
        assert!(from_dump("{\"line\": 1}").is_err());
        assert!(from_dump("not json").is_err());
    }

    /// Every scenario in the repository parses, with nothing the runner lacks.
    #[test]
    fn repository_scenarios_parse() {
        let root = crate::paths::workspace_root().join("tests/e2e");
        let mut n = 0;
        for dir in [root.clone(), root.join("selftest")] {
            let files = crate::e2e::scenario_files(&dir, None).unwrap();
            // Python-hosted scenarios (tests/e2e/python/*.py) are not sqllogictest files
            for f in files
                .iter()
                .filter(|f| f.extension().is_some_and(|e| e == "test"))
            {
                let s = parse_file(f).unwrap();
                n += 1;
                for r in &s.records {
                    assert!(
                        !matches!(r.kind, Kind::Unsupported(_) | Kind::Mode(_)),
                        "{}:{}: {:?}",
                        f.display(),
                        r.line,
                        r.kind
                    );
                }
            }
        }
        assert!(n > 0);
    }

    /// The parser's own unit tests (tests/conformance/slt/test_parser.py).
    #[test]
    fn python_parser_unit_tests() {
        let out = Command::new(crate::deps::python())
            .args(["-m", "unittest", "slt.test_parser"])
            .current_dir(conformance_dir())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
