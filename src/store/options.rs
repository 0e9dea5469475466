//! The options an attach passes that bound the store's operations (`moraine_io_timeout`,
//! `moraine_reader_poll_interval`, ...): parsed into the store's [`Access`], which an attach
//! that would share an open store must match.

use super::*;

/// How long one store operation may take unless the attach says otherwise (DuckDB's
/// `moraine_io_timeout` setting): opening SlateDB (its manifest, fencing, WAL replay), a
/// commit's durable write, a close.
pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(30);

/// How an attach reaches its store: the credentials of an s3:// store and the time limit of
/// each operation. An attach that would share an open store must bring the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Access {
    pub(super) secret: Option<crate::s3::S3Secret>,
    pub(super) io_timeout: Duration,
    /// The most one commit writes (`moraine_max_commit_size`, see `limits.rs`).
    pub(super) max_commit_bytes: u64,
    /// How often a reader polls for the writer's commits (`moraine_reader_poll_interval`).
    pub(super) reader_poll: Duration,
    /// The longest a writer leaves an SST unrewritten (`moraine_reclaim_interval`).
    pub(super) reclaim_interval: Duration,
    /// What a writer compresses SlateDB's blocks and its checkpoints with
    /// (`moraine_compression`, RFC 0013).
    pub(super) compression: Codec,
}

/// The `compression` option (from `moraine_compression`), else [`crate::compression::DEFAULT`].
pub(super) fn compression_option(options: &[(String, String)]) -> Result<Codec> {
    match options.iter().find(|(k, _)| k == "compression") {
        None => Ok(crate::compression::DEFAULT),
        Some((_, v)) => Codec::parse(v),
    }
}

/// The option `key` in milliseconds (from the interval setting `setting`), else `default`.
pub(super) fn millis_option(
    options: &[(String, String)],
    key: &str,
    setting: &str,
    default: Duration,
) -> Result<Duration> {
    match options.iter().find(|(k, _)| k == key) {
        None => Ok(default),
        Some((_, v)) => match v.parse::<u64>() {
            Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
            _ => Err(Error::InvalidInput(format!(
                "{setting} must be positive (at least a millisecond), not '{v}'"
            ))),
        },
    }
}

/// The `io_timeout_ms` option (from `moraine_io_timeout`), else [`DEFAULT_IO_TIMEOUT`].
pub(super) fn io_timeout_option(options: &[(String, String)]) -> Result<Duration> {
    millis_option(
        options,
        "io_timeout_ms",
        "moraine_io_timeout",
        DEFAULT_IO_TIMEOUT,
    )
}

/// How often a reader polls the writer's manifest and WAL unless the attach says otherwise
/// (DuckDB's `moraine_reader_poll_interval` setting): its freshness (RFC 0009).
pub const DEFAULT_READER_POLL: Duration = Duration::from_millis(200);

/// The `reader_poll_ms` option (from `moraine_reader_poll_interval`), else
/// [`DEFAULT_READER_POLL`].
pub(super) fn reader_poll_option(options: &[(String, String)]) -> Result<Duration> {
    millis_option(
        options,
        "reader_poll_ms",
        "moraine_reader_poll_interval",
        DEFAULT_READER_POLL,
    )
}
