//! DuckDB's 512-byte extension footer (DuckDB v1.5.5).
//!
//! Mirrors `ExtensionHelper::ParseExtensionMetaData` in
//! `src/main/extension/extension_load.cpp` and `ParsedExtensionMetaData` in
//! `src/include/duckdb/main/extension.hpp`:
//!
//! * `FOOTER_SIZE = 512`, `SIGNATURE_SIZE = 256`; the footer is the last 512
//!   bytes of the file.
//! * The first 256 bytes hold 8 fields of 32 bytes. DuckDB reads them in file
//!   order and then *reverses* the list, so field `i` sits at byte offset
//!   `(7 - i) * 32` of the footer:
//!     - field 0 (offset 224): magic value `"4"`
//!     - field 1 (offset 192): platform, e.g. `linux_amd64`
//!     - field 2 (offset 160): DuckDB version (`v1.5.5`) for the CPP ABI
//!     - field 3 (offset 128): extension version
//!     - field 4 (offset  96): ABI type (`CPP`, `C_STRUCT`, `C_STRUCT_UNSTABLE`)
//!     - fields 5..7 (offsets 64, 32, 0): unused, zero
//! * Each field's value is its bytes with trailing NULs removed
//!   (`FilterZeroAtEnd`), so values are zero-padded to 32 bytes.
//! * The last 256 bytes are the signature; zeros for an unsigned extension
//!   (loadable with `duckdb -unsigned` / `allow_unsigned_extensions`).

pub const FOOTER_SIZE: usize = 512;
pub const SIGNATURE_SIZE: usize = 256;
pub const FIELD_SIZE: usize = 32;
pub const FIELD_COUNT: usize = 8;
pub const MAGIC: &str = "4";

/// What goes into a footer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    pub platform: String,
    pub duckdb_version: String,
    pub extension_version: String,
    pub abi: String,
}

impl Metadata {
    /// The footer moraine's extension carries: linux_amd64, DuckDB v1.5.5, C++ ABI.
    pub fn moraine(extension_version: &str) -> Self {
        Metadata {
            platform: "linux_amd64".into(),
            duckdb_version: "v1.5.5".into(),
            extension_version: extension_version.into(),
            abi: "CPP".into(),
        }
    }
}

/// Byte offset of metadata field `index` (0 = magic) within the footer.
pub const fn field_offset(index: usize) -> usize {
    (FIELD_COUNT - 1 - index) * FIELD_SIZE
}

fn put(buf: &mut [u8; FOOTER_SIZE], index: usize, value: &str) -> Result<(), String> {
    let bytes = value.as_bytes();
    if bytes.len() > FIELD_SIZE {
        return Err(format!(
            "footer field {index} {value:?} is {} bytes, more than {FIELD_SIZE}",
            bytes.len()
        ));
    }
    if bytes.contains(&0) {
        return Err(format!(
            "footer field {index} {value:?} contains a NUL byte"
        ));
    }
    let off = field_offset(index);
    buf[off..off + bytes.len()].copy_from_slice(bytes);
    Ok(())
}

/// Build the 512-byte footer (unsigned: the signature area is zeros).
pub fn footer(meta: &Metadata) -> Result<[u8; FOOTER_SIZE], String> {
    let mut buf = [0u8; FOOTER_SIZE];
    put(&mut buf, 0, MAGIC)?;
    put(&mut buf, 1, &meta.platform)?;
    put(&mut buf, 2, &meta.duckdb_version)?;
    put(&mut buf, 3, &meta.extension_version)?;
    put(&mut buf, 4, &meta.abi)?;
    Ok(buf)
}

/// `library` bytes followed by the footer: the contents of a `.duckdb_extension` file.
pub fn append_footer(library: &[u8], meta: &Metadata) -> Result<Vec<u8>, String> {
    let f = footer(meta)?;
    let mut out = Vec::with_capacity(library.len() + FOOTER_SIZE);
    out.extend_from_slice(library);
    out.extend_from_slice(&f);
    Ok(out)
}

/// What DuckDB would parse out of a file's footer (for tests and `xtask` checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub magic: String,
    pub platform: String,
    pub duckdb_version: String,
    pub extension_version: String,
    pub abi: String,
    pub unused: [String; 3],
    pub signature_is_zero: bool,
}

fn field(footer: &[u8], index: usize) -> String {
    let off = field_offset(index);
    let raw = &footer[off..off + FIELD_SIZE];
    let end = raw.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

/// Parse the footer at the end of `file` the way DuckDB v1.5.5 does.
pub fn parse(file: &[u8]) -> Result<Parsed, String> {
    if file.len() < FOOTER_SIZE {
        return Err(format!(
            "file is {} bytes, shorter than the footer",
            file.len()
        ));
    }
    let f = &file[file.len() - FOOTER_SIZE..];
    Ok(Parsed {
        magic: field(f, 0),
        platform: field(f, 1),
        duckdb_version: field(f, 2),
        extension_version: field(f, 3),
        abi: field(f, 4),
        unused: [field(f, 5), field(f, 6), field(f, 7)],
        signature_is_zero: f[FOOTER_SIZE - SIGNATURE_SIZE..].iter().all(|&b| b == 0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_follow_duckdbs_reversed_field_order() {
        assert_eq!(field_offset(0), 224);
        assert_eq!(field_offset(1), 192);
        assert_eq!(field_offset(2), 160);
        assert_eq!(field_offset(3), 128);
        assert_eq!(field_offset(4), 96);
        assert_eq!(field_offset(7), 0);
    }

    #[test]
    fn exact_bytes() {
        let f = footer(&Metadata::moraine("v0.1.0")).unwrap();
        assert_eq!(f.len(), 512);
        let mut want = [0u8; 512];
        want[224] = b'4';
        want[192..192 + 11].copy_from_slice(b"linux_amd64");
        want[160..160 + 6].copy_from_slice(b"v1.5.5");
        want[128..128 + 6].copy_from_slice(b"v0.1.0");
        want[96..96 + 3].copy_from_slice(b"CPP");
        assert_eq!(f.to_vec(), want.to_vec());
    }

    #[test]
    fn roundtrip_through_duckdb_style_parse() {
        let lib = b"\x7fELF pretend shared object".to_vec();
        let meta = Metadata::moraine("v0.1.0");
        let file = append_footer(&lib, &meta).unwrap();
        assert_eq!(file.len(), lib.len() + 512);
        assert_eq!(&file[..lib.len()], &lib[..]);
        let p = parse(&file).unwrap();
        assert_eq!(p.magic, "4");
        assert_eq!(p.platform, "linux_amd64");
        assert_eq!(p.duckdb_version, "v1.5.5");
        assert_eq!(p.extension_version, "v0.1.0");
        assert_eq!(p.abi, "CPP");
        assert_eq!(p.unused, [String::new(), String::new(), String::new()]);
        assert!(p.signature_is_zero);
    }

    #[test]
    fn full_width_field_is_allowed_longer_is_refused() {
        let mut meta = Metadata::moraine(&"x".repeat(32));
        let p = parse(&footer(&meta).unwrap()).unwrap();
        assert_eq!(p.extension_version, "x".repeat(32));
        // a full-width field must not bleed into its neighbours
        assert_eq!(p.abi, "CPP");
        assert_eq!(p.duckdb_version, "v1.5.5");
        meta.extension_version = "x".repeat(33);
        assert!(footer(&meta).is_err());
        meta.extension_version = "a\0b".into();
        assert!(footer(&meta).is_err());
    }

    /// Against a footer written by DuckDB's own build tooling: the stock DuckLake
    /// extension from PyPI (present once `cargo xtask deps` has run).
    #[test]
    fn matches_stock_ducklake_footer() {
        let Some(path) = crate::deps::installed_ducklake_ext() else {
            eprintln!("skipped: DuckLake extension not installed (cargo xtask deps)");
            return;
        };
        let file = std::fs::read(&path).unwrap();
        let p = parse(&file).unwrap();
        assert_eq!(p.magic, "4");
        assert_eq!(p.platform, "linux_amd64");
        assert_eq!(p.duckdb_version, "v1.5.5");
        assert_eq!(p.abi, "CPP");
        let ours = footer(&Metadata {
            platform: p.platform.clone(),
            duckdb_version: p.duckdb_version.clone(),
            extension_version: p.extension_version.clone(),
            abi: p.abi.clone(),
        })
        .unwrap();
        let theirs = &file[file.len() - FOOTER_SIZE..];
        // metadata half identical byte for byte; theirs is signed, ours is not
        assert_eq!(&ours[..256], &theirs[..256]);
        assert!(ours[256..].iter().all(|&b| b == 0));
    }
}
