//! The SlateDB handle a store reads its committed state through: a writer's `Db` or a
//! [`Reader`] of the state the writer made durable. Below the image: an image is handed one to
//! read a reader's latest state.

use crate::error::{Error, Result};
use crate::keys;
use bytes::Bytes;
use object_store::ObjectStore;
use slatedb::config::DbReaderOptions;
use slatedb::{Db, DbReader, DbReaderMode, ErrorKind};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tracing::Instrument;

/// A handle of the committed state: a writer's, or a reader's.
pub(crate) enum Backend {
    /// A writer, and its status (open, or why it closed), which a pin reads without I/O.
    Writer(Db, tokio::sync::watch::Receiver<slatedb::DbStatus>),
    Reader(Box<Reader>),
}

/// Where a lake's SlateDB handles are opened from.
#[derive(Clone)]
pub(crate) struct Source {
    pub(crate) object_store: Arc<dyn ObjectStore>,
    /// The store as the user named it (for errors).
    pub(crate) location: String,
    /// The store's scope in the process's SST cache.
    pub(crate) cache_scope: u64,
    pub(crate) metrics: Arc<slatedb_common::metrics::DefaultMetricsRecorder>,
    /// What a writer opened from it compresses SlateDB's blocks with.
    pub(crate) compression: crate::compression::Codec,
}

/// How long SlateDB's own poller waits between reads of the latest manifest: a reader's state
/// moves when the store reads it afresh ([`Reader::refresh`]), so this is only a backstop.
const SLATEDB_POLL: Duration = Duration::from_secs(3600);

/// A reader of the lake's SlateDB state (RFC 0009, "Readers"): a `DbReader` of the manifest
/// that was latest when it was opened. It does not follow the manifest on its own (an idle
/// attach makes no request): the store follows the lake through its commit objects and reads
/// the state afresh when it needs to ([`Reader::refresh`]); a read that finds an object of the
/// state it holds collected (compacted away since) reads the state afresh and tries once more.
/// A reader made [`Reader::unopened`] opens its `DbReader` at its first read: an attach that
/// started from the newest image checkpoint and the commit objects after it (RFC 0009, "An
/// attach that reads what its first query needs") pays SlateDB's open only when a query reads
/// history.
pub(crate) struct Reader {
    source: Source,
    /// `None` until the first read opens it.
    current: RwLock<Option<Arc<Opened>>>,
    /// The store format (`sys/format`) an unopened reader's attach took the lake to be in (its
    /// checkpoint said so): checked at the first open, which refuses another.
    expect_format: Option<&'static str>,
    /// One refresh (or first open) at a time.
    refreshing: tokio::sync::Mutex<()>,
    /// Set by [`Reader::close`]: nothing is opened after it.
    closed: std::sync::atomic::AtomicBool,
}

/// One opened `DbReader`, closed once its last holder drops it (a refresh replaces it while
/// reads may still hold it).
pub(crate) struct Opened {
    /// `None` once dropped.
    reader: Option<DbReader>,
    at: Instant,
    closed: std::sync::atomic::AtomicBool,
}

impl std::ops::Deref for Opened {
    type Target = DbReader;
    fn deref(&self) -> &DbReader {
        self.reader
            .as_ref()
            .expect("a reader is open until dropped")
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        let Some(reader) = self.reader.take() else {
            return;
        };
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        // its poller task would hold it otherwise; closing does no I/O
        crate::runtime::runtime().spawn(async move {
            let _ = reader.close().await;
        });
    }
}

/// Whether `e` is a read that found an object of the state gone (SlateDB's `NotFound`).
pub(crate) fn object_gone(e: &slatedb::Error) -> bool {
    if e.kind() != slatedb::ErrorKind::Data {
        return false;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let found = s
            .downcast_ref::<Arc<object_store::Error>>()
            .map(|e| e.as_ref())
            .or_else(|| s.downcast_ref::<object_store::Error>());
        if matches!(found, Some(object_store::Error::NotFound { .. })) {
            return true;
        }
        source = s.source();
    }
    false
}

impl Reader {
    /// A reader of the lake's state as its latest manifest has it now.
    pub(crate) async fn open(source: Source) -> std::result::Result<Reader, slatedb::Error> {
        let opened = Self::open_one(&source).await?;
        Ok(Reader {
            source,
            current: RwLock::new(Some(Arc::new(opened))),
            expect_format: None,
            refreshing: tokio::sync::Mutex::new(()),
            closed: Default::default(),
        })
    }

    /// A reader that opens SlateDB at its first read, of the state latest then, and refuses
    /// a store whose `sys/format` is not `format`.
    pub(crate) fn unopened(source: Source, format: &'static str) -> Reader {
        Reader {
            source,
            current: RwLock::new(None),
            expect_format: Some(format),
            refreshing: tokio::sync::Mutex::new(()),
            closed: Default::default(),
        }
    }

    async fn open_one(source: &Source) -> std::result::Result<Opened, slatedb::Error> {
        let options = DbReaderOptions {
            manifest_poll_interval: SLATEDB_POLL,
            checkpoint_lifetime: 2 * SLATEDB_POLL,
            ..DbReaderOptions::default()
        };
        // (the state is the manifest's as of this moment or later)
        let at = Instant::now();
        let reader = DbReader::builder("", source.object_store.clone())
            .with_reader_mode(DbReaderMode::FollowLatest)
            .with_options(options)
            .with_db_cache(crate::sst_cache::shared(), source.cache_scope)
            .with_metrics_recorder(source.metrics.clone())
            .build()
            .await?;
        Ok(Opened {
            reader: Some(reader),
            at,
            closed: Default::default(),
        })
    }

    /// The open `DbReader`, if there is one yet.
    fn current(&self) -> Option<Arc<Opened>> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether SlateDB was opened (an unopened reader opens it at its first read).
    pub(crate) fn is_open(&self) -> bool {
        self.current().is_some()
    }

    /// The `DbReader` reads go through now, held open while the caller holds it; opened now
    /// if it was not yet.
    pub(crate) async fn held(&self) -> Result<Arc<Opened>> {
        loop {
            if let Some(held) = self.current() {
                return Ok(held);
            }
            self.refresh(None).await?;
        }
    }

    /// When the state this reader reads was read (just before its manifest was opened); `None`
    /// before it was opened.
    pub(crate) fn read_at(&self) -> Option<Instant> {
        self.current().map(|h| h.at)
    }

    /// Read the lake's state afresh: a reader of the manifest that is latest now replaces this
    /// one (reads under way finish on the one they hold), or opens it. A refresh that began
    /// after `since` (another caller's, meanwhile; any open, when `since` is `None`) serves
    /// this one.
    pub(crate) async fn refresh(&self, since: Option<Instant>) -> Result<()> {
        let _one = self.refreshing.lock().await;
        if let Some(at) = self.read_at() {
            if since.is_none_or(|since| at > since) {
                return Ok(());
            }
        }
        self.refuse_if_closed()?;
        let first = self.read_at().is_none();
        let span = tracing::debug_span!("moraine.reader.refresh", store = %self.source.location);
        let opened = match Self::open_one(&self.source).instrument(span).await {
            Ok(opened) => opened,
            // (what the attach's open would have said of a location SlateDB cannot open)
            Err(e)
                if first
                    && !object_gone(&e)
                    && matches!(e.kind(), ErrorKind::Invalid | ErrorKind::Data) =>
            {
                return Err(Error::NotAStore {
                    location: self.source.location.clone(),
                    reason: format!("SlateDB cannot open it ({e})"),
                })
            }
            Err(e) => return Err(e.into()),
        };
        if let (true, Some(want)) = (first, self.expect_format) {
            let found = opened.get(keys::sys_format()).await?;
            if found.as_deref() != Some(want.as_bytes()) {
                return Err(Error::NotAStore {
                    location: self.source.location.clone(),
                    reason: format!(
                        "its sys/format is {:?}, not the {want:?} its newest image checkpoint \
                         names; attach it again",
                        found.as_deref().map(String::from_utf8_lossy)
                    ),
                });
            }
        }
        // a close that gave up waiting for this open: the reader it made goes (its drop closes
        // it)
        self.refuse_if_closed()?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(opened));
        Ok(())
    }

    /// Nothing is opened once [`Reader::close`] has begun.
    fn refuse_if_closed(&self) -> Result<()> {
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::Storage(format!(
                "the reader of {} is closed (the lake was detached)",
                self.source.location
            )));
        }
        Ok(())
    }

    /// `read` through the current reader; once more through a fresh one when it found an object
    /// of the state gone (collected after compaction since this reader's manifest).
    async fn read_retrying<T, F, Fut>(&self, read: F) -> Result<T>
    where
        F: Fn(Arc<Opened>) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, slatedb::Error>>,
    {
        let held = self.held().await?;
        let at = held.at;
        match read(held).await {
            Err(e) if object_gone(&e) => {
                tracing::debug!(
                    target: "moraine::store",
                    "moraine: a read of {} found an object gone ({e}); reading the state afresh",
                    self.source.location
                );
                self.refresh(Some(at)).await?;
                Ok(read(self.held().await?).await?)
            }
            read => Ok(read?),
        }
    }

    /// Why SlateDB closed this reader, if it did (an unopened one is open).
    pub(crate) fn close_reason(&self) -> Option<slatedb::CloseReason> {
        self.current().and_then(|h| h.status().close_reason)
    }

    /// The manifest this reader holds; `None` before it was opened.
    pub(crate) fn manifest(&self) -> Option<slatedb::VersionedManifest> {
        self.current().map(|h| h.manifest())
    }

    async fn close(&self) -> Result<()> {
        // (an open under way, e.g. a catch-up's, ends first: nothing opens after this)
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        let _one = self.refreshing.lock().await;
        let Some(held) = self.current() else {
            return Ok(());
        };
        held.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        held.close().await.map_err(Error::from)
    }
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
                Backend::Reader(r) => r.read_retrying(|h| async move { h.get(key).await }).await?,
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
            let out = match self {
                Backend::Writer(db, _) => {
                    let it = db
                        .scan_prefix_with_options(prefix, .., &bulk_scan())
                        .await?;
                    collect(it).await?
                }
                Backend::Reader(r) => {
                    r.read_retrying(|h| async move {
                        let it = h.scan_prefix_with_options(prefix, .., &bulk_scan()).await?;
                        collect(it).await
                    })
                    .await?
                }
            };
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

async fn collect(
    mut it: slatedb::DbIterator,
) -> std::result::Result<Vec<(Bytes, Bytes)>, slatedb::Error> {
    let mut out = Vec::new();
    while let Some(kv) = it.next().await? {
        out.push((kv.key, kv.value));
    }
    Ok(out)
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
