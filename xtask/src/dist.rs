//! How moraine is handed to DuckDB users: an extension repository (`cargo xtask package --repo
//! DIR`, DuckDB's `<repo>/<duckdb version>/<platform>/<name>.duckdb_extension.gz` layout, for
//! `INSTALL moraine FROM '<repo>'`) and a Python wheel (`cargo xtask wheel --out DIR`,
//! `duckdb_extension_moraine`, the form the pinned DuckLake itself comes in from PyPI).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::paths;

pub const DUCKDB_VERSION: &str = "v1.5.5";
pub const PLATFORM: &str = "linux_amd64";
/// The wheel's platform tag: glibc 2.28 or newer on x86_64 (what DuckDB's own wheels require).
pub const WHEEL_TAG: &str = "py3-none-manylinux_2_28_x86_64";

/// Writes `ext` (a built `moraine.duckdb_extension`) into the repository `repo` as
/// `v1.5.5/linux_amd64/moraine.duckdb_extension.gz`; returns that path.
pub fn repository(ext: &Path, repo: &Path) -> Result<PathBuf, String> {
    let dir = repo.join(DUCKDB_VERSION).join(PLATFORM);
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let out = dir.join("moraine.duckdb_extension.gz");
    let tmp = dir.join(format!(
        ".moraine.duckdb_extension.gz.tmp-{}",
        std::process::id()
    ));
    let file = std::fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    // gzip -n: no name or time stamp in the header, so the same extension gives the same bytes
    let status = Command::new("gzip")
        .args(["-n", "-9", "-c"])
        .arg(ext)
        .stdout(file)
        .status()
        .map_err(|e| format!("running gzip: {e}"))?;
    if !status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("gzip -c {} failed ({status})", ext.display()));
    }
    std::fs::rename(&tmp, &out).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(out)
}

/// The wheel's file name for moraine `version` (without the footer's leading `v`).
pub fn wheel_name(version: &str) -> String {
    format!("duckdb_extension_moraine-{version}-{WHEEL_TAG}.whl")
}

/// The package's `__init__.py`: where the extension is, and helpers to load or install it.
fn init_py(version: &str) -> String {
    format!(
        r#""""moraine: DuckLake's metadata catalog on SlateDB, as a DuckDB {DUCKDB_VERSION} extension.

    import duckdb, duckdb_extension_moraine
    con = duckdb.connect(config={{"allow_unsigned_extensions": "true"}})
    duckdb_extension_moraine.load(con)
    con.execute("ATTACH 'ducklake:moraine:/path/to/meta' AS lake (DATA_PATH '/path/to/data/')")

`install(con)` copies it into the connection's extension directory instead, after which
`ATTACH 'ducklake:moraine:...'` loads it by itself in any new connection.
"""
import os

__version__ = "{version}"

#: The extension file inside this package.
EXTENSION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "extensions",
                         "{DUCKDB_VERSION}", "moraine.duckdb_extension")


def path():
    """The path of moraine.duckdb_extension inside this package."""
    return EXTENSION


def _literal(text):
    return "'" + text.replace("'", "''") + "'"


def load(con):
    """LOAD moraine into `con` (a duckdb connection opened with allow_unsigned_extensions)."""
    con.execute("LOAD " + _literal(EXTENSION))


def install(con):
    """INSTALL moraine into `con`'s extension directory, so ATTACH can load it by itself."""
    con.execute("INSTALL " + _literal(EXTENSION))
"#
    )
}

fn metadata(version: &str) -> String {
    format!(
        "Metadata-Version: 2.1\n\
         Name: duckdb_extension_moraine\n\
         Version: {version}\n\
         Summary: moraine, DuckLake's metadata catalog on SlateDB, as a DuckDB {DUCKDB_VERSION} extension\n\
         License: MIT\n\
         Requires-Python: >=3.9\n\
         Requires-Dist: duckdb==1.5.5\n"
    )
}

fn wheel_file() -> String {
    format!(
        "Wheel-Version: 1.0\n\
         Generator: moraine xtask\n\
         Root-Is-Purelib: false\n\
         Tag: {WHEEL_TAG}\n"
    )
}

/// Builds the wheel for `ext` (a built `moraine.duckdb_extension`, moraine `version`) in
/// `out`; returns its path. The zip is written by Python's `zipfile` (Python is a requirement
/// of the test command already), its RECORD hashed with `hashlib`.
pub fn wheel(ext: &Path, version: &str, out: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("create {}: {e}", out.display()))?;
    let stage = paths::fresh_temp_dir("moraine-wheel").map_err(|e| e.to_string())?;
    let pkg = stage.join("duckdb_extension_moraine");
    let ext_dir = pkg.join("extensions").join(DUCKDB_VERSION);
    let info = stage.join(format!("duckdb_extension_moraine-{version}.dist-info"));
    let write = |p: &Path, bytes: &[u8]| -> Result<(), String> {
        std::fs::create_dir_all(p.parent().expect("a parent"))
            .and_then(|_| std::fs::write(p, bytes))
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    write(&pkg.join("__init__.py"), init_py(version).as_bytes())?;
    std::fs::create_dir_all(&ext_dir).map_err(|e| e.to_string())?;
    std::fs::copy(ext, ext_dir.join("moraine.duckdb_extension"))
        .map_err(|e| format!("copy {}: {e}", ext.display()))?;
    write(&info.join("METADATA"), metadata(version).as_bytes())?;
    write(&info.join("WHEEL"), wheel_file().as_bytes())?;
    write(&info.join("top_level.txt"), b"duckdb_extension_moraine\n")?;
    let wheel = out.join(wheel_name(version));
    let script = r#"
import base64, hashlib, os, sys, zipfile
stage, wheel, info = sys.argv[1], sys.argv[2], sys.argv[3]
files = []
for d, _, names in os.walk(stage):
    for n in names:
        files.append(os.path.relpath(os.path.join(d, n), stage))
files.sort(key=lambda f: (f.startswith(info + "/"), f))
record = []
tmp = wheel + ".tmp"
with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
    for f in files:
        data = open(os.path.join(stage, f), "rb").read()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{f},sha256={digest},{len(data)}")
        zi = zipfile.ZipInfo(f, date_time=(2026, 1, 1, 0, 0, 0))
        zi.external_attr = 0o644 << 16
        zi.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(zi, data)
    record.append(f"{info}/RECORD,,")
    zi = zipfile.ZipInfo(f"{info}/RECORD", date_time=(2026, 1, 1, 0, 0, 0))
    zi.external_attr = 0o644 << 16
    z.writestr(zi, "\n".join(record) + "\n")
os.replace(tmp, wheel)
"#;
    let status = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&stage)
        .arg(&wheel)
        .arg(format!("duckdb_extension_moraine-{version}.dist-info"))
        .status()
        .map_err(|e| format!("running python3: {e}"))?;
    let _ = std::fs::remove_dir_all(&stage);
    if !status.success() {
        return Err(format!("writing {} failed ({status})", wheel.display()));
    }
    Ok(wheel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wheel_is_named_as_pip_expects_and_requires_the_pinned_duckdb() {
        assert_eq!(
            wheel_name("0.1.0"),
            "duckdb_extension_moraine-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
        );
        assert!(metadata("0.1.0").contains("Requires-Dist: duckdb==1.5.5\n"));
        assert!(wheel_file().contains("Tag: py3-none-manylinux_2_28_x86_64\n"));
        assert!(init_py("0.1.0").contains("__version__ = \"0.1.0\""));
    }
}
