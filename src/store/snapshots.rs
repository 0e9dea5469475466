//! The SlateDB snapshots a writer took, remembered weakly: which committed states something of
//! the process may still read (a reclaim waits for the older ones).

use super::*;

/// The SlateDB snapshots a writer took, held weakly: those still open are the committed states
/// something of the process may still read.
#[derive(Default)]
pub(crate) struct OpenSnapshots {
    taken: Vec<Weak<slatedb::DbSnapshot>>,
    /// How many may be remembered before the closed ones are forgotten.
    room: usize,
}

impl OpenSnapshots {
    fn add(&mut self, snapshot: &Arc<slatedb::DbSnapshot>) {
        if self.taken.len() >= self.room {
            self.taken.retain(|w| w.strong_count() > 0);
            self.room = (self.taken.len() * 2).max(16);
        }
        self.taken.push(Arc::downgrade(snapshot));
    }

    fn oldest(&self) -> Option<u64> {
        self.taken
            .iter()
            .filter_map(Weak::upgrade)
            .map(|s| s.seq())
            .min()
    }
}

impl Store {
    /// A SlateDB snapshot of this writer's state now, remembered (weakly) among the open ones.
    pub(crate) fn take_snapshot(&self, db: &Db) -> Result<Arc<slatedb::DbSnapshot>> {
        let snapshot = db.snapshot()?;
        self.snapshots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add(&snapshot);
        Ok(snapshot)
    }

    /// The sequence number of the oldest SlateDB snapshot this writer took that is still open:
    /// the oldest state something of this process (an image a transaction pinned) may read.
    pub(crate) fn oldest_open_snapshot(&self) -> Option<u64> {
        self.snapshots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .oldest()
    }
}
