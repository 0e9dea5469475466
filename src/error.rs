//! The one error type of the moraine core.
//!
//! Every message names what was wrong (the URL, the path, the table, the column, the key).
//! Two wordings are load-bearing for DuckLake, which retries a commit whose error message
//! contains "conflict", "primary key" or "unique":
//! - [`Error::Conflict`] always contains the word "conflict";
//! - a duplicate key is a [`Error::Constraint`] whose message says "primary key / unique".

/// Everything that can go wrong in the core.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store URL cannot be used (empty, unknown scheme, relative `file://` path, ...).
    #[error("invalid store URL '{url}': {reason}")]
    Url { url: String, reason: String },

    /// The location exists but holds something other than a moraine store.
    #[error("{location} is not a moraine store: {reason}")]
    NotAStore { location: String, reason: String },

    /// The object store or SlateDB failed.
    #[error("storage error: {0}")]
    Storage(String),

    /// A commit's write did not finish within the store's time limit: it may still reach the
    /// store, or may not. The handle that sent it refuses further work; a re-attach reads what
    /// the store holds.
    #[error("the outcome of the commit is unknown: {0}")]
    OutcomeUnknown(String),

    /// The store could not be reached, or did not answer in time; nothing was written.
    #[error("cannot reach {location}: {reason}")]
    Unreachable { location: String, reason: String },

    /// Another transaction committed first; DuckLake retries on this ("conflict").
    #[error("transaction conflict: {0}")]
    Conflict(String),

    /// A commit would break a rule of the catalog (NULL key, duplicate key, head snapshot...).
    #[error("constraint violation: {0}")]
    Constraint(String),

    /// A table definition does not match what moraine serves.
    #[error("schema error: {0}")]
    Schema(String),

    /// A catalog object is missing, already exists, or cannot be created.
    #[error("catalog error: {0}")]
    Catalog(String),

    /// A write reached a lake attached read-only.
    #[error("lake is attached read-only: {0}")]
    ReadOnly(String),

    /// A stored record does not decode.
    #[error("corrupt record: {0}")]
    Corrupt(String),

    /// The caller handed over something malformed (bad UTF-8, wrong row width, unknown tag).
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// A rowid does not name a row of any materialization of this transaction.
    #[error("invalid rowid {rowid}: {reason}")]
    RowId { rowid: i64, reason: String },
}

/// The core's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// True for errors DuckLake treats as retryable (its message contains "conflict").
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Conflict(_))
    }
}

/// `e` and its sources, so the message names the failure underneath ("wal unavailable (object
/// store error)" alone does not say which object, or why). A source whose text the message
/// already holds is not repeated.
pub(crate) fn with_sources(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !text.is_empty() && !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        source = s.source();
    }
    msg
}

impl From<slatedb::Error> for Error {
    fn from(e: slatedb::Error) -> Self {
        let detail = with_sources(&e);
        match e.kind() {
            slatedb::ErrorKind::Transaction => Error::Conflict(format!(
                "another transaction committed to the lake after this one began ({detail}); retry"
            )),
            slatedb::ErrorKind::Closed(slatedb::CloseReason::Fenced) => Error::Storage(format!(
                "another writer opened this lake, so this one was fenced and can no longer write ({detail})"
            )),
            _ => Error::Storage(format!("slatedb: {detail}")),
        }
    }
}

impl From<object_store::Error> for Error {
    fn from(e: object_store::Error) -> Self {
        Error::Storage(format!("object store: {}", with_sources(&e)))
    }
}
