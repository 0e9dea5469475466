//! `cargo xtask e2e`: run scenario files through the stock DuckDB CLI.
//!
//! Each scenario file gets a fresh temp directory (`__TEST_DIR__`) and a CLI
//! process started with `-unsigned`, into which the runner first sends a
//! prelude: no autoinstall/autoload, a private extension directory, and
//! `LOAD` by path of the stock DuckLake and sqlite_scanner extensions and (for
//! moraine scenarios) the freshly built moraine extension. Scenario files
//! therefore start with `ATTACH`.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Instant;

use crate::cli_host::{self, CliConfig, CliHost, Outcome, Reply};
use crate::deps;
pub use crate::scenario::{Env, Failure, FileOutcome};
use crate::slt::{self, Expect, Kind, SortMode};

fn substitute(s: &str, test_dir: &Path, env: &Env) -> String {
    let td = test_dir.display().to_string();
    let moraine = env
        .moraine_ext
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    s.replace("__TEST_DIR__", &td)
        .replace("${TEST_DIR}", &td)
        .replace("${MORAINE_EXT}", &moraine)
        .replace(
            "${DUCKLAKE_EXT}",
            &env.deps.ducklake_ext.display().to_string(),
        )
        .replace("${SQLITE_EXT}", &env.deps.sqlite_ext.display().to_string())
}

/// The SQL each CLI process runs before a scenario's first record.
pub fn prelude(env: &Env, scratch: &Path) -> Vec<String> {
    let lit = |p: &Path| deps::sql_escape(&p.display().to_string());
    let mut v: Vec<String> = deps::no_autoload_sql(&scratch.join(".duckdb_extensions"))
        .lines()
        .map(String::from)
        .collect();
    v.push(format!("LOAD '{}';", lit(&env.deps.ducklake_ext)));
    v.push(format!("LOAD '{}';", lit(&env.deps.sqlite_ext)));
    if let Some(m) = &env.moraine_ext {
        v.push(format!("LOAD '{}';", lit(m)));
    }
    v
}

fn start(env: &Env, test_dir: &Path) -> Result<CliHost, String> {
    let cfg = CliConfig {
        cli: env.deps.cli.clone(),
        args: vec!["-unsigned".into()],
        cwd: test_dir.to_path_buf(),
        env: vec![],
    };
    let mut host = CliHost::spawn(&cfg)?;
    for sql in prelude(env, test_dir) {
        match host.exec(&sql, env.timeout) {
            Outcome::Done(r) => {
                if let Some(e) = r.error() {
                    return Err(format!("prelude `{sql}` failed: {e}"));
                }
            }
            other => return Err(format!("prelude `{sql}`: {}", describe_abnormal(&other))),
        }
    }
    Ok(host)
}

fn describe_abnormal(o: &Outcome) -> String {
    match o {
        Outcome::Done(_) => "done".into(),
        Outcome::Died { partial, status } => format!(
            "the CLI process died ({}){}",
            status
                .map(describe_status)
                .unwrap_or_else(|| "status unknown".into()),
            tail(&partial.stderr)
        ),
        Outcome::TimedOut { partial } => {
            format!(
                "no reply within the timeout; CLI killed{}",
                tail(&partial.stderr)
            )
        }
    }
}

fn describe_status(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(sig)) => format!(
            "killed by signal {sig}{}",
            if s.core_dumped() { ", core dumped" } else { "" }
        ),
        _ => format!("{s}"),
    }
}

fn tail(stderr: &str) -> String {
    let t = stderr.trim();
    if t.is_empty() {
        return String::new();
    }
    let lines: Vec<&str> = t.lines().collect();
    let start = lines.len().saturating_sub(8);
    format!("; stderr: {:?}", lines[start..].join("\n"))
}

/// A CLI exit that is not an orderly 0 (all ok) or 1 (some statement failed).
fn abnormal_exit(status: Option<ExitStatus>) -> Option<String> {
    match status {
        Some(s) if matches!(s.code(), Some(0) | Some(1)) => None,
        Some(s) => Some(describe_status(s)),
        None => Some("did not exit".into()),
    }
}

/// Render a cell the way DuckDB's sqllogictest runner does.
pub fn render(cell: &cli_host::Cell) -> String {
    match cell {
        None => "NULL".into(),
        Some(s) if s.is_empty() => "(empty)".into(),
        Some(s) => s.clone(),
    }
}

/// Compare a query's rows with the record's expected lines. `Err` explains the mismatch.
pub fn compare(
    types: &str,
    sort: SortMode,
    expected: &[String],
    rows: &[Vec<cli_host::Cell>],
) -> Result<(), String> {
    let ncols = types.chars().count();
    let mut actual: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(render).collect())
        .collect();
    if let Some(bad) = actual.iter().find(|r| r.len() != ncols) {
        return Err(format!(
            "expected {ncols} column(s) ({types}), got {}: {:?}",
            bad.len(),
            bad.join("\t")
        ));
    }
    // DuckDB accepts either one row per line (tab-separated) or one value per line.
    let value_wise = ncols > 1
        && !expected.is_empty()
        && expected.len() == actual.len() * ncols
        && expected.iter().all(|l| !l.contains('\t'));
    let mut want: Vec<Vec<String>> = if value_wise {
        expected.chunks(ncols).map(|c| c.to_vec()).collect()
    } else {
        expected
            .iter()
            .map(|l| l.split('\t').map(String::from).collect())
            .collect()
    };
    match sort {
        SortMode::NoSort => {}
        SortMode::RowSort => {
            actual.sort();
            want.sort();
        }
        SortMode::ValueSort => {
            let mut a: Vec<String> = actual.concat();
            let mut w: Vec<String> = want.concat();
            a.sort();
            w.sort();
            actual = a.into_iter().map(|v| vec![v]).collect();
            want = w.into_iter().map(|v| vec![v]).collect();
        }
    }
    if actual == want {
        return Ok(());
    }
    let lines =
        |rows: &[Vec<String>]| -> Vec<String> { rows.iter().map(|r| r.join("\t")).collect() };
    Err(format!(
        "expected {:?}, actual {:?}",
        lines(&want),
        lines(&actual)
    ))
}

fn one_line(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Run one scenario file.
pub fn run_file(path: &Path, env: &Env) -> FileOutcome {
    if path.extension().is_some_and(|e| e == "py") {
        return crate::python_host::run_script(path, env);
    }
    let script = match slt::parse_file(path) {
        Ok(s) => s,
        Err(e) => {
            return FileOutcome::Failed(vec![Failure {
                line: 0,
                sql: String::new(),
                message: e,
            }])
        }
    };
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("scenario");
    let test_dir = match crate::paths::fresh_temp_dir(&format!("moraine-e2e-{stem}")) {
        Ok(d) => d,
        Err(e) => {
            return FileOutcome::Failed(vec![Failure {
                line: 0,
                sql: String::new(),
                message: format!("temp dir: {e}"),
            }])
        }
    };
    let mut failures = Vec::new();
    let outcome = run_records(&script, env, &test_dir, &mut failures);
    match outcome {
        Some(reason) => {
            let _ = std::fs::remove_dir_all(&test_dir);
            FileOutcome::Skipped(reason)
        }
        None if failures.is_empty() => {
            let _ = std::fs::remove_dir_all(&test_dir);
            FileOutcome::Passed
        }
        None => {
            failures.push(Failure {
                line: 0,
                sql: String::new(),
                message: format!("(test dir kept: {})", test_dir.display()),
            });
            FileOutcome::Failed(failures)
        }
    }
}

/// Returns `Some(reason)` if the file is skipped.
fn run_records(
    script: &slt::Script,
    env: &Env,
    test_dir: &Path,
    failures: &mut Vec<Failure>,
) -> Option<String> {
    let mut host: Option<CliHost> = None;
    let fail = |failures: &mut Vec<Failure>, line: usize, sql: &str, message: String| {
        failures.push(Failure {
            line,
            sql: one_line(sql),
            message,
        });
    };

    for rec in &script.records {
        let line = rec.line;
        let (sql, connection) = match &rec.kind {
            Kind::Statement {
                sql, connection, ..
            }
            | Kind::Query {
                sql, connection, ..
            } => (substitute(sql, test_dir, env), connection.clone()),
            Kind::Restart => {
                if let Some(h) = host.take() {
                    let (status, rest) = h.close(env.timeout);
                    if let Some(why) = abnormal_exit(status) {
                        fail(
                            failures,
                            line,
                            "restart",
                            format!("CLI exited abnormally: {why}{}", tail(&rest.stderr)),
                        );
                    }
                }
                continue;
            }
            Kind::Require(what) => {
                if !env.available(what) {
                    return Some(format!("require {what}"));
                }
                continue;
            }
            // the parser applies `mode skip`/`mode unskip` (and `halt`) itself
            Kind::Mode(m) => {
                fail(failures, line, "", format!("unsupported mode {m:?}"));
                continue;
            }
            Kind::Unsupported(what) => {
                fail(failures, line, "", format!("unsupported record: {what}"));
                continue;
            }
        };
        if let Some(c) = connection {
            fail(
                failures,
                line,
                &sql,
                format!("named connections ({c}) are not supported"),
            );
            continue;
        }
        if host.is_none() {
            match start(env, test_dir) {
                Ok(h) => host = Some(h),
                Err(e) => {
                    fail(
                        failures,
                        line,
                        &sql,
                        format!("could not start the CLI: {e}"),
                    );
                    return None;
                }
            }
        }
        let h = host.as_mut().unwrap();
        let reply: Reply = match h.exec(&sql, env.timeout) {
            Outcome::Done(r) => r,
            other => {
                fail(failures, line, &sql, describe_abnormal(&other));
                return None; // the process is gone: later records would only cascade
            }
        };
        match &rec.kind {
            Kind::Statement {
                expect: Expect::Ok, ..
            } => {
                if let Some(e) = reply.error() {
                    fail(
                        failures,
                        line,
                        &sql,
                        format!("expected success, got error: {e:?}"),
                    );
                }
            }
            Kind::Statement {
                expect: Expect::Error(want),
                ..
            } => match (reply.error(), want) {
                (None, _) => fail(
                    failures,
                    line,
                    &sql,
                    "expected an error, statement succeeded".into(),
                ),
                (Some(e), Some(w)) => {
                    let w = substitute(w, test_dir, env);
                    if !e.contains(&w) {
                        fail(
                            failures,
                            line,
                            &sql,
                            format!("expected error containing {w:?}, got {e:?}"),
                        );
                    }
                }
                (Some(_), None) => {}
            },
            Kind::Query {
                types,
                sort,
                expected,
                ..
            } => {
                if let Some(e) = reply.error() {
                    fail(failures, line, &sql, format!("query failed: {e:?}"));
                } else if let Some(exp) = expected {
                    let exp: Vec<String> =
                        exp.iter().map(|l| substitute(l, test_dir, env)).collect();
                    let rows = cli_host::parse_rows(&reply.stdout);
                    if let Err(m) = compare(types, *sort, &exp, &rows) {
                        fail(failures, line, &sql, m);
                    }
                }
            }
            _ => unreachable!(),
        }
    }
    if let Some(h) = host.take() {
        let (status, rest) = h.close(env.timeout);
        if let Some(why) = abnormal_exit(status) {
            fail(
                failures,
                0,
                "",
                format!(
                    "CLI exited abnormally at the end: {why}{}",
                    tail(&rest.stderr)
                ),
            );
        }
    }
    None
}

/// Scenario files directly inside `dir`, sorted, filtered by substring.
pub fn scenario_files(dir: &Path, filter: Option<&str>) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(files),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    for entry in rd {
        let p = entry.map_err(|e| e.to_string())?.path();
        let is_test = p.is_file() && p.extension().is_some_and(|e| e == "test");
        if is_test && filter.is_none_or(|f| p.to_string_lossy().contains(f)) {
            files.push(p);
        }
    }
    // scripts for the Python host live in <dir>/python/
    if let Ok(rd) = std::fs::read_dir(dir.join("python")) {
        for entry in rd {
            let p = entry.map_err(|e| e.to_string())?.path();
            // `_name.py` files are shared modules, not scenarios
            let is_module = p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('_'));
            let is_script = p.is_file() && p.extension().is_some_and(|e| e == "py") && !is_module;
            if is_script && filter.is_none_or(|f| p.to_string_lossy().contains(f)) {
                files.push(p);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Files passed and failed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tally {
    pub passed: usize,
    pub failed: usize,
}

/// Run the files and print the report, closing with `<label>: N passed, N failed`.
pub fn run_all(files: &[PathBuf], env: &Env, label: &str) -> Tally {
    let root = crate::paths::workspace_root();
    let (mut passed, mut failed, mut skipped) = (0usize, 0usize, 0usize);
    for f in files {
        let shown = f.strip_prefix(&root).unwrap_or(f).display().to_string();
        let t0 = Instant::now();
        let outcome = run_file(f, env);
        let secs = t0.elapsed().as_secs_f64();
        match outcome {
            FileOutcome::Passed => {
                passed += 1;
                println!("ok    {shown} ({secs:.1}s)");
            }
            FileOutcome::Skipped(why) => {
                skipped += 1;
                println!("skip  {shown} ({why})");
            }
            FileOutcome::Failed(fs) => {
                failed += 1;
                println!("FAIL  {shown} ({secs:.1}s)");
                for x in fs {
                    if x.sql.is_empty() {
                        println!("{shown}:{}: {}", x.line, x.message);
                    } else {
                        println!("{shown}:{}: {} -- {}", x.line, x.sql, x.message);
                    }
                }
            }
        }
    }
    if skipped > 0 {
        println!("{label}: {skipped} file(s) skipped");
    }
    println!("{label}: {passed} passed, {failed} failed");
    Tally { passed, failed }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn s(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    #[test]
    fn compare_rows_nulls_empty_and_sorting() {
        let rows = vec![vec![s("2"), None], vec![s("1"), s("")]];
        let exp = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(compare(
            "IT",
            SortMode::RowSort,
            &exp(&["1\t(empty)", "2\tNULL"]),
            &rows
        )
        .is_ok());
        assert!(compare(
            "IT",
            SortMode::NoSort,
            &exp(&["1\t(empty)", "2\tNULL"]),
            &rows
        )
        .is_err());
        assert!(compare(
            "IT",
            SortMode::NoSort,
            &exp(&["2\tNULL", "1\t(empty)"]),
            &rows
        )
        .is_ok());
        // value-wise expected output
        assert!(compare(
            "IT",
            SortMode::NoSort,
            &exp(&["2", "NULL", "1", "(empty)"]),
            &rows
        )
        .is_ok());
        assert!(compare(
            "IT",
            SortMode::ValueSort,
            &exp(&["(empty)", "1", "2", "NULL"]),
            &rows
        )
        .is_ok());
        // column count is checked
        let e = compare("I", SortMode::NoSort, &exp(&["2", "1"]), &rows).unwrap_err();
        assert!(e.contains("expected 1 column"), "{e}");
        // zero rows
        assert!(compare("I", SortMode::NoSort, &[], &[]).is_ok());
        assert!(compare("I", SortMode::NoSort, &exp(&["1"]), &[]).is_err());
    }

    /// The runner reports every kind of mismatch, against the stock CLI.
    #[test]
    fn reports_failures_per_record() {
        let Some(d) = deps::installed() else {
            eprintln!("skipped: deps not installed (cargo xtask deps)");
            return;
        };
        let env = Env {
            deps: d,
            moraine_ext: None,
            timeout: Duration::from_secs(60),
        };
        let dir = crate::paths::fresh_temp_dir("moraine-e2e-selfcheck").unwrap();
        let file = dir.join("bad.test");
        std::fs::write(
            &file,
            "\
statement ok
CREATE TABLE t AS SELECT 1 AS i

statement ok
SELECT * FROM missing

statement error
SELECT 1
----
any error

statement error
SELECT * FROM missing
----
some other message

query I
SELECT i FROM t
----
2

query II
SELECT i FROM t
----
1

query I
SELECT i FROM t
----
1

restart

statement error
SELECT * FROM t
----
Table with name t does not exist

loop i 0 2

statement ok
SELECT 1

endloop
",
        )
        .unwrap();
        let failures = match run_file(&file, &env) {
            FileOutcome::Failed(f) => f,
            other => panic!("{other:?}"),
        };
        let lines: Vec<usize> = failures.iter().map(|f| f.line).collect();
        // the last entry names the kept test dir
        assert_eq!(lines, vec![4, 7, 12, 17, 22, 39, 0], "{failures:#?}");
        assert!(failures[0].message.contains("expected success"));
        assert!(failures[1].message.contains("expected an error"));
        assert!(failures[2].message.contains("some other message"));
        assert!(
            failures[3]
                .message
                .contains(r#"expected ["2"], actual ["1"]"#),
            "{:?}",
            failures[3]
        );
        assert!(failures[4].message.contains("expected 2 column"));
        assert!(failures[5]
            .message
            .contains("unsupported record: loop i 0 2"));
        let kept = failures[6]
            .message
            .trim_start_matches("(test dir kept: ")
            .trim_end_matches(')');
        let _ = std::fs::remove_dir_all(kept);
        let _ = std::fs::remove_dir_all(dir);
    }
}
