//! An operator's view of an open store: its state (`moraine_status`), SlateDB's metrics
//! (`moraine_metrics`) and how many keys each keyspace holds.

use super::*;

impl Store {
    /// How many keys each keyspace holds at the latest committed state, as
    /// (keyspace, kind, keys): e.g. ("history", "ducklake_column", 3). The kind is the second
    /// key segment when it is text (a table name), else empty (e.g. `snapshot/<id>`). A lake
    /// other than the default one names its keyspaces `lake/<schema>/<keyspace>`.
    /// An operator's view of the store; reads everything, so not for hot paths.
    pub fn keyspace_counts(self: &Arc<Self>) -> Result<Vec<(String, String, u64)>> {
        let entries = self.bounded("reading every record", self.backend().scan(&[]))?;
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
        let manifest = match &*self.backend() {
            Backend::Writer(db, _) => Some(db.manifest()),
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
            folder: self.is_folder(),
            state,
            head_batch: head.as_ref().ok().map(|h| h.batch_count),
            head_snapshot: head.as_ref().ok().and_then(|h| h.snapshot_id),
            problem: head.err().map(|e| e.to_string()),
            manifest_id: manifest.as_ref().map(|m| m.id()),
            writer_epoch: manifest.as_ref().map(|m| m.writer_epoch()),
            l0_ssts: manifest.as_ref().map(|m| m.l0().len()),
            sorted_runs: manifest.as_ref().map(|m| m.compacted().len()),
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
            compression: self.access.compression.name(),
        })
    }

    /// SlateDB's metrics for this store (`moraine_metrics`).
    pub fn metrics(&self) -> Vec<(String, String, i64)> {
        crate::status::metric_rows(&self.metrics)
    }
}
