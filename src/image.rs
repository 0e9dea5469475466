//! The committed image (RFC 0009): one immutable, shared, in-memory copy of a store's committed
//! live state, identified by the head it was read at.
//!
//! The image holds every key outside the history keyspace, grouped into *spaces*: the records of
//! one fixed table of one lake (`[lake/<l>/]current/<table>`), one lake's snapshot records
//! (`[lake/<l>/]snapshot`), one inlined table (`inline/<schema>/<table>`), and the store's `sys/`
//! and lake-head records. A commit replaces only the spaces it wrote (the others are shared by
//! `Arc` with the image before it), so advancing the image costs what the commit touched.
//!
//! Each space also caches, per table, the rows it serves in scan order ([`RowSet`]), decoded once
//! per image version and shared by every transaction pinned to that version, together with
//! integer column indexes built on first use (filter pushdown).
//!
//! History (ended versions) is not held: it is read on demand, from the SlateDB snapshot taken
//! with the image on a writer, or from the reader's state on a read-only store (filtered to the
//! versions that had ended by the image's head).

use crate::catalog::CommittedCatalog;
use crate::head::Head;
use crate::rowset::RowSet;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

mod advance;
mod build;
mod history;
mod read;
mod serve;
mod spaces;
#[cfg(test)]
mod tests;

pub(crate) use build::read_live;
pub(crate) use read::ImageAt;
pub(crate) use serve::reads_history;
#[cfg(test)]
pub(crate) use spaces::place_space_for_test;

use history::{History, HistoryHeld};
use spaces::{Section, Space};

/// A consistent committed image of one store.
pub struct Image {
    head: Head,
    /// The decoded spaces. With the checkpoint sections not decoded yet they are every space
    /// of the image: a space in neither is empty.
    spaces: Mutex<BTreeMap<Vec<u8>, Arc<Space>>>,
    history: History,
    /// The schemas and table definitions, decoded on first use.
    catalog: OnceLock<Arc<CommittedCatalog>>,
    /// Spaces as the checkpoint this image was read from holds them, decoded into `spaces` on
    /// first use (a space in `spaces` supersedes its section). Shared by the images after it.
    sections: Arc<BTreeMap<Vec<u8>, Section>>,
    /// The batch of the checkpoint this image was loaded from, if it was.
    checkpoint: Option<u64>,
    /// Empty stand-ins for spaces with no live record in this image, by space prefix: their
    /// tables' rows with history are cached there like any space's, so the history is read
    /// from the store once per image, not once per transaction. Never checkpointed or advanced.
    stand_ins: Mutex<HashMap<Vec<u8>, Arc<Space>>>,
    /// The live rows of every table whose space this image does not hold (no live record): one
    /// empty set, carried to the images a commit advances this one to, so that the selections
    /// scans make of it are kept like any table's instead of computed again by every scan of an
    /// empty table.
    no_rows: Arc<RowSet>,
    /// Which tables hold ended versions at this image (a writer's only): found on first need
    /// with one iterator per lake, and carried to the image a commit advances this one to.
    history_held: OnceLock<Arc<HistoryHeld>>,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Image")
            .field("head", &self.head)
            .field("spaces", &self.loaded().len())
            .finish()
    }
}

impl Image {
    /// The batch of the checkpoint this image was loaded from, if it was.
    pub(crate) fn checkpoint_batch(&self) -> Option<u64> {
        self.checkpoint
    }

    /// The committed `sys/head` this image was read at.
    pub fn head(&self) -> Head {
        self.head
    }

    /// How many records the image holds and their key and value bytes.
    pub fn footprint(&self) -> (usize, usize) {
        let mut records = 0;
        let mut bytes = 0;
        let spaces = self.loaded();
        for (prefix, section) in self.sections.iter() {
            if !spaces.contains_key(prefix) {
                records += section.stored.records;
                bytes += section.stored.raw_len;
            }
        }
        for s in spaces.values() {
            records += s.entries.len();
            bytes += s
                .entries
                .iter()
                .map(|(k, e)| k.len() + e.value.len())
                .sum::<usize>();
        }
        (records, bytes)
    }
}
