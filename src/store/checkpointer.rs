//! A writer's image checkpoints (`checkpoint.rs`): written in the background after enough
//! commits, and at close; each replaces the one before, whose objects and commit log go.

use super::*;

impl Store {
    /// Test hook: write a checkpoint of the installed image now.
    #[cfg(test)]
    /// Waits for a background checkpoint first: one of the same batch writes the same object,
    /// and a test that then damages it must not race a late rewrite.
    pub(crate) fn write_checkpoint_for_test(&self) {
        self.settle_checkpoint_for_test();
        let image = self.current_image().expect("an installed image");
        block_on(self.checkpointer().expect("a writer").write(&image)).unwrap();
    }

    /// Test hook: the newest checkpoint this attach counts as written (`u64::MAX`: none known).
    #[cfg(test)]
    pub(crate) fn checkpointed_for_test(&self) -> u64 {
        self.checkpointed.load(Ordering::SeqCst)
    }

    /// Test hook: wait until no background checkpoint is being written.
    #[cfg(test)]
    pub(crate) fn settle_checkpoint_for_test(&self) {
        let running = self.checkpointing.lock().unwrap().take();
        if let Some(running) = running {
            let _ = block_on(running);
        }
    }

    /// This attach learned that the newest checkpoint is at `batch` (or later): the next is due
    /// [`checkpoint::COMMITS_PER_CHECKPOINT`] commits after it, and it bounds what the next
    /// checkpoint deletes.
    pub(super) fn count_checkpoint(&self, batch: u64) {
        let _ = self
            .checkpointed
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |known| {
                (known == u64::MAX || known < batch).then_some(batch)
            });
    }

    /// After a commit installed `image`: start writing a checkpoint of it in the background
    /// when the newest one is [`checkpoint::COMMITS_PER_CHECKPOINT`] commits behind and none is
    /// being written.
    pub(super) fn checkpoint_after_commit(&self, image: Arc<Image>) {
        let known = self.checkpointed.load(Ordering::SeqCst);
        let since = *self
            .uncheckpointed_since
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(std::time::Instant::now);
        let behind = known == u64::MAX
            || image.head().batch_count >= known + checkpoint::COMMITS_PER_CHECKPOINT
            || since.elapsed() >= checkpoint::CHECKPOINT_AGE;
        if !behind {
            return;
        }
        let Some(writer) = self.checkpointer() else {
            return;
        };
        let mut running = self.checkpointing.lock().unwrap_or_else(|p| p.into_inner());
        if running.as_ref().is_some_and(|h| !h.is_finished()) {
            return;
        }
        *self
            .uncheckpointed_since
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
        *running = Some(runtime().spawn(async move {
            if let Err(e) = writer.write(&image).await {
                tracing::warn!(
                    target: "moraine::store",
                    "moraine: writing an image checkpoint failed: {e}"
                );
            }
        }));
    }

    /// What writes this writer's checkpoints; `None` on a reader.
    pub(super) fn checkpointer(&self) -> Option<Checkpointer> {
        match &*self.backend() {
            Backend::Writer(db, _) => Some(Checkpointer {
                db: db.clone(),
                object_store: self.objects.store.clone(),
                checkpointed: self.checkpointed.clone(),
                url: self.url.clone(),
                codec: self.access.compression,
            }),
            Backend::Reader(_) => None,
        }
    }
}

/// Deletes the commit-log records of batches up to `batch`, in batches of a thousand; how many
/// there were. A reader that needed one follows from the newest image checkpoint instead.
pub(super) async fn delete_log_upto(db: &Db, batch: u64) -> Result<u64> {
    let range = keys::image_log(0)..=keys::image_log(batch);
    let mut it = db.scan_with_options(range, &bulk_scan()).await?;
    let mut doomed = Vec::new();
    while let Some(kv) = it.next().await? {
        doomed.push(kv.key);
    }
    for keys in doomed.chunks(1000) {
        let mut batch = WriteBatch::new();
        for k in keys {
            batch.delete(k);
        }
        let handle = db.write(batch).await?;
        db.flush().await?;
        handle.await_durable().await?;
    }
    Ok(doomed.len() as u64)
}

/// Writes a writer's image checkpoints (`checkpoint.rs`), in the background or at close; holds
/// what that needs rather than the store, so that dropping the store's last handle closes it.
pub(super) struct Checkpointer {
    db: Db,
    object_store: Arc<dyn ObjectStore>,
    checkpointed: Arc<std::sync::atomic::AtomicU64>,
    url: String,
    /// What it compresses the sections it encodes with (`moraine_compression`).
    codec: Codec,
}

impl Checkpointer {
    /// Write a checkpoint of `image` (a committed state of this writer) and point
    /// `image/checkpoint` at it, unless the newest one holds that batch already; then delete
    /// the checkpoint objects older than the one it replaces (a reader may still be reading
    /// that one).
    pub(super) async fn write(&self, image: &Image) -> Result<()> {
        let span = tracing::debug_span!(
            target: "moraine::store",
            "moraine.checkpoint",
            store = %self.url,
            batch = image.head().batch_count
        );
        self.write_unlogged(image).instrument(span).await
    }

    async fn write_unlogged(&self, image: &Image) -> Result<()> {
        let batch = image.head().batch_count;
        let mut previous = self.checkpointed.load(Ordering::SeqCst);
        if previous == u64::MAX {
            previous = match self.db.get(keys::image_checkpoint()).await? {
                Some(v) => checkpoint::decode_pointer(&v)?.0,
                None => 0,
            };
            self.checkpointed.store(previous, Ordering::SeqCst);
        }
        if batch <= previous {
            return Ok(());
        }
        // which history ranges hold records: a reader that starts from the checkpoint reads
        // SlateDB's state for those only (RFC 0009); not known, it reads it for any
        let held = image.held_ranges().await.unwrap_or_else(|e| {
            tracing::debug!(target: "moraine::store", "moraine: history ranges not found ({e})");
            None
        });
        let (head, sections, codec) = (image.head(), image.checkpoint_sections(), self.codec);
        // compressing a large lake's sections takes a while: off the runtime's threads
        let object = tokio::task::spawn_blocking(move || {
            let _span = tracing::trace_span!(target: "moraine::store", "moraine.checkpoint.encode")
                .entered();
            checkpoint::encode_checkpoint(head, STORE_FORMAT, held.as_ref(), sections, codec)
        })
        .await
        .map_err(|e| Error::Storage(format!("encoding a checkpoint failed: {e}")))?;
        let path = checkpoint::object_path(batch);
        // the folds the checkpoint holds durable first: an attach that finds the object by
        // listing (RFC 0009) counts on SlateDB's state holding at least its head
        self.db.flush().await?;
        self.object_store
            .put(
                &object_store::path::Path::from(path.as_str()),
                object.into(),
            )
            .await
            .map_err(|e| Error::Storage(format!("writing {path}: {e}")))?;
        let handle = self
            .db
            .put(
                keys::image_checkpoint(),
                checkpoint::encode_pointer(batch, &path),
            )
            .await?;
        self.db.flush().await?;
        handle.await_durable().await?;
        self.checkpointed.store(batch, Ordering::SeqCst);
        // the checkpoint it replaced stays for readers that read the pointer before, with the
        // log after it; the log up to it serves nobody now: a reader further behind follows
        // from this checkpoint
        self.delete_checkpoints_before(previous).await?;
        if previous > 0 {
            delete_log_upto(&self.db, previous).await?;
            let objects = Objects {
                store: self.object_store.clone(),
                local: None,
            };
            objects.delete_commits_upto(previous).await?;
        }
        Ok(())
    }

    /// Delete the checkpoint objects of batches before `bound`; how many went. A failed delete
    /// is logged and left for a later one.
    pub(super) async fn delete_checkpoints_before(&self, bound: u64) -> Result<u64> {
        let dir = object_store::path::Path::from(checkpoint::OBJECT_DIR);
        let listed = self
            .object_store
            .list_with_delimiter(Some(&dir))
            .await
            .map_err(|e| Error::Storage(format!("listing {dir}: {e}")))?;
        let old = listed
            .objects
            .into_iter()
            .map(|m| m.location)
            .filter(|l| checkpoint::batch_of_object(l.as_ref()).is_some_and(|b| b < bound));
        let mut deleted = 0;
        for location in old {
            match self.object_store.delete(&location).await {
                Ok(()) => deleted += 1,
                Err(e) => tracing::warn!(
                    target: "moraine::store",
                    "moraine: deleting the old image checkpoint {location} failed: {e}"
                ),
            }
        }
        Ok(deleted)
    }
}
