//! Pinned third-party binaries from PyPI: the stock DuckDB CLI, the stock
//! DuckLake and sqlite_scanner extensions, and the DuckDB Python package.
//!
//! Installed with `python3 -m pip install --target <cache>/pypi --no-deps`
//! into `$MORAINE_CACHE/pypi` (default `$HOME/.cache/moraine/pypi`). A stamp
//! file records the pinned set; when it matches and the files are present the
//! install is skipped, so `deps` is fast when warm.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::paths;

pub const DUCKDB_VERSION: &str = "v1.5.5";

/// The pinned requirement set. Changing it invalidates the stamp.
pub const REQUIREMENTS: &[&str] = &[
    "duckdb-cli==1.5.5",
    "duckdb-extension-ducklake==1.5.5",
    "duckdb-extension-sqlite-scanner==1.5.5",
    "duckdb==1.5.5",
];

const STAMP: &str = ".moraine-deps-stamp";

/// Paths of the installed third-party pieces.
#[derive(Debug, Clone)]
pub struct Deps {
    /// `duckdb_cli/duckdb`: the stock DuckDB v1.5.5 CLI.
    pub cli: PathBuf,
    /// `duckdb_extension_ducklake/extensions/v1.5.5/ducklake.duckdb_extension`.
    pub ducklake_ext: PathBuf,
    /// `duckdb_extension_sqlite_scanner/extensions/v1.5.5/sqlite_scanner.duckdb_extension`.
    pub sqlite_ext: PathBuf,
    /// Directory to put on `PYTHONPATH` to `import duckdb` (1.5.5).
    pub python_path: PathBuf,
}

pub fn pypi_dir() -> PathBuf {
    paths::cache_root().join("pypi")
}

fn layout(dir: &Path) -> Deps {
    Deps {
        cli: dir.join("duckdb_cli").join("duckdb"),
        ducklake_ext: dir
            .join("duckdb_extension_ducklake/extensions")
            .join(DUCKDB_VERSION)
            .join("ducklake.duckdb_extension"),
        sqlite_ext: dir
            .join("duckdb_extension_sqlite_scanner/extensions")
            .join(DUCKDB_VERSION)
            .join("sqlite_scanner.duckdb_extension"),
        python_path: dir.to_path_buf(),
    }
}

fn stamp_text() -> String {
    stamp(REQUIREMENTS.iter().copied())
}

/// The Python that runs pip and the tests: `$PYTHON`, else `python3`.
pub(crate) fn python() -> std::ffi::OsString {
    std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into())
}

/// The interpreter's cache tag (`cpython-311`), or `unknown` when it cannot be asked. A binary
/// wheel fits one interpreter (DuckDB's is cp311-only), so every stamp names it: after an
/// interpreter upgrade the sets are installed again.
fn interpreter() -> &'static str {
    static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TAG.get_or_init(|| {
        Command::new(python())
            .args(["-c", "import sys; print(sys.implementation.cache_tag)"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "unknown".to_string())
    })
}

/// A stamp: the lines of a pinned set, then the interpreter it was installed for.
fn stamp<'a>(lines: impl IntoIterator<Item = &'a str>) -> String {
    let mut s: String = lines.into_iter().map(|l| format!("{l}\n")).collect();
    s.push_str(&format!("python: {}\n", interpreter()));
    s
}

fn complete(dir: &Path) -> bool {
    let d = layout(dir);
    std::fs::read_to_string(dir.join(STAMP)).ok().as_deref() == Some(stamp_text().as_str())
        && d.cli.is_file()
        && d.ducklake_ext.is_file()
        && d.sqlite_ext.is_file()
        && d.python_path.join("duckdb").is_dir()
}

/// The installed deps, if `cargo xtask deps` has completed (no install attempted).
#[allow(dead_code)] // used by tests
pub fn installed() -> Option<Deps> {
    let dir = pypi_dir();
    complete(&dir).then(|| layout(&dir))
}

/// Path of the installed stock DuckLake extension, if any.
#[allow(dead_code)] // used by tests
pub fn installed_ducklake_ext() -> Option<PathBuf> {
    installed().map(|d| d.ducklake_ext)
}

/// Install (if needed) and return the pinned deps.
pub fn ensure() -> Result<Deps, String> {
    let dir = pypi_dir();
    if complete(&dir) {
        return Ok(layout(&dir));
    }
    let parent = dir.parent().expect("pypi dir has a parent");
    std::fs::create_dir_all(parent).map_err(|e| format!("create {}: {e}", parent.display()))?;
    // Install into a scratch directory and rename it into place, so an
    // interrupted install never leaves a half-filled cache behind.
    let tmp = parent.join(format!("pypi.tmp-{}", std::process::id()));
    pip_install_scratch(&tmp, &dir, REQUIREMENTS)
        .map_err(|status| format!("pip install failed ({status})"))?;
    std::fs::write(tmp.join(STAMP), stamp_text()).map_err(|e| format!("write stamp: {e}"))?;
    if !complete(&tmp) {
        let d = layout(&tmp);
        return Err(format!(
            "pip install finished but expected files are missing: {} {} {}",
            d.cli.display(),
            d.ducklake_ext.display(),
            d.sqlite_ext.display()
        ));
    }
    move_into_place(&tmp, &dir)?;
    Ok(layout(&dir))
}

/// Stock extensions that only the conformance suite needs (`require httpfs`, `tpch`,
/// `spatial`): pinned like the rest, installed on demand into their own directory
/// (`$MORAINE_CACHE/pypi-extras`) so that the main set's stamp is untouched.
pub const EXTRA_EXTENSIONS: &[(&str, &str)] = &[
    ("httpfs", "duckdb-extension-httpfs==1.5.5"),
    ("tpch", "duckdb-extension-tpch==1.5.5"),
    ("spatial", "duckdb-extension-spatial==1.5.5"),
];

pub fn extras_dir() -> PathBuf {
    paths::cache_root().join("pypi-extras")
}

fn extra_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("duckdb_extension_{name}/extensions"))
        .join(DUCKDB_VERSION)
        .join(format!("{name}.duckdb_extension"))
}

fn extras_stamp_text() -> String {
    stamp(
        EXTRA_EXTENSIONS
            .iter()
            .map(|(_, req)| *req)
            .chain(["extras"]),
    )
}

/// Install (if needed) the extra extensions; returns (name, path) of each.
pub fn ensure_extras() -> Result<Vec<(String, PathBuf)>, String> {
    let dir = extras_dir();
    let listed = || -> Vec<(String, PathBuf)> {
        EXTRA_EXTENSIONS
            .iter()
            .map(|(name, _)| (name.to_string(), extra_path(&dir, name)))
            .collect()
    };
    let stamp_ok = std::fs::read_to_string(dir.join(STAMP)).ok().as_deref()
        == Some(extras_stamp_text().as_str());
    if stamp_ok && listed().iter().all(|(_, p)| p.is_file()) {
        return Ok(listed());
    }
    let parent = dir.parent().expect("extras dir has a parent");
    std::fs::create_dir_all(parent).map_err(|e| format!("create {}: {e}", parent.display()))?;
    let tmp = parent.join(format!("pypi-extras.tmp-{}", std::process::id()));
    let reqs: Vec<&str> = EXTRA_EXTENSIONS.iter().map(|(_, r)| *r).collect();
    pip_install_scratch(&tmp, &dir, &reqs)
        .map_err(|status| format!("pip install of the extra extensions failed ({status})"))?;
    std::fs::write(tmp.join(STAMP), extras_stamp_text())
        .map_err(|e| format!("write stamp: {e}"))?;
    move_into_place(&tmp, &dir)?;
    let got = listed();
    if let Some((_, p)) = got.iter().find(|(_, p)| !p.is_file()) {
        return Err(format!(
            "pip install finished but {} is missing",
            p.display()
        ));
    }
    Ok(got)
}

/// The S3-compatible server the S3 tests run against (`moto_server`, S3 only: moto's `s3`
/// extra and the Flask pieces of its `server` extra), every wheel pinned: pip installs them
/// without resolving anything. Installed into `$MORAINE_CACHE/pypi-moto`.
pub const MOTO_REQUIREMENTS: &[&str] = &[
    "moto==5.2.5",
    "boto3==1.44.8",
    "botocore==1.44.8",
    "s3transfer==0.19.3",
    "jmespath==1.1.0",
    "python_dateutil==2.9.0.post0",
    "six==1.17.0",
    "urllib3==2.8.0",
    "cryptography==50.0.2",
    "cffi==2.1.1",
    "pycparser==3.12",
    "requests==2.34.2",
    "certifi==2026.10.19.post1",
    "charset_normalizer==3.5.3",
    "idna==3.20",
    "xmltodict==1.0.4",
    "werkzeug==3.1.9",
    "markupsafe==3.0.4",
    "responses==0.26.3",
    "pyyaml==6.0.4",
    "py_partiql_parser==0.6.3",
    "flask==3.1.3",
    "flask_cors==6.0.5",
    "blinker==1.9.0",
    "click==8.5.1",
    "itsdangerous==2.2.0",
    "jinja2==3.1.6",
];

/// Install (if needed) the pinned S3 test server; returns the directory to put on
/// `PYTHONPATH` for `python3 -m moto.server`.
pub fn ensure_moto() -> Result<PathBuf, String> {
    ensure_set("pypi-moto", MOTO_REQUIREMENTS, Path::new("moto/server.py"))
}

/// What a process running against the S3 test server needs in its environment (installing the
/// pinned pieces if needed): MOTO_PYTHONPATH (the pinned moto), HTTPFS_EXT (the pinned httpfs
/// extension), NO_PROXY for the loopback address, and every proxy variable emptied (DuckDB's
/// `http_proxy` setting starts out as HTTP_PROXY, and moraine sends every request through it), so
/// nothing leaves the machine through a proxy the environment names. (On a machine that needs a
/// proxy to reach anything, a test that fetched a remote URL through httpfs would fail here;
/// none does: the tests reach 127.0.0.1 only.)
pub fn s3_test_env() -> Result<Vec<(&'static str, std::ffi::OsString)>, String> {
    let moto = ensure_moto().map_err(|e| format!("the S3 test server: {e}"))?;
    let httpfs = ensure_extras()
        .map_err(|e| format!("the httpfs extension: {e}"))?
        .into_iter()
        .find(|(n, _)| n == "httpfs")
        .map(|(_, p)| p)
        .ok_or("the httpfs extension is not among the pinned extras")?;
    Ok(vec![
        ("MOTO_PYTHONPATH", moto.into_os_string()),
        ("HTTPFS_EXT", httpfs.into_os_string()),
        ("NO_PROXY", "127.0.0.1,localhost".into()),
        ("no_proxy", "127.0.0.1,localhost".into()),
        ("HTTP_PROXY", "".into()),
        ("http_proxy", "".into()),
        ("HTTPS_PROXY", "".into()),
        ("https_proxy", "".into()),
        ("ALL_PROXY", "".into()),
        ("all_proxy", "".into()),
    ])
}

/// Install (if needed) a pinned set of wheels into `$MORAINE_CACHE/<name>` (pip into a scratch
/// directory, a stamp naming the set, a rename into place) and return that directory; `probe`
/// is a file the install must leave, relative to it.
pub(crate) fn ensure_set(name: &str, reqs: &[&str], probe: &Path) -> Result<PathBuf, String> {
    let dir = paths::cache_root().join(name);
    let wanted = stamp(reqs.iter().copied());
    if std::fs::read_to_string(dir.join(STAMP)).ok().as_deref() == Some(wanted.as_str())
        && dir.join(probe).is_file()
    {
        return Ok(dir);
    }
    let parent = dir.parent().expect("the cache dir has a parent");
    std::fs::create_dir_all(parent).map_err(|e| format!("create {}: {e}", parent.display()))?;
    let tmp = parent.join(format!("{name}.tmp-{}", std::process::id()));
    pip_install_scratch(&tmp, &dir, reqs)
        .map_err(|status| format!("pip install into {name} failed ({status})"))?;
    std::fs::write(tmp.join(STAMP), &wanted).map_err(|e| format!("write stamp: {e}"))?;
    if !tmp.join(probe).is_file() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(format!(
            "pip install into {name} finished but {} is missing",
            probe.display()
        ));
    }
    move_into_place(&tmp, &dir)?;
    Ok(dir)
}

/// The wheels a fresh virtual environment installs moraine's wheel beside (DuckDB's Python
/// package and DuckLake's, pinned), downloaded once into `$MORAINE_CACHE/wheelhouse` so the
/// tests' `pip install` reads them from there (`--no-index --find-links`), never from the network.
pub const WHEELHOUSE: &[&str] = &["duckdb==1.5.5", "duckdb-extension-ducklake==1.5.5"];

/// Download (if needed) [`WHEELHOUSE`] and return its directory.
pub fn ensure_wheelhouse() -> Result<PathBuf, String> {
    let dir = paths::cache_root().join("wheelhouse");
    let wanted = stamp(WHEELHOUSE.iter().copied());
    if std::fs::read_to_string(dir.join(STAMP)).ok().as_deref() == Some(wanted.as_str()) {
        return Ok(dir);
    }
    let parent = dir.parent().expect("the cache dir has a parent");
    std::fs::create_dir_all(parent).map_err(|e| format!("create {}: {e}", parent.display()))?;
    let tmp = parent.join(format!("wheelhouse.tmp-{}", std::process::id()));
    pip_scratch("download", &tmp, &dir, WHEELHOUSE)
        .map_err(|status| format!("pip download into the wheelhouse failed ({status})"))?;
    std::fs::write(tmp.join(STAMP), &wanted).map_err(|e| format!("write stamp: {e}"))?;
    move_into_place(&tmp, &dir)?;
    Ok(dir)
}

/// SQL that keeps DuckDB from installing or auto-loading anything by itself:
/// there is no network here except PyPI, and every extension must be the one
/// we LOAD by path. The extension directory points at a scratch dir so
/// nothing under `~/.duckdb/extensions` is picked up either.
pub fn no_autoload_sql(extension_dir: &Path) -> String {
    format!(
        "SET autoinstall_known_extensions = false;\n\
         SET autoload_known_extensions = false;\n\
         SET extension_directory = '{}';\n",
        sql_escape(&extension_dir.display().to_string())
    )
}

/// Escape a string for use inside a single-quoted SQL literal.
pub fn sql_escape(s: &str) -> String {
    s.replace('\'', "''")
}

/// Check that the CLI is v1.5.5 and loads the stock DuckLake and sqlite
/// extensions by path, with autoinstall/autoload off.
pub fn check(d: &Deps) -> Result<(), String> {
    let out = Command::new(&d.cli)
        .arg("--version")
        .output()
        .map_err(|e| format!("running {}: {e}", d.cli.display()))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !version.starts_with(DUCKDB_VERSION) {
        return Err(format!(
            "{} --version printed {version:?}, want {DUCKDB_VERSION}",
            d.cli.display()
        ));
    }
    let scratch = paths::fresh_temp_dir("moraine-deps-check").map_err(|e| e.to_string())?;
    let sql = format!(
        "{}LOAD '{}';\nLOAD '{}';\n\
         SELECT extension_name FROM duckdb_extensions() \
         WHERE loaded AND extension_name IN ('ducklake', 'sqlite_scanner') ORDER BY 1;\n",
        no_autoload_sql(&scratch.join("ext")),
        sql_escape(&d.ducklake_ext.display().to_string()),
        sql_escape(&d.sqlite_ext.display().to_string()),
    );
    let out = Command::new(&d.cli)
        .args(["-unsigned", "-no-init", "-noheader", "-list", "-c"])
        .arg(&sql)
        .current_dir(&scratch)
        .output()
        .map_err(|e| format!("running {}: {e}", d.cli.display()))?;
    let _ = std::fs::remove_dir_all(&scratch);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let loaded: Vec<&str> = stdout.lines().collect();
    if !out.status.success() || loaded != ["ducklake", "sqlite_scanner"] {
        return Err(format!(
            "stock CLI failed to LOAD the extensions by path: status {}, stdout {:?}, stderr {:?}",
            out.status,
            stdout,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    eprintln!("xtask deps: {version}; ducklake and sqlite_scanner load by path");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_names_the_set_and_the_interpreter() {
        let tag = interpreter();
        assert_ne!(
            tag, "unknown",
            "python3 could not be asked for its cache tag"
        );
        assert_eq!(
            stamp(["a==1", "b==2"]),
            format!("a==1\nb==2\npython: {tag}\n")
        );
        assert!(stamp_text().starts_with("duckdb-cli==1.5.5\n"));
    }

    /// Strip the stock DuckLake extension's signed footer, write our own
    /// unsigned one, and LOAD the result into the stock CLI: the real DuckDB
    /// loader accepts what `footer::append_footer` writes.
    #[test]
    fn refootered_extension_loads_in_stock_cli() {
        let Some(d) = installed() else {
            eprintln!("skipped: deps not installed (cargo xtask deps)");
            return;
        };
        let bytes = std::fs::read(&d.ducklake_ext).unwrap();
        let lib = &bytes[..bytes.len() - crate::footer::FOOTER_SIZE];
        let file =
            crate::footer::append_footer(lib, &crate::footer::Metadata::moraine("v9.9.9")).unwrap();
        let scratch = paths::fresh_temp_dir("moraine-footer-test").unwrap();
        // DuckDB derives the init symbol from the file name, so keep "ducklake"
        let path = scratch.join("ducklake.duckdb_extension");
        std::fs::write(&path, file).unwrap();
        let run = |extra: &[&str], p: &Path| {
            let sql = format!(
                "{}LOAD '{}';\n\
                 SELECT extension_version FROM duckdb_extensions() WHERE extension_name = 'ducklake';\n",
                no_autoload_sql(&scratch.join("ext")),
                sql_escape(&p.display().to_string())
            );
            Command::new(&d.cli)
                .args(extra)
                .args(["-no-init", "-noheader", "-list", "-c"])
                .arg(&sql)
                .output()
                .unwrap()
        };

        let out = run(&["-unsigned"], &path);
        assert!(
            out.status.success(),
            "stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "v9.9.9");

        // without -unsigned, DuckDB refuses our unsigned footer...
        let out = run(&[], &path);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("signature"),
            "expected a signature error, got {err:?}"
        );
        // ...but accepts the signed stock file
        let out = run(&[], &d.ducklake_ext);
        assert!(
            out.status.success(),
            "stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let _ = std::fs::remove_dir_all(&scratch);
    }
}

/// `pip install --target <tmp>` of pinned wheels (no dependencies, binaries only) into a fresh
/// scratch directory `tmp`, destined for `dir`. On failure the scratch directory is removed and
/// the error says what failed (the caller names which install it was).
pub(crate) fn pip_install_scratch(tmp: &Path, dir: &Path, reqs: &[&str]) -> Result<(), String> {
    pip_scratch("install", tmp, dir, reqs)
}

/// `pip install --target <tmp>` or `pip download --dest <tmp>` (`verb`) of pinned wheels (no
/// dependencies, binaries only) into a fresh scratch directory `tmp`, destined for `dir`.
fn pip_scratch(verb: &str, tmp: &Path, dir: &Path, reqs: &[&str]) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(tmp);
    eprintln!(
        "xtask deps: pip {verb} {} into {}",
        reqs.join(" "),
        dir.display()
    );
    let python = python();
    let status = Command::new(&python)
        .args(["-m", "pip", verb, "--quiet", "--disable-pip-version-check"])
        .env("PIP_ROOT_USER_ACTION", "ignore")
        .args(["--no-deps", "--only-binary=:all:"])
        .arg(if verb == "install" {
            "--target"
        } else {
            "--dest"
        })
        .arg(tmp)
        .args(reqs)
        .status()
        .map_err(|e| format!("running {python:?} -m pip: {e}"))?;
    if !status.success() {
        let _ = std::fs::remove_dir_all(tmp);
        return Err(status.to_string());
    }
    Ok(())
}

/// Replaces `dir` with the completed scratch directory `tmp`.
pub(crate) fn move_into_place(tmp: &Path, dir: &Path) -> Result<(), String> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("remove stale {}: {e}", dir.display()))?;
    }
    std::fs::rename(tmp, dir).map_err(|e| format!("rename into {}: {e}", dir.display()))
}
