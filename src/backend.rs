//! The SlateDB handle a store reads its committed state through: a writer's `Db` or a reader's
//! `DbReader`. Below the image: an image is handed one to read a reader's latest state.

use crate::error::Result;
use crate::keys;
use bytes::Bytes;
use slatedb::{Db, DbReader};
use tracing::Instrument;

/// A handle of the committed state: a writer's, or a reader's.
pub(crate) enum Backend {
    /// A writer, and its status (open, or why it closed), which a pin reads without I/O.
    Writer(Db, tokio::sync::watch::Receiver<slatedb::DbStatus>),
    Reader(Box<DbReader>),
}

impl Backend {
    pub(crate) fn writer(db: Db) -> Backend {
        let status = db.subscribe();
        Backend::Writer(db, status)
    }

    /// A point read of the committed state this handle sees.
    pub(crate) async fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        let span = tracing::trace_span!("moraine.get", key = %keys::show(key));
        async {
            Ok(match self {
                Backend::Writer(db, _) => db.get(key).await?,
                Backend::Reader(r) => r.get(key).await?,
            })
        }
        .instrument(span)
        .await
    }

    /// Every (key, value) under `prefix` in the committed state this handle sees.
    pub(crate) async fn scan(&self, prefix: &[u8]) -> Result<Vec<(Bytes, Bytes)>> {
        let span = tracing::trace_span!(
            "moraine.scan_prefix",
            prefix = %keys::show(prefix),
            records = tracing::field::Empty
        );
        async {
            let options = bulk_scan();
            let mut it = match self {
                Backend::Writer(db, _) => db.scan_prefix_with_options(prefix, .., &options).await?,
                Backend::Reader(r) => r.scan_prefix_with_options(prefix, .., &options).await?,
            };
            let mut out = Vec::new();
            while let Some(kv) = it.next().await? {
                out.push((kv.key, kv.value));
            }
            tracing::Span::current().record("records", out.len());
            Ok(out)
        }
        .instrument(span)
        .await
    }

    pub(crate) async fn close(&self) -> Result<()> {
        match self {
            Backend::Writer(db, _) => db.close().await?,
            Backend::Reader(r) => r.close().await?,
        }
        Ok(())
    }
}

/// How a whole-keyspace read fetches: large reads, several at once (the defaults fetch one block
/// per request, one request at a time).
pub(crate) fn bulk_scan() -> slatedb::config::ScanOptions {
    slatedb::config::ScanOptions {
        read_ahead_bytes: 1 << 20,
        max_fetch_tasks: 4,
        ..Default::default()
    }
}
