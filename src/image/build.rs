//! Building an image: from every live record of the store, or from an image checkpoint's
//! sections (and back to sections when a checkpoint is written).

use super::history::History;
use super::read::scan_snapshot;
use super::spaces::{
    always_held, history_range_end, place_of, place_space, Entry, Place, Section, Space,
};
use super::Image;
use crate::cell::Cell;
use crate::checkpoint::{self, StoredSection};
use crate::error::{Error, Result};
use crate::head::Head;
use crate::keys;
use crate::records::Records;
use crate::rowset::RowSet;
use bytes::Bytes;
use slatedb::DbSnapshot;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The schemas the store's `sys/` records name: every lake has one.
fn lakes_of(sys: &[(Bytes, Bytes)]) -> Result<Vec<String>> {
    let mut lakes = Vec::new();
    for (k, _) in sys {
        match keys::decode_key(k)?.as_slice() {
            [_, Cell::Text(kind), Cell::Text(schema), ..]
                if kind == "schema" || kind == "table" =>
            {
                if !lakes.contains(schema) {
                    lakes.push(schema.clone())
                }
            }
            _ => {}
        }
    }
    Ok(lakes)
}

/// The records of one iterator over the whole keyspace, less the history ranges, which it seeks
/// past (`[lake/<l>/]history/` are contiguous key ranges).
pub(crate) async fn read_live(mut it: slatedb::DbIterator) -> Result<Vec<(Bytes, Bytes)>> {
    let mut out = Vec::new();
    while let Some(kv) = it.next().await? {
        match place_of(&kv.key)? {
            Place::Space(_) => out.push((kv.key, kv.value)),
            Place::History(_) => it.seek(history_range_end(&kv.key)?).await?,
            Place::Image => it.seek(history_range_end(&kv.key)?).await?,
        }
    }
    Ok(out)
}

impl Image {
    /// The image of an image checkpoint's sections at `head` (checkpoint batch `checkpoint`),
    /// reading ended versions through `snap` (a writer's) or the reader's state.
    pub(crate) fn from_sections(
        head: Head,
        sections: impl IntoIterator<Item = (Vec<u8>, StoredSection)>,
        checkpoint: u64,
        snap: Option<Arc<DbSnapshot>>,
    ) -> Image {
        Image {
            head,
            spaces: Mutex::new(BTreeMap::new()),
            history: History::of(snap),
            catalog: OnceLock::new(),
            sections: Arc::new(
                sections
                    .into_iter()
                    .map(|(p, stored)| {
                        let section = Section {
                            stored,
                            decoded: Mutex::new(std::sync::Weak::new()),
                        };
                        (p, section)
                    })
                    .collect(),
            ),
            checkpoint: Some(checkpoint),
            stand_ins: Default::default(),
            no_rows: Arc::new(RowSet::new(Vec::new())),
            history_held: OnceLock::new(),
        }
    }

    /// The image of every live record, read at `snap` (a writer's) or the reader's state.
    pub(crate) fn from_live_records(
        records: Vec<(Bytes, Bytes)>,
        snap: Option<Arc<DbSnapshot>>,
        previous: Option<&Image>,
    ) -> Result<Image> {
        Self::assemble(records, History::of(snap), previous)
    }

    fn assemble(
        records: Vec<(Bytes, Bytes)>,
        history: History,
        previous: Option<&Image>,
    ) -> Result<Image> {
        let mut grouped: BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, Entry>> = BTreeMap::new();
        for (k, v) in records {
            let Place::Space(space) = place_of(&k)? else {
                continue;
            };
            // an unchanged record keeps its decoded form from the image before
            let entry = match previous.and_then(|p| p.entry(&space, &k)) {
                Some(e) if e.value == v => e,
                _ => Entry::new(v),
            };
            grouped.entry(space).or_default().insert(k.to_vec(), entry);
        }
        let head_entry = grouped
            .get(&place_space(&keys::sys_head())?)
            .and_then(|s| s.get(&keys::sys_head()))
            .ok_or_else(|| Error::Corrupt("the store has no sys/head".into()))?;
        let head = Head::decode(&head_entry.value)?;
        Ok(Image {
            head,
            spaces: Mutex::new(
                grouped
                    .into_iter()
                    .map(|(p, e)| (p, Arc::new(Space::with_entries(Records::from_sorted(e)))))
                    .collect(),
            ),
            history,
            catalog: OnceLock::new(),
            sections: Default::default(),
            checkpoint: None,
            stand_ins: Default::default(),
            no_rows: Arc::new(RowSet::new(Vec::new())),
            history_held: OnceLock::new(),
        })
    }

    /// This image with its `sys` and lake-head spaces replaced by those read through `snap`,
    /// the snapshot it was loaded through: they must name the same head (the log reached the
    /// store's head).
    pub(crate) async fn with_held(self, snap: &DbSnapshot) -> Result<Image> {
        let mut held = scan_snapshot(snap, &place_space(&keys::sys_head())?).await?;
        for l in lakes_of(&held)? {
            if l != keys::DEFAULT_LAKE {
                held.extend(scan_snapshot(snap, &keys::lake_head(&l)).await?);
            }
        }
        let fresh = Self::assemble(held, History::of(None), None)?;
        if fresh.head != self.head {
            return Err(Error::Corrupt(format!(
                "the commit log ends at batch {}, the store's head is batch {}",
                self.head.batch_count, fresh.head.batch_count
            )));
        }
        {
            let mut spaces = self.loaded();
            let held_prefixes: Vec<Vec<u8>> = spaces
                .keys()
                .chain(self.sections.keys())
                .filter(|p| always_held(p))
                .cloned()
                .collect();
            for p in held_prefixes {
                spaces.insert(p, Arc::new(Space::default()));
            }
            for (p, space) in fresh.loaded().iter() {
                spaces.insert(p.clone(), space.clone());
            }
        }
        Ok(self)
    }

    /// Every space of this image as checkpoint sections, by space prefix: a section it has not
    /// decoded as it is stored, a decoded space encoded again (raw: the checkpoint compresses it).
    pub(crate) fn checkpoint_sections(&self) -> Vec<(Vec<u8>, StoredSection)> {
        let encode = |entries: &Records<Entry>| {
            StoredSection::raw(checkpoint::encode_section(
                entries.len(),
                entries.iter().map(|(k, e)| (&k[..], &e.value[..])),
            ))
        };
        let spaces = self.loaded().clone();
        let mut out: BTreeMap<Vec<u8>, StoredSection> = BTreeMap::new();
        for (p, section) in self.sections.iter() {
            if !spaces.contains_key(p) {
                out.insert(p.clone(), section.stored.clone());
            }
        }
        for (p, space) in spaces {
            if !space.entries.is_empty() {
                out.insert(p, encode(&space.entries));
            }
        }
        out.into_iter().collect()
    }
}
