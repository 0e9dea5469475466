//! A commit (RFC 0004 v3): its commit object created only if absent under the commit lock, then
//! folded into SlateDB by the folder (without waiting for SlateDB's durability: the object is
//! the commit's), the image advanced by it, and the memtable flushed every
//! [`COMMITS_PER_MEMTABLE_FLUSH`] commits (in the background).

use super::*;
use slatedb::config::{PutOptions, Ttl};
use std::collections::BTreeMap;

/// Every commit flushes one small WAL object, and an open (a writer's, or a reader's) replays
/// every WAL object written since the last memtable flush. SlateDB flushes the memtable only
/// after 4096 WAL flushes or 64 MiB, so a lake of small commits would replay thousands of objects
/// on every attach; a writer flushes its memtable to L0 itself after this many commits (the
/// writer's compactor merges the L0 tables: `compactor.rs`).
const COMMITS_PER_MEMTABLE_FLUSH: u64 = 64;

/// The folder writes SlateDB's WAL out after this many folds (its own commits and the ones it
/// folds from the tail) even within [`super::open::WAL_FLUSH_INTERVAL`], in the background: the
/// folded state the store shows is never more than this many commits behind for long, well
/// within [`super::role::TAKE_OVER_AFTER`] (an attach that sees the folded state that far behind
/// takes the folder role).
pub(super) const FOLDS_PER_WAL_FLUSH: u64 = 16;

/// A commit goes over at most this many commits made since its transaction began ...
const MAX_GO_OVER: usize = 64;

/// ... and loses at most this many races doing so before DuckLake is told of the conflict.
const MAX_GO_OVER_TURNS: u32 = 8;

impl Store {
    /// Write what `translate` returns as one SlateDB batch on behalf of a transaction pinned to
    /// `base`, and advance the image by it. Under the commit lock, a store whose head is no
    /// longer `base`'s refuses first (a conflict), before anything is translated.
    pub(crate) fn commit_writes<T>(
        &self,
        base: &Arc<Image>,
        translate: impl FnOnce() -> Result<(BTreeMap<Vec<u8>, Option<Vec<u8>>>, Head, T)>,
    ) -> Result<T> {
        let span = tracing::debug_span!(
            target: "moraine::store",
            "moraine.commit",
            store = %self.url,
            batch = tracing::field::Empty,
            keys = tracing::field::Empty,
            bytes = tracing::field::Empty
        );
        let _enter = span.enter();
        if self.read_only {
            return Err(Error::ReadOnly(format!(
                "cannot commit changes to {}",
                self.url
            )));
        }
        let _commit = self.commit_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.settle_locked()?;
        if !self.tail_is_confirmed() {
            // A view of the lake this old (a long statement) could miss a commit object
            // deleted since (`log.rs`): confirm it now, by the object after it and a listing.
            let started = std::time::Instant::now();
            let batch = base.head().batch_count;
            let later = self.bounded("reading the commits after this transaction's", async {
                Ok(match self.objects.read_commit(batch + 1).await? {
                    Some(_) => Some(batch + 1),
                    None => self.objects.first_commit_after(batch).await?,
                })
            })?;
            if let Some(later) = later {
                *self.tail_checked.lock().unwrap_or_else(|p| p.into_inner()) = None;
                return Err(Error::Conflict(format!(
                    "write conflict: another process committed batch {later} since this \
                     transaction began; retry"
                )));
            }
            self.confirm_tail(started);
        }
        if let Some(reason) = &*self
            .format_refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
        {
            return Err(open::not_a_store(self.url.clone(), reason.clone()));
        }
        if self.role_at_first_commit.load(Ordering::SeqCst) {
            // a read-write attach that started without SlateDB takes the folder role now, as
            // its open once did (RFC 0009, "An attach that reads what its first query needs")
            match self.promote_locked(true) {
                Ok(()) => {}
                // another attach opened the writer while this one did: it holds the role, and
                // this one commits without it
                Err(Error::Fenced(_)) => {
                    self.role_at_first_commit.store(false, Ordering::SeqCst);
                    if self.is_folder() {
                        self.demote_fenced_locked()?;
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if matches!(self.close_reason(), Some(slatedb::CloseReason::Fenced)) {
            // another attach took the folder role: this one commits without it
            self.demote_locked()?;
        }
        let backend = self.backend();
        let folder = match &*backend {
            Backend::Writer(db, _) => Some(db),
            Backend::Reader(_) => None,
        };
        // The folder's own head is SlateDB's (a commit that landed but never installed its
        // image, a panic between the two, must still be seen); any other writer's, its image,
        // unless the folded state is already past it. The commit object decides the rest.
        let folded = match self.bounded("reading the head", self.read_head()) {
            Ok(folded) => folded,
            Err(Error::Fenced(_)) => return Err(self.role_taken_meanwhile()),
            Err(e) => return Err(e),
        };
        let head_now = match (folder, self.current_image()) {
            (None, Some(image)) if image.head().batch_count >= folded.batch_count => image.head(),
            _ => folded,
        };
        let base_head = base.head();
        let advanced = |to: Head| {
            Error::Conflict(format!(
                "write conflict: the lake advanced from batch {} to batch {} since this \
                 transaction began; retry",
                base_head.batch_count, to.batch_count
            ))
        };
        let (writes, head, out) = match translate() {
            Ok(t) => t,
            Err(Error::Fenced(_)) => return Err(self.role_taken_meanwhile()),
            // (translated on a view the lake has left: DuckLake's retry translates again)
            Err(_) if head_now != base_head => return Err(advanced(head_now)),
            Err(e) => return Err(e),
        };
        span.record("batch", head.batch_count);
        span.record("keys", writes.len());
        // (shared, not cloned: a commit's writes can be the whole catalog, as a copied-in
        // lake's are; RFC 0014)
        let made = Arc::new(checkpoint::Commit::new(head, writes));
        let size = crate::limits::CommitSize::of(made.writes.iter());
        span.record("bytes", size.bytes);
        // the writes go to the store twice: in the commit object and in SlateDB
        size.check(made.encoded_len(), self.access.max_commit_bytes)?;
        // the commits made since `base`, which this one goes over when their keys and its
        // keys are apart (`rebase.rs`)
        let mut since: Vec<checkpoint::Commit> = Vec::new();
        let mut commit = made.clone();
        if head_now != base_head {
            // (a commit inserting a snapshot never goes over another that did)
            let over = match made.head.snapshot_id == base_head.snapshot_id
                || head_now.snapshot_id == base_head.snapshot_id
            {
                true => self.go_over(&made, base_head, &mut since, Some(head_now.batch_count)),
                false => None,
            };
            match over {
                Some(c) => commit = Arc::new(c),
                None => {
                    if self.current_image().is_some_and(|i| i.head() != head_now) {
                        // the installed image is not the store's head either: the next pin
                        // rereads
                        self.install_image(None);
                    }
                    return Err(advanced(head_now));
                }
            }
        }
        // the store decides: the commit is the object of the next batch, created only if
        // absent; a commit that lost the race goes over the winner when their keys are apart
        let mut turns = 0;
        loop {
            // (compressed here, on the committing thread: not within the time limit, which is
            // the store's to use)
            let object = bytes::Bytes::from(commit.encode(self.access.compression));
            let asked = std::time::Instant::now();
            let created = block_on(
                async {
                    tokio::time::timeout(
                        self.access.io_timeout,
                        self.objects.create_commit_until_answered(&commit, object),
                    )
                    .await
                }
                .instrument(tracing::debug_span!(target: "moraine::store", "moraine.create")),
            );
            match created {
                Ok(Ok(log::Answer::Ours)) => {
                    self.confirm_tail(std::time::Instant::now());
                    // when the create was first asked, no commit after the head it was made
                    // on existed (a commit names the batch after one it read): as good as a
                    // read of the tail that found its end then, so a writer committing alone
                    // does not poll between its commits (`tail_due`)
                    *self.tail_checked.lock().unwrap_or_else(|p| p.into_inner()) = Some(asked);
                    break;
                }
                Ok(Ok(log::Answer::Taken)) => {
                    // another process committed this batch first: read (the folder: fold) what
                    // it wrote, and go over it or let DuckLake retry on the new head
                    let mut folded_to = None;
                    if let Some(db) = folder {
                        match self.bounded("folding the commits after the head", async {
                            let folded = self.fold_tail(db).await?;
                            Ok((folded, self.read_head().await?))
                        }) {
                            Ok((folded, h)) => {
                                // (read from their objects just now: the ones to go over,
                                // right after `since`, as SlateDB's head was `since`'s end)
                                since.extend(folded);
                                folded_to = Some(h.batch_count)
                            }
                            Err(e) => tracing::warn!(
                                target: "moraine::store",
                                "moraine: folding the lake's tail failed: {e}"
                            ),
                        }
                        self.install_image(None);
                    }
                    *self.tail_checked.lock().unwrap_or_else(|p| p.into_inner()) = None;
                    self.met_another_writer();
                    turns += 1;
                    let over = match (folder, folded_to) {
                        (Some(_), None) => None,
                        _ if turns > MAX_GO_OVER_TURNS => None,
                        (_, upto) => self.go_over(&made, base_head, &mut since, upto),
                    };
                    match over {
                        Some(c) => commit = Arc::new(c),
                        None => {
                            return Err(Error::Conflict(format!(
                                "write conflict: another process committed batch {} first; \
                                 retry",
                                commit.head.batch_count
                            )))
                        }
                    }
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    let prev = since.last().map_or(base_head, |c| c.head);
                    drop(made);
                    let commit = Arc::unwrap_or_clone(commit);
                    *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some((commit, prev));
                    return Err(self.outcome_unknown(&format!(
                        "its commit object was not created within {} (moraine_io_timeout)",
                        seconds(self.access.io_timeout)
                    )));
                }
            }
        }
        drop(made);
        let commit = Arc::unwrap_or_clone(commit);
        if !since.is_empty() {
            tracing::debug!(
                target: "moraine::store",
                from = base_head.batch_count,
                to = commit.head.batch_count,
                "moraine: a commit went over the commits made since its transaction began"
            );
        }
        let Some(db) = folder else {
            // the commit is durable (its object exists) and the folder folds it; this attach's
            // image takes it from here
            let next =
                since
                    .iter()
                    .chain(std::iter::once(&commit))
                    .try_fold(None::<Image>, |image, c| {
                        let from = image.as_ref().unwrap_or(base);
                        from.advance_unfolded(&c.writes, c.head).map(Some)
                    });
            match next.map(|i| i.expect("a commit")) {
                Ok(next) => {
                    self.install_image(Some(Arc::new(next)));
                    self.take_over_if_unfolded(commit.head, folded);
                }
                Err(e) => {
                    tracing::warn!(
                        target: "moraine::store",
                        "moraine: the image could not follow a commit ({e}); rereading"
                    );
                    self.install_image(None);
                }
            }
            self.commits.fetch_add(1, Ordering::SeqCst);
            self.last_commit_micros
                .store(unix_micros_now(), Ordering::SeqCst);
            return Ok(out);
        };
        // The commit is durable: its object exists. Fold it into SlateDB, without waiting for
        // SlateDB's own durability (a process killed before SlateDB's WAL reached the store
        // leaves the object, which the next open folds).
        self.image_unsure.store(true, Ordering::SeqCst);
        let folded = block_on(
            async {
                match tokio::time::timeout(self.access.io_timeout, write_fold(db, &commit)).await {
                    Ok(written) => written,
                    // SlateDB holds the batch and may still apply it: nothing is folded again
                    // until a flush shows it applied (`settle`)
                    Err(_) => Err({
                        self.fold_stuck.store(true, Ordering::SeqCst);
                        self.outcome_unknown(&format!(
                            "folding it into SlateDB did not finish within {} \
                             (moraine_io_timeout)",
                            seconds(self.access.io_timeout)
                        ))
                    }),
                }
            }
            .instrument(tracing::debug_span!(target: "moraine::store", "moraine.write")),
        );
        if let Err(e) = folded {
            if matches!(e, Error::Fenced(_)) {
                self.fenced.store(true, Ordering::SeqCst);
            }
            // the commit landed all the same; this attach's image is read afresh
            tracing::warn!(
                target: "moraine::store",
                "moraine: batch {} is committed, but folding it into SlateDB failed ({e}); \
                 the next statement folds it",
                head.batch_count
            );
            self.install_image(None);
            self.image_unsure.store(false, Ordering::SeqCst);
            return Ok(out);
        }
        self.count_fold(db);
        let head = commit.head;
        let log = since
            .into_iter()
            .chain(std::iter::once(commit))
            .map(|c| (c.head, c.writes))
            .collect();
        match self
            .take_snapshot(db)
            .and_then(|snap| base.follow(log, Some(snap)))
        {
            Ok(next) => {
                let next = Arc::new(next);
                self.install_image(Some(next.clone()));
                self.checkpoint_after_commit(next);
            }
            Err(e) => {
                tracing::warn!(
                    target: "moraine::store",
                    "moraine: the image could not follow a commit ({e}); rereading"
                );
                self.install_image(None);
            }
        }
        self.image_unsure.store(false, Ordering::SeqCst);
        self.commits.fetch_add(1, Ordering::SeqCst);
        // a writer that commits has work for its compactor (started at the first commit, and
        // again if it stopped on an error)
        self.start_compactor();
        self.last_commit_micros
            .store(unix_micros_now(), Ordering::SeqCst);
        // the commit is installed: pins and commits need not wait for the flush below, which
        // runs in the background (the folds are durable in their commit objects; it only
        // bounds what an open replays)
        drop(_commit);
        self.flush_after(
            db,
            (&self.unflushed_commits, COMMITS_PER_MEMTABLE_FLUSH),
            &self.memtable_flushing,
            FlushType::MemTable,
            "flushing the memtable",
        );
        tracing::debug!(
            target: "moraine::store",
            snapshot = ?head.snapshot_id,
            "moraine: committed"
        );
        Ok(out)
    }

    /// The folder role was taken while this commit read through the writer (the caller holds
    /// the commit lock): the attach goes on without it, and DuckLake retries on a view read
    /// again.
    fn role_taken_meanwhile(&self) -> Error {
        match self.demote_fenced_locked() {
            Ok(()) => Error::Conflict(format!(
                "write conflict: another attach of {} took the folder role; retry",
                self.url
            )),
            Err(e) => e,
        }
    }

    /// `made` (a commit on `base`) taken over every commit after `base` through batch `upto`
    /// (to the tail's end when `None`), reading from their objects those `since` does not hold
    /// yet; `None` when it cannot go over them (`rebase::onto`) or they cannot all be read.
    fn go_over(
        &self,
        made: &checkpoint::Commit,
        base: Head,
        since: &mut Vec<checkpoint::Commit>,
        upto: Option<u64>,
    ) -> Option<checkpoint::Commit> {
        if !self.tail_is_confirmed() || since.len() > MAX_GO_OVER {
            // a view confirmed longer ago than that (races lost one after another) could take
            // the name of a commit folded and deleted since (`log.rs`)
            return None;
        }
        let from = base.batch_count + 1 + since.len() as u64;
        let held = since.len();
        let read = self.bounded(
            "reading the commits made since the transaction began",
            async {
                let mut got = Vec::new();
                let mut next = from;
                while upto.is_none_or(|u| next <= u) {
                    if held + got.len() >= MAX_GO_OVER {
                        return Ok(None);
                    }
                    match self.objects.read_commit(next).await? {
                        Some(c) if !c.retired => got.push(c),
                        // (a tail read to its end)
                        None if upto.is_none() => break,
                        _ => return Ok(None),
                    }
                    next += 1;
                }
                Ok(Some(got))
            },
        );
        match read {
            Ok(Some(got)) => since.extend(got),
            Ok(None) => return None,
            Err(e) => {
                tracing::debug!(
                    target: "moraine::store",
                    "moraine: the commits since the transaction began could not be read: {e}"
                );
                return None;
            }
        }
        rebase::onto(made, base, since)
    }

    /// Fold the commit objects after SlateDB's head into SlateDB, in order; how many. The
    /// caller holds the commit lock (or is the open).
    pub(super) async fn fold_tail(&self, db: &Db) -> Result<Vec<checkpoint::Commit>> {
        let started = std::time::Instant::now();
        let mut head = self.read_head().await?;
        let mut folded = Vec::new();
        let mut tail = log::Tail::from(&self.objects, head.batch_count + 1);
        while let Some(commit) = tail.next().await? {
            if commit.retired {
                // (a reclaim retires only what SlateDB holds durably)
                break;
            }
            write_fold(db, &commit).await?;
            self.count_fold(db);
            tracing::debug!(
                target: "moraine::store",
                batch = commit.head.batch_count,
                "moraine: folded a commit object"
            );
            head = commit.head;
            folded.push(commit);
            self.met_another_writer();
        }
        self.tail_ends_at(head.batch_count, started).await?;
        Ok(folded)
    }

    /// Counts a fold written into SlateDB without waiting for its durability; once
    /// [`FOLDS_PER_WAL_FLUSH`] have built up, writes SlateDB's WAL out in the background,
    /// within the time limit, one such write at a time. (A fold SlateDB has not written out
    /// is not lost: its commit object stays until a checkpoint, which flushes first; a failed
    /// write is left to the next one, and a fenced folder learns of the fence at its next pin.)
    pub(super) fn count_fold(&self, db: &Db) {
        self.flush_after(
            db,
            (&self.unflushed_folds, FOLDS_PER_WAL_FLUSH),
            &self.wal_flushing,
            FlushType::Wal,
            "writing SlateDB's WAL out",
        );
    }

    /// Counts one more in `count` (a counter, and how many make a flush due); once a flush is
    /// due and none that `flag` marks is running, resets it and runs a flush of `kind` in the
    /// background ([`Store::flush_in_background`]). A flush still running leaves the count
    /// growing: the next call tries again.
    fn flush_after(
        &self,
        db: &Db,
        count: (&std::sync::atomic::AtomicU64, u64),
        flag: &Arc<std::sync::atomic::AtomicBool>,
        kind: FlushType,
        name: &'static str,
    ) {
        let (counter, every) = count;
        if counter.fetch_add(1, Ordering::SeqCst) + 1 < every || flag.swap(true, Ordering::SeqCst) {
            return;
        }
        counter.store(0, Ordering::SeqCst);
        self.flush_in_background(db, kind, flag, name);
    }

    /// Runs a flush of `db` of `kind` in the background, within the time limit; `flag` (set by
    /// the caller) is cleared when it ends, however it ends. Nothing waits on it: a failure is
    /// logged (a memtable flush's as a warning).
    fn flush_in_background(
        &self,
        db: &Db,
        kind: FlushType,
        flag: &Arc<std::sync::atomic::AtomicBool>,
        name: &'static str,
    ) {
        let (db, flushing, limit) = (db.clone(), Running(flag.clone()), self.access.io_timeout);
        let span = tracing::debug_span!(
            target: "moraine::store",
            parent: None,
            "moraine.flush",
            flush = name,
            store = %self.url
        );
        runtime().spawn(
            async move {
                let memtable = matches!(kind, FlushType::MemTable);
                let options = FlushOptions { flush_type: kind };
                let flushed = tokio::time::timeout(limit, db.flush_with_options(options)).await;
                drop(flushing);
                let failed = match flushed {
                    Ok(Ok(())) => return,
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => format!(
                        "it took longer than {} (moraine_io_timeout)",
                        seconds(limit)
                    ),
                };
                // (a memtable flush that fails is worth an operator's look: the next open's
                // replay grows; the WAL's next flush, checkpoint or close writes it again)
                if memtable {
                    tracing::warn!(
                        target: "moraine::store",
                        "moraine: {name} after a commit failed: {failed}"
                    )
                } else {
                    tracing::debug!(target: "moraine::store", "moraine: {name} failed: {failed}")
                }
            }
            .instrument(span),
        );
    }

    /// Test hook: write raw keys outside any transaction (to plant records a load must skip).
    #[cfg(test)]
    pub(crate) fn put_raw(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let db = self.db().ok_or_else(|| Error::ReadOnly(self.url.clone()))?;
        block_on(async {
            db.put(key, value).await?;
            db.flush().await?;
            Ok::<(), Error>(())
        })?;
        self.install_image(None);
        Ok(())
    }
}

/// Apply `commit` to SlateDB as one batch: its writes and its commit-log record, which is how an
/// image at the batch before follows. Waits for SlateDB to take it, not for its durability.
async fn write_fold(db: &Db, commit: &checkpoint::Commit) -> Result<()> {
    let mut batch = WriteBatch::new();
    for (k, v) in &commit.writes {
        match v {
            Some(v) => batch.put(k, v),
            None => batch.delete(k),
        }
    }
    batch.put_with_options(
        keys::image_log(commit.head.batch_count),
        checkpoint::encode_log(commit.head, &commit.writes),
        &PutOptions {
            ttl: Ttl::ExpireAfterMillis(checkpoint::LOG_TTL.as_millis() as u64),
        },
    );
    // the handle would say when it is durable: not waited for
    let _ = db.write(batch).await?;
    Ok(())
}
