//! Reclaiming a store's space (RFC 0003): making the bytes of deleted catalog records leave
//! the store's objects, at once on request (`moraine_reclaim(lake)`) and, by default, within
//! `moraine_reclaim_interval` of being written while a writer is attached.
//!
//! A deleted record is a SlateDB tombstone; its old value stays in the WAL object and the
//! SSTs that held it until a compaction that reads both drops it, and until the garbage
//! collector deletes the objects nothing references any more. moraine's own objects hold
//! records too: an image checkpoint holds every live record at one head, and the commit log
//! (`image/log/<batch>`) every write of each commit since the checkpoint before the newest. A
//! reclaim, in this order:
//!
//! 1. writes an image checkpoint of the head (unless the newest one is of the head);
//! 2. deletes the commit log up to the head;
//! 3. renews the SlateDB snapshot the head image reads through: one taken after those
//!    deletions, at the same committed state, so that the transactions pinned to the head
//!    (this statement's own among them) hold no snapshot older than the deletions;
//! 4. deletes every other image checkpoint object;
//! 5. waits until no snapshot this process took before step 3's is open (a transaction pinned
//!    to an image older than the head still reads the deleted records: one that stays open
//!    fails the reclaim with a conflict after `moraine_io_timeout`, and one the caller's own
//!    transaction may hold fails it at once, before step 1 when it can be told then,
//!    [`WaitForReads`]), then flushes the
//!    memtable (the tombstones reach an L0 SST) and checks that the manifest says so too;
//! 6. compacts every L0 SST and every sorted run into one sorted run, the last one, where
//!    SlateDB drops the tombstones and every value they delete;
//! 7. rewrites the format marker and flushes it to a newer L0 (SlateDB collects no SST newer
//!    than the newest L0), drops the checkpoints SlateDB's compactor keeps of the manifest
//!    before a compaction, and runs the garbage collector with no minimum age: the WAL
//!    objects, SSTs, manifests and compactor states the store no longer needs go.
//!
//! Each step is bounded by the store's `moraine_io_timeout` (the compaction by four times it),
//! and each has a `moraine.reclaim.*` debug span that logs its time. The writer's compactor runs
//! at [`Pace::Reclaim`] through step 6, so that its compaction is run as soon as it is
//! submitted, and at its routine pace again after. A reclaim that stops half way leaves a
//! consistent store, and running it again finishes.

use super::*;
use compactor::Pace;
use slatedb::compactor::{CompactionSpec, CompactionStatus, SourceId};

/// Default of `moraine_reclaim_interval`: the longest a writer leaves an SST unrewritten, and
/// so the longest the bytes of a deleted record stay in the store while a writer is attached.
pub const DEFAULT_RECLAIM_INTERVAL: Duration = Duration::from_secs(24 * 3600);

/// Every how many collector passes (each `pass` long) a writer checks whether a reclaim is due:
/// about once a minute, or every pass for an interval shorter than that.
pub(super) fn check_every(interval: Duration, pass: Duration) -> u32 {
    let period = interval.min(Duration::from_secs(60));
    ((period.as_millis() / pass.as_millis().max(1)) as u32).max(1)
}

/// What one reclaim did: the row `moraine_reclaim` returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reclaimed {
    /// The head the store was reclaimed at.
    pub head_batch: u64,
    /// The batch of the image checkpoint that remains.
    pub checkpoint_batch: u64,
    /// Commit-log records deleted.
    pub log_records: u64,
    /// Image checkpoint objects deleted.
    pub image_checkpoints: u64,
    /// L0 SSTs and sorted runs compacted into one sorted run.
    pub compacted: u64,
    /// Objects under the store's root before and after.
    pub objects_before: u64,
    pub objects_after: u64,
    /// Bytes of those objects before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
}

impl Reclaimed {
    /// The row, column by column, as `moraine_reclaim` returns it.
    pub fn fields(&self) -> Vec<(&'static str, crate::status::Field)> {
        let int = |v: u64| crate::status::Field::Int(i64::try_from(v).ok());
        vec![
            ("head_batch", int(self.head_batch)),
            ("checkpoint_batch", int(self.checkpoint_batch)),
            ("log_records_deleted", int(self.log_records)),
            ("image_checkpoints_deleted", int(self.image_checkpoints)),
            ("runs_compacted", int(self.compacted)),
            ("objects_before", int(self.objects_before)),
            ("objects_after", int(self.objects_after)),
            ("bytes_before", int(self.bytes_before)),
            ("bytes_after", int(self.bytes_after)),
        ]
    }
}

/// The `reclaim_interval_ms` option (from `moraine_reclaim_interval`), else
/// [`DEFAULT_RECLAIM_INTERVAL`].
pub(super) fn reclaim_interval_option(options: &[(String, String)]) -> Result<Duration> {
    millis_option(
        options,
        "reclaim_interval_ms",
        "moraine_reclaim_interval",
        DEFAULT_RECLAIM_INTERVAL,
    )
}

/// How a reclaim collects: what a clean close collects, and every compacted table no manifest
/// needs, whatever its age.
fn gc_now(boundary_files: bool) -> GarbageCollectorOptions {
    GarbageCollectorOptions {
        compacted_options: Some(GarbageCollectorDirectoryOptions {
            interval: None,
            min_age: Duration::ZERO,
            dry_run: false,
        }),
        ..gc_at_close(boundary_files)
    }
}

/// When the oldest record the store may still hold was written (milliseconds since the Unix
/// epoch): its oldest SST's (by its ULID) or WAL object's; `None` for an empty store.
pub(super) async fn oldest_write(
    admin: &slatedb::admin::Admin,
    object_store: &Arc<dyn ObjectStore>,
) -> Result<Option<u64>> {
    let Some(manifest) = admin.read_manifest(None).await? else {
        return Ok(None);
    };
    let l0 = manifest.l0().iter();
    let runs = manifest.compacted().iter().flat_map(|sr| sr.sst_views());
    let sst = l0.chain(runs).map(|v| v.id.timestamp_ms()).min();
    let wal = object_store::path::Path::from("wal");
    let listed = object_store.list_with_delimiter(Some(&wal)).await?;
    let wal = listed
        .objects
        .iter()
        .map(|m| m.last_modified.timestamp_millis().max(0) as u64)
        .min();
    Ok(sst.into_iter().chain(wal).min())
}

/// How often a reclaim reads the compactor's state while it waits for a compaction (the
/// compactor runs at [`Pace::Reclaim`] meanwhile).
const COMPACTION_POLL: Duration = Duration::from_millis(20);

/// How many times a reclaim submits its compaction before it gives up.
const COMPACTION_ATTEMPTS: u32 = 5;

/// Compacts every L0 SST and sorted run of the latest manifest into one sorted run, through the
/// writer's compactor; returns how many there were. A submission the compactor refuses (one of
/// its own compactions took some of them meanwhile) is planned again, a few times.
async fn compact_everything(admin: &slatedb::admin::Admin) -> Result<u64> {
    // a compactor that has just started creates the compactions file a submission needs
    while admin.read_compactions(None).await?.is_none() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for _ in 0..COMPACTION_ATTEMPTS {
        // one at a time: the compactor runs two compactions into the same sorted run only by
        // panicking (a compaction of an earlier writer, resumed, and a reclaim's)
        while compaction_running(admin).await? {
            tokio::time::sleep(COMPACTION_POLL).await;
        }
        let manifest = admin
            .read_manifest(None)
            .await?
            .ok_or_else(|| Error::Storage("the store has no SlateDB manifest".into()))?;
        let l0: Vec<_> = manifest.l0().iter().map(|v| v.id).collect();
        let runs: Vec<u32> = manifest.compacted().iter().map(|sr| sr.id).collect();
        if l0.is_empty() && runs.is_empty() {
            return Ok(0);
        }
        let mut sources: Vec<SourceId> = l0.iter().map(|id| SourceId::SstView(*id)).collect();
        sources.extend(runs.iter().map(|id| SourceId::SortedRun(*id)));
        // into the lowest sorted run, or a new one above every run when there is none
        let destination = runs.iter().copied().min().unwrap_or(0);
        let submitted = admin
            .submit_compaction(CompactionSpec::new(sources, destination))
            .await?;
        loop {
            tokio::time::sleep(COMPACTION_POLL).await;
            match admin.read_compaction(submitted.id(), None).await? {
                Some(c) if c.status() == CompactionStatus::Completed => {
                    return Ok((l0.len() + runs.len()) as u64)
                }
                Some(c) if c.status() == CompactionStatus::Failed => break,
                Some(_) => continue,
                // the compactor keeps only the last finished compaction: judge by the manifest
                None => {
                    let now = admin.read_manifest(None).await?;
                    let done = now.is_some_and(|m| {
                        m.l0().iter().all(|v| !l0.contains(&v.id))
                            && m.compacted()
                                .iter()
                                .all(|sr| sr.id == destination || !runs.contains(&sr.id))
                    });
                    if done {
                        return Ok((l0.len() + runs.len()) as u64);
                    }
                    break;
                }
            }
        }
        tracing::debug!("moraine: the compactor did not take the reclaim's compaction; again");
    }
    Err(Error::Storage(format!(
        "SlateDB's compactor refused the reclaim's compaction {COMPACTION_ATTEMPTS} times \
         (its own compactions kept taking the same tables); run moraine_reclaim again"
    )))
}

/// Whether the compactor has a compaction it has not finished (or failed).
async fn compaction_running(admin: &slatedb::admin::Admin) -> Result<bool> {
    Ok(admin.read_compactions(None).await?.is_some_and(|c| {
        c.recent_compactions().any(|c| {
            matches!(
                c.status(),
                CompactionStatus::Submitted
                    | CompactionStatus::Scheduled
                    | CompactionStatus::Running
                    | CompactionStatus::Compacted
            )
        })
    }))
}

/// How many objects, and how many bytes, are under the store's root.
async fn footprint(object_store: &Arc<dyn ObjectStore>) -> Result<(u64, u64)> {
    let (mut objects, mut bytes) = (0, 0);
    let mut dirs = vec![None];
    while let Some(dir) = dirs.pop() {
        let listed = object_store.list_with_delimiter(dir.as_ref()).await?;
        objects += listed.objects.len() as u64;
        bytes += listed.objects.iter().map(|m| m.size).sum::<u64>();
        dirs.extend(listed.common_prefixes.into_iter().map(Some));
    }
    Ok((objects, bytes))
}

/// What DuckDB knows of the session that asks for a reclaim.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caller {
    /// The call runs in an explicit transaction (`BEGIN … COMMIT`), which stays open after it.
    pub explicit: bool,
    /// The caller's transaction has a transaction of the lake already (it has read the lake:
    /// through it, the caller holds an image until its transaction ends, after the call).
    pub read_lake: bool,
    /// The lake's name was detached and attached again since the call was bound (it now names
    /// another store, or none): whether the caller read the bound store is not known.
    pub rebound: bool,
    /// When the caller's transaction began, in microseconds since the Unix epoch (DuckDB's
    /// transaction start); `None` if not known.
    pub began: Option<i64>,
}

impl Caller {
    /// Whether the image the caller holds may be older than the head: it has read the lake (or
    /// may have: a rebound lake counts as read), and its transaction began before the image of
    /// the head was installed (or when is not known). One that began after it pinned the head,
    /// which a reclaim renews.
    pub(crate) fn may_hold_older(self, head_installed_at: i64) -> bool {
        (self.read_lake || self.rebound)
            && self.began.map_or(true, |began| began <= head_installed_at)
    }
}

/// What a reclaim does about the snapshots this process took before its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitForReads {
    /// None is open: no transaction reads a state older than the reclaim's.
    Done,
    /// Some are open, held by transactions that will end: wait for them, within the time limit.
    Wait,
    /// Some are open, and the caller's own transaction, which stays open until the call has
    /// returned (an autocommit statement) or after it (an explicit transaction), may be what
    /// holds one: waiting could only time out.
    Refuse,
}

/// [`WaitForReads`] for a reclaim whose own snapshot is `target`, when the oldest snapshot of
/// the process still open is `oldest_open` and the image of the head was installed at
/// `head_installed_at`.
pub(crate) fn wait_for_reads(
    caller: Caller,
    oldest_open: Option<u64>,
    target: u64,
    head_installed_at: i64,
) -> WaitForReads {
    match oldest_open {
        Some(seq) if seq < target => {
            if caller.may_hold_older(head_installed_at) {
                WaitForReads::Refuse
            } else {
                WaitForReads::Wait
            }
        }
        _ => WaitForReads::Done,
    }
}

/// How often a reclaim looks whether the older transactions of the process have ended.
const READS_POLL: Duration = Duration::from_millis(10);

/// Runs a writer's compactor at its routine pace again when dropped, without waiting for it
/// (the reclaim returns, or fails, at once).
struct RoutinePace<'a>(&'a Store);

impl Drop for RoutinePace<'_> {
    fn drop(&mut self) {
        self.0.pace_compactor_later(Pace::Routine);
    }
}

impl Store {
    /// Reclaim the store's space now (see the module's description); only a writer can.
    pub fn reclaim(&self) -> Result<Reclaimed> {
        self.reclaim_for(Caller::default())
    }

    /// [`Store::reclaim`], asked for by `caller`.
    pub fn reclaim_for(&self, caller: Caller) -> Result<Reclaimed> {
        let span = tracing::info_span!("moraine.reclaim", store = %self.url, ?caller);
        let _enter = span.enter();
        if !self.read_only && !self.is_folder() {
            // a reclaim runs in the folder (RFC 0004 v3): a plain writer takes the role
            self.take_folder_role()?;
        }
        let Backend::Writer(db, _) = &*self.backend() else {
            return Err(Error::ReadOnly(format!(
                "moraine_reclaim needs the lake's writer, and {} is attached READ_ONLY here; run \
                 it where the lake is attached read-write",
                self.url
            )));
        };
        let Ok(_one_at_a_time) = self.reclaiming.try_lock() else {
            return Err(Error::Conflict(format!(
                "a reclaim of {} is already running in this process; run it again when it ends",
                self.url
            )));
        };
        // a caller that may itself hold what the reclaim would wait for is told before anything
        // is done (and again at step 5, if a commit made its image older meanwhile)
        if let Some(head_seq) = self.current_image().and_then(|i| i.snapshot_seq()) {
            let open = self.oldest_open_snapshot();
            if wait_for_reads(caller, open, head_seq, self.head_installed_at())
                == WaitForReads::Refuse
            {
                return Err(self.caller_holds_older_reads(caller));
            }
        }
        // its compaction (step 6) is run by this writer's compactor, which runs from here on
        // (before the memtable flush of step 5 adds to L0)
        self.start_compactor();
        let writer = self.checkpointer().expect("a writer has a checkpointer");
        let admin = slatedb::admin::Admin::builder("", self.objects.store.clone()).build();
        let (objects_before, bytes_before) =
            self.bounded("listing the store", footprint(&self.objects.store))?;

        // 1. an image checkpoint of the head, so that the commit log up to it can go
        let step = tracing::debug_span!("moraine.reclaim.checkpoint").entered();
        let pinned = self.pin_image()?;
        let (head, checkpoint_batch) = {
            // (the pin's image, and its snapshot, go at the end of this block)
            let pinned = pinned;
            let _commit = self.commit_lock.lock().unwrap_or_else(|p| p.into_inner());
            self.settle_locked()?;
            let head = self.bounded("reading the head", self.read_head())?;
            let image = match self.current_image() {
                Some(i) if !self.image_unsure.load(Ordering::SeqCst) => i,
                _ => pinned,
            };
            if image.head() != head {
                return Err(Error::Conflict(format!(
                    "{} moved on while the reclaim began; run moraine_reclaim again",
                    self.url
                )));
            }
            let running = self
                .checkpointing
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let Some(running) = running {
                let abort = running.abort_handle();
                let finished = self.bounded("finishing a background checkpoint", async {
                    let _ = running.await;
                    Ok(())
                });
                if let Err(e) = finished {
                    abort.abort();
                    return Err(e);
                }
            }
            self.bounded("writing an image checkpoint", writer.write(&image))?;
            (head, self.checkpointed.load(Ordering::SeqCst))
        };
        drop(step);

        // 2. the commit log up to the head (later commits' records stay), in batches
        let step = tracing::debug_span!("moraine.reclaim.log").entered();
        // (the checkpoint of step 1 made every fold up to the head durable: the commit objects
        // up to it serve nobody either, and are retired)
        let log_records = self.bounded("deleting the commit log", async {
            let records = delete_log_upto(db, head.batch_count).await?;
            self.objects.retire_commits_upto(head.batch_count).await?;
            Ok(records)
        })?;
        drop(step);

        // 3. the head image reads through a snapshot that no longer holds the log: it reads the
        // same committed state (the commit lock keeps commits out), so the transactions pinned
        // to it read on unchanged, and every record deleted before `target` is one no snapshot
        // of this process needs once the transactions pinned to older images end
        // (and when the head's image was installed: an image installed later, by a commit
        // after this one, holds a snapshot newer than `target`, so a caller that began after
        // this install holds nothing older, however many commits land while it waits)
        let (target, installed_at) = {
            let _commit = self.commit_lock.lock().unwrap_or_else(|p| p.into_inner());
            let snapshot = self.take_snapshot(db)?;
            let target = snapshot.seq();
            if let Some(image) = self.current_image() {
                if !self.image_unsure.load(Ordering::SeqCst) {
                    image.renew_snapshot(snapshot);
                }
            }
            (target, self.head_installed_at())
        };

        // 4. every other image checkpoint
        let step = tracing::debug_span!("moraine.reclaim.checkpoints").entered();
        let image_checkpoints = self.bounded(
            "deleting old image checkpoints",
            writer.delete_checkpoints_before(checkpoint_batch),
        )?;
        drop(step);

        // 5. no snapshot older than the deletions left open, and the tombstones in L0
        let step = tracing::debug_span!("moraine.reclaim.reads").entered();
        self.wait_for_older_reads(caller, target, installed_at)?;
        let settle = async {
            let limit = self.access.io_timeout;
            tokio::time::timeout(limit, self.settle_snapshots(db, &admin, target)).await
        };
        match block_on(settle) {
            Ok(settled) => settled?,
            Err(_) => return Err(self.older_reads_open()),
        }
        drop(step);

        // 6. one sorted run, the last: tombstones and the values they delete are dropped
        // (by the compactor at a pace that runs it as soon as it is submitted, and at its
        // routine pace again after)
        let step = tracing::debug_span!("moraine.reclaim.compaction").entered();
        self.pace_compactor(Pace::Reclaim);
        let routine = RoutinePace(self);
        let compacted = block_on(within(
            self.access.io_timeout * 4,
            &self.url,
            "compacting the store into one sorted run",
            compact_everything(&admin),
        ))?;
        drop(routine);
        drop(step);

        // 7. the compacted tables below the newest L0, the compactor's checkpoints gone, and
        // everything no manifest needs collected
        let step = tracing::debug_span!("moraine.reclaim.collect").entered();
        self.bounded("collecting obsolete objects", async {
            self.flush_newer_l0(db).await?;
            for c in admin.list_checkpoints(None).await? {
                // the compactor's: unnamed, with a lifetime
                if c.name.is_none() && c.expire_time.is_some() {
                    admin.delete_checkpoint(c.id).await?;
                }
            }
            admin.run_gc_once(gc_now(self.boundary_files)).await?;
            Ok(())
        })?;
        drop(step);
        let (objects_after, bytes_after) =
            self.bounded("listing the store", footprint(&self.objects.store))?;
        let done = Reclaimed {
            head_batch: head.batch_count,
            checkpoint_batch,
            log_records,
            image_checkpoints,
            compacted,
            objects_before,
            objects_after,
            bytes_before,
            bytes_after,
        };
        tracing::info!(?done, "moraine: reclaimed");
        Ok(done)
    }

    /// Waits until no SlateDB snapshot this process took before `target` is open: a
    /// transaction pinned to an image older than the head holds one, and a compaction keeps
    /// every version an open snapshot can see. Fails at once when the caller's own transaction
    /// may be what holds one ([`wait_for_reads`], with `installed_at` the install of the image
    /// whose snapshot `target` renewed), and after the store's time limit otherwise.
    fn wait_for_older_reads(&self, caller: Caller, target: u64, installed_at: i64) -> Result<()> {
        let deadline = std::time::Instant::now() + self.access.io_timeout;
        loop {
            let open = self.oldest_open_snapshot();
            match wait_for_reads(caller, open, target, installed_at) {
                WaitForReads::Done => return Ok(()),
                WaitForReads::Refuse => return Err(self.caller_holds_older_reads(caller)),
                WaitForReads::Wait if std::time::Instant::now() >= deadline => {
                    return Err(self.older_reads_open())
                }
                WaitForReads::Wait => std::thread::sleep(READS_POLL),
            }
        }
    }

    /// The error of a reclaim refused because its caller may hold older reads.
    fn caller_holds_older_reads(&self, caller: Caller) -> Error {
        let what = "a transaction of this process that began before the lake's latest commit \
                    (the caller's own, or one of another connection) still reads what the \
                    reclaim would remove";
        Error::Conflict(if caller.explicit {
            format!(
                "moraine_reclaim cannot run inside this transaction: it has read {} already, \
                 and {what}; COMMIT or ROLLBACK, then run CALL moraine_reclaim on its own",
                self.url
            )
        } else {
            format!(
                "moraine_reclaim of {} cannot run now: this statement began before the lake's \
                 latest commit, and {what}; run CALL moraine_reclaim again",
                self.url
            )
        })
    }

    /// The error of a reclaim that waited the whole time limit for older transactions.
    fn older_reads_open(&self) -> Error {
        Error::Conflict(format!(
            "a transaction of this process that began before the latest commit of {} is still \
             open after {}, and what it reads keeps the deleted records' bytes; end it and run \
             moraine_reclaim again",
            self.url,
            seconds(self.access.io_timeout)
        ))
    }

    /// Writes a record (the format marker again, unchanged) and flushes the memtable: a new L0
    /// SST, and a manifest that says which snapshots are open now.
    async fn flush_newer_l0(&self, db: &Db) -> Result<()> {
        let format = db
            .get(keys::sys_format())
            .await?
            .ok_or_else(|| Error::Corrupt(format!("{} has no sys/format", self.canonical)))?;
        db.put(keys::sys_format(), &format).await?;
        db.flush_with_options(FlushOptions {
            flush_type: FlushType::MemTable,
        })
        .await?;
        Ok(())
    }

    /// Flushes the memtable until the manifest says no open snapshot is older than `target`
    /// (once, when [`Store::wait_for_older_reads`] has seen them closed): SlateDB's compaction
    /// keeps what the manifest's open snapshots can see.
    async fn settle_snapshots(
        &self,
        db: &Db,
        admin: &slatedb::admin::Admin,
        target: u64,
    ) -> Result<()> {
        loop {
            self.flush_newer_l0(db).await?;
            let manifest = admin
                .read_manifest(None)
                .await?
                .ok_or_else(|| Error::Storage("the store has no SlateDB manifest".into()))?;
            if manifest.recent_snapshot_min_seq() >= target {
                return Ok(());
            }
            tracing::debug!(
                min_seq = manifest.recent_snapshot_min_seq(),
                target,
                "moraine: the manifest still names a snapshot older than the reclaim's"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// How long a writer waits after a failed scheduled reclaim before it checks again.
pub(super) const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(10 * 60);

/// A writer collector's check: reclaim when the store's oldest SST or WAL object is older than
/// `interval`; false when the reclaim failed
/// (on a blocking thread: the reclaim waits on the store, and the store may close there).
pub(super) async fn reclaim_if_due(
    admin: &slatedb::admin::Admin,
    object_store: &Arc<dyn ObjectStore>,
    store: &Weak<Store>,
    interval: Duration,
) -> bool {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    match oldest_write(admin, object_store).await {
        Ok(Some(oldest)) if now_ms.saturating_sub(oldest) >= interval.as_millis() as u64 => {}
        Ok(_) => return true,
        Err(e) => {
            tracing::warn!(
                "moraine: reading the manifest to see whether a reclaim is due failed: {e}"
            );
            return false;
        }
    }
    let store = store.clone();
    let reclaimed = tokio::task::spawn_blocking(move || match store.upgrade() {
        // (a folder demoted meanwhile leaves it to the attach that took the role)
        Some(store) if store.is_folder() => store.reclaim().map(Some),
        _ => Ok(None),
    })
    .await;
    match reclaimed {
        Ok(Ok(_)) => true,
        Ok(Err(e)) => {
            tracing::warn!(
                "moraine: the scheduled reclaim failed ({e}); the next try is in {}",
                seconds(RETRY_AFTER_FAILURE)
            );
            false
        }
        Err(e) => {
            tracing::warn!("moraine: the scheduled reclaim stopped: {e}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::lakes::{column_of, commit_table, raw, rows_of};
    use crate::testing::{init_lake, snap, table_row};

    /// Every file under `dir` whose bytes hold `needle`.
    fn holding(dir: &Path, needle: &[u8]) -> Vec<String> {
        walk(dir)
            .into_iter()
            .filter(|p| {
                std::fs::read(p)
                    .unwrap_or_default()
                    .windows(needle.len())
                    .any(|w| w == needle)
            })
            .collect()
    }

    /// A new lake in a temporary directory (`<dir>/lake`) whose waits time out after `ms`,
    /// written uncompressed, so that a search of its files' bytes finds every copy of a value.
    fn lake_timing_out_after(ms: u64) -> (tempfile::TempDir, Arc<Store>) {
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().join("lake").to_str().unwrap().to_string();
        let options = [
            ("io_timeout_ms".to_string(), ms.to_string()),
            ("compression".to_string(), "none".to_string()),
        ];
        let store = Store::open_with(&url, false, &options).unwrap();
        init_lake(&store);
        (dir, store)
    }

    /// A deleted record's value is in the store's WAL, SSTs, image checkpoint and commit log
    /// until a reclaim; after it no object holds a byte of it, and the lake reads as before.
    #[test]
    fn a_reclaim_leaves_no_byte_of_a_deleted_record() {
        for codec in ["none", "zstd"] {
            leaves_no_byte_of_a_deleted_record(codec);
        }
    }

    /// Uncompressed, the search of the files' bytes finds every copy of the value before the
    /// reclaim; compressed, only the verifier's decoding does.
    fn leaves_no_byte_of_a_deleted_record(codec: &str) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lake");
        let url = path.to_str().unwrap().to_string();
        let options = [("compression".to_string(), codec.to_string())];
        let store = Store::open_with(&url, false, &options).unwrap();
        init_lake(&store);
        let marker = "zz-withdrawn-7f3a9c1e5b2d48f6a0c3e9b7d1f5a2c8";
        commit_table(&store, 1, 1, marker);
        for i in 2..=70 {
            // past a memtable flush and a checkpoint: the marker is in an L0 SST and an image
            commit_table(&store, i, i, &format!("t{i}"));
        }
        store.settle_checkpoint_for_test();
        // a maintenance commit deletes the record (as DuckLake's expiry would)
        delete_table_record(&store, marker);
        let before = store.objects_holding(marker.as_bytes()).unwrap();
        assert!(
            before.len() >= 3,
            "before: WAL, SST, checkpoint and commit objects hold it: {before:?}"
        );
        if codec == "none" {
            assert!(
                holding(&path, marker.as_bytes()).len() >= 3,
                "{:?}",
                holding(&path, marker.as_bytes())
            );
        }
        let done = store.reclaim().unwrap();
        assert_eq!(holding(&path, marker.as_bytes()), Vec::<String>::new());
        assert_eq!(store.objects_holding(marker.as_bytes()).unwrap(), vec![]);
        // (checkpoints deleted the log up to the one before; the reclaim deletes the rest)
        assert!(done.log_records > 0, "{done:?}");
        let log = raw(&store, &keys::image_log_prefix());
        assert_eq!(log.len(), 0, "no commit-log record is left");
        assert!(
            done.compacted >= 2 && done.image_checkpoints >= 1,
            "{done:?}"
        );
        assert!(done.bytes_after < done.bytes_before, "{done:?}");
        // again: nothing left to delete, and the lake still reads
        let again = store.reclaim().unwrap();
        assert_eq!((again.log_records, again.image_checkpoints), (0, 0));
        drop(store);
        let store = Store::open_with(&url, false, &options).unwrap();
        let names = column_of(&store, "ducklake_table", false, "table_name");
        assert_eq!(names.len(), 69);
        assert!(Store::open(&url, true)
            .unwrap()
            .reclaim()
            .is_err_and(|e| matches!(e, Error::ReadOnly(_))));
    }

    /// Deletes the `ducklake_table` record named `name` by a maintenance commit.
    fn delete_table_record(store: &Arc<Store>, name: &str) {
        let mut t = store.begin();
        let m = t.rows("main", "ducklake_table", true).unwrap();
        let doomed: Vec<i64> = (0..m.rows.len())
            .filter(|&i| m.rows[i].contains(&crate::cell::Cell::Text(name.into())))
            .map(|i| crate::txn::rowid(m.id, i))
            .collect();
        assert_eq!(doomed.len(), 1);
        t.stage_delete("main", "ducklake_table", doomed).unwrap();
        t.commit().unwrap();
    }

    /// A transaction that began before the deletion still reads the deleted record, so the
    /// store must keep it: the reclaim says so and removes nothing it reads; once the
    /// transaction ends, the next reclaim removes every byte.
    #[test]
    fn a_transaction_open_across_a_reclaim_keeps_what_it_reads() {
        let (dir, store) = lake_timing_out_after(3000);
        let path = dir.path().join("lake");
        let marker = "zz-withdrawn-3c9d1f7a0b5e42c8a6f1d0e9b7c5a3f2";
        commit_table(&store, 1, 1, marker);
        commit_table(&store, 2, 2, "t2");
        let mut open = store.begin();
        let before = open
            .rows("main", "ducklake_table", true)
            .unwrap()
            .rows
            .len();
        delete_table_record(&store, marker);
        let err = store.reclaim().unwrap_err();
        assert!(
            matches!(&err, Error::Conflict(m) if m.contains("still open")),
            "{err}"
        );
        assert_eq!(
            open.rows("main", "ducklake_table", true)
                .unwrap()
                .rows
                .len(),
            before,
            "the open transaction still reads its state"
        );
        drop(open);
        store.reclaim().unwrap();
        assert_eq!(holding(&path, marker.as_bytes()), Vec::<String>::new());
    }

    /// Ends the `ducklake_table` record of table 1 at a new snapshot 3 (its ended version
    /// goes to the history keyspace, which an image reads through its SlateDB snapshot).
    fn end_table_1(store: &Arc<Store>) -> crate::cell::Row {
        let mut t = store.begin();
        let m = t.rows("main", "ducklake_table", false).unwrap();
        let at = m
            .rows
            .iter()
            .position(|r| r.contains(&crate::cell::Cell::Int(1)))
            .unwrap();
        t.stage_insert("main", "ducklake_snapshot", vec![snap(3)])
            .unwrap();
        let ended = table_row(1, 1, Some(3), "t1");
        t.stage_update(
            "main",
            "ducklake_table",
            vec![(crate::txn::rowid(m.id, at), ended.clone())],
        )
        .unwrap();
        t.commit().unwrap();
        ended
    }

    /// A transaction pinned to the head (as the statement that calls `moraine_reclaim` after
    /// `USE lake` is) holds nothing back: the reclaim renews the head image's snapshot, at the
    /// same state, instead of waiting for the transaction; the transaction reads its state,
    /// ended versions included, through the renewed one.
    #[test]
    fn a_transaction_pinned_to_the_head_does_not_hold_a_reclaim_back() {
        // a wait for the transaction would fail the reclaim after the time limit
        let (dir, store) = lake_timing_out_after(60000);
        let (path, url) = (dir.path().join("lake"), store.url().to_string());
        let marker = "zz-withdrawn-8b1e4d7c2a9f43e6b0d5c8a1f7e3b2d9";
        commit_table(&store, 1, 1, "t1");
        commit_table(&store, 2, 2, marker);
        delete_table_record(&store, marker);
        let ended = end_table_1(&store);
        let mut pinned = store.begin();
        assert!(pinned
            .rows("main", "ducklake_table", false)
            .unwrap()
            .rows
            .is_empty());
        // (an explicit transaction that began after the head's commit pinned the head)
        let began = Some(crate::runtime::unix_micros_now());
        for caller in [
            Caller::default(),
            Caller {
                explicit: true,
                read_lake: true,
                rebound: false,
                began,
            },
            Caller {
                explicit: false,
                read_lake: true,
                rebound: false,
                began,
            },
        ] {
            store.reclaim_for(caller).unwrap();
            assert_eq!(holding(&path, marker.as_bytes()), Vec::<String>::new());
        }
        // a commit after the renewal: the pinned transaction still reads its own state, its
        // ended versions (read for the first time) through the renewed snapshot
        commit_table(&store, 5, 5, "t5");
        assert!(pinned
            .rows("main", "ducklake_table", false)
            .unwrap()
            .rows
            .is_empty());
        let with_history = pinned.rows("main", "ducklake_table", true).unwrap();
        assert_eq!(with_history.rows, vec![ended.clone()]);
        let names = column_of(&store, "ducklake_table", false, "table_name");
        assert_eq!(names, vec![crate::cell::Cell::Text("t5".into())]);
        drop(pinned);
        drop(store);
        let store = Store::open(&url, false).unwrap();
        assert_eq!(
            rows_of(&store, "ducklake_table", true),
            vec![ended, table_row(5, 5, None, "t5")]
        );
    }

    /// The commit-log records and image checkpoint objects of the store: what a reclaim's
    /// first steps delete.
    fn log_and_checkpoints(store: &Arc<Store>, path: &Path) -> (usize, Vec<String>) {
        let log = raw(store, &keys::image_log_prefix()).len();
        let mut objects: Vec<String> = walk(path)
            .into_iter()
            .filter(|p| p.contains("checkpoint"))
            .collect();
        objects.sort();
        (log, objects)
    }

    /// Every file under `dir`.
    fn walk(dir: &Path) -> Vec<String> {
        let mut found = Vec::new();
        let mut dirs = vec![dir.to_path_buf()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                if e.path().is_dir() {
                    dirs.push(e.path());
                } else {
                    found.push(e.path().display().to_string());
                }
            }
        }
        found
    }

    /// A reclaim asked for by a caller that has read the lake in a transaction that began
    /// before the head's commit, while a transaction of the process reads a state older than
    /// the head, fails at once with what to do (that transaction may be the caller's own,
    /// which a wait could never see end) before it has done anything: inside an explicit
    /// transaction, and as an autocommit statement that began before another connection's
    /// commit. The same call on its own afterwards succeeds.
    #[test]
    fn a_caller_whose_own_transaction_may_hold_older_reads_is_told_at_once() {
        let (dir, store) = lake_timing_out_after(60000);
        let path = dir.path().join("lake");
        let marker = "zz-withdrawn-5d2c8e1a7b4f49d3a6e0c9b8f1d7a2e4";
        commit_table(&store, 1, 1, marker);
        let began = Some(crate::runtime::unix_micros_now());
        let mut open = store.begin();
        let before = open
            .rows("main", "ducklake_table", true)
            .unwrap()
            .rows
            .clone();
        delete_table_record(&store, marker);
        let untouched = log_and_checkpoints(&store, &path);
        for (explicit, says) in [
            (true, "COMMIT or ROLLBACK"),
            (false, "run CALL moraine_reclaim again"),
        ] {
            let err = store
                .reclaim_for(Caller {
                    explicit,
                    read_lake: true,
                    rebound: false,
                    began,
                })
                .unwrap_err();
            assert!(
                matches!(&err, Error::Conflict(m) if m.contains(says)),
                "{err}"
            );
            assert_eq!(log_and_checkpoints(&store, &path), untouched);
        }
        assert_eq!(
            open.rows("main", "ducklake_table", true).unwrap().rows,
            before
        );
        assert!(!holding(&path, marker.as_bytes()).is_empty());
        drop(open);
        store
            .reclaim_for(Caller {
                explicit: true,
                read_lake: false,
                rebound: false,
                began,
            })
            .unwrap();
        assert_eq!(holding(&path, marker.as_bytes()), Vec::<String>::new());
    }

    /// A caller whose transaction began after the head's commit holds the head, so an older
    /// transaction of another connection is waited for, not refused, and commits that land
    /// while it waits (after its step 3) do not turn the wait into a refusal: the reclaim
    /// returns once that transaction has ended.
    #[test]
    fn a_caller_that_began_after_the_head_waits_for_another_connections_reads() {
        use std::sync::atomic::AtomicBool;
        let (_dir, store) = lake_timing_out_after(60000);
        for (round, explicit) in [(0, true), (1, false)] {
            let marker = format!("zz-withdrawn-2f6a9d3c8e1b47a5d0c4f7e2b9a6d1c{round}");
            commit_table(&store, 10 * round + 1, 10 * round + 1, &marker);
            let mut other = store.begin();
            other.rows("main", "ducklake_table", true).unwrap();
            delete_table_record(&store, &marker);
            let began = Some(crate::runtime::unix_micros_now());
            let renewed_from = store.current_image().unwrap().snapshot_seq();
            let ended = AtomicBool::new(false);
            std::thread::scope(|s| {
                s.spawn(|| {
                    // once step 3 has renewed the head's snapshot, two commits land, and then
                    // the older transaction ends
                    while store.current_image().unwrap().snapshot_seq() == renewed_from {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    commit_table(&store, 10 * round + 2, 10 * round + 2, "during-1");
                    commit_table(&store, 10 * round + 3, 10 * round + 3, "during-2");
                    // (long enough for the reclaim to look again after those commits)
                    std::thread::sleep(Duration::from_millis(200));
                    ended.store(true, Ordering::SeqCst);
                    drop(other);
                });
                let done = store.reclaim_for(Caller {
                    explicit,
                    read_lake: true,
                    rebound: false,
                    began,
                });
                assert!(done.is_ok(), "{done:?}");
                assert!(
                    ended.load(Ordering::SeqCst),
                    "it returned only once the older transaction had ended"
                );
            });
        }
    }

    #[test]
    fn a_reclaim_waits_only_for_older_reads_and_refuses_its_callers_own() {
        use WaitForReads::*;
        // the head's image was installed at 100
        let installed = 100;
        let caller = |explicit, read_lake, began| Caller {
            explicit,
            read_lake,
            rebound: false,
            began,
        };
        let rebound = |began| Caller {
            rebound: true,
            began,
            ..Caller::default()
        };
        let cases = [
            // (caller, what it gets when a snapshot older than the reclaim's is open)
            (caller(true, true, Some(50)), Refuse),
            (caller(false, true, Some(50)), Refuse),
            (caller(true, true, None), Refuse),
            (caller(false, true, Some(100)), Refuse),
            // began after the head's install: it holds the head; the older one is another's
            // a lake detached and attached again since the bind counts as read
            (rebound(Some(50)), Refuse),
            (rebound(Some(150)), Wait),
            (caller(true, true, Some(150)), Wait),
            (caller(false, true, Some(150)), Wait),
            // has not read the lake: holds nothing
            (caller(true, false, Some(50)), Wait),
            (caller(false, false, None), Wait),
            (Caller::default(), Wait),
        ];
        for (caller, older_open) in cases {
            assert_eq!(wait_for_reads(caller, None, 7, installed), Done);
            assert_eq!(wait_for_reads(caller, Some(7), 7, installed), Done);
            assert_eq!(wait_for_reads(caller, Some(9), 7, installed), Done);
            assert_eq!(
                wait_for_reads(caller, Some(6), 7, installed),
                older_open,
                "{caller:?}"
            );
        }
    }

    #[test]
    fn a_writer_checks_about_once_a_minute_or_every_pass() {
        let pass = Duration::from_secs(10);
        assert_eq!(check_every(DEFAULT_RECLAIM_INTERVAL, pass), 6);
        assert_eq!(check_every(Duration::from_secs(30), pass), 3);
        assert_eq!(check_every(Duration::from_millis(1), pass), 1);
    }
}
