//! Closing a store, at DETACH or when its last handle drops: a writer leaves a checkpoint of its
//! last commit, its memtable in L0 and the WAL before it collected, so that the next open
//! replays little.

use super::*;
use slatedb::config::{FlushOptions, FlushType};

/// How many WAL objects an open now would replay: SlateDB replays every one after its
/// manifest's replay point, including the empty object each writer's open writes to fence the
/// writer before it (this writer's own fence took the id the manifest still calls next).
pub(crate) fn replay_backlog(db: &Db) -> u64 {
    let manifest = db.manifest();
    manifest
        .next_wal_sst_id()
        .saturating_sub(manifest.replay_after_wal_id())
}

/// A writer's close moves the replay point when the next open would otherwise replay this many
/// WAL objects or more: at most one small L0 SST per this many opens that committed nothing,
/// and no open reads more than about this many objects of WAL.
pub(crate) const REPLAY_BACKLOG_LIMIT: u64 = 8;

impl Store {
    /// Close the underlying SlateDB handle (also done when the last `Arc` drops).
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        let span =
            tracing::debug_span!(target: "moraine::store", "moraine.close", store = %self.url);
        let _enter = span.enter();
        let broken = self.broken.load(Ordering::SeqCst);
        let closing = async {
            let Backend::Writer(db, _) = &*self.backend() else {
                return self.backend().close().await;
            };
            self.stop_collector();
            let running = self
                .checkpointing
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if broken {
                // a write of unknown outcome is pending: stop without flushing the memtable
                // that holds it (SlateDB's WAL upload may still deliver it, as the error said)
                if let Some(running) = running {
                    running.abort();
                }
                self.compactor.stop().await;
                db.close_with_options(slatedb::config::CloseOptions { flush_type: None })
                    .await?;
                return Ok(());
            }
            // a writer leaves a checkpoint of its last commit for the next attach
            if let Some(running) = running {
                let _ = running.await;
            }
            if self.close_reason().is_none() {
                if let (Some(image), Some(writer)) = (self.current_image(), self.checkpointer()) {
                    if let Err(e) = writer.write(&image).await {
                        tracing::warn!(
                            target: "moraine::store",
                            "moraine: writing the image checkpoint at close failed: {e}"
                        );
                    }
                }
            }
            // a memtable flush a commit started is let finish first: what it adds to L0 counts
            // below (the close's time limit bounds the wait)
            while self.memtable_flushing.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // A writer still holding the lake leaves nothing for the next open to replay: its
            // memtable goes to L0, and the WAL objects before the new boundary are collected.
            // A flush that adds to a full L0 waits for a compaction: the compactor runs for
            // the replay marker's flush, and for a writer that committed (it runs since the
            // first commit). A memtable holding only what the open replayed (a writer that
            // stopped without flushing) is left to the compactor the open's timer starts.
            let mut holding = self.close_reason().is_none();
            let marker_due = holding && replay_backlog(db) >= REPLAY_BACKLOG_LIMIT;
            if compactor::l0_is_full(db) && (marker_due || self.commits.load(Ordering::SeqCst) > 0)
            {
                self.start_compactor();
            }
            let mut unmarked = false;
            if marker_due {
                // SlateDB moves the replay point only when it flushes a memtable holding
                // something, so writers that commit nothing (one that only queries) each leave
                // their open's fence in the WAL for every later open to read: give the flush one
                // record, the store's unchanged format marker, durable first so that the replay
                // point the flush records is past it
                let marked = async {
                    let handle = db.put(keys::sys_format(), STORE_FORMAT.as_bytes()).await?;
                    db.flush().await?;
                    handle.await_durable().await
                };
                if let Err(e) = marked.await {
                    // (a writer fenced without knowing it learns it here: nothing to tidy)
                    tracing::debug!(
                        target: "moraine::store",
                        "moraine: writing the replay marker at close failed: {e}"
                    );
                    holding = false;
                    unmarked = true;
                }
            }
            let tidy = holding
                && db
                    .flush_with_options(FlushOptions {
                        flush_type: FlushType::MemTable,
                    })
                    .await
                    .inspect_err(|e| {
                        tracing::warn!(
                            target: "moraine::store",
                            "moraine: flushing the memtable at close failed: {e}"
                        )
                    })
                    .is_ok();
            self.compactor.stop().await;
            match self.backend().close().await {
                // the marker's failure closed SlateDB with its reason (fenced, most likely);
                // every commit this writer acknowledged was durable already
                Err(e) if unmarked => {
                    tracing::debug!(
                        target: "moraine::store",
                        "moraine: closing after the replay marker failed: {e}"
                    )
                }
                closed => closed?,
            }
            if tidy {
                let admin = slatedb::admin::Admin::builder("", self.objects.store.clone()).build();
                if let Err(e) = admin.run_gc_once(gc_at_close(self.boundary_files)).await {
                    tracing::warn!(
                        target: "moraine::store",
                        "moraine: collecting obsolete objects at close failed: {e}"
                    );
                }
            }
            Ok(())
        };
        let closed = block_on(within(
            self.access.io_timeout,
            &self.url,
            "closing (every commit it acknowledged was already durable)",
            closing,
        ));
        crate::sst_cache::shared().drop_scope(self.cache_scope);
        closed
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!(
                target: "moraine::store",
                "moraine: closing {} failed: {e}",
                self.canonical
            );
        }
    }
}
