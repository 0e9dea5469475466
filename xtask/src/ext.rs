//! `cargo xtask build`: build the moraine cdylib and wrap it as a DuckDB extension.

use std::path::{Path, PathBuf};

use crate::footer;
use crate::paths;

/// The `version` of a manifest's `[package]` (for the extension: `extension/Cargo.toml`).
pub fn crate_version(manifest: &Path) -> Result<String, String> {
    let text =
        std::fs::read_to_string(manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let mut in_package = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_package = l == "[package]";
            continue;
        }
        if in_package {
            if let Some(rest) = l.strip_prefix("version") {
                let rest = rest.trim_start();
                if let Some(v) = rest.strip_prefix('=') {
                    let v = v.trim().trim_matches('"');
                    return Ok(v.to_string());
                }
            }
        }
    }
    Err(format!("no [package] version in {}", manifest.display()))
}

/// Run `cargo build --release -p moraine` in the shared target directory.
pub fn cargo_build() -> Result<PathBuf, String> {
    let target = paths::target_dir();
    eprintln!(
        "xtask build: cargo build --release -p moraine (CARGO_TARGET_DIR={})",
        target.display()
    );
    let status = paths::cargo_command()
        .args(["build", "--release", "-p", "moraine"])
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(paths::workspace_root())
        .status()
        .map_err(|e| format!("running cargo: {e}"))?;
    if !status.success() {
        return Err(format!(
            "cargo build --release -p moraine failed ({status})"
        ));
    }
    Ok(target.join("release"))
}

/// Wrap `<dir>/libmoraine_extension.so` as `<dir>/moraine.duckdb_extension`. The file
/// name matters: DuckDB derives the init symbol (`moraine_duckdb_cpp_init`)
/// from it.
pub fn package(release_dir: &Path, version: &str) -> Result<PathBuf, String> {
    let so = release_dir.join("libmoraine_extension.so");
    let lib = std::fs::read(&so).map_err(|e| format!("{}: {e}", so.display()))?;
    let meta = footer::Metadata::moraine(&format!("v{version}"));
    let bytes = footer::append_footer(&lib, &meta)?;
    let out = release_dir.join("moraine.duckdb_extension");
    // write-then-rename: a CLI that has the old file mapped is not disturbed
    let tmp = release_dir.join(format!(
        ".moraine.duckdb_extension.tmp-{}",
        std::process::id()
    ));
    std::fs::write(&tmp, &bytes).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &out).map_err(|e| format!("{}: {e}", out.display()))?;
    let parsed = footer::parse(&std::fs::read(&out).map_err(|e| e.to_string())?)?;
    if parsed.platform != meta.platform
        || parsed.duckdb_version != meta.duckdb_version
        || parsed.abi != meta.abi
        || parsed.magic != footer::MAGIC
    {
        return Err(format!(
            "footer of {} reads back wrong: {parsed:?}",
            out.display()
        ));
    }
    Ok(out)
}

/// The extension crate's manifest, whose version the extension and the wheel carry.
pub fn extension_manifest() -> PathBuf {
    paths::workspace_root().join("extension").join("Cargo.toml")
}

/// Build and package; returns the path of `moraine.duckdb_extension`.
pub fn build() -> Result<PathBuf, String> {
    let release = cargo_build()?;
    let version = crate_version(&extension_manifest())?;
    package(&release, &version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_package_version_only() {
        let dir = paths::fresh_temp_dir("moraine-xtask-version").unwrap();
        let m = dir.join("Cargo.toml");
        std::fs::write(
            &m,
            "[workspace]\nmembers = []\n\n[package]\nname = \"moraine\"\nversion = \"0.3.1\"\n\n[dependencies]\nx = { version = \"1\" }\n",
        )
        .unwrap();
        assert_eq!(crate_version(&m).unwrap(), "0.3.1");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn packages_a_library_with_the_footer() {
        let dir = paths::fresh_temp_dir("moraine-xtask-package").unwrap();
        std::fs::write(dir.join("libmoraine_extension.so"), b"\x7fELFfake").unwrap();
        let out = package(&dir, "0.1.0").unwrap();
        assert_eq!(out.file_name().unwrap(), "moraine.duckdb_extension");
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(bytes.len(), 8 + 512);
        assert_eq!(&bytes[..8], b"\x7fELFfake");
        let p = footer::parse(&bytes).unwrap();
        assert_eq!(p.extension_version, "v0.1.0");
        let _ = std::fs::remove_dir_all(dir);
    }
}
