//! Advancing an image by a commit's writes, copying only the spaces the commit wrote, or along
//! the commit log after a checkpoint.

use super::history::{History, HistoryHeld, Tail};
use super::spaces::{place_of, Entry, Place, Space};
use super::Image;
use crate::checkpoint::Writes;
use crate::error::Result;
use crate::head::Head;
use crate::keys;
use crate::records::Records;
use crate::rowset::RowSet;
use bytes::Bytes;
use slatedb::DbSnapshot;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

impl Image {
    /// This image advanced by each commit of `log` (consecutive, from the one after its head).
    pub(crate) fn follow(
        &self,
        log: Vec<(Head, Writes)>,
        snap: Option<Arc<DbSnapshot>>,
    ) -> Result<Image> {
        let mut image: Option<Image> = None;
        for (head, writes) in log {
            let base = image.as_ref().unwrap_or(self);
            image = Some(base.advance(&writes, head, snap.clone())?);
        }
        match image {
            Some(i) => Ok(i),
            None => Ok(Image {
                head: self.head,
                spaces: Mutex::new(self.loaded().clone()),
                history: History::of(snap),
                catalog: OnceLock::new(),
                sections: self.sections.clone(),
                checkpoint: self.checkpoint,
                stand_ins: Default::default(),
                no_rows: Arc::new(RowSet::new(Vec::new())),
                history_held: self.held_once_folded(&[])?,
            }),
        }
    }

    /// This image advanced by a commit taken from the lake's tail: a commit object not yet
    /// folded into the state the image reads history from (RFC 0004 v3). As [`Image::advance`]
    /// with no snapshot, and the commit's history records kept beside the image until that
    /// state holds them ([`Image::without_tail`]).
    pub(crate) fn advance_unfolded(&self, writes: &Writes, head: Head) -> Result<Image> {
        let mut image = self.advance(writes, head, None)?;
        // the ranges the state holds records in are this image's: the commit's own ended
        // versions are in the tail (`without_tail` adds their ranges)
        image.history_held = self.history_held.clone();
        let mut tail = match &self.history {
            History::Latest(tail) => (**tail).clone(),
            History::Snapshot(_) => Tail::new(),
        };
        for (k, v) in writes {
            if let Place::History(_) = place_of(k)? {
                tail.insert(k.clone(), v.as_ref().map(|v| Bytes::copy_from_slice(v)));
            }
        }
        image.history = History::Latest(Arc::new(tail));
        Ok(image)
    }

    /// Whether this image holds history records of commits taken from the lake's tail.
    pub(crate) fn has_tail(&self) -> bool {
        matches!(&self.history, History::Latest(tail) if !tail.is_empty())
    }

    /// This image reading every ended version from the state it reads, once that state holds
    /// every commit of the image.
    pub(crate) fn without_tail(&self) -> Result<Image> {
        self.follow(Vec::new(), None)
    }

    /// What this image knows of the history ranges that hold records, with the ranges of the
    /// ended versions it keeps from the lake's tail: those of an image that reads them from
    /// the state instead, with `ended` too.
    pub(super) fn held_once_folded(&self, ended: &[Vec<u8>]) -> Result<OnceLock<Arc<HistoryHeld>>> {
        let out = OnceLock::new();
        if let Some(held) = self.history_held.get() {
            let mut tables = held.tables.clone();
            tables.extend(ended.iter().cloned());
            if let History::Latest(tail) = &self.history {
                for key in tail.keys() {
                    tables.insert(HistoryHeld::table_of(key)?);
                }
            }
            let _ = out.set(Arc::new(HistoryHeld {
                roots: held.roots.clone(),
                tables,
            }));
        }
        Ok(out)
    }

    /// The image after a commit of `writes` (the final value of every key it touched; `None`
    /// deletes) that left `head`. Only the spaces the commit wrote are copied.
    ///
    /// `snapshot` is a writer's SlateDB snapshot at exactly the new state; `None` on a reader,
    /// whose ended versions are read from its latest state.
    pub(crate) fn advance(
        &self,
        writes: &BTreeMap<Vec<u8>, Option<Vec<u8>>>,
        head: Head,
        snapshot: Option<Arc<DbSnapshot>>,
    ) -> Result<Image> {
        // each written space's changes (a space whose history alone changed gets none, but a
        // new space all the same: its cached rows with history are stale)
        let mut touched: BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, Option<Entry>>> = BTreeMap::new();
        // the keys of one space are contiguous: a key under the previous key's space prefix is
        // in that space (prefixes are whole encoded segments)
        let mut last: Option<Vec<u8>> = None;
        // the history ranges the commit writes ended versions into
        let mut ended: Vec<Vec<u8>> = Vec::new();
        for (k, v) in writes {
            let (space, live) = match &last {
                Some(p) if k.starts_with(p) => (p.clone(), true),
                _ => match place_of(k)? {
                    Place::Space(space) => {
                        last = Some(space.clone());
                        (space, true)
                    }
                    Place::History(space) => {
                        if v.is_some() {
                            ended.push(HistoryHeld::table_of(k)?);
                        }
                        (space, false)
                    }
                    Place::Image => continue,
                },
            };
            let changes = touched.entry(space).or_default();
            if live {
                changes.insert(
                    k.clone(),
                    v.as_ref().map(|v| Entry::new(Bytes::copy_from_slice(v))),
                );
            }
        }
        // a space the commit writes that is still a checkpoint section is decoded first
        for space in touched.keys() {
            if self.sections.contains_key(space) {
                self.space(space)?;
            }
        }
        let mut spaces = self.loaded().clone();
        for (space, changes) in touched {
            // only the chunks the changes fall in are copied
            let entries = match spaces.get(&space) {
                Some(s) => s.entries.changed(changes),
                None => Records::default().changed(changes),
            };
            // (an emptied space a section still holds must stay, empty, to supersede it)
            if entries.is_empty() && !self.sections.contains_key(&space) {
                spaces.remove(&space);
            } else {
                spaces.insert(space, Arc::new(Space::with_entries(entries)));
            }
        }
        // a commit that wrote no schema or table definition keeps the decoded catalog
        let catalog = OnceLock::new();
        let (schemas, tables) = (keys::sys_schema_prefix(), keys::sys_table_prefix());
        if !writes
            .keys()
            .any(|k| k.starts_with(&schemas) || k.starts_with(&tables))
        {
            if let Some(cat) = self.catalog.get() {
                let _ = catalog.set(cat.clone());
            }
        }
        // what this image knows of the history ranges holds after the commit, with the
        // ranges it ended versions into (a superset: only an expiry deletes history, and a
        // range it emptied is read and found empty)
        let history_held = self.held_once_folded(&ended)?;
        Ok(Image {
            head,
            spaces: Mutex::new(spaces),
            history: History::of(snapshot),
            catalog,
            sections: self.sections.clone(),
            checkpoint: self.checkpoint,
            stand_ins: Default::default(),
            // empty and immutable: what scans kept of it holds at every head
            no_rows: self.no_rows.clone(),
            history_held,
        })
    }
}
