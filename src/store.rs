//! The store: one SlateDB database per lake, opened from a store URL.
//!
//! A writer holds a `slatedb::Db` (opening one fences any earlier writer of the same lake); a
//! read-only attach holds a `slatedb::DbReader`, which writes nothing and fences nobody. All
//! SlateDB calls are async; the FFI calls in from DuckDB's own threads, so the core drives them
//! on one process-wide tokio runtime with [`block_on`].

pub(crate) use crate::backend::{bulk_scan, Backend, Reader, Source};
use crate::cell::Cell;
use crate::checkpoint;
use crate::compression::Codec;
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
mod log;
mod objects;
mod open;
mod options;
mod pin;
#[cfg(test)]
mod readers_tests;
mod rebase;
mod reclaim;
mod role;
mod snapshots;
mod status;
#[cfg(test)]
mod tests;
mod verify;
#[cfg(test)]
mod writers_tests;

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
pub use verify::Holding;

// what the submodules share (each reads this module's names with `use super::*`)
use checkpointer::delete_log_upto;
use format::check_format;
use gc::{gc_at_close, start_collector};
use objects::{prefetch_checkpoint, Objects, Prefetch};
use open::{not_a_store, writer_settings};
use options::{compression_option, io_timeout_option, millis_option, reader_poll_option, Access};
use snapshots::OpenSnapshots;

// ---- the store -------------------------------------------------------------------------------

/// Clears a "task under way" flag of the store (a catch-up's, a background flush's) when the
/// task holding it ends, however it ends (a panic included).
struct Running(Arc<std::sync::atomic::AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// An open lake.
pub struct Store {
    /// This store, weakly: what its background tasks hold.
    me: Weak<Store>,
    url: String,
    canonical: String,
    read_only: bool,
    closed: std::sync::atomic::AtomicBool,
    /// Rows deleted or updated by this process's open transactions.
    pub(crate) row_locks: crate::row_locks::RowLocks,
    /// The SlateDB handle: the folder's `Db`, or a `DbReader` (RFC 0004 v3); a folder another
    /// process fenced becomes a reader ([`Store::demote`]), a writer may take the folder role.
    handle: std::sync::RwLock<Arc<Backend>>,
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
    /// Folds written into SlateDB since this folder last wrote its WAL out itself
    /// (`Store::count_fold`), and whether such a write is under way.
    unflushed_folds: std::sync::atomic::AtomicU64,
    wal_flushing: Arc<std::sync::atomic::AtomicBool>,
    /// Set while a memtable flush a commit started runs (`Store::flush_after`).
    memtable_flushing: Arc<std::sync::atomic::AtomicBool>,
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
    /// The commit whose object's create got no answer, if any: settled by reading the object.
    pending: Mutex<Option<(checkpoint::Commit, Head)>>,
    /// Set when a fold's write into SlateDB did not return within the time limit: SlateDB may
    /// still apply it, so nothing is folded again until a flush shows it applied.
    fold_stuck: std::sync::atomic::AtomicBool,
    /// The last time an attach without the folder role found its image far past its SlateDB
    /// state and read that state afresh in the background (`pin.rs`, `follow_tail`).
    catch_up: Arc<Mutex<Option<pin::CatchUp>>>,
    /// Set while that read runs: one at a time.
    catching_up: Arc<std::sync::atomic::AtomicBool>,
    /// When a reader last read the lake's tail (the commit objects after its image).
    tail_checked: Mutex<Option<std::time::Instant>>,
    /// When this attach last met another process's commit (in the tail, or as the winner of
    /// a race): while other writers are about, a read-write attach reads the tail at every
    /// pin, so that its transactions begin on the head (`pin.rs`).
    others_seen: Mutex<Option<std::time::Instant>>,
    /// When this attach last read the lake's tail to its end, or created a commit object: a
    /// commit object is deleted only [`log::DELETE_AFTER`] after it was written, so a view
    /// confirmed more recently than half that cannot miss one that is gone (`log.rs`).
    tail_confirmed: Mutex<Option<std::time::Instant>>,
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
    /// The head of the checkpoint an attach started from without opening SlateDB (`open.rs`,
    /// `start_without_slatedb`): the folded head it stands on until its reader opens SlateDB,
    /// whose state holds at least that head.
    started_from: Option<Head>,
    /// Set for a read-write attach that started without SlateDB: it takes the folder role at
    /// its first commit (`commit.rs`), not at the attach. Cleared once it took the role.
    role_at_first_commit: std::sync::atomic::AtomicBool,
    /// Why taking the folder role found a store this build does not write (its format marker
    /// names another format): every commit is refused with it.
    format_refused: Mutex<Option<String>>,
    /// How many times `sys/head` was read from storage (tests).
    #[cfg(test)]
    pub(crate) head_reads: std::sync::atomic::AtomicU64,
}

impl Store {
    /// Where this lake's SlateDB handles are opened from.
    fn source(&self) -> Source {
        Source {
            object_store: self.objects.store.clone(),
            location: self.url.clone(),
            cache_scope: self.cache_scope,
            metrics: self.metrics.clone(),
            compression: self.access.compression,
        }
    }

    /// The handle the committed state is read through (what an image is given to read a
    /// reader's latest state).
    pub(crate) fn backend(&self) -> Arc<Backend> {
        self.handle
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The URL this store was opened with.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The lake's committed head: the head of the image a transaction beginning now reads (the
    /// folded state and the lake's tail after it).
    pub fn head(&self) -> Result<Head> {
        Ok(self.pin_image()?.head())
    }

    pub(crate) async fn read_head(&self) -> Result<Head> {
        let backend = self.backend();
        if let Backend::Reader(reader) = &*backend {
            if let (Some(head), false) = (self.started_from, reader.is_open()) {
                return Ok(head);
            }
        }
        #[cfg(test)]
        self.head_reads.fetch_add(1, Ordering::SeqCst);
        match backend.get(&keys::sys_head()).await? {
            Some(v) => Head::decode(&v),
            None => Err(Error::Corrupt(format!(
                "{} has no sys/head",
                self.canonical
            ))),
        }
    }

    #[cfg(test)]
    pub(crate) fn db(&self) -> Option<Db> {
        match &*self.backend() {
            Backend::Writer(db, _) => Some(db.clone()),
            Backend::Reader(_) => None,
        }
    }

    /// Why SlateDB closed this handle, if it did: its own status, or the fence a failed write of
    /// this writer saw before SlateDB's status caught up ([`Store::fenced`]).
    fn close_reason(&self) -> Option<slatedb::CloseReason> {
        let status = match &*self.backend() {
            Backend::Writer(_, status) => status.borrow().close_reason,
            Backend::Reader(reader) => reader.close_reason(),
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
    /// outlived the time limit, or a panic inside the commit) serves nothing until that outcome
    /// is settled ([`Store::settle`]); this only says so (for the operator view).
    fn check_not_broken(&self) -> Result<()> {
        if self.broken.load(Ordering::SeqCst) {
            return Err(Error::OutcomeUnknown(format!(
                "an earlier commit to {} may or may not have been applied (its write may still \
                 land); the next statement settles it once the store answers",
                self.url
            )));
        }
        Ok(())
    }

    /// Settles a commit of unknown outcome, if there was one, before the next read or commit
    /// of this attach ([`Store::settle_locked`], under the commit lock).
    pub(crate) fn settle(&self) -> Result<()> {
        if !self.broken.load(Ordering::SeqCst) {
            return Ok(());
        }
        let _commit = self.commit_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.settle_locked()
    }

    /// [`Store::settle`] for a caller holding the commit lock. SlateDB keeps a batch it took and
    /// retries its upload without bound, so once the store answers, a flush makes everything
    /// this handle wrote durable: the commit landed, or (when SlateDB never took its batch)
    /// nothing of it did, and the head read afterwards says which. The image is read afresh
    /// and the attach goes on, as DuckLake goes on after another process's commit. Within the
    /// time limit: a store that still does not answer leaves the outcome unknown, and the next
    /// statement tries again. A handle SlateDB closed (another writer fenced it meanwhile)
    /// cannot settle anything: DETACH and ATTACH read what the store holds.
    pub(crate) fn settle_locked(&self) -> Result<()> {
        if !self.broken.load(Ordering::SeqCst) {
            return Ok(());
        }
        let span =
            tracing::debug_span!(target: "moraine::store", "moraine.settle", store = %self.url);
        let _enter = span.enter();
        // a folder another attach fenced goes on as a plain writer: it settles through the
        // commit object like one
        if matches!(self.close_reason(), Some(slatedb::CloseReason::Fenced)) && !self.read_only {
            self.demote_locked()?;
        }
        let backend = self.backend();
        let settled = match (&*backend, self.close_reason()) {
            // a fold SlateDB still held lands first, before anything is folded again; then the
            // commit whose create got no answer; then whatever the tail holds
            (Backend::Writer(db, _), None) => {
                self.bounded("settling a commit of unknown outcome", async {
                    if self.fold_stuck.load(Ordering::SeqCst) {
                        db.flush().await?;
                    }
                    self.resolve_pending().await?;
                    self.fold_tail(db).await?;
                    self.read_head().await
                })
            }
            (Backend::Reader(_), None) => {
                self.bounded("settling a commit of unknown outcome", async {
                    self.resolve_pending().await?;
                    self.read_head().await
                })
            }
            _ => {
                return Err(Error::OutcomeUnknown(format!(
                    "an earlier commit to {} may or may not have been applied, and this attach \
                     was closed since: DETACH and ATTACH again to see what the lake holds",
                    self.url
                )))
            }
        };
        let head = settled;
        match head {
            Ok(head) => {
                self.install_image(None);
                self.image_unsure.store(false, Ordering::SeqCst);
                *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = None;
                self.fold_stuck.store(false, Ordering::SeqCst);
                self.broken.store(false, Ordering::SeqCst);
                tracing::info!(
                    target: "moraine::store",
                    "moraine: the commit of unknown outcome to {} is settled: the lake's head \
                     is batch {}",
                    self.url,
                    head.batch_count
                );
                Ok(())
            }
            Err(e) => Err(Error::OutcomeUnknown(format!(
                "an earlier commit to {} may or may not have been applied, and the store cannot \
                 say yet ({e}); the next statement tries again",
                self.url
            ))),
        }
    }

    /// Whether the commit whose create got no answer landed: its batch's object holds it, or
    /// another commit (then it never can), or nothing, and then this attach creates that
    /// object itself as a commit that changes nothing but the head, so that it never can
    /// either. Leaves the pending commit for the caller to clear once everything is settled.
    async fn resolve_pending(&self) -> Result<()> {
        let Some((pending, base)) = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        else {
            return Ok(());
        };
        let batch = pending.head.batch_count;
        let found = match self.objects.read_commit(batch).await? {
            Some(found) => found,
            // folded, and its object deleted since: the folded record says which commit it was
            None if self.read_head().await?.batch_count >= batch => {
                let landed = match self.backend().get(&keys::image_log(batch)).await? {
                    Some(record) => {
                        let (_, writes) = checkpoint::decode_log(&record, batch)?;
                        Some(writes == pending.writes)
                    }
                    None => None,
                };
                tracing::info!(
                    target: "moraine::store",
                    "moraine: the commit of unknown outcome to {} {} (batch {batch})",
                    self.url,
                    match landed {
                        Some(true) => "landed",
                        Some(false) => "did not land",
                        None => "may or may not have landed: the lake has moved past it",
                    }
                );
                return Ok(());
            }
            None => {
                // the head the lost commit was made on, with the batch it would have taken
                let head = Head {
                    snapshot_id: base.snapshot_id,
                    batch_count: batch,
                };
                let mut writes = checkpoint::Writes::new();
                writes.insert(keys::sys_head(), Some(head.encode()));
                let empty = checkpoint::Commit::new(head, writes);
                match self
                    .objects
                    .create_commit(batch, empty.encode(self.access.compression).into())
                    .await?
                {
                    log::Create::Ours => empty,
                    log::Create::Taken => {
                        self.objects.read_commit(batch).await?.ok_or_else(|| {
                            Error::Storage(format!("commit object {batch} was taken and is gone"))
                        })?
                    }
                    log::Create::Unanswered(e) => return Err(Error::Storage(e)),
                }
            }
        };
        tracing::info!(
            target: "moraine::store",
            "moraine: the commit of unknown outcome to {} {} (batch {batch})",
            self.url,
            if found.id == pending.id {
                "landed"
            } else {
                "did not land"
            }
        );
        Ok(())
    }

    /// A commit whose outcome is unknown (`why`): this handle serves nothing until the outcome
    /// is settled ([`Store::settle`]), and the error says so.
    pub fn outcome_unknown(&self, why: &str) -> Error {
        self.broken.store(true, Ordering::SeqCst);
        Error::OutcomeUnknown(format!(
            "{why}: the commit to {} may or may not have been applied (its write may still \
             reach the store); the next statement settles it once the store answers",
            self.url
        ))
    }
}
