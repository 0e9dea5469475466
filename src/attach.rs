//! What an ATTACH of a moraine store asks for (RFC 0004, "Access modes"). DuckDB hands the C++
//! layer the path, the options it left to the storage extension and the access mode it chose;
//! this module decides what they mean: the store's URL, the secret named for it, and whether it
//! opens read-only.

use crate::error::{Error, Result};

/// What DuckDB knows of one ATTACH.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The path, as DuckDB hands it over: with the `moraine:` prefix when the ATTACH named
    /// `TYPE moraine` (DuckLake's `META_TYPE`).
    pub path: String,
    /// The options DuckDB left to the storage extension, by name (as written) and value.
    pub options: Vec<(String, String)>,
    /// The name of every option the ATTACH statement carried, access modes included.
    pub named: Vec<String>,
    /// DuckDB set this attach read-only.
    pub read_only: bool,
    /// DuckDB's own `access_mode` is automatic (a READ_ONLY DuckDB keeps every attach read-only).
    pub duckdb_automatic: bool,
}

/// What the ATTACH opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The store's URL: the path without the `moraine:` prefix.
    pub url: String,
    /// An `s3://` store, opened with the fields of an s3 secret.
    pub s3: bool,
    /// The secret the ATTACH named (`SECRET`, DuckLake's `META_SECRET`); else the one DuckDB
    /// matches to the URL.
    pub secret: Option<String>,
    /// The store opens read-only.
    pub read_only: bool,
    /// DuckDB made this attach read-only by itself, and the C++ layer gives it back its
    /// read-write mode (below).
    pub read_write_again: bool,
}

/// The ATTACH options that name an access mode.
const ACCESS_MODES: &[&str] = &["read_only", "readonly", "read_write", "readwrite"];

/// Decides what an ATTACH opens, or why it is refused.
///
/// DuckDB 1.5.5 makes an ATTACH of an `s3://` path that names no access mode read-only before
/// any storage extension runs (most remote files cannot be written). A moraine store on S3 is
/// writable, and an ATTACH naming no mode opens a local store read-write, so an `s3://` store
/// gets the same: read-write again, unless the ATTACH named a mode or DuckDB itself is
/// read-only.
pub fn plan(facts: &Facts) -> Result<Plan> {
    let url = facts.path.strip_prefix("moraine:").unwrap_or(&facts.path);
    let mut secret = None;
    for (name, value) in &facts.options {
        if !name.eq_ignore_ascii_case("secret") {
            return Err(Error::InvalidInput(format!(
                "moraine: unknown ATTACH option \"{name}\" for \"{}\" (moraine accepts \
                 READ_ONLY / READ_WRITE, and SECRET: DuckLake's META_SECRET)",
                facts.path
            )));
        }
        secret = Some(value.clone());
    }
    let s3 = url.starts_with("s3://");
    if let (Some(name), false) = (&secret, s3) {
        return Err(Error::InvalidInput(format!(
            "moraine: SECRET \"{name}\" was given for \"{url}\", but only an s3:// lake uses a \
             secret"
        )));
    }
    let named_mode = facts
        .named
        .iter()
        .any(|n| ACCESS_MODES.iter().any(|mode| n.eq_ignore_ascii_case(mode)));
    let read_write_again = s3 && facts.read_only && !named_mode && facts.duckdb_automatic;
    Ok(Plan {
        url: url.to_string(),
        s3,
        secret,
        read_only: facts.read_only && !read_write_again,
        read_write_again,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(path: &str, options: &[(&str, &str)], named: &[&str], read_only: bool) -> Facts {
        Facts {
            path: path.into(),
            options: options
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            named: named.iter().map(|n| n.to_string()).collect(),
            read_only,
            duckdb_automatic: true,
        }
    }

    #[test]
    fn the_prefix_goes_and_the_secret_is_taken_for_s3_only() {
        let plan = plan(&facts(
            "moraine:s3://b/m",
            &[("SECRET", "s")],
            &["SECRET"],
            false,
        ))
        .unwrap();
        assert_eq!(
            plan,
            Plan {
                url: "s3://b/m".into(),
                s3: true,
                secret: Some("s".into()),
                read_only: false,
                read_write_again: false,
            }
        );
        let local = super::plan(&facts("dir/meta", &[], &[], false)).unwrap();
        assert_eq!(
            (local.url.as_str(), local.s3, local.secret),
            ("dir/meta", false, None)
        );
        let e = super::plan(&facts("dir/meta", &[("secret", "s")], &[], false)).unwrap_err();
        assert!(
            e.to_string().contains("only an s3:// lake uses a secret"),
            "{e}"
        );
        let e = super::plan(&facts("dir/meta", &[("bogus", "1")], &[], false)).unwrap_err();
        let shown = e.to_string();
        assert!(shown.contains("unknown ATTACH option \"bogus\""), "{shown}");
        assert!(matches!(e, Error::InvalidInput(_)));
    }

    #[test]
    fn an_s3_store_duckdb_made_read_only_by_itself_is_read_write_again() {
        let open = |path: &str, named: &[&str], read_only: bool, automatic: bool| {
            let mut f = facts(path, &[], named, read_only);
            f.duckdb_automatic = automatic;
            let p = plan(&f).unwrap();
            (p.read_only, p.read_write_again)
        };
        // no mode named: DuckDB's own bump is undone
        assert_eq!(open("s3://b/m", &[], true, true), (false, true));
        // a mode named, in any spelling, or a read-only DuckDB: read-only it stays
        for mode in ["READ_ONLY", "readonly", "Read_Write", "READWRITE"] {
            assert_eq!(
                open("s3://b/m", &[mode], true, true),
                (true, false),
                "{mode}"
            );
        }
        assert_eq!(open("s3://b/m", &[], true, false), (true, false));
        // a local store: as DuckDB set it
        assert_eq!(open("dir/m", &[], true, true), (true, false));
        assert_eq!(open("s3://b/m", &[], false, true), (false, false));
    }
}
