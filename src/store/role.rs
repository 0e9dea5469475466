//! The folder role (RFC 0004 v3): the one attach that holds SlateDB's writer, folds the commit
//! objects every process creates into it, and runs the store's maintenance (checkpoints,
//! compaction, collection, reclaim). Any read-write attach commits without it. A read-write
//! attach takes the role at its first commit (at its open when the lake has no checkpoint to
//! start from), for a reclaim, and again when the tail nobody folded grows long; one whose role
//! another attach took (SlateDB fenced its writer) goes on with a reader.

use super::*;

/// A read-write attach whose image is this many commits past the folded state takes the folder
/// role: nobody folds (the folder detached or died).
pub(super) const TAKE_OVER_AFTER: u64 = 64;

impl Store {
    /// Whether this attach holds the folder role.
    pub fn is_folder(&self) -> bool {
        matches!(&*self.backend(), Backend::Writer(..))
    }

    /// [`Store::demote_locked`] for an attach that learned of the fence from a read or write
    /// through its writer: marked fenced first. The caller holds the commit lock.
    pub(super) fn demote_fenced_locked(&self) -> Result<()> {
        self.fenced.store(true, Ordering::SeqCst);
        self.demote_locked()
    }

    /// This attach's writer was fenced (another attach took the folder role): stop the folder's
    /// work and go on with a reader of the lake. The caller holds the commit lock. Open
    /// transactions keep their images; the next pin reads the lake afresh.
    pub(super) fn demote_locked(&self) -> Result<()> {
        let backend = self.backend();
        let Backend::Writer(db, _) = &*backend else {
            return Ok(());
        };
        let span =
            tracing::debug_span!(target: "moraine::store", "moraine.demote", store = %self.url);
        let _enter = span.enter();
        self.stop_collector();
        if let Some(running) = self
            .checkpointing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            running.abort();
        }
        let stopped = block_on(within(
            self.access.io_timeout,
            &self.url,
            "stopping the compactor",
            async {
                self.compactor.stop().await;
                Ok(())
            },
        ));
        if let Err(e) = stopped {
            tracing::warn!(target: "moraine::store", "moraine: {e}");
        }
        let reader = self.bounded(
            "opening a reader of the lake",
            open::open_reader(&self.source()),
        )?;
        *self.handle.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(reader);
        // (a fenced writer's close fails: nothing of it is needed)
        self.drop_writer(db);
        self.fenced.store(false, Ordering::SeqCst);
        self.install_image(None);
        self.image_unsure.store(false, Ordering::SeqCst);
        *self.tail_checked.lock().unwrap_or_else(|p| p.into_inner()) = None;
        tracing::info!(
            target: "moraine::store",
            "moraine: another attach of {} took the folder role; this one goes on without it",
            self.url
        );
        Ok(())
    }

    /// Close a SlateDB writer this attach no longer uses, flushing nothing, within the time
    /// limit; its errors are of no use (a fenced writer's close fails).
    fn drop_writer(&self, db: &Db) {
        let _ = block_on(within(
            self.access.io_timeout,
            &self.url,
            "closing the lake's writer",
            async {
                db.close_with_options(slatedb::config::CloseOptions { flush_type: None })
                    .await
                    .map_err(Error::from)
            },
        ));
    }

    /// Stop the folder's collector, if it runs.
    pub(super) fn stop_collector(&self) {
        if let Some(collector) = self
            .collector
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            collector.abort();
        }
    }

    /// Take the folder role now, as a read-write attach's first commit does (and
    /// `moraine_reclaim`, which runs in the folder). Nothing for a `READ_ONLY` attach or one that
    /// holds the role.
    pub(crate) fn take_folder_role(&self) -> Result<()> {
        let _commit = self.commit_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.promote_locked(false)
    }

    /// Take the folder role: open SlateDB's writer (fencing the attach that held it, if any),
    /// check the store's format and fold the tail. The caller holds the commit lock; a
    /// read-only attach never takes it. `at_first_commit`: the routine taking of a read-write
    /// attach's first commit, logged at debug (a take-over is news, logged at info). A store of
    /// a format this build does not write is refused before the writer is installed; once it
    /// is, the attach is the folder, with its collector and compactor, even if the fold fails
    /// (its image is then unsure, and the next pin folds and reads afresh).
    pub(super) fn promote_locked(&self, at_first_commit: bool) -> Result<()> {
        if self.read_only || self.is_folder() {
            return Ok(());
        }
        let span =
            tracing::debug_span!(target: "moraine::store", "moraine.promote", store = %self.url);
        let _enter = span.enter();
        let db = self.bounded(
            "opening the lake's writer",
            open::open_writer(&self.source()),
        )?;
        // a store opened by a reader of an earlier format is upgraded as a writer's open would
        // (its marker names what this writer now writes, RFC 0013); another is refused
        let writer = Backend::writer(db.clone());
        let checked = self.bounded("checking the store's format", async {
            match db.get(keys::sys_format()).await? {
                Some(v) => check_format(&self.url, &writer, &v).await,
                None => Ok(()),
            }
        });
        if let Err(e) = checked {
            self.drop_writer(&db);
            if let Error::NotAStore { reason, .. } = &e {
                // remembered: the next commit is refused without opening (and fencing) again
                *self
                    .format_refused
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = Some(reason.clone());
            }
            return Err(e);
        }
        // (held by reads under way on other connections, the old handle closes when they end)
        drop(std::mem::replace(
            &mut *self.handle.write().unwrap_or_else(|p| p.into_inner()),
            Arc::new(writer),
        ));
        // (a fence this attach met as a plain writer is not this writer's)
        self.fenced.store(false, Ordering::SeqCst);
        // until the fold below has advanced it, the image may be behind what SlateDB holds
        self.image_unsure.store(true, Ordering::SeqCst);
        *self.tail_checked.lock().unwrap_or_else(|p| p.into_inner()) = None;
        if let Some(me) = self.me.upgrade() {
            *self.collector.lock().unwrap_or_else(|p| p.into_inner()) = Some(start_collector(&me));
            self.compactor.start_later(&me);
        }
        self.role_at_first_commit.store(false, Ordering::SeqCst);
        match at_first_commit {
            true => tracing::debug!(
                target: "moraine::store",
                "moraine: this attach of {} took the folder role at its first commit",
                self.url
            ),
            false => tracing::info!(
                target: "moraine::store",
                "moraine: this attach of {} took the folder role",
                self.url
            ),
        }
        self.bounded("folding the commits after the head", self.fold_tail(&db))?;
        // the checkpoint `image/checkpoint` names is the newest one known, not the object an
        // attach started from (which may be newer, written by a folder that died before naming
        // it): the first commit writes none, and a reader that just read the pointer keeps it
        let pointer = self.bounded("reading the checkpoint pointer", async {
            Ok(db.get(keys::image_checkpoint()).await?)
        })?;
        if let Some(pointer) = pointer {
            self.count_checkpoint(checkpoint::decode_pointer(&pointer)?.0);
        }
        let folded = self.bounded("reading the head", self.read_head())?;
        if let Some(image) = self.current_image() {
            if image.head() == folded {
                // the folder's images read ended versions through its snapshots, which a
                // reclaim knows to wait for (a reader's read the latest state); an image behind
                // (an attach's that had not read the tail yet) stays unsure, and the next pin
                // advances it
                let snap = self.take_snapshot(&db)?;
                self.install_image(Some(Arc::new(image.follow(Vec::new(), Some(snap))?)));
                self.image_unsure.store(false, Ordering::SeqCst);
            }
        }
        Ok(())
    }
}
