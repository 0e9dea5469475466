//! Where things live: the workspace, the cargo target directory, the cache.
//!
//! The bundled DuckDB inside `libduckdb-sys` takes ~20 minutes to compile on
//! two cores, so every cargo invocation that xtask makes shares one target
//! directory *outside* the clone: `$CARGO_TARGET_DIR` if set, otherwise
//! `$HOME/.cache/moraine/target`. A fresh clone (CI, a new work tree) then
//! reuses the compiled DuckDB instead of rebuilding it.
//!
//! Third-party binaries (DuckDB CLI, DuckLake extension, ...) are cached under
//! `$MORAINE_CACHE` (default `$HOME/.cache/moraine`), in `pypi/`, and DuckLake's test suite,
//! when it has to be fetched, in `ducklake-tests/<commit>`.

use std::env;
use std::path::{Path, PathBuf};

/// The workspace root (the directory holding the root `Cargo.toml`).
///
/// Taken from the `CARGO_MANIFEST_DIR` that `cargo run` (the `xtask` alias) sets at run time:
/// the target directory is shared by every clone on the machine, so a binary built from another
/// clone may be reused, and the path compiled into it would name that clone's tree instead.
pub fn workspace_root() -> PathBuf {
    let manifest = env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest
        .parent()
        .expect("xtask lives inside the workspace")
        .to_path_buf()
}

fn home() -> PathBuf {
    env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"))
}

/// Root of moraine's caches: `$MORAINE_CACHE`, else `$HOME/.cache/moraine`.
pub fn cache_root() -> PathBuf {
    match env::var_os("MORAINE_CACHE") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => home().join(".cache").join("moraine"),
    }
}

/// The cargo target directory every xtask-driven cargo call uses:
/// `$CARGO_TARGET_DIR` if set, else `$HOME/.cache/moraine/target`.
pub fn target_dir() -> PathBuf {
    match env::var_os("CARGO_TARGET_DIR") {
        Some(v) if !v.is_empty() => {
            let p = PathBuf::from(v);
            if p.is_absolute() {
                p
            } else {
                workspace_root().join(p)
            }
        }
        _ => home().join(".cache").join("moraine").join("target"),
    }
}

/// The `cargo` executable that launched us (falls back to `cargo` on PATH).
pub fn cargo() -> std::ffi::OsString {
    env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// A `cargo` command with the environment `cargo run` gave xtask itself taken away.
///
/// `cargo xtask` runs us through `cargo run`, which sets `CARGO_PKG_NAME=xtask`,
/// `CARGO_MANIFEST_DIR`, `LD_LIBRARY_PATH` and the like. Some build scripts (ring's, which
/// libduckdb-sys's build depends on) declare `rerun-if-env-changed` on exactly those names, and
/// cargo checks them in its own environment: inherited, they would make the inner cargo rerun
/// those build scripts and, through them, recompile the bundled DuckDB (~25 minutes).
pub fn cargo_command() -> std::process::Command {
    let mut cmd = std::process::Command::new(cargo());
    for (name, _) in env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        let package_scoped = name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_MANIFEST_")
            || matches!(
                name,
                "CARGO_CRATE_NAME" | "CARGO_BIN_NAME" | "CARGO_PRIMARY_PACKAGE" | "LD_LIBRARY_PATH"
            );
        if package_scoped {
            cmd.env_remove(name);
        }
    }
    cmd
}

/// A fresh, empty directory under the system temp dir.
pub fn fresh_temp_dir(prefix: &str) -> std::io::Result<PathBuf> {
    fresh_dir_in(&env::temp_dir(), prefix)
}

/// A fresh, empty directory `<base>/<prefix>-<pid>-<n>-<nanos>` (`base` must exist).
pub fn fresh_dir_in(base: &Path, prefix: &str) -> std::io::Result<PathBuf> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let p = base.join(format!("{prefix}-{}-{n}-{nanos:x}", std::process::id()));
        match std::fs::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inner_cargo_does_not_inherit_the_package_environment_of_cargo_run() {
        // what `cargo run -p xtask` puts in our environment; CARGO_MANIFEST_DIR keeps its real
        // value, because tests running beside this one find the workspace through it
        env::set_var("CARGO_PKG_NAME", "xtask");
        env::set_var("CARGO_MANIFEST_DIR", env!("CARGO_MANIFEST_DIR"));
        let cmd = cargo_command();
        let removed: Vec<_> = cmd
            .get_envs()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert!(
            removed.contains(&"CARGO_PKG_NAME".to_string()),
            "{removed:?}"
        );
        assert!(
            removed.contains(&"CARGO_MANIFEST_DIR".to_string()),
            "{removed:?}"
        );
        // the toolchain selection is kept
        assert!(!removed
            .iter()
            .any(|k| k == "CARGO" || k == "CARGO_HOME" || k.starts_with("RUSTUP")));
    }
}
