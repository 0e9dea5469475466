//! Where a key lies in an image: its *space* (the records of one table, one lake's snapshots,
//! one inlined table, `sys/` and the lake heads), the history keyspace, or the image's own
//! records; and the spaces an image holds, decoded from its checkpoint's sections on first use.

use super::Image;
use crate::cell::{Cell, Row};
use crate::chunk::decode_chunk;
use crate::error::{Error, Result};
use crate::keys;
use crate::records::Records;
use crate::rowset::RowSet;
use bytes::Bytes;
use once_cell::sync::OnceCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

/// A space as the checkpoint an image was read from holds it, decoded on first use: once for
/// the images that share the checkpoint while one of them holds the decoded space (a space a
/// commit replaced is freed with the last image that holds it, not kept by its section).
pub(super) struct Section {
    pub(super) stored: crate::checkpoint::StoredSection,
    pub(super) decoded: Mutex<std::sync::Weak<Space>>,
}

/// One stored record.
#[derive(Clone)]
pub(super) struct Entry {
    pub(super) value: Bytes,
    /// An inlined chunk's decoded rows, decoded once for every image that shares the entry
    /// (images share entries by sharing the chunks of records that hold them; a copied entry
    /// keeps the rows decoded before the copy).
    pub(super) chunk: OnceLock<Arc<Vec<Row>>>,
}

impl Entry {
    pub(super) fn new(value: Bytes) -> Entry {
        Entry {
            value,
            chunk: OnceLock::new(),
        }
    }

    pub(super) fn chunk_rows(&self) -> Result<Arc<Vec<Row>>> {
        if let Some(rows) = self.chunk.get() {
            return Ok(rows.clone());
        }
        let rows = Arc::new(decode_chunk(&self.value)?);
        Ok(self.chunk.get_or_init(|| rows).clone())
    }
}

/// The records under one space prefix, and the row sets served from them.
#[derive(Default)]
pub(super) struct Space {
    pub(super) entries: Records<Entry>,
    /// table name -> its live rows in scan order
    pub(super) live: Mutex<HashMap<String, Arc<OnceCell<Arc<RowSet>>>>>,
    /// table name -> its live rows and ended versions in scan order
    pub(super) with_history: Mutex<HashMap<String, Arc<RowSet>>>,
}

impl Space {
    pub(super) fn with_entries(entries: Records<Entry>) -> Space {
        Space {
            entries,
            live: Mutex::new(HashMap::new()),
            with_history: Mutex::new(HashMap::new()),
        }
    }

    /// A space decoded from a checkpoint section (its values share the checkpoint's buffer).
    pub(super) fn from_section(section: &Bytes) -> Result<Space> {
        let records = crate::checkpoint::decode_section(section)?;
        if records.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(Error::Corrupt(
                "an image checkpoint section's keys are not in order".into(),
            ));
        }
        Ok(Space::with_entries(Records::from_sorted(
            records.into_iter().map(|(k, v)| (k, Entry::new(v))),
        )))
    }

    pub(super) fn range<'a>(
        &'a self,
        prefix: &'a [u8],
    ) -> impl Iterator<Item = (&'a Vec<u8>, &'a Entry)> {
        self.entries.range(prefix)
    }
}

/// What a key is, by its leading segments.
pub(super) enum Place {
    /// A record the image holds, in the space with this prefix.
    Space(Vec<u8>),
    /// An ended version: read on demand. Holds the space of the table's live rows, whose
    /// cached rows with history it changes.
    History(Vec<u8>),
    /// The image's own records (`image/`: checkpoint pointer, commit log): never in an image.
    Image,
}

pub(super) fn place_of(key: &[u8]) -> Result<Place> {
    let outside = || {
        Error::Corrupt(format!(
            "key {:?} is outside moraine's keyspace",
            String::from_utf8_lossy(key)
        ))
    };
    // at most: lake, <l>, inline, <schema>, <table>; compared and copied still encoded (the
    // encoding is canonical), as every read and every commit's key goes through here
    let segments = keys::raw_segments(key, 5)?;
    let text = |i: usize, t: &str| segments.get(i).is_some_and(|s| keys::segment_is_text(s, t));
    let at = if text(0, "lake") { 2 } else { 0 };
    if at == 0 && text(0, "image") {
        return Ok(Place::Image);
    }
    let depth = if text(at, "sys") || text(at, "snapshot") || text(at, "head") {
        1
    } else if text(at, "current") {
        2
    } else if text(at, "inline") {
        3
    } else if text(at, "history") {
        let table = segments.get(at + 1).ok_or_else(outside)?;
        let mut live: Vec<u8> = segments[..at].concat();
        live.extend_from_slice(&keys::Key::new().s("current").into_bytes());
        live.extend_from_slice(table);
        return Ok(Place::History(live));
    } else {
        return Err(outside());
    };
    if segments.len() < at + depth {
        return Err(outside());
    }
    let len: usize = segments[..at + depth].iter().map(|s| s.len()).sum();
    Ok(Place::Space(key[..len].to_vec()))
}

/// Spaces every image holds whole, loaded or not: `sys` and the lake heads (small, and read by
/// every transaction). An absent one is empty.
pub(super) fn always_held(space: &[u8]) -> bool {
    matches!(
        keys::decode_leading(space, 3).map(|(s, _)| s).as_deref(),
        Ok([Cell::Text(t)] ) if t == "sys"
    ) || matches!(
        keys::decode_leading(space, 3).map(|(s, _)| s).as_deref(),
        Ok([Cell::Text(l), _, Cell::Text(h)]) if l == "lake" && h == "head"
    )
}

/// The space a key's records live in (tests).
#[cfg(test)]
pub(crate) fn place_space_for_test(key: &[u8]) -> Vec<u8> {
    place_space(key).unwrap()
}

pub(super) fn place_space(key: &[u8]) -> Result<Vec<u8>> {
    match place_of(key)? {
        Place::Space(s) => Ok(s),
        Place::History(_) | Place::Image => Err(Error::Corrupt(format!(
            "key {:?} has no space",
            String::from_utf8_lossy(key)
        ))),
    }
}

pub(super) fn is_history_prefix(prefix: &[u8]) -> Result<bool> {
    let segments = keys::decode_key(prefix)?;
    let at = match segments.first() {
        Some(Cell::Text(l)) if l == "lake" => 2,
        _ => 0,
    };
    if segments.len() <= at {
        return Err(Error::InvalidInput(format!(
            "a scan of {:?} would span live and ended records; scan the keyspaces apart",
            String::from_utf8_lossy(prefix)
        )));
    }
    Ok(matches!(segments.get(at), Some(Cell::Text(s)) if s == "history"))
}

/// The first key after the history range (or the `image/` range) that holds `key`.
pub(super) fn history_range_end(key: &[u8]) -> Result<Vec<u8>> {
    let segments = keys::decode_key(key)?;
    let at = match segments.first() {
        Some(Cell::Text(l)) if l == "lake" => 2,
        _ => 0,
    };
    let mut end = keys::encode_key(&segments[..=at]);
    // every text segment ends 0x00 0x01; 0x00 0x02 sorts after every key that continues it
    let last = end.last_mut().expect("a text segment");
    *last += 1;
    Ok(end)
}

impl Image {
    pub(super) fn loaded(&self) -> std::sync::MutexGuard<'_, BTreeMap<Vec<u8>, Arc<Space>>> {
        self.spaces.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A record of the image.
    pub(super) fn entry(&self, space: &[u8], key: &[u8]) -> Option<Entry> {
        self.space(space)
            .ok()
            .flatten()
            .and_then(|s| s.entries.get(key).cloned())
    }

    /// The space with prefix `prefix`, decoded from the checkpoint the image came from on first
    /// use; `None` when the image holds nothing under it.
    pub(super) fn space(&self, prefix: &[u8]) -> Result<Option<Arc<Space>>> {
        if let Some(space) = self.loaded().get(prefix) {
            return Ok(Some(space.clone()));
        }
        let Some(section) = self.sections.get(prefix) else {
            return Ok(None);
        };
        let space = {
            // decoded under the section's lock: a second first use waits for the first
            let mut decoded = section.decoded.lock().unwrap_or_else(|p| p.into_inner());
            match decoded.upgrade() {
                Some(space) => space,
                None => {
                    let _span = tracing::trace_span!(
                        target: "moraine::image",
                        "moraine.image.section",
                        records = section.stored.records
                    )
                    .entered();
                    let space = Arc::new(Space::from_section(&section.stored.decompressed()?)?);
                    *decoded = Arc::downgrade(&space);
                    space
                }
            }
        };
        Ok(Some(
            self.loaded()
                .entry(prefix.to_vec())
                .or_insert(space)
                .clone(),
        ))
    }

    /// Whether two images hold the same head, and every space this one has decoded holds the
    /// same records in `other` (decoded there if need be).
    #[cfg(test)]
    pub(crate) fn same_records(&self, other: &Image) -> bool {
        if self.head != other.head {
            return false;
        }
        let mine: Vec<(Vec<u8>, Arc<Space>)> = self
            .loaded()
            .iter()
            .map(|(p, s)| (p.clone(), s.clone()))
            .collect();
        for (prefix, a) in mine {
            let b = other.space(&prefix).ok().flatten();
            let empty = Records::default();
            let b_entries = b.as_ref().map_or(&empty, |s| &s.entries);
            if a.entries.len() != b_entries.len()
                || !a
                    .entries
                    .iter()
                    .zip(b_entries.iter())
                    .all(|((k, e), (l, f))| k == l && e.value == f.value)
            {
                return false;
            }
        }
        true
    }

    /// Every record of the image, sections decoded (tests).
    #[cfg(test)]
    pub(crate) fn all_records(&self) -> BTreeMap<Vec<u8>, Bytes> {
        let prefixes: Vec<Vec<u8>> = self.sections.keys().cloned().collect();
        for p in prefixes {
            self.space(&p).unwrap();
        }
        self.loaded()
            .values()
            .flat_map(|s| s.entries.iter().map(|(k, e)| (k.clone(), e.value.clone())))
            .collect()
    }

    /// Whether the checkpoint section of space `prefix` has a decoded space alive (tests).
    #[cfg(test)]
    pub(crate) fn section_decoded_for_test(&self, prefix: &[u8]) -> bool {
        self.sections.get(prefix).is_some_and(|s| {
            s.decoded
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .strong_count()
                > 0
        })
    }
}
