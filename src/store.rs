//! The store: one SlateDB database per lake, opened from a store URL.
//!
//! A writer holds a `slatedb::Db` (opening one fences any earlier writer of the same lake); a
//! read-only attach holds a `slatedb::DbReader`, which writes nothing and fences nobody. All
//! SlateDB calls are async; the FFI calls in from DuckDB's own threads, so the core drives them
//! on one process-wide tokio runtime with [`block_on`].

pub(crate) use crate::backend::{bulk_scan, Backend};
use crate::cell::Cell;
use crate::checkpoint;
use crate::error::{Error, Result};
pub use crate::head::Head;
use crate::image::Image;
use crate::keys;
use crate::runtime::block_on;
use crate::runtime::{runtime, seconds, unix_micros_now, within};
use object_store::{ObjectStore, ObjectStoreExt};
use slatedb::config::{
    FlushOptions, FlushType, GarbageCollectorDirectoryOptions, GarbageCollectorOptions,
};
use slatedb::{Db, WriteBatch};
use std::future::Future;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tracing::Instrument;

mod checkpointer;
mod close;
mod commit;
mod compactor;
mod format;
mod gc;
mod load;
mod local;
mod objects;
mod open;
mod options;
mod pin;
mod reclaim;
mod snapshots;
#[cfg(test)]
mod tests;

#[cfg(test)]
pub(crate) use close::{replay_backlog, REPLAY_BACKLOG_LIMIT};
#[cfg(test)]
pub(crate) use compactor::START_AFTER as COMPACTOR_START_AFTER;
pub use format::STORE_FORMAT;
#[cfg(test)]
pub(crate) use load::{image_from_records, load_image};
pub use options::{DEFAULT_IO_TIMEOUT, DEFAULT_READER_POLL};
pub use reclaim::DEFAULT_RECLAIM_INTERVAL;
pub use reclaim::{Caller, Reclaimed};

// what the submodules share (each reads this module's names with `use super::*`)
use checkpointer::delete_log_upto;
use format::check_format;
use gc::{gc_at_close, start_collector};
use objects::{prefetch_checkpoint, Objects, Prefetch};
use open::{not_a_store, writer_settings};
use options::{io_timeout_option, millis_option, reader_poll_option, Access};
use snapshots::OpenSnapshots;

// ---- the store -------------------------------------------------------------------------------

/// An open lake.
pub struct Store {
    url: String,
    canonical: String,
    read_only: bool,
    closed: std::sync::atomic::AtomicBool,
    /// Rows deleted or updated by this process's open transactions.
    pub(crate) row_locks: crate::row_locks::RowLocks,
    pub(crate) backend: Backend,
    /// The object store SlateDB runs on (its garbage collector's at close, and where image
    /// checkpoints are written and read).
    objects: Objects,
    /// Whether that object store keeps SlateDB's GC boundary objects (see `gc_options`).
    boundary_files: bool,
    /// The checkpoint being written in the background, if any.
    checkpointing: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The newest checkpoint object, read while SlateDB opened; the first image load takes it.
    prefetched: Mutex<Option<Prefetch>>,
    /// When the first commit after the last checkpoint this writer started was installed.
    uncheckpointed_since: Mutex<Option<std::time::Instant>>,
    /// A writer's garbage collector (`start_collector`), stopped at close.
    collector: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// A writer's compactor (`compactor.rs`), stopped at close.
    compactor: compactor::WriterCompactor,
    /// The batch of the newest image checkpoint this writer knows of (`u64::MAX`: not read
    /// yet); shared with the background checkpoint.
    checkpointed: Arc<std::sync::atomic::AtomicU64>,
    /// The committed image transactions pin (RFC 0009); `None` until first needed, and after a
    /// write whose outcome is unknown (the next pin reads the store afresh).
    image: Mutex<Option<Arc<Image>>>,
    /// Held by a commit from its conflict check until its image is installed, and by a reader's
    /// refresh: one at a time.
    commit_lock: Mutex<()>,
    /// Held by a reclaim (`reclaim.rs`): one at a time.
    reclaiming: Mutex<()>,
    /// Every SlateDB snapshot this writer took, weakly: which of them are still open, and so
    /// which committed states this process may still read (a reclaim waits for the older ones).
    snapshots: Mutex<OpenSnapshots>,
    /// When (microseconds since the Unix epoch) an image of a new head was last installed: a
    /// transaction that began after it reads the head (a reclaim tells its caller by it).
    head_installed_at: std::sync::atomic::AtomicI64,
    /// Commits since this writer last flushed its memtable.
    unflushed_commits: std::sync::atomic::AtomicU64,
    /// This store's scope in the process's SST cache.
    cache_scope: u64,
    /// Set while a commit is between its write and the install of its image, and left set if
    /// it never got there (a panic): a writer then trusts its image no more and reads the head.
    image_unsure: std::sync::atomic::AtomicBool,
    /// The credentials and time limit it was opened with.
    access: Access,
    /// Set when a commit's write outlived `io_timeout`: its outcome is unknown, so this handle
    /// serves nothing more (a re-attach reads the truth).
    broken: std::sync::atomic::AtomicBool,
    /// Set when a write of this writer failed because another writer fenced it. SlateDB also
    /// records the fence in its status, but from a background task that may run after the
    /// failed write has returned: the flag makes the very next pin refuse, as every later one.
    fenced: Arc<std::sync::atomic::AtomicBool>,
    /// SlateDB's metrics for this store (`moraine_metrics`).
    metrics: Arc<slatedb_common::metrics::DefaultMetricsRecorder>,
    /// Commits made through this handle, and when the last was acknowledged (microseconds
    /// since the Unix epoch; 0 before the first).
    commits: std::sync::atomic::AtomicU64,
    last_commit_micros: std::sync::atomic::AtomicI64,
    /// How many times `sys/head` was read from storage (tests).
    #[cfg(test)]
    pub(crate) head_reads: std::sync::atomic::AtomicU64,
}

impl Store {
    /// Whether this writer's compactor runs (tests).
    #[cfg(test)]
    pub(crate) fn compactor_running(&self) -> bool {
        self.compactor.running().is_some()
    }

    /// The pace this writer's compactor runs at, if it runs (tests).
    #[cfg(test)]
    pub(crate) fn compactor_pace(&self) -> Option<compactor::Pace> {
        self.compactor.running()
    }

    /// Starts a writer's compactor now, if it is not running yet (`compactor.rs`).
    pub(crate) fn start_compactor(&self) {
        if let Backend::Writer(..) = &self.backend {
            // a fenced writer's compactor would fence the newer writer's
            if self.close_reason().is_none() {
                self.compactor.start(&self.objects.store, &self.metrics);
            }
        }
    }

    /// Runs a writer's compactor at `pace` from now (stopping the one that runs at another
    /// pace first), unless the store was fenced or closed (`compactor.rs`). Waits for the change
    /// within the store's time limit; past it, the change goes on in the background.
    pub(crate) fn pace_compactor(&self, pace: compactor::Pace) {
        if let Some(change) = self.set_compactor_pace(pace) {
            let changed = async {
                change
                    .await
                    .map_err(|e| Error::Storage(format!("restarting the compactor: {e}")))?;
                Ok(())
            };
            if let Err(e) = self.bounded("restarting the compactor", changed) {
                tracing::warn!("moraine: the compactor is not at {pace:?} yet: {e}");
            }
        }
    }

    /// [`Store::pace_compactor`] without waiting: the change is made in the background.
    pub(crate) fn pace_compactor_later(&self, pace: compactor::Pace) {
        drop(self.set_compactor_pace(pace));
    }

    fn set_compactor_pace(&self, pace: compactor::Pace) -> Option<tokio::task::JoinHandle<bool>> {
        match &self.backend {
            Backend::Writer(_, status) if self.close_reason().is_none() => {
                // asked again before the change starts a compactor: a writer fenced or closed
                // meanwhile starts none
                let (status, fenced) = (status.clone(), self.fenced.clone());
                let open = move || {
                    status.borrow().close_reason.is_none() && !fenced.load(Ordering::SeqCst)
                };
                Some(
                    self.compactor
                        .set_pace(&self.objects.store, &self.metrics, pace, open),
                )
            }
            _ => None,
        }
    }

    /// The handle the committed state is read through (what an image is given to read a
    /// reader's latest state).
    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The URL this store was opened with.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The committed `sys/head`.
    pub fn head(&self) -> Result<Head> {
        self.bounded("reading the head", self.read_head())
    }

    pub(crate) async fn read_head(&self) -> Result<Head> {
        #[cfg(test)]
        self.head_reads.fetch_add(1, Ordering::SeqCst);
        match self.backend.get(&keys::sys_head()).await? {
            Some(v) => Head::decode(&v),
            None => Err(Error::Corrupt(format!(
                "{} has no sys/head",
                self.canonical
            ))),
        }
    }

    #[cfg(test)]
    pub(crate) fn db(&self) -> Option<&Db> {
        match &self.backend {
            Backend::Writer(db, _) => Some(db),
            Backend::Reader(_) => None,
        }
    }

    /// Why SlateDB closed this handle, if it did: its own status, or the fence a failed write of
    /// this writer saw before SlateDB's status caught up ([`Store::fenced`]).
    fn close_reason(&self) -> Option<slatedb::CloseReason> {
        let status = match &self.backend {
            Backend::Writer(_, status) => status.borrow().close_reason,
            Backend::Reader(reader) => reader.status().close_reason,
        };
        status.or(self
            .fenced
            .load(Ordering::SeqCst)
            .then_some(slatedb::CloseReason::Fenced))
    }

    /// `f` on the store's runtime, failing with [`Error::Unreachable`] when it takes longer than
    /// the store's time limit (`what` names it). For reads: a read given up writes nothing.
    pub(crate) fn bounded<T: Send>(
        &self,
        what: &str,
        f: impl Future<Output = Result<T>> + Send,
    ) -> Result<T> {
        block_on(within(self.access.io_timeout, &self.url, what, f))
    }

    /// An attach whose commit had an unknown outcome ([`Store::outcome_unknown`]: a write that
    /// outlived the time limit, or a panic inside the commit) serves nothing more.
    fn check_not_broken(&self) -> Result<()> {
        if self.broken.load(Ordering::SeqCst) {
            return Err(Error::OutcomeUnknown(format!(
                "an earlier commit to {} may or may not have been applied (its write may still \
                 land); this attach accepts no more work: DETACH and ATTACH again to see what the \
                 lake holds",
                self.url
            )));
        }
        Ok(())
    }

    /// How many keys each keyspace holds at the latest committed state, as
    /// (keyspace, kind, keys): e.g. ("history", "ducklake_column", 3). The kind is the second
    /// key segment when it is text (a table name), else empty (e.g. `snapshot/<id>`). A lake
    /// other than the default one names its keyspaces `lake/<schema>/<keyspace>`.
    /// An operator's view of the store; reads everything, so not for hot paths.
    pub fn keyspace_counts(self: &Arc<Self>) -> Result<Vec<(String, String, u64)>> {
        let entries = self.bounded("reading every record", self.backend.scan(&[]))?;
        let mut counts: Vec<(String, String, u64)> = Vec::new();
        for (key, _) in entries {
            let segments = keys::decode_key(&key)?;
            let text = |i: usize| match segments.get(i) {
                Some(Cell::Text(s)) => s.clone(),
                _ => String::new(),
            };
            // another lake's keys lead with lake/<schema>/: its keyspaces are named with it
            let (keyspace, kind) = match text(0).as_str() {
                "lake" => (format!("lake/{}/{}", text(1), text(2)), text(3)),
                _ => (text(0), text(1)),
            };
            match counts.last_mut() {
                Some(last) if last.0 == keyspace && last.1 == kind => last.2 += 1,
                _ => counts.push((keyspace, kind, 1)),
            }
        }
        Ok(counts)
    }

    /// A commit whose outcome is unknown (`why`): this handle serves nothing more (a re-attach
    /// reads what the store holds), and the error says so.
    pub fn outcome_unknown(&self, why: &str) -> Error {
        self.broken.store(true, Ordering::SeqCst);
        Error::OutcomeUnknown(format!(
            "{why}: the commit to {} may or may not have been applied (its write may still \
             reach the store); this attach accepts no more work: DETACH and ATTACH again to see \
             what the lake holds",
            self.url
        ))
    }

    /// An operator's view of this handle (`moraine_status`): reads the head from the store,
    /// the rest from memory. A head that cannot be read (an outage, a fenced writer) is
    /// reported, not raised: the view is for when something is wrong.
    pub fn status(&self) -> Result<crate::status::Status> {
        // after a commit of unknown outcome, a read would see that commit's batch in SlateDB's
        // memtable, which may never land: the committed head is not known
        let head = match self.check_not_broken() {
            Ok(()) => self.head(),
            Err(e) => Err(e),
        };
        let manifest = match &self.backend {
            Backend::Writer(db, _) => db.manifest(),
            Backend::Reader(reader) => reader.manifest(),
        };
        let closed = self.close_reason();
        let state = if self.broken.load(Ordering::SeqCst) {
            "outcome unknown"
        } else if matches!(closed, Some(slatedb::CloseReason::Fenced)) {
            "fenced"
        } else if closed.is_some() || self.closed.load(Ordering::SeqCst) {
            "closed"
        } else {
            "open"
        };
        let image = self.current_image();
        let footprint = image.as_ref().map(|i| i.footprint());
        let known = self.checkpointed.load(Ordering::SeqCst);
        let last = self.last_commit_micros.load(Ordering::SeqCst);
        Ok(crate::status::Status {
            url: self.url.clone(),
            mode: if self.read_only { "reader" } else { "writer" },
            state,
            head_batch: head.as_ref().ok().map(|h| h.batch_count),
            head_snapshot: head.as_ref().ok().and_then(|h| h.snapshot_id),
            problem: head.err().map(|e| e.to_string()),
            manifest_id: manifest.id(),
            writer_epoch: manifest.writer_epoch(),
            l0_ssts: manifest.l0().len(),
            sorted_runs: manifest.compacted().len(),
            image_batch: image.as_ref().map(|i| i.head().batch_count),
            image_records: footprint.map(|f| f.0),
            image_bytes: footprint.map(|f| f.1),
            checkpoint_batch: image
                .as_ref()
                .and_then(|i| i.checkpoint_batch())
                .max((known != u64::MAX && known > 0).then_some(known)),
            commits: self.commits.load(Ordering::SeqCst),
            last_commit_micros: (last > 0).then_some(last),
            io_timeout_ms: self.access.io_timeout.as_millis() as u64,
            max_commit_bytes: self.access.max_commit_bytes,
            reader_poll_ms: self.access.reader_poll.as_millis() as u64,
            reclaim_interval_ms: self.access.reclaim_interval.as_millis() as u64,
        })
    }

    /// SlateDB's metrics for this store (`moraine_metrics`).
    pub fn metrics(&self) -> Vec<(String, String, i64)> {
        crate::status::metric_rows(&self.metrics)
    }
}
