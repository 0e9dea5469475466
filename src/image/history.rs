//! Ended versions, which an image does not hold: read on demand through a writer's SlateDB
//! snapshot, or from a reader's latest state filtered to the versions that had ended by the
//! image's head; and which history ranges hold any record at all.

use super::spaces::place_space;
use super::Image;
use crate::cell::{decode_row_at, Cell};
use crate::error::{Error, Result};
use crate::keys;
use slatedb::DbSnapshot;
use std::sync::{Arc, Mutex};
use tracing::Instrument;

/// Where an image reads ended versions from.
pub(super) enum History {
    /// A writer's SlateDB snapshot taken at exactly the image's state, or one taken later at
    /// the same committed state ([`Image::renew_snapshot`]).
    Snapshot(Mutex<Arc<DbSnapshot>>),
    /// A reader's latest state, filtered to versions that had ended by the image's head; and
    /// the ended versions written by the commits the image took from the lake's tail (commit
    /// objects, RFC 0004 v3), which that state may not hold yet.
    Latest(Arc<Tail>),
}

/// History records written by commits not yet folded into the state an image reads (`None`:
/// deleted), by key.
pub(crate) type Tail = std::collections::BTreeMap<Vec<u8>, Option<bytes::Bytes>>;

impl History {
    pub(super) fn of(snapshot: Option<Arc<DbSnapshot>>) -> History {
        match snapshot {
            Some(s) => History::Snapshot(Mutex::new(s)),
            None => History::Latest(Default::default()),
        }
    }

    /// The snapshot ended versions are read through; `None` on a reader.
    pub(super) fn snapshot(&self) -> Option<Arc<DbSnapshot>> {
        match self {
            History::Snapshot(s) => Some(s.lock().unwrap_or_else(|p| p.into_inner()).clone()),
            History::Latest(_) => None,
        }
    }
}

/// The history ranges of an image that hold at least one record: the lakes' history roots
/// looked through, and each `[lake/<l>/]history/<table>/` found to hold a record under them
/// (a superset once carried forward: a commit adds the tables it ends versions of and removes
/// none).
#[derive(Debug, Default)]
pub(super) struct HistoryHeld {
    pub(super) roots: std::collections::BTreeSet<Vec<u8>>,
    pub(super) tables: std::collections::BTreeSet<Vec<u8>>,
}

impl HistoryHeld {
    /// Whether records under `prefix` (within a history root) may exist: its root was not
    /// looked through, or a table range found holding records overlaps it.
    pub(super) fn may_hold(&self, prefix: &[u8]) -> bool {
        if !self.roots.iter().any(|r| prefix.starts_with(r)) {
            return true;
        }
        // table prefixes are whole segments, so none is a prefix of another
        let within = self
            .tables
            .range(prefix.to_vec()..)
            .next()
            .is_some_and(|t| t.starts_with(prefix));
        let covering = self
            .tables
            .range(..=prefix.to_vec())
            .next_back()
            .is_some_and(|t| prefix.starts_with(t));
        within || covering
    }

    /// The `[lake/<l>/]history/<table>/` range a history key lies in.
    pub(super) fn table_of(key: &[u8]) -> Result<Vec<u8>> {
        let lead = keys::raw_segments(key, 1)?;
        let at = if lead
            .first()
            .is_some_and(|s| keys::segment_is_text(s, "lake"))
        {
            2
        } else {
            0
        };
        let segments = keys::raw_segments(key, at + 2)?;
        if segments.len() < at + 2 {
            return Err(Error::Corrupt(format!(
                "history key {} names no table",
                keys::show(key)
            )));
        }
        Ok(segments.concat())
    }

    /// Look through each lake's history root in `snap`, one iterator per lake, seeking past
    /// each table found.
    pub(super) async fn find(
        snap: &DbSnapshot,
        lakes: impl Iterator<Item = &str>,
    ) -> Result<HistoryHeld> {
        let mut held = HistoryHeld::default();
        for lake in lakes {
            let root = keys::history_root(lake);
            let mut it = snap
                .scan_prefix_with_options(&root, .., &Default::default())
                .await?;
            while let Some(kv) = it.next().await? {
                let table = Self::table_of(&kv.key)?;
                // every key under a text segment sorts before the segment's last byte + 1
                let mut past = table.clone();
                *past.last_mut().expect("a table segment") += 1;
                held.tables.insert(table);
                it.seek(past).await?;
            }
            held.roots.insert(root);
        }
        Ok(held)
    }
}

impl Image {
    /// Read ended versions through `snapshot` from now on, instead of the snapshot this image
    /// was read through; the caller took it at this image's committed state (the head
    /// unchanged, under the commit lock), so every read returns what it returned before. The
    /// older snapshot goes with its last reader: a reclaim needs no snapshot older than its
    /// own, and transactions pinned to the head need not hold one (RFC 0003). False on a
    /// reader's image, which holds none.
    pub(crate) fn renew_snapshot(&self, snapshot: Arc<DbSnapshot>) -> bool {
        match &self.history {
            History::Snapshot(s) => {
                let old =
                    std::mem::replace(&mut *s.lock().unwrap_or_else(|p| p.into_inner()), snapshot);
                drop(old);
                true
            }
            History::Latest(_) => false,
        }
    }

    /// The sequence number of the SlateDB snapshot the image reads ended versions through;
    /// `None` on a reader's image, which holds none.
    pub(crate) fn snapshot_seq(&self) -> Option<u64> {
        self.history.snapshot().map(|s| s.seq())
    }

    /// Which tables hold ended versions at this image, read through its snapshot on first
    /// need.
    pub(super) async fn history_held(&self, snap: &DbSnapshot) -> Result<Arc<HistoryHeld>> {
        if let Some(held) = self.history_held.get() {
            return Ok(held.clone());
        }
        let catalog = self.catalog()?;
        let held = HistoryHeld::find(snap, catalog.schemas.iter().map(String::as_str))
            .instrument(
                tracing::trace_span!(target: "moraine::image", "moraine.image.history_held"),
            )
            .await?;
        Ok(self.history_held.get_or_init(|| Arc::new(held)).clone())
    }

    /// Which history ranges hold ended versions at this image, for its checkpoint: found afresh
    /// through a writer's snapshot (the set an image carries only grows, and an expiry may
    /// have emptied ranges since it was found), else as far as known, with the ranges of the
    /// ended versions it keeps from the lake's tail (which the state holds once a reader of
    /// the checkpoint reads it).
    pub(crate) async fn held_ranges(&self) -> Result<Option<crate::checkpoint::HeldRanges>> {
        let held = match self.history.snapshot() {
            Some(snap) => {
                let catalog = self.catalog()?;
                let lakes = catalog.schemas.iter().map(String::as_str);
                Some(Arc::new(HistoryHeld::find(&snap, lakes).await?))
            }
            None => self.held_once_folded(&[])?.get().cloned(),
        };
        Ok(held.map(|h| crate::checkpoint::HeldRanges {
            roots: h.roots.iter().cloned().collect(),
            tables: h.tables.iter().cloned().collect(),
        }))
    }

    /// This image, knowing which history ranges hold ended versions (a checkpoint's, at its
    /// head): a reader's reads of history then go to SlateDB's state only for those ranges.
    pub(crate) fn with_history_held(self, held: Option<crate::checkpoint::HeldRanges>) -> Image {
        if let Some(held) = held {
            let _ = self.history_held.set(Arc::new(HistoryHeld {
                roots: held.roots.into_iter().collect(),
                tables: held.tables.into_iter().collect(),
            }));
        }
        self
    }

    /// Whether a history record read from a reader's latest state belongs to this image: it
    /// had ended by the image's head (a version ended later is live here, served from
    /// `current/`), its live version is not in the image (a version ended after the pin without
    /// a new snapshot), and it was first written by a commit the image holds.
    pub(super) fn ended_by_head(&self, key: &[u8], value: &[u8]) -> bool {
        let Ok(segments) = keys::decode_key(key) else {
            return false;
        };
        let at = match segments.first() {
            Some(Cell::Text(l)) if l == "lake" => 2,
            _ => 0,
        };
        let lake = match (at, segments.get(1)) {
            (2, Some(Cell::Text(name))) => name.clone(),
            _ => keys::DEFAULT_LAKE.to_string(),
        };
        let head = self.lake_snapshot(&lake).ok().flatten();
        // [lake/<l>/]history/<table>/<key cells>/<end>/<begin> (RFC 0002)
        let n = segments.len();
        if n < at + 4 {
            return false;
        }
        let end = segments[n - 2].as_int();
        if !matches!((end, head), (Some(e), Some(h)) if e <= h) {
            return false;
        }
        let mut live = segments[..at].to_vec();
        live.push(Cell::Text("current".into()));
        live.extend_from_slice(&segments[at + 1..n - 2]);
        live.push(segments[n - 1].clone());
        let live = keys::encode_key(&live);
        if place_space(&live)
            .ok()
            .is_some_and(|space| self.entry(&space, &live).is_some())
        {
            return false;
        }
        match decode_row_at(value) {
            Ok((_, Some((batch, _)))) => batch <= self.head.batch_count,
            Ok((_, None)) => true,
            Err(_) => false,
        }
    }
}
