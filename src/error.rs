//! The one error type of the moraine core.
//!
//! Every message names what was wrong (the URL, the path, the table, the column, the key).
//! Every error has a [`Kind`], which crosses the C surface as a code; the C++ layer picks
//! DuckDB's exception type from the code, never from the text.
//!
//! DuckLake retries a commit whose error *message* contains "conflict", "primary key",
//! "unique" or "concurrent" (`DuckLakeTransaction::RetryOnError`). So the text decides what
//! DuckLake retries, and it must say exactly that for the errors a retry can cure:
//! - [`Error::Conflict`] always contains the word "conflict";
//! - [`Error::Duplicate`] (a stored identity inserted again) says "primary key / unique";
//! - every other error reaches DuckDB through [`Error::duckdb_message`], which breaks those
//!   words wherever they occur (a table named `unique_ids`, an HTTP "409 Conflict" from the
//!   object store) with an invisible U+2060 WORD JOINER, so DuckLake never retries them.

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

    /// A commit inserts a row whose identity is already stored: the race two writers minting
    /// the same snapshot or id lose; DuckLake retries on it ("primary key / unique").
    #[error("constraint violation: {0}")]
    Duplicate(String),

    /// A commit would break a rule of the catalog (NULL key, head snapshot, a missing parent...).
    #[error("constraint violation: {0}")]
    Constraint(String),

    /// Another writer opened the lake, so this one can no longer write.
    #[error("fenced: {0}")]
    Fenced(String),

    /// A bug in moraine (a panic, a call the C++ layer should never make); the transaction it
    /// happened in refuses to commit.
    #[error("moraine internal error: {0}")]
    Internal(String),

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

/// What kind of failure an error is: the code that crosses the C surface
/// (`MoraineError::kind` in extension/include/moraine_ffi.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Kind {
    /// Bad input: a URL, an option, a value, a definition moraine does not serve.
    InvalidInput = 1,
    /// Another transaction committed first (retried by DuckLake).
    Conflict = 2,
    /// A stored identity inserted again (retried by DuckLake).
    Duplicate = 3,
    /// A rule of the catalog broken.
    Constraint = 4,
    /// A catalog object missing, or already there.
    Catalog = 5,
    /// A write to a lake attached read-only.
    ReadOnly = 6,
    /// The store failed or could not be reached; nothing was written.
    Io = 7,
    /// A commit's write may or may not have reached the store.
    OutcomeUnknown = 8,
    /// Another writer opened the lake.
    Fenced = 9,
    /// A stored record does not decode.
    Corrupt = 10,
    /// A bug in moraine.
    Internal = 11,
}

impl Kind {
    /// Every kind, in code order.
    pub const ALL: [Kind; 11] = [
        Kind::InvalidInput,
        Kind::Conflict,
        Kind::Duplicate,
        Kind::Constraint,
        Kind::Catalog,
        Kind::ReadOnly,
        Kind::Io,
        Kind::OutcomeUnknown,
        Kind::Fenced,
        Kind::Corrupt,
        Kind::Internal,
    ];
}

/// The words DuckLake's retry looks for in a commit's error message (lower case).
const RETRY_WORDS: [&str; 4] = ["conflict", "primary key", "unique", "concurrent"];

impl Error {
    /// True for errors DuckLake treats as retryable (its message contains "conflict").
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Conflict(_))
    }

    pub fn kind(&self) -> Kind {
        match self {
            Error::Url { .. } | Error::NotAStore { .. } | Error::Schema(_) => Kind::InvalidInput,
            Error::InvalidInput(_) => Kind::InvalidInput,
            Error::Storage(_) | Error::Unreachable { .. } => Kind::Io,
            Error::OutcomeUnknown(_) => Kind::OutcomeUnknown,
            Error::Conflict(_) => Kind::Conflict,
            Error::Duplicate(_) => Kind::Duplicate,
            Error::Constraint(_) => Kind::Constraint,
            Error::Fenced(_) => Kind::Fenced,
            Error::Catalog(_) => Kind::Catalog,
            Error::ReadOnly(_) => Kind::ReadOnly,
            Error::Corrupt(_) => Kind::Corrupt,
            Error::Internal(_) | Error::RowId { .. } => Kind::Internal,
        }
    }

    /// Whether a retry of the whole DuckLake commit can cure it.
    pub fn retryable(&self) -> bool {
        matches!(self.kind(), Kind::Conflict | Kind::Duplicate)
    }

    /// The message as DuckDB (and DuckLake's retry) sees it: the retryable errors as they are,
    /// every other one with DuckLake's retry words broken by an invisible U+2060, so that no
    /// name or foreign text in it makes DuckLake retry what a retry cannot cure.
    pub fn duckdb_message(&self) -> String {
        let text = self.to_string();
        if self.retryable() {
            text
        } else {
            break_retry_words(&text)
        }
    }
}

/// `text` with each occurrence of a retry word (any case) broken after its first letter by
/// U+2060 WORD JOINER: it reads the same, and no longer contains the word.
fn break_retry_words(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len() + 8);
    let mut at = 0;
    while at < text.len() {
        let hit = RETRY_WORDS
            .iter()
            .find(|w| lower[at..].starts_with(**w) && text.is_char_boundary(at + 1));
        match hit {
            Some(w) => {
                out.push_str(&text[at..at + 1]);
                out.push('\u{2060}');
                out.push_str(&text[at + 1..at + w.len()]);
                at += w.len();
            }
            None => {
                let c = text[at..].chars().next().expect("at is a char boundary");
                out.push(c);
                at += c.len_utf8();
            }
        }
    }
    out
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
            slatedb::ErrorKind::Closed(slatedb::CloseReason::Fenced) => Error::Fenced(format!(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn retried_by_ducklake(message: &str) -> bool {
        let m = message.to_lowercase();
        RETRY_WORDS.iter().any(|w| m.contains(w))
    }

    #[test]
    fn ducklake_retries_exactly_the_conflicts() {
        let retryable = [
            Error::Conflict("another transaction committed first".into()),
            Error::Duplicate(
                "duplicate key (3) in ducklake_snapshot: violates primary key / unique constraint"
                    .into(),
            ),
        ];
        for e in &retryable {
            assert!(e.retryable(), "{e}");
            assert!(retried_by_ducklake(&e.duckdb_message()), "{e}");
        }
        // every other kind, even when a name or a service's text holds the words
        let words = "409 Conflict, table unique_ids, CONCURRENT writers, Primary Key";
        let others = [
            Error::Url {
                url: words.into(),
                reason: words.into(),
            },
            Error::NotAStore {
                location: words.into(),
                reason: words.into(),
            },
            Error::Storage(words.into()),
            Error::OutcomeUnknown(words.into()),
            Error::Unreachable {
                location: words.into(),
                reason: words.into(),
            },
            Error::Constraint(words.into()),
            Error::Fenced(words.into()),
            Error::Schema(words.into()),
            Error::Catalog(words.into()),
            Error::ReadOnly(words.into()),
            Error::Corrupt(words.into()),
            Error::InvalidInput(words.into()),
            Error::Internal(words.into()),
            Error::RowId {
                rowid: 1,
                reason: words.into(),
            },
        ];
        for e in &others {
            assert!(!e.retryable(), "{e}");
            let shown = e.duckdb_message();
            assert!(!retried_by_ducklake(&shown), "{shown}");
            // the same text once the invisible joiners are taken out
            assert_eq!(shown.replace('\u{2060}', ""), e.to_string());
        }
    }

    #[test]
    fn each_error_has_its_kind() {
        assert_eq!(Error::Conflict(String::new()).kind(), Kind::Conflict);
        assert_eq!(Error::Duplicate(String::new()).kind(), Kind::Duplicate);
        assert_eq!(Error::Constraint(String::new()).kind(), Kind::Constraint);
        assert_eq!(Error::Storage(String::new()).kind(), Kind::Io);
        assert_eq!(
            Error::Unreachable {
                location: String::new(),
                reason: String::new()
            }
            .kind(),
            Kind::Io
        );
        assert_eq!(
            Error::OutcomeUnknown(String::new()).kind(),
            Kind::OutcomeUnknown
        );
        assert_eq!(Error::Fenced(String::new()).kind(), Kind::Fenced);
        assert_eq!(Error::Catalog(String::new()).kind(), Kind::Catalog);
        assert_eq!(Error::ReadOnly(String::new()).kind(), Kind::ReadOnly);
        assert_eq!(Error::Corrupt(String::new()).kind(), Kind::Corrupt);
        assert_eq!(
            Error::InvalidInput(String::new()).kind(),
            Kind::InvalidInput
        );
        assert_eq!(Error::Internal(String::new()).kind(), Kind::Internal);
        assert_eq!(Kind::Internal as u32, 11);
    }

    #[test]
    fn breaking_words_keeps_other_text_and_multibyte_characters() {
        assert_eq!(break_retry_words("naïve ünïque"), "naïve ünïque");
        assert_eq!(break_retry_words("Unique"), "U\u{2060}nique");
        assert_eq!(break_retry_words("x conflicts y"), "x c\u{2060}onflicts y");
        assert_eq!(break_retry_words(""), "");
    }
}
