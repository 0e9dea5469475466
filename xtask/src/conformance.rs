//! `cargo xtask conformance`: DuckLake's own sqllogictest suite against moraine and, for
//! comparison, against DuckLake's DuckDB-file and SQLite catalogs.
//!
//! The runner is `tests/conformance/runner.py`, hosted by the pinned `duckdb==1.5.5` Python
//! package (one process per test file, so several connections, threads and crash isolation
//! come for free). This command installs the pinned pieces, finds or builds the moraine
//! extension when moraine is among the catalogs, and hands the runner their paths; every other
//! argument goes to the runner unchanged (`--help` lists them).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{deps, ext, paths};

/// The catalogs named by `--catalog` flags (default moraine), to know what to prepare.
fn catalogs(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = if a == "--catalog" {
            it.next().cloned().unwrap_or_default()
        } else if let Some(v) = a.strip_prefix("--catalog=") {
            v.to_string()
        } else {
            continue;
        };
        for c in v.split(',') {
            let c = c.trim();
            if c == "all" {
                out.extend(["moraine", "duckdb", "sqlite"].map(String::from));
            } else {
                out.push(c.to_string());
            }
        }
    }
    if out.is_empty() {
        out.push("moraine".into());
    }
    out
}

fn has_flag(args: &[String], flag: &str) -> bool {
    args.iter()
        .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
}

/// Where DuckLake's suite is read from by default: `shared/ducklake-tests` beside the workspace
/// or beside one of its ancestors, else beside the repository this clone was made from (a CI
/// clone elsewhere still finds the suite next to its origin). The runner reports a missing one.
fn default_suite(root: &Path) -> PathBuf {
    let beside = |dir: &Path| dir.join("shared").join("ducklake-tests");
    let found = |p: &PathBuf| p.join("test").join("sql").is_dir();
    if let Some(p) = root.ancestors().skip(1).map(beside).find(found) {
        return p;
    }
    let origin = Command::new("git")
        .args(["config", "--get", "remote.origin.url"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if let Some(origin) = origin {
        let origin = PathBuf::from(origin.strip_prefix("file://").unwrap_or(&origin));
        if let Some(p) = origin.ancestors().skip(1).map(beside).find(found) {
            return p;
        }
    }
    root.join("../shared/ducklake-tests")
}

/// `cargo xtask conformance --selftest`: the runner's own checks (no moraine, no suite).
pub fn selftest() -> Result<bool, String> {
    run(&["--selftest".to_string()])
}

pub fn run(args: &[String]) -> Result<bool, String> {
    let root = paths::workspace_root();
    let runner = root.join("tests/conformance/runner.py");
    let help = args.iter().any(|a| a == "-h" || a == "--help");
    let selftest = args.iter().any(|a| a == "--selftest");
    let d = deps::ensure()?;
    deps::check(&d)?;
    let mut cmd = Command::new(std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into()));
    cmd.arg(&runner)
        .env("PYTHONPATH", &d.python_path)
        .arg("--ducklake-ext")
        .arg(&d.ducklake_ext)
        .arg("--sqlite-ext")
        .arg(&d.sqlite_ext);
    if !help && !selftest {
        match deps::ensure_extras() {
            Ok(extras) => {
                for (name, path) in extras {
                    cmd.arg("--ext").arg(format!("{name}={}", path.display()));
                }
            }
            Err(e) => eprintln!(
                "xtask conformance: warning: {e}; tests that require httpfs, tpch or spatial will skip"
            ),
        }
        if catalogs(args).iter().any(|c| c == "moraine") {
            let moraine = match std::env::var_os("MORAINE_EXTENSION") {
                Some(p) => PathBuf::from(p),
                None => ext::build()?,
            };
            cmd.arg("--moraine-ext").arg(moraine);
        }
    }
    if !has_flag(args, "--suite") && !selftest {
        let suite = std::env::var_os("MORAINE_DUCKLAKE_TESTS")
            .map(PathBuf::from)
            .unwrap_or_else(|| default_suite(&root));
        cmd.arg("--suite").arg(suite);
    }
    if !has_flag(args, "--out") {
        cmd.arg("--out").arg(root.join("target/conformance"));
    }
    cmd.args(args);
    let status = cmd
        .status()
        .map_err(|e| format!("running {}: {e}", runner.display()))?;
    Ok(status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn the_suite_is_found_beside_an_ancestor_of_the_workspace() {
        let base = std::env::temp_dir().join(format!("moraine-suite-{}", std::process::id()));
        let suite = base.join("shared/ducklake-tests");
        std::fs::create_dir_all(suite.join("test/sql")).unwrap();
        let workspace = base.join("ci/clones/moraine");
        std::fs::create_dir_all(&workspace).unwrap();
        assert_eq!(default_suite(&workspace), suite);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn catalogs_default_to_moraine_and_expand_all() {
        assert_eq!(catalogs(&v(&["general"])), v(&["moraine"]));
        assert_eq!(
            catalogs(&v(&["--catalog", "duckdb", "--catalog=sqlite,moraine"])),
            v(&["duckdb", "sqlite", "moraine"])
        );
        assert_eq!(
            catalogs(&v(&["--catalog", "all"])),
            v(&["moraine", "duckdb", "sqlite"])
        );
    }
}
