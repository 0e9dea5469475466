//! `cargo xtask header`: extension/include/moraine_ffi.h, the C surface the C++ layer includes,
//! is what cbindgen (pinned, installed once into `$MORAINE_CACHE/cbindgen-<version>`) generates
//! from extension/src/ffi.rs. `header` writes it; `header --check` (run by `cargo xtask test`)
//! fails when the committed header differs, so a value edited by hand or a Rust change left
//! out of the header cannot reach the C++ compiler.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::paths;

/// The cbindgen release the header is generated with.
pub const CBINDGEN_VERSION: &str = "0.29.4";

/// The header, relative to the workspace root.
const HEADER: &str = "extension/include/moraine_ffi.h";

/// The pinned cbindgen, installed with `cargo install --locked` on first use.
fn ensure_cbindgen() -> Result<PathBuf, String> {
    let root = paths::cache_root().join(format!("cbindgen-{CBINDGEN_VERSION}"));
    let bin = root.join("bin").join("cbindgen");
    if bin.is_file() {
        return Ok(bin);
    }
    eprintln!(
        "xtask header: installing cbindgen {CBINDGEN_VERSION} into {}",
        root.display()
    );
    let status = paths::cargo_command()
        .args(["install", "--locked", "--quiet", "cbindgen", "--version"])
        .arg(format!("={CBINDGEN_VERSION}"))
        .arg("--root")
        .arg(&root)
        // its own target dir: never the workspace's, whose DuckDB build it must not disturb
        .env(
            "CARGO_TARGET_DIR",
            paths::cache_root().join("cbindgen-target"),
        )
        .status()
        .map_err(|e| format!("running cargo install cbindgen: {e}"))?;
    if !status.success() || !bin.is_file() {
        return Err(format!(
            "cargo install cbindgen {CBINDGEN_VERSION} failed ({status})"
        ));
    }
    Ok(bin)
}

/// The header cbindgen writes for the extension crate as it is now.
fn generate(out: &Path) -> Result<(), String> {
    let cbindgen = ensure_cbindgen()?;
    let crate_dir = paths::workspace_root().join("extension");
    let output = Command::new(&cbindgen)
        .arg("--quiet")
        .arg("--config")
        .arg(crate_dir.join("cbindgen.toml"))
        .arg("--output")
        .arg(out)
        .arg(&crate_dir)
        .output()
        .map_err(|e| format!("running {}: {e}", cbindgen.display()))?;
    if !output.status.success() {
        return Err(format!(
            "cbindgen failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(())
}

/// `header [--check]`.
pub fn run(args: &[String]) -> Result<bool, String> {
    let check = match args {
        [] => false,
        [a] if a == "--check" => true,
        _ => {
            return Err(format!(
                "header: expected no argument or --check, got {args:?}"
            ))
        }
    };
    let header = paths::workspace_root().join(HEADER);
    if !check {
        generate(&header)?;
        eprintln!("xtask header: wrote {HEADER}");
        return Ok(true);
    }
    let fresh = std::env::temp_dir().join(format!("moraine_ffi.{}.h", std::process::id()));
    generate(&fresh)?;
    let want =
        std::fs::read_to_string(&fresh).map_err(|e| format!("read {}: {e}", fresh.display()));
    let _ = std::fs::remove_file(&fresh);
    let want = want?;
    let have = std::fs::read_to_string(&header).map_err(|e| format!("read {HEADER}: {e}"))?;
    if have == want {
        eprintln!("xtask header: {HEADER} is what cbindgen generates from extension/src/ffi.rs");
        return Ok(true);
    }
    let line = have
        .lines()
        .zip(want.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| have.lines().count().min(want.lines().count()));
    let shown = |text: &str| {
        text.lines()
            .nth(line)
            .unwrap_or("(end of file)")
            .to_string()
    };
    eprintln!(
        "xtask header: {HEADER} differs from what cbindgen generates from extension/src/ffi.rs, \
         first at line {}:\n  committed: {}\n  generated: {}\n(edited by hand, or ffi.rs changed \
         without it: run `cargo xtask header`)",
        line + 1,
        shown(&have),
        shown(&want)
    );
    Ok(false)
}
