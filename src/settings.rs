//! moraine's DuckDB settings (RFC 0012, "Settings"): each one's name, what `duckdb_settings()`
//! says of it, its type and default, and the store option an ATTACH reads it into. The C++
//! layer registers exactly these.

use std::time::Duration;

/// A setting's DuckDB type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// An INTERVAL, read into its store option as whole milliseconds.
    Interval,
    /// A VARCHAR, read into its store option as written.
    Text,
}

/// What a `SET` of the setting does besides storing the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnSet {
    Nothing,
    /// Refuses a size [`crate::limits::parse_size`] does not read.
    CheckMaxCommitSize,
    /// Sets the stderr log's filter ([`crate::telemetry::set_filter`]).
    SetLogLevel,
}

/// One of moraine's DuckDB settings. Every one is global: DuckLake attaches its metadata
/// catalog on a connection of its own, which reads only global settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub name: &'static str,
    pub description: &'static str,
    pub ty: Type,
    /// The default, in the setting's own spelling.
    pub default: String,
    /// The store option an ATTACH reads the setting's value into; `None` for a setting the
    /// attach does not read.
    pub store_option: Option<&'static str>,
    pub on_set: OnSet,
}

/// Every setting, in the order DuckDB registers them.
pub fn all() -> Vec<Setting> {
    let millis = |d: Duration| format!("{} milliseconds", d.as_millis());
    let interval = |name, description, default, store_option| Setting {
        name,
        description,
        ty: Type::Interval,
        default: millis(default),
        store_option: Some(store_option),
        on_set: OnSet::Nothing,
    };
    vec![
        interval(
            "moraine_io_timeout",
            "How long one moraine store operation (an ATTACH's reads, a COMMIT's write, a DETACH) \
             may take before it fails; read at ATTACH (a global setting: DuckLake attaches its \
             catalog on its own connection)",
            crate::store::DEFAULT_IO_TIMEOUT,
            "io_timeout_ms",
        ),
        interval(
            "moraine_reader_poll_interval",
            "How often a READ_ONLY attach looks for the writer's new commits: how fresh its reads \
             are, and how many requests an idle reader makes; read at ATTACH",
            crate::store::DEFAULT_READER_POLL,
            "reader_poll_ms",
        ),
        interval(
            "moraine_reclaim_interval",
            "The longest a moraine writer leaves the store's table files unrewritten: the bytes \
             of deleted catalog rows leave the store within about this long while a writer is \
             attached (moraine_reclaim(lake) does it at once); read at ATTACH",
            crate::store::DEFAULT_RECLAIM_INTERVAL,
            "reclaim_interval_ms",
        ),
        Setting {
            name: "moraine_max_commit_size",
            description: "The most one commit may write to a moraine catalog (its keys and \
                          values, inlined rows included), e.g. '64MiB'; at most and by default \
                          1GiB; read at ATTACH",
            ty: Type::Text,
            default: crate::limits::DEFAULT_MAX_COMMIT_SIZE.into(),
            store_option: Some("max_commit_size"),
            on_set: OnSet::CheckMaxCommitSize,
        },
        Setting {
            name: "moraine_compression",
            description: "What a moraine writer compresses the store's tables and image \
                          checkpoints with: 'zstd', 'lz4' or 'none' (what it wrote before stays \
                          readable); read at ATTACH",
            ty: Type::Text,
            default: crate::compression::DEFAULT.name().into(),
            store_option: Some("compression"),
            on_set: OnSet::Nothing,
        },
        Setting {
            name: "moraine_log_level",
            description: "What moraine writes to stderr: a level (off, error, warn, info, debug, \
                          trace) for moraine, then optionally target=level for slatedb, \
                          object_store, reqwest; debug shows each attach, refresh, commit and \
                          checkpoint with its time (process-wide)",
            ty: Type::Text,
            default: crate::telemetry::DEFAULT_FILTER.into(),
            store_option: None,
            on_set: OnSet::SetLogLevel,
        },
    ]
}

/// The store option an ATTACH passes for an INTERVAL setting's value of `micros`
/// microseconds: whole milliseconds; `shown`, the value as written, when that is not
/// positive, so that the store's refusal names what the user set.
fn interval_option(micros: i64, shown: &str) -> String {
    match micros / 1000 {
        ms if ms > 0 => ms.to_string(),
        _ => shown.to_string(),
    }
}

/// An interval of `micros` microseconds in the largest whole unit of seconds, milliseconds or
/// microseconds, as a refusal names what the user set.
fn interval_text(micros: i64) -> String {
    match micros {
        m if m % 1_000_000 == 0 => format!("{} seconds", m / 1_000_000),
        m if m % 1000 == 0 => format!("{} milliseconds", m / 1000),
        m => format!("{m} microseconds"),
    }
}

/// DuckDB's own settings an ATTACH of an `s3://` store reads, and the store option each feeds:
/// its proxy (`http_proxy` starts out as the HTTP_PROXY environment variable), so the store's
/// requests take the route httpfs's take for the data files.
const DUCKDB_PROXY: [(&str, &str); 3] = [
    ("http_proxy", "s3.http_proxy"),
    ("http_proxy_username", "s3.http_proxy_username"),
    ("http_proxy_password", "s3.http_proxy_password"),
];

/// The DuckDB settings an ATTACH reads: moraine's own that feed a store option, and DuckDB's
/// proxy settings for an `s3://` store. The C++ layer passes each one's value to
/// [`store_options`] as `setting.<name>`.
pub fn read_at_attach(s3: bool) -> Vec<&'static str> {
    let own = all()
        .into_iter()
        .filter(|s| s.store_option.is_some())
        .map(|s| s.name);
    let proxy = DUCKDB_PROXY.iter().filter(|_| s3).map(|(name, _)| *name);
    own.chain(proxy).collect()
}

/// The store options an ATTACH opens the store with: each `setting.<name>` the C++ layer read
/// ([`read_at_attach`]; an INTERVAL as whole microseconds) as the store option it feeds (an
/// empty proxy setting as none), every other option as given.
pub fn store_options(given: Vec<(String, String)>) -> Vec<(String, String)> {
    let settings = all();
    let mut out = Vec::with_capacity(given.len());
    for (key, value) in given {
        let Some(name) = key.strip_prefix("setting.") else {
            out.push((key, value));
            continue;
        };
        if let Some(setting) = settings.iter().find(|s| s.name == name) {
            let Some(option) = setting.store_option else {
                continue;
            };
            let value = match (setting.ty, value.parse::<i64>()) {
                (Type::Interval, Ok(micros)) => interval_option(micros, &interval_text(micros)),
                _ => value,
            };
            out.push((option.to_string(), value));
        } else if let Some((_, option)) = DUCKDB_PROXY.iter().find(|(n, _)| *n == name) {
            if !value.trim().is_empty() {
                out.push((option.to_string(), value));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The setting named `name`.
    fn find(name: &str) -> Option<Setting> {
        all().into_iter().find(|s| s.name == name)
    }

    #[test]
    fn each_setting_feeds_the_store_option_the_store_reads_and_its_default_parses() {
        let names: Vec<_> = all().iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "moraine_io_timeout",
                "moraine_reader_poll_interval",
                "moraine_reclaim_interval",
                "moraine_max_commit_size",
                "moraine_compression",
                "moraine_log_level"
            ]
        );
        // the store reads every option the settings feed, with each default
        let options: Vec<(String, String)> = all()
            .iter()
            .filter_map(|s| {
                let value = match s.ty {
                    Type::Interval => {
                        let ms: i64 = s.default.trim_end_matches(" milliseconds").parse().ok()?;
                        interval_option(ms * 1000, &s.default)
                    }
                    Type::Text => s.default.clone(),
                };
                Some((s.store_option?.to_string(), value))
            })
            .collect();
        assert_eq!(options.len(), 5);
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().join("lake").to_str().unwrap().to_string();
        let store = crate::store::Store::open_with(&url, false, &options).unwrap();
        let status = store.status().unwrap();
        assert_eq!(
            status.io_timeout_ms,
            crate::store::DEFAULT_IO_TIMEOUT.as_millis() as u64
        );
        assert!(
            crate::limits::parse_size(&find("moraine_max_commit_size").unwrap().default).is_ok()
        );
        assert!(
            crate::telemetry::Filter::parse(&find("moraine_log_level").unwrap().default).is_ok()
        );
        assert_eq!(find("moraine_nothing"), None);
    }

    #[test]
    fn an_attach_reads_its_settings_into_store_options() {
        assert_eq!(
            read_at_attach(false),
            [
                "moraine_io_timeout",
                "moraine_reader_poll_interval",
                "moraine_reclaim_interval",
                "moraine_max_commit_size",
                "moraine_compression"
            ]
        );
        assert_eq!(
            &read_at_attach(true)[5..],
            ["http_proxy", "http_proxy_username", "http_proxy_password"]
        );
        let given = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        let options = store_options(given(&[
            ("s3.key_id", "k"),
            ("setting.moraine_io_timeout", "1500000"),
            ("setting.moraine_reader_poll_interval", "999"),
            ("setting.moraine_max_commit_size", "64MiB"),
            ("setting.http_proxy", "localhost:3128"),
            ("setting.http_proxy_username", ""),
        ]));
        assert_eq!(
            options,
            given(&[
                ("s3.key_id", "k"),
                ("io_timeout_ms", "1500"),
                // not positive in whole milliseconds: the store's refusal names the value
                ("reader_poll_ms", "999 microseconds"),
                ("max_commit_size", "64MiB"),
                ("s3.http_proxy", "localhost:3128"),
            ])
        );
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().join("lake").to_str().unwrap().to_string();
        let bad = store_options(given(&[("setting.moraine_io_timeout", "0")]));
        let Err(err) = crate::store::Store::open_with(&url, false, &bad) else {
            panic!("a timeout of 0 opened the store")
        };
        let err = err.to_string();
        assert!(err.contains("moraine_io_timeout must be positive"), "{err}");
        assert!(err.contains("not '0 seconds'"), "{err}");
        assert_eq!(interval_text(-5_000_000), "-5 seconds");
        assert_eq!(interval_text(1_500), "1500 microseconds");
        assert_eq!(interval_text(2_000), "2 milliseconds");
    }

    #[test]
    fn an_interval_travels_as_whole_milliseconds_or_as_written() {
        assert_eq!(interval_option(1_500_000, "00:00:01.5"), "1500");
        assert_eq!(interval_option(999, "00:00:00.000999"), "00:00:00.000999");
        assert_eq!(interval_option(-5_000, "-00:00:00.005"), "-00:00:00.005");
    }
}
