//! A parser for the subset of DuckDB's sqllogictest dialect that moraine's
//! scenario files use.
//!
//! ```text
//! # a comment (between records)
//! statement ok
//! <SQL, one or more lines>
//!
//! statement error
//! <SQL>
//! ----
//! <expected substring of the error message; optional>
//!
//! query <types> [nosort|rowsort|valuesort] [label]
//! <SQL>
//! ----
//! <expected rows: tab-separated values, NULL for null, (empty) for ''>
//!
//! restart            -- a new CLI process; only on-disk state survives
//! require <name>     -- skip the file unless <name> is available
//! mode skip|unskip   -- skip records until `mode unskip`
//! halt               -- stop the file here
//! ```
//!
//! Records end at a blank line (or the end of the file). Anything else is
//! parsed as [`Kind::Unsupported`] so a runner can say exactly what it lacks;
//! DuckDB's loops, `concurrentloop`, named connections and `<REGEX>:`
//! matching are the obvious next additions for a conformance runner.

use std::path::{Path, PathBuf};

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
    Mode(String),
    Halt,
    Unsupported(String),
}

pub fn parse_file(path: &Path) -> Result<Script, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(path, &text)
}

fn is_blank(l: &str) -> bool {
    l.trim().is_empty()
}

pub fn parse(path: &Path, text: &str) -> Result<Script, String> {
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let mut records = Vec::new();
    let mut i = 0;
    let err = |line: usize, msg: &str| format!("{}:{line}: {msg}", path.display());

    // collect lines from `start` until a blank line or EOF; split on a `----` line
    let body = |start: usize| -> (Vec<&str>, Option<Vec<&str>>, usize) {
        let mut j = start;
        let mut sql = Vec::new();
        while j < lines.len() && !is_blank(lines[j]) && lines[j].trim_end() != "----" {
            sql.push(lines[j]);
            j += 1;
        }
        if j < lines.len() && lines[j].trim_end() == "----" {
            j += 1;
            let mut res = Vec::new();
            while j < lines.len() && !is_blank(lines[j]) {
                res.push(lines[j]);
                j += 1;
            }
            (sql, Some(res), j)
        } else {
            (sql, None, j)
        }
    };

    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            i += 1;
            continue;
        }
        let header_line = i + 1;
        let tokens: Vec<&str> = trimmed.split_whitespace().collect();
        match tokens[0] {
            "statement" => {
                let expect = match tokens.get(1) {
                    Some(&"ok") => Expect::Ok,
                    Some(&"error") => Expect::Error(None),
                    other => {
                        return Err(err(
                            header_line,
                            &format!("unknown statement kind {other:?}"),
                        ))
                    }
                };
                let connection = tokens.get(2).map(|s| s.to_string());
                let (sql, res, next) = body(i + 1);
                if sql.is_empty() {
                    return Err(err(header_line, "statement without SQL"));
                }
                let expect = match (expect, res) {
                    (Expect::Ok, Some(_)) => {
                        return Err(err(
                            header_line,
                            "`statement ok` cannot have a ---- section",
                        ))
                    }
                    (Expect::Error(_), Some(r)) if !r.is_empty() => {
                        Expect::Error(Some(r.join("\n")))
                    }
                    (e, _) => e,
                };
                records.push(Record {
                    line: header_line,
                    kind: Kind::Statement {
                        expect,
                        sql: sql.join("\n"),
                        connection,
                    },
                });
                i = next;
            }
            "query" => {
                let types = tokens
                    .get(1)
                    .ok_or_else(|| err(header_line, "query without column types"))?
                    .to_string();
                let mut sort = SortMode::NoSort;
                let mut label = None;
                let mut connection = None;
                for t in tokens.iter().skip(2) {
                    match *t {
                        "nosort" => sort = SortMode::NoSort,
                        "rowsort" => sort = SortMode::RowSort,
                        "valuesort" => sort = SortMode::ValueSort,
                        t if t.starts_with("con") && t[3..].chars().all(|c| c.is_ascii_digit()) => {
                            connection = Some(t.to_string())
                        }
                        t => label = Some(t.to_string()),
                    }
                }
                let (sql, res, next) = body(i + 1);
                if sql.is_empty() {
                    return Err(err(header_line, "query without SQL"));
                }
                records.push(Record {
                    line: header_line,
                    kind: Kind::Query {
                        types,
                        sort,
                        label,
                        sql: sql.join("\n"),
                        expected: res.map(|r| r.into_iter().map(String::from).collect()),
                        connection,
                    },
                });
                i = next;
            }
            "restart" => {
                records.push(Record {
                    line: header_line,
                    kind: Kind::Restart,
                });
                i += 1;
            }
            "require" => {
                let what = tokens[1..].join(" ");
                records.push(Record {
                    line: header_line,
                    kind: Kind::Require(what),
                });
                i += 1;
            }
            "mode" => {
                let what = tokens.get(1).copied().unwrap_or("").to_string();
                records.push(Record {
                    line: header_line,
                    kind: Kind::Mode(what),
                });
                i += 1;
            }
            "halt" => {
                records.push(Record {
                    line: header_line,
                    kind: Kind::Halt,
                });
                i += 1;
            }
            _ => {
                records.push(Record {
                    line: header_line,
                    kind: Kind::Unsupported(trimmed.to_string()),
                });
                // skip the rest of this record
                i += 1;
                while i < lines.len() && !is_blank(lines[i]) {
                    i += 1;
                }
            }
        }
    }
    Ok(Script {
        path: path.to_path_buf(),
        records,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
";
        let s = parse(Path::new("x.test"), text).unwrap();
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
        assert_eq!(k.len(), 10);
    }

    /// Every scenario in the repository parses, with nothing the runner lacks.
    #[test]
    fn repository_scenarios_parse() {
        let root = crate::paths::workspace_root().join("tests/e2e");
        for dir in [root.clone(), root.join("selftest")] {
            let files = crate::e2e::scenario_files(&dir, None).unwrap();
            // Python-hosted scenarios (tests/e2e/python/*.py) are not sqllogictest files
            for f in files
                .iter()
                .filter(|f| f.extension().is_some_and(|e| e == "test"))
            {
                let s = parse_file(f).unwrap();
                for r in &s.records {
                    assert!(
                        !matches!(r.kind, Kind::Unsupported(_)),
                        "{}:{}: {:?}",
                        f.display(),
                        r.line,
                        r.kind
                    );
                }
            }
        }
    }

    #[test]
    fn rejects_malformed_headers() {
        assert!(parse(Path::new("x"), "statement maybe\nSELECT 1\n").is_err());
        assert!(parse(Path::new("x"), "statement ok\n\n").is_err());
        assert!(parse(Path::new("x"), "statement ok\nSELECT 1\n----\nx\n").is_err());
    }
}
