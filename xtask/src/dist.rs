//! How moraine is handed to DuckDB users: an extension repository (`cargo xtask package --repo
//! DIR`, DuckDB's `<repo>/<duckdb version>/<platform>/<name>.duckdb_extension.gz` layout, for
//! `INSTALL moraine FROM '<repo>'`) and a Python wheel (`cargo xtask wheel --out DIR`,
//! `duckdb_extension_moraine`, the form the pinned DuckLake itself comes in from PyPI).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::paths;

pub const DUCKDB_VERSION: &str = "v1.5.5";
pub const PLATFORM: &str = "linux_amd64";

/// The newest glibc symbol version the library in `ext` needs, as (2, minor): the
/// `GLIBC_2.<minor>` version names in its dynamic string table. A wheel's platform tag must not
/// claim less, or pip installs it where it cannot load.
pub fn glibc_needed(ext: &[u8]) -> Result<(u32, u32), String> {
    let needle = b"GLIBC_2.";
    let mut newest: Option<u32> = None;
    let mut at = 0;
    while let Some(i) = ext[at..].windows(needle.len()).position(|w| w == needle) {
        let start = at + i + needle.len();
        let digits: String = ext[start..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .map(|&b| b as char)
            .collect();
        if let Ok(minor) = digits.parse::<u32>() {
            newest = Some(newest.map_or(minor, |n| n.max(minor)));
        }
        at = start;
    }
    newest
        .map(|minor| (2, minor))
        .ok_or_else(|| "the extension names no GLIBC_2.x symbol version".to_string())
}

/// The wheel's tag for an extension needing glibc `2.minor`: any Python 3, x86_64 Linux with
/// that glibc or newer (`manylinux_2_<minor>`).
pub fn wheel_tag(glibc: (u32, u32)) -> String {
    format!("py3-none-manylinux_{}_{}_x86_64", glibc.0, glibc.1)
}

/// The moraine version an extension file's footer carries, without its `v`.
pub fn extension_version(ext: &Path) -> Result<String, String> {
    let bytes = std::fs::read(ext).map_err(|e| format!("{}: {e}", ext.display()))?;
    let parsed = crate::footer::parse(&bytes)?;
    Ok(parsed.extension_version.trim_start_matches('v').to_string())
}

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
        .status();
    match status {
        Ok(s) if s.success() => {}
        other => {
            let _ = std::fs::remove_file(&tmp);
            return Err(match other {
                Ok(s) => format!("gzip -c {} failed ({s})", ext.display()),
                Err(e) => format!("running gzip: {e}"),
            });
        }
    }
    std::fs::rename(&tmp, &out).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(out)
}

/// The wheel's file name for moraine `version` (without the footer's leading `v`) and `tag`.
pub fn wheel_name(version: &str, tag: &str) -> String {
    format!("duckdb_extension_moraine-{version}-{tag}.whl")
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
    """INSTALL moraine into `con`'s extension directory (replacing one installed before, e.g.
    by an older version of this package), so ATTACH can load it by itself."""
    con.execute("FORCE INSTALL " + _literal(EXTENSION))
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

fn wheel_file(tag: &str) -> String {
    format!(
        "Wheel-Version: 1.0\n\
         Generator: moraine xtask\n\
         Root-Is-Purelib: false\n\
         Tag: {tag}\n"
    )
}

/// Writes the wheel's zip from the staged tree: every file with its SHA-256 in RECORD, RECORD
/// last; a failure leaves no partial wheel.
const ZIP_SCRIPT: &str = r#"
import base64, hashlib, os, sys, zipfile
stage, wheel, info = sys.argv[1], sys.argv[2], sys.argv[3]
files = []
for d, _, names in os.walk(stage):
    for n in names:
        files.append(os.path.relpath(os.path.join(d, n), stage))
files.sort(key=lambda f: (f.startswith(info + "/"), f))
record = []
tmp = wheel + ".tmp"


def entry(name):
    zi = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
    zi.external_attr = 0o644 << 16
    zi.compress_type = zipfile.ZIP_DEFLATED
    return zi


try:
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for f in files:
            data = open(os.path.join(stage, f), "rb").read()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{f},sha256={digest},{len(data)}")
            z.writestr(entry(f), data)
        record.append(f"{info}/RECORD,,")
        z.writestr(entry(f"{info}/RECORD"), "\n".join(record) + "\n")
    os.replace(tmp, wheel)
finally:
    if os.path.exists(tmp):
        os.remove(tmp)
"#;

/// Builds the wheel for `ext` (a built `moraine.duckdb_extension`) in `out`, versioned by its
/// footer and tagged for the glibc it needs; returns its path. The zip is written by Python's
/// `zipfile` (Python is a requirement of the test command already).
pub fn wheel(ext: &Path, out: &Path) -> Result<PathBuf, String> {
    let version = extension_version(ext)?;
    if version.is_empty() || !version.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "moraine's version {version:?} is not a plain release number (digits and dots), \
             which a wheel's name and PEP 440 need"
        ));
    }
    let bytes = std::fs::read(ext).map_err(|e| format!("{}: {e}", ext.display()))?;
    let tag = wheel_tag(glibc_needed(&bytes)?);
    drop(bytes);
    std::fs::create_dir_all(out).map_err(|e| format!("create {}: {e}", out.display()))?;
    let stage = paths::fresh_temp_dir("moraine-wheel").map_err(|e| e.to_string())?;
    let built = stage_and_zip(ext, &version, &tag, &stage, out);
    let _ = std::fs::remove_dir_all(&stage);
    built
}

fn stage_and_zip(
    ext: &Path,
    version: &str,
    tag: &str,
    stage: &Path,
    out: &Path,
) -> Result<PathBuf, String> {
    let pkg = stage.join("duckdb_extension_moraine");
    let ext_dir = pkg.join("extensions").join(DUCKDB_VERSION);
    let info = format!("duckdb_extension_moraine-{version}.dist-info");
    let write = |p: &Path, bytes: &[u8]| -> Result<(), String> {
        std::fs::create_dir_all(p.parent().expect("a parent"))
            .and_then(|_| std::fs::write(p, bytes))
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    write(&pkg.join("__init__.py"), init_py(version).as_bytes())?;
    std::fs::create_dir_all(&ext_dir).map_err(|e| e.to_string())?;
    std::fs::copy(ext, ext_dir.join("moraine.duckdb_extension"))
        .map_err(|e| format!("copy {}: {e}", ext.display()))?;
    write(
        &stage.join(&info).join("METADATA"),
        metadata(version).as_bytes(),
    )?;
    write(&stage.join(&info).join("WHEEL"), wheel_file(tag).as_bytes())?;
    write(
        &stage.join(&info).join("top_level.txt"),
        b"duckdb_extension_moraine\n",
    )?;
    let wheel = out.join(wheel_name(version, tag));
    let python = crate::deps::python();
    let status = Command::new(&python)
        .arg("-c")
        .arg(ZIP_SCRIPT)
        .arg(stage)
        .arg(&wheel)
        .arg(&info)
        .status()
        .map_err(|e| format!("running {}: {e}", python.to_string_lossy()))?;
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
        let tag = wheel_tag((2, 34));
        assert_eq!(
            wheel_name("0.1.0", &tag),
            "duckdb_extension_moraine-0.1.0-py3-none-manylinux_2_34_x86_64.whl"
        );
        assert!(metadata("0.1.0").contains("Requires-Dist: duckdb==1.5.5\n"));
        assert!(wheel_file(&tag).contains("Tag: py3-none-manylinux_2_34_x86_64\n"));
        assert!(init_py("0.1.0").contains("__version__ = \"0.1.0\""));
    }

    #[test]
    fn the_glibc_a_library_needs_is_its_newest_symbol_version() {
        let lib = b"\0libc.so.6\0GLIBC_2.2.5\0GLIBC_2.34\0GLIBC_2.17\0GLIBCXX_3.4.29\0";
        assert_eq!(glibc_needed(lib).unwrap(), (2, 34));
        assert!(glibc_needed(b"no versions here").is_err());
    }
}
