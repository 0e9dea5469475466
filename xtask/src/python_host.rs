//! Scenarios hosted by the pinned `duckdb==1.5.5` Python package, for what the stock CLI
//! cannot do (several connections in one process). Each script gets MORAINE_EXT,
//! DUCKLAKE_EXT and a fresh TEST_DIR, prints one line per check and exits non-zero on failure.

use std::path::Path;
use std::process::Command;

use crate::scenario::{Env, Failure, FileOutcome};

pub fn run_script(path: &Path, env: &Env) -> FileOutcome {
    let fail = |message: String| {
        FileOutcome::Failed(vec![Failure {
            line: 0,
            sql: String::new(),
            message,
        }])
    };
    let Some(moraine) = &env.moraine_ext else {
        return FileOutcome::Skipped("needs the moraine extension".into());
    };
    let test_dir = match crate::paths::fresh_temp_dir("moraine-e2e-py") {
        Ok(d) => d,
        Err(e) => return fail(format!("temp dir: {e}")),
    };
    // the interpreter the dependencies were installed for (`$PYTHON`, else python3)
    let python = crate::deps::python();
    let mut cmd = Command::new(&python);
    cmd.arg(path)
        .env("PYTHONPATH", &env.deps.python_path)
        .env("MORAINE_EXT", moraine)
        .env("DUCKLAKE_EXT", &env.deps.ducklake_ext)
        .env("SQLITE_EXT", &env.deps.sqlite_ext)
        .env("TEST_DIR", &test_dir);
    // a scenario that says `# needs: moto_server` gets the pinned S3 test server and httpfs
    let source = std::fs::read_to_string(path).unwrap_or_default();
    if source.lines().any(|l| l.trim() == "# needs: moto_server") {
        match crate::deps::s3_test_env() {
            Ok(vars) => {
                cmd.envs(vars);
            }
            Err(e) => return fail(e),
        }
    }
    // a scenario that says `# needs: moraine_dist` gets moraine as users receive it: an extension
    // repository and a wheel built from this extension (MORAINE_REPO, MORAINE_WHEEL) by the code
    // behind `cargo xtask package --repo` and `cargo xtask wheel`, the stock CLI (DUCKDB_CLI) and
    // a local wheelhouse for pip (WHEELHOUSE)
    if source.lines().any(|l| l.trim() == "# needs: moraine_dist") {
        let dist = (|| -> Result<Vec<(&'static str, std::ffi::OsString)>, String> {
            let version = crate::dist::extension_version(moraine)?;
            let repo = test_dir.join("repo");
            crate::dist::repository(moraine, &repo)?;
            let wheel = crate::dist::wheel(moraine, &test_dir.join("wheels"))?;
            Ok(vec![
                ("MORAINE_REPO", repo.into_os_string()),
                ("MORAINE_WHEEL", wheel.into_os_string()),
                ("MORAINE_VERSION", version.into()),
                ("DUCKDB_CLI", env.deps.cli.clone().into_os_string()),
                (
                    "WHEELHOUSE",
                    crate::deps::ensure_wheelhouse()?.into_os_string(),
                ),
            ])
        })();
        match dist {
            Ok(vars) => {
                cmd.envs(vars);
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&test_dir);
                return fail(e);
            }
        }
    }
    let output = cmd.output();
    let output = match output {
        Ok(o) => o,
        Err(e) => return fail(format!("running {}: {e}", python.to_string_lossy())),
    };
    if output.status.success() {
        let _ = std::fs::remove_dir_all(&test_dir);
        return FileOutcome::Passed;
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let mut failures: Vec<Failure> = stdout
        .lines()
        .filter(|l| l.starts_with("FAIL"))
        .map(|l| Failure {
            line: 0,
            sql: String::new(),
            message: l.to_string(),
        })
        .collect();
    if failures.is_empty() {
        let tail: Vec<&str> = stderr
            .lines()
            .rev()
            .take(15)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        failures.push(Failure {
            line: 0,
            sql: String::new(),
            message: format!(
                "exited with {} (test dir kept: {}):\n{}",
                output.status,
                test_dir.display(),
                tail.join("\n")
            ),
        });
    }
    FileOutcome::Failed(failures)
}
