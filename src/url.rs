//! Store URLs: where a lake's SlateDB lives.
//!
//! - a plain local path (`/data/lake`, `lake.moraine`): a directory on the local filesystem;
//! - `file:///abs/path`: the same, as a URL (the path must be absolute);
//! - `memory://<name>`: a process-local in-memory object store. A global registry maps the name
//!   to one `InMemory`, so a re-attach in the same process sees the same data;
//! - `s3://<bucket>[/<prefix>]`: SlateDB's objects under `<prefix>/` in an S3 bucket (or an
//!   S3-compatible service's), reached with the credentials of a DuckDB secret (`s3.rs`).
//!
//! Anything else is an error naming the URL.

use crate::error::{Error, Result};
use object_store::memory::InMemory;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// A parsed store location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// A directory on the local filesystem (absolute).
    Local(PathBuf),
    /// A named process-local in-memory object store.
    Memory(String),
    /// A key prefix in an S3 bucket: no leading or trailing `/`, empty for the bucket's root.
    S3 { bucket: String, prefix: String },
}

impl StoreUrl {
    /// A canonical spelling, used to share one open store between attaches.
    pub fn canonical(&self) -> String {
        match self {
            StoreUrl::Local(p) => format!("file://{}", p.display()),
            StoreUrl::Memory(n) => format!("memory://{n}"),
            StoreUrl::S3 { bucket, prefix } if prefix.is_empty() => format!("s3://{bucket}"),
            StoreUrl::S3 { bucket, prefix } => format!("s3://{bucket}/{prefix}"),
        }
    }

    /// What the store touches outside the process, as DuckDB's file-access rules
    /// (`enable_external_access`, `allowed_directories`) name it: the directory of a local
    /// store (absolute, `.` and `..` resolved), an S3 store's URL; nothing for a memory store.
    pub fn access_path(&self) -> Option<String> {
        match self {
            StoreUrl::Local(p) => Some(p.display().to_string()),
            StoreUrl::Memory(_) => None,
            StoreUrl::S3 { .. } => Some(self.canonical()),
        }
    }
}

fn url_err(url: &str, reason: impl Into<String>) -> Error {
    Error::Url {
        url: url.to_string(),
        reason: reason.into(),
    }
}

/// Parse a store URL.
pub fn parse(url: &str) -> Result<StoreUrl> {
    let trimmed = url.trim();
    if trimmed.is_empty() {
        return Err(url_err(
            url,
            "the URL is empty; give a local path, file:///path or memory://name",
        ));
    }
    if let Some(name) = trimmed.strip_prefix("memory://") {
        return Ok(StoreUrl::Memory(name.to_string()));
    }
    if let Some(path) = trimmed.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(url_err(
                url,
                "a file:// URL needs an absolute path (file:///abs/path); use a plain path for a relative one",
            ));
        }
        return Ok(StoreUrl::Local(normalize(PathBuf::from(path))));
    }
    if let Some(rest) = trimmed.strip_prefix("s3://") {
        return parse_s3(url, rest);
    }
    if let Some((scheme, _)) = trimmed.split_once("://") {
        return Err(url_err(
            url,
            format!(
                "scheme '{scheme}://' is not supported; supported: local paths, file:///path, \
                 memory://name, s3://bucket/prefix"
            ),
        ));
    }
    let p = PathBuf::from(trimmed);
    let abs = if p.is_absolute() {
        p
    } else {
        std::env::current_dir()
            .map_err(|e| url_err(url, format!("cannot resolve a relative path: {e}")))?
            .join(p)
    };
    Ok(StoreUrl::Local(normalize(abs)))
}

/// `s3://<bucket>[/<prefix>]` after its scheme: a bucket name as S3 allows it, and a key prefix
/// of plain segments (no empty, `.` or `..` segment, no query or fragment).
fn parse_s3(url: &str, rest: &str) -> Result<StoreUrl> {
    if rest.contains(['?', '#']) {
        return Err(url_err(
            url,
            "an s3:// URL takes no query or fragment; options go in the DuckDB secret",
        ));
    }
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let bucket_ok = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        && bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
        && bucket.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !bucket_ok {
        return Err(url_err(
            url,
            format!(
                "'{bucket}' is not an S3 bucket name (3 to 63 lowercase letters, digits, dots and \
                 hyphens, beginning and ending with a letter or digit); write s3://bucket/prefix"
            ),
        ));
    }
    let prefix = prefix.trim_end_matches('/');
    if !prefix.is_empty() {
        for segment in prefix.split('/') {
            if segment.is_empty() || segment == "." || segment == ".." {
                return Err(url_err(
                    url,
                    format!(
                        "the key prefix '{prefix}' has an empty, '.' or '..' segment; write \
                         s3://bucket/a/b"
                    ),
                ));
            }
        }
    }
    Ok(StoreUrl::S3 {
        bucket: bucket.to_string(),
        prefix: prefix.to_string(),
    })
}

/// Drop `.` components and trailing slashes so two spellings of a path compare equal.
fn normalize(p: PathBuf) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn registry() -> &'static Mutex<HashMap<String, Arc<InMemory>>> {
    static REG: OnceLock<Mutex<HashMap<String, Arc<InMemory>>>> = OnceLock::new();
    REG.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The process-wide in-memory object store called `name` (created on first use).
pub fn memory_store(name: &str) -> Arc<InMemory> {
    let mut reg = registry().lock().unwrap_or_else(|p| p.into_inner());
    reg.entry(name.to_string())
        .or_insert_with(|| Arc::new(InMemory::new()))
        .clone()
}

/// Whether `memory://<name>` has been used in this process.
pub fn memory_store_exists(name: &str) -> bool {
    registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains_key(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_supported_forms() {
        assert_eq!(
            parse("memory://lake1").unwrap(),
            StoreUrl::Memory("lake1".into())
        );
        assert_eq!(
            parse("file:///tmp/x/").unwrap(),
            StoreUrl::Local("/tmp/x".into())
        );
        assert_eq!(parse("/tmp/./y").unwrap(), StoreUrl::Local("/tmp/y".into()));
        match parse("rel/dir").unwrap() {
            StoreUrl::Local(p) => assert!(p.is_absolute() && p.ends_with("rel/dir")),
            other => panic!("{other:?}"),
        }
        let s3 = |bucket: &str, prefix: &str| StoreUrl::S3 {
            bucket: bucket.into(),
            prefix: prefix.into(),
        };
        assert_eq!(
            parse("s3://bucket/lake-meta").unwrap(),
            s3("bucket", "lake-meta")
        );
        assert_eq!(
            parse("s3://my.bucket-1/a/b/").unwrap(),
            s3("my.bucket-1", "a/b")
        );
        assert_eq!(parse("s3://bucket").unwrap(), s3("bucket", ""));
        assert_eq!(parse("s3://bucket/").unwrap(), s3("bucket", ""));
        assert_eq!(
            parse("s3://bucket/a/b/").unwrap().canonical(),
            "s3://bucket/a/b"
        );
        assert_eq!(parse("s3://bucket").unwrap().canonical(), "s3://bucket");
    }

    #[test]
    fn rejects_others_naming_the_url() {
        for bad in [
            "",
            "   ",
            "gs://bucket/lake",
            "foo://x",
            "file://relative/path",
            "s3://",
            "s3://Bucket/x",
            "s3://ab/x",
            "s3://-bucket/x",
            "s3://bucket_1/x",
            "s3://bucket//x",
            "s3://bucket/a/../b",
            "s3://bucket/./b",
            "s3://bucket/x?region=eu",
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("'{bad}'")), "{e}");
        }
    }

    #[test]
    fn memory_registry_shares_by_name() {
        let a = memory_store("url-test-shared");
        let b = memory_store("url-test-shared");
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &memory_store("url-test-other")));
        assert!(memory_store_exists("url-test-shared"));
    }
}
