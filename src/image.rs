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

use crate::backend::{bulk_scan, Backend};
use crate::catalog::{CommittedCatalog, Kind, TableDef};
use crate::cell::{decode_row, decode_row_at, Cell, Row};
use crate::checkpoint::{self, Writes};
use crate::chunk::decode_chunk;
use crate::error::{Error, Result};
use crate::head::Head;
use crate::keys;
use crate::kinds;
use crate::records::Records;
use crate::rowset::RowSet;
use bytes::Bytes;
use slatedb::DbSnapshot;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use tracing::Instrument;

/// A value computed once, by whichever caller asks first; a caller asking meanwhile waits for
/// it instead of computing it again (the image's background warm-up and a query's first read
/// of the same table do the work once). A failure is not kept: the next caller tries again.
struct Once<T>(Mutex<Option<T>>);

impl<T: Clone> Once<T> {
    fn new() -> Self {
        Once(Mutex::new(None))
    }

    fn get_or_try(&self, compute: impl FnOnce() -> Result<T>) -> Result<T> {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = slot.as_ref() {
            return Ok(v.clone());
        }
        let v = compute()?;
        *slot = Some(v.clone());
        Ok(v)
    }
}

/// A space as the checkpoint an image was read from holds it, decoded on first use: once for
/// the images that share the checkpoint while one of them holds the decoded space (a space a
/// commit replaced is freed with the last image that holds it, not kept by its section).
struct Section {
    bytes: Bytes,
    decoded: Mutex<std::sync::Weak<Space>>,
}

/// One stored record.
#[derive(Clone)]
struct Entry {
    value: Bytes,
    /// An inlined chunk's decoded rows, decoded once for every image that shares the entry
    /// (images share entries by sharing the chunks of records that hold them; a copied entry
    /// keeps the rows decoded before the copy).
    chunk: OnceLock<Arc<Vec<Row>>>,
}

impl Entry {
    fn new(value: Bytes) -> Entry {
        Entry {
            value,
            chunk: OnceLock::new(),
        }
    }

    fn chunk_rows(&self) -> Result<Arc<Vec<Row>>> {
        if let Some(rows) = self.chunk.get() {
            return Ok(rows.clone());
        }
        let rows = Arc::new(decode_chunk(&self.value)?);
        Ok(self.chunk.get_or_init(|| rows).clone())
    }
}

/// The records under one space prefix, and the row sets served from them.
#[derive(Default)]
struct Space {
    entries: Records<Entry>,
    /// table name -> its live rows in scan order
    live: Mutex<HashMap<String, Arc<Once<Arc<RowSet>>>>>,
    /// table name -> its live rows and ended versions in scan order
    with_history: Mutex<HashMap<String, Arc<RowSet>>>,
}

impl Space {
    fn with_entries(entries: Records<Entry>) -> Space {
        Space {
            entries,
            live: Mutex::new(HashMap::new()),
            with_history: Mutex::new(HashMap::new()),
        }
    }

    /// A space decoded from a checkpoint section (its values share the checkpoint's buffer).
    fn from_section(section: &Bytes) -> Result<Space> {
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

    fn range<'a>(&'a self, prefix: &'a [u8]) -> impl Iterator<Item = (&'a Vec<u8>, &'a Entry)> {
        self.entries.range(prefix)
    }
}

/// Where an image reads ended versions from.
enum History {
    /// A writer's SlateDB snapshot taken at exactly the image's state, or one taken later at
    /// the same committed state ([`Image::renew_snapshot`]).
    Snapshot(Mutex<Arc<DbSnapshot>>),
    /// A reader's latest state, filtered to versions that had ended by the image's head.
    Latest,
}

impl History {
    fn of(snapshot: Option<Arc<DbSnapshot>>) -> History {
        match snapshot {
            Some(s) => History::Snapshot(Mutex::new(s)),
            None => History::Latest,
        }
    }

    /// The snapshot ended versions are read through; `None` on a reader.
    fn snapshot(&self) -> Option<Arc<DbSnapshot>> {
        match self {
            History::Snapshot(s) => Some(s.lock().unwrap_or_else(|p| p.into_inner()).clone()),
            History::Latest => None,
        }
    }
}

/// What a key is, by its leading segments.
enum Place {
    /// A record the image holds, in the space with this prefix.
    Space(Vec<u8>),
    /// An ended version: read on demand. Holds the space of the table's live rows, whose
    /// cached rows with history it changes.
    History(Vec<u8>),
    /// The image's own records (`image/`: checkpoint pointer, commit log): never in an image.
    Image,
}

fn place_of(key: &[u8]) -> Result<Place> {
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
fn always_held(space: &[u8]) -> bool {
    matches!(
        keys::decode_leading(space, 3).map(|(s, _)| s).as_deref(),
        Ok([Cell::Text(t)] ) if t == "sys"
    ) || matches!(
        keys::decode_leading(space, 3).map(|(s, _)| s).as_deref(),
        Ok([Cell::Text(l), _, Cell::Text(h)]) if l == "lake" && h == "head"
    )
}

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

/// The history ranges of an image that hold at least one record: the lakes' history roots
/// looked through, and each `[lake/<l>/]history/<table>/` found to hold a record under them
/// (a superset once carried forward: a commit adds the tables it ends versions of and removes
/// none).
#[derive(Debug, Default)]
struct HistoryHeld {
    roots: std::collections::BTreeSet<Vec<u8>>,
    tables: std::collections::BTreeSet<Vec<u8>>,
}

impl HistoryHeld {
    /// Whether records under `prefix` (within a history root) may exist: its root was not
    /// looked through, or a table range found holding records overlaps it.
    fn may_hold(&self, prefix: &[u8]) -> bool {
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
    fn table_of(key: &[u8]) -> Result<Vec<u8>> {
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
    async fn find(snap: &DbSnapshot, lakes: impl Iterator<Item = &str>) -> Result<HistoryHeld> {
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

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Image")
            .field("head", &self.head)
            .field("spaces", &self.loaded().len())
            .finish()
    }
}

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

/// The first key after the history range (or the `image/` range) that holds `key`.
fn history_range_end(key: &[u8]) -> Result<Vec<u8>> {
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

async fn scan_snapshot(snap: &DbSnapshot, prefix: &[u8]) -> Result<Vec<(Bytes, Bytes)>> {
    let mut it = snap
        .scan_prefix_with_options(prefix, .., &bulk_scan())
        .await?;
    let mut out = Vec::new();
    while let Some(kv) = it.next().await? {
        out.push((kv.key, kv.value));
    }
    Ok(out)
}

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
                history_held: OnceLock::new(),
            }),
        }
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
        let fresh = Self::assemble(held, History::Latest, None)?;
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
    /// decoded as it is, a decoded space encoded again.
    pub(crate) fn checkpoint_sections(&self) -> Vec<(Vec<u8>, Bytes)> {
        let encode = |entries: &Records<Entry>| {
            checkpoint::encode_section(
                entries.len(),
                entries.iter().map(|(k, e)| (&k[..], &e.value[..])),
            )
        };
        let spaces = self.loaded().clone();
        let mut out: BTreeMap<Vec<u8>, Bytes> = BTreeMap::new();
        for (p, section) in self.sections.iter() {
            if !spaces.contains_key(p) {
                out.insert(p.clone(), section.bytes.clone());
            }
        }
        for (p, space) in spaces {
            if !space.entries.is_empty() {
                out.insert(p, encode(&space.entries));
            }
        }
        out.into_iter().collect()
    }

    /// The image of an image checkpoint's sections at `head` (checkpoint batch `checkpoint`),
    /// reading ended versions through `snap` (a writer's) or the reader's state.
    pub(crate) fn from_sections(
        head: Head,
        sections: impl IntoIterator<Item = (Vec<u8>, Bytes)>,
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
                    .map(|(p, bytes)| {
                        let section = Section {
                            bytes,
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

    fn loaded(&self) -> std::sync::MutexGuard<'_, BTreeMap<Vec<u8>, Arc<Space>>> {
        self.spaces.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A record of the image.
    fn entry(&self, space: &[u8], key: &[u8]) -> Option<Entry> {
        self.space(space)
            .ok()
            .flatten()
            .and_then(|s| s.entries.get(key).cloned())
    }

    /// The space with prefix `prefix`, decoded from the checkpoint the image came from on first
    /// use; `None` when the image holds nothing under it.
    fn space(&self, prefix: &[u8]) -> Result<Option<Arc<Space>>> {
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
                        "moraine.image.section",
                        records = crate::checkpoint::section_len(&section.bytes)
                    )
                    .entered();
                    let space = Arc::new(Space::from_section(&section.bytes)?);
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
        // ranges it ended versions into (a writer's: its next image reads the same snapshots)
        let history_held = OnceLock::new();
        if let (Some(held), Some(_)) = (self.history_held.get(), &snapshot) {
            let mut tables = held.tables.clone();
            tables.extend(ended);
            let _ = history_held.set(Arc::new(HistoryHeld {
                roots: held.roots.clone(),
                tables,
            }));
        }
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

    /// The tables whose live rows this image has served, with the rows (tests).
    #[cfg(test)]
    pub(crate) fn served_live_for_test(&self) -> BTreeMap<String, Arc<RowSet>> {
        let mut out = BTreeMap::new();
        let spaces: Vec<Arc<Space>> = self.loaded().values().cloned().collect();
        for space in spaces {
            let live = space.live.lock().unwrap_or_else(|p| p.into_inner()).clone();
            for (name, once) in live {
                if let Some(rows) = once.0.lock().unwrap_or_else(|p| p.into_inner()).clone() {
                    out.insert(name, rows);
                }
            }
        }
        out
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

    /// The batch of the checkpoint this image was loaded from, if it was.
    pub(crate) fn checkpoint_batch(&self) -> Option<u64> {
        self.checkpoint
    }

    /// The committed `sys/head` this image was read at.
    pub fn head(&self) -> Head {
        self.head
    }

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
            History::Latest => false,
        }
    }

    /// The sequence number of the SlateDB snapshot the image reads ended versions through;
    /// `None` on a reader's image, which holds none.
    pub(crate) fn snapshot_seq(&self) -> Option<u64> {
        self.history.snapshot().map(|s| s.seq())
    }

    /// How many records the image holds and their key and value bytes.
    pub fn footprint(&self) -> (usize, usize) {
        let mut records = 0;
        let mut bytes = 0;
        let spaces = self.loaded();
        for (prefix, section) in self.sections.iter() {
            if !spaces.contains_key(prefix) {
                records += crate::checkpoint::section_len(&section.bytes);
                bytes += section.bytes.len();
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

    /// The head snapshot of `lake`: the default lake's is in `sys/head`, any other lake's in
    /// `lake/<lake>/head`. `None` for a lake with no snapshot yet.
    pub fn lake_snapshot(&self, lake: &str) -> Result<Option<i64>> {
        if lake == keys::DEFAULT_LAKE {
            return Ok(self.head.snapshot_id);
        }
        let key = keys::lake_head(lake);
        match self.entry(&place_space(&key)?, &key) {
            None => Ok(None),
            Some(e) => match decode_row(&e.value)?.as_slice() {
                [Cell::Int(id)] => Ok(Some(*id)),
                _ => Err(Error::Corrupt(format!("lake/{lake}/head is malformed"))),
            },
        }
    }

    /// The committed schemas and table definitions, decoded once per image.
    pub(crate) fn catalog(&self) -> Result<Arc<CommittedCatalog>> {
        if let Some(cat) = self.catalog.get() {
            return Ok(cat.clone());
        }
        let schemas = self.scan_live(&keys::sys_schema_prefix())?;
        let tables = self.scan_live(&keys::sys_table_prefix())?;
        let cat = Arc::new(CommittedCatalog::decode(
            schemas.iter().map(|(_, v)| v.as_ref()),
            tables.iter().map(|(_, v)| v.as_ref()),
        )?);
        Ok(self.catalog.get_or_init(|| cat).clone())
    }

    /// A point read at this image (history keys read on demand).
    pub(crate) async fn get(&self, backend: &Backend, key: &[u8]) -> Result<Option<Bytes>> {
        match place_of(key)? {
            Place::Space(space) => Ok(match self.space(&space)? {
                Some(s) => s.entries.get(key).map(|e| e.value.clone()),
                None => None,
            }),
            Place::Image => Err(Error::InvalidInput(
                "image/ records are not read through an image".into(),
            )),
            Place::History(_) => match self.history.snapshot() {
                Some(s) => Ok(s.get(key).await?),
                None => {
                    let v = backend.get(key).await?;
                    Ok(v.filter(|v| self.ended_by_head(key, v)))
                }
            },
        }
    }

    /// Every record under `prefix` at this image, in key order. The prefix lies within one
    /// space, spans whole spaces, or lies within the history keyspace.
    pub(crate) async fn scan(
        &self,
        backend: &Backend,
        prefix: &[u8],
    ) -> Result<Vec<(Bytes, Bytes)>> {
        if is_history_prefix(prefix)? {
            let records = match self.history.snapshot() {
                Some(s) => {
                    if !self.history_held(&s).await?.may_hold(prefix) {
                        return Ok(Vec::new());
                    }
                    scan_snapshot(&s, prefix).await?
                }
                None => backend.scan(prefix).await?,
            };
            return Ok(match self.history {
                History::Snapshot(_) => records,
                History::Latest => records
                    .into_iter()
                    .filter(|(k, v)| self.ended_by_head(k, v))
                    .collect(),
            });
        }
        self.scan_live(prefix)
    }

    /// Which tables hold ended versions at this image, read through its snapshot on first
    /// need.
    async fn history_held(&self, snap: &DbSnapshot) -> Result<Arc<HistoryHeld>> {
        if let Some(held) = self.history_held.get() {
            return Ok(held.clone());
        }
        let catalog = self.catalog()?;
        let held = HistoryHeld::find(snap, catalog.schemas.iter().map(String::as_str))
            .instrument(tracing::trace_span!("moraine.image.history_held"))
            .await?;
        Ok(self.history_held.get_or_init(|| Arc::new(held)).clone())
    }

    /// Every record under `prefix`, which lies within one space or spans whole spaces, in key
    /// order.
    fn scan_live(&self, prefix: &[u8]) -> Result<Vec<(Bytes, Bytes)>> {
        let mut out = Vec::new();
        // the space holding the prefix, if the prefix lies within one
        if let Ok(Place::Space(space_prefix)) = place_of(prefix) {
            if prefix.starts_with(&space_prefix) {
                if let Some(space) = self.space(&space_prefix)? {
                    out.extend(
                        space
                            .range(prefix)
                            .map(|(k, e)| (Bytes::copy_from_slice(k), e.value.clone())),
                    );
                }
                return Ok(out);
            }
        }
        // else every space the prefix spans, in key order
        let spanned: Vec<Vec<u8>> = self
            .sections
            .range(prefix.to_vec()..)
            .take_while(|(p, _)| p.starts_with(prefix))
            .map(|(p, _)| p.clone())
            .collect();
        for p in spanned {
            self.space(&p)?;
        }
        for (space_prefix, space) in self.loaded().range(prefix.to_vec()..) {
            if !space_prefix.starts_with(prefix) {
                break;
            }
            out.extend(
                space
                    .entries
                    .iter()
                    .map(|(k, e)| (Bytes::copy_from_slice(k), e.value.clone())),
            );
        }
        Ok(out)
    }

    /// Whether a history record read from a reader's latest state belongs to this image: it
    /// had ended by the image's head (a version ended later is live here, served from
    /// `current/`), its live version is not in the image (a version ended after the pin without
    /// a new snapshot), and it was first written by a commit the image holds.
    fn ended_by_head(&self, key: &[u8], value: &[u8]) -> bool {
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

    /// The committed rows of `def` in scan order: live rows, and with `need_history` ended
    /// versions too (versioned kinds only; other kinds have none). Built once per image.
    pub(crate) async fn rows(
        &self,
        backend: &Backend,
        def: &TableDef,
        kind: &Kind,
        need_history: bool,
    ) -> Result<Arc<RowSet>> {
        if !reads_history(kind, need_history) {
            return self.live_rows(def, kind);
        }
        let live_prefix = keys::current_prefix(&def.schema, &def.name);
        let space_prefix = place_space(&live_prefix)?;
        let space = match self.space(&space_prefix)? {
            Some(space) => space,
            None => self
                .stand_ins
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(space_prefix)
                .or_default()
                .clone(),
        };
        if let Some(r) = space
            .with_history
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&def.name)
        {
            return Ok(r.clone());
        }
        let rows = async {
            let mut rows = Vec::new();
            for (k, e) in space.range(&live_prefix) {
                rows.push(decode_row_at(&e.value).map_err(|err| keys::at_key(err, k))?);
            }
            let prefix = keys::history_prefix(&def.schema, &def.name);
            for (k, v) in self.scan(backend, &prefix).await? {
                rows.push(decode_row_at(&v).map_err(|err| keys::at_key(err, &k))?);
            }
            Ok::<_, Error>(kinds::fixed::serve(rows, kind, false))
        }
        .instrument(tracing::trace_span!("moraine.image.serve", table = %def.name))
        .await?;
        let rows = Arc::new(RowSet::new(rows));
        space
            .with_history
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(def.name.clone(), rows.clone());
        Ok(rows)
    }

    /// The committed live rows of `def` in scan order, served once per image (a second reader
    /// meanwhile waits for the first).
    pub(crate) fn live_rows(&self, def: &TableDef, kind: &Kind) -> Result<Arc<RowSet>> {
        let live_prefix = match kind {
            Kind::Snapshot(_) => keys::snapshot_prefix(&def.schema),
            Kind::Inline => keys::inline_chunk_prefix(&def.schema, &def.name),
            _ => keys::current_prefix(&def.schema, &def.name),
        };
        let Some(space) = self.space(&place_space(&live_prefix)?)? else {
            return Ok(self.no_rows.clone());
        };
        let once = space
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(def.name.clone())
            .or_insert_with(|| Arc::new(Once::new()))
            .clone();
        once.get_or_try(|| {
            let _span = tracing::trace_span!("moraine.image.serve", table = %def.name).entered();
            serve_live(kind, space.range(&live_prefix)).map(Arc::new)
        })
    }

    /// Serve the live rows of the tables DuckLake reads to plan a query
    /// ([`crate::tables::read_to_plan`]), so that the first query after an attach finds them
    /// ready. Runs on a background thread after an attach's image is read; reads no storage.
    /// In the order DuckLake reads them (the list's), then the inlined-data tables. A table
    /// that cannot be served is skipped: the transaction that reads it meets the same error and
    /// reports it.
    pub(crate) fn warm(&self) {
        let _span =
            tracing::debug_span!("moraine.image.warm", batch = self.head.batch_count).entered();
        let catalog = match self.catalog() {
            Ok(catalog) => catalog,
            Err(e) => return tracing::debug!("moraine: no warm-up: {e}"),
        };
        let rank = |def: &TableDef| {
            crate::tables::READ_TO_PLAN
                .iter()
                .position(|t| *t == def.name)
                .or(crate::catalog::is_inlined_table_name(&def.name)
                    .then_some(crate::tables::READ_TO_PLAN.len()))
        };
        let mut planned: Vec<(usize, &Arc<TableDef>)> = catalog
            .tables
            .values()
            .filter_map(|def| Some((rank(def)?, def)))
            .collect();
        planned.sort_by_key(|(rank, _)| *rank);
        for (_, def) in planned {
            let served = crate::catalog::kind_of(def).and_then(|kind| self.live_rows(def, &kind));
            if let Err(e) = served {
                tracing::debug!(table = %def.name, "moraine: not warmed: {e}");
            }
        }
    }
}

/// The live rows of a table of `kind` from its space's records under its live prefix.
fn serve_live<'a>(
    kind: &Kind,
    live: impl Iterator<Item = (&'a Vec<u8>, &'a Entry)>,
) -> Result<RowSet> {
    Ok(match kind {
        Kind::Snapshot(half) => RowSet::encoded(kinds::snapshot::records(
            live.map(|(k, e)| (&k[..], &e.value)),
            *half,
        )?),
        Kind::Inline => {
            let chunks = live
                .map(|(k, e)| e.chunk_rows().map_err(|err| keys::at_key(err, k)))
                .collect::<Result<Vec<_>>>()?;
            RowSet::new(kinds::inline::rows(chunks.iter().map(|c| c.as_slice())))
        }
        // kept encoded, decoded as they are read
        Kind::Versioned { .. } | Kind::Unversioned { .. } => RowSet::encoded(
            kinds::fixed::serve_encoded(live.map(|(k, e)| (&k[..], &e.value)), kind)?,
        ),
    })
}

/// Whether the committed rows of a table of `kind` asked with `need_history` include ended
/// versions, which live in storage; every other read is served from the image's memory.
pub(crate) fn reads_history(kind: &Kind, need_history: bool) -> bool {
    need_history && matches!(kind, Kind::Versioned { .. })
}

/// The space a key's records live in (tests).
#[cfg(test)]
pub(crate) fn place_space_for_test(key: &[u8]) -> Vec<u8> {
    place_space(key).unwrap()
}

fn place_space(key: &[u8]) -> Result<Vec<u8>> {
    match place_of(key)? {
        Place::Space(s) => Ok(s),
        Place::History(_) | Place::Image => Err(Error::Corrupt(format!(
            "key {:?} has no space",
            String::from_utf8_lossy(key)
        ))),
    }
}

fn is_history_prefix(prefix: &[u8]) -> Result<bool> {
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

/// An image read through the store's handle: the committed state a commit's write set lies
/// over.
pub(crate) struct ImageAt<'a> {
    pub image: &'a Image,
    pub backend: &'a Backend,
}

impl crate::write_set::Committed for ImageAt<'_> {
    fn get<'a>(&'a self, key: &'a [u8]) -> futures::future::BoxFuture<'a, Result<Option<Bytes>>> {
        Box::pin(self.image.get(self.backend, key))
    }

    fn scan<'a>(
        &'a self,
        prefix: &'a [u8],
    ) -> futures::future::BoxFuture<'a, Result<Vec<(Bytes, Bytes)>>> {
        Box::pin(self.image.scan(self.backend, prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_set_kept_encoded_reads_as_its_rows_and_decodes_only_what_is_read() {
        use crate::cell::encode_row_at;
        let kind = Kind::Versioned {
            key: vec![0],
            begin: 1,
            end: 2,
        };
        // first-write sequences out of key order, ties broken by begin, then by key; a record
        // without a sequence sorts first
        let stored: Vec<(Row, Option<(u64, u64)>)> = (0..40i64)
            .map(|i| {
                let row = vec![
                    Cell::Int(i),
                    Cell::Int(100 - i % 5),
                    if i % 7 == 0 {
                        Cell::Null
                    } else {
                        Cell::Int(i % 4)
                    },
                    Cell::Text(format!("file-{i} é")),
                ];
                let seq = (i != 13).then_some(((i % 6) as u64, (i % 2) as u64));
                (row, seq)
            })
            .collect();
        let records: Vec<Bytes> = stored
            .iter()
            .map(|(row, seq)| match seq {
                Some(seq) => Bytes::from(encode_row_at(row, *seq)),
                None => Bytes::from(crate::cell::encode_row(row)),
            })
            .collect();
        let eager = RowSet::new(kinds::fixed::serve(stored, &kind, true));
        let lazy = RowSet::encoded(
            kinds::fixed::serve_encoded(records.iter().map(|r| (&b"k"[..], r)), &kind).unwrap(),
        );
        assert_eq!(lazy.len(), eager.len());
        assert_eq!(lazy.get(3), eager.get(3));
        assert_eq!(lazy.positions(2, &[1, 3]), eager.positions(2, &[1, 3]));
        assert_eq!(
            lazy.positions_between(0, 5, 17),
            eager.positions_between(0, 5, 17)
        );
        // the count, one row and the indexes decoded nothing else
        assert_eq!(lazy.decoded_for_test(), (false, 1));
        assert_eq!(*lazy, *eager);
        assert_eq!(lazy.get(39), eager.get(39));
        // a column with text cells has no index in either: no integer is equal to a text cell
        assert_eq!(lazy.positions(3, &[1]), Vec::<u32>::new());
        assert_eq!(eager.positions(3, &[1]), Vec::<u32>::new());
        // a damaged record is refused when the set is built, not served as a short row later
        let mut bad = records.clone();
        bad[5] = bad[5].slice(..bad[5].len() - 1);
        assert!(kinds::fixed::serve_encoded(bad.iter().map(|r| (&b"k"[..], r)), &kind).is_err());
    }

    #[test]
    fn a_value_asked_for_at_once_is_computed_once_and_a_failure_is_not_kept() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let once = Arc::new(Once::new());
        let computed = Arc::new(AtomicUsize::new(0));
        let askers: Vec<_> = (0..4)
            .map(|_| {
                let (once, computed) = (once.clone(), computed.clone());
                std::thread::spawn(move || {
                    once.get_or_try(|| {
                        computed.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        Ok(7)
                    })
                    .unwrap()
                })
            })
            .collect();
        for a in askers {
            assert_eq!(a.join().unwrap(), 7);
        }
        assert_eq!(computed.load(Ordering::SeqCst), 1);
        let failing = Once::new();
        assert!(failing
            .get_or_try(|| Err(Error::Corrupt("damaged".into())))
            .is_err());
        assert_eq!(failing.get_or_try(|| Ok(3)).unwrap(), 3);
    }

    #[test]
    fn history_held_answers_for_the_tables_found_and_scans_what_it_did_not_look_through() {
        let key = keys::history("main", "t", &[Cell::Int(1)], &Cell::Int(3), &Cell::Int(1));
        assert_eq!(
            HistoryHeld::table_of(&key).unwrap(),
            keys::history_prefix("main", "t")
        );
        let other = keys::history("o", "t", &[Cell::Int(1)], &Cell::Int(3), &Cell::Int(1));
        assert_eq!(
            HistoryHeld::table_of(&other).unwrap(),
            keys::history_prefix("o", "t")
        );
        let held = HistoryHeld {
            roots: [keys::history_root("main")].into(),
            tables: [keys::history_prefix("main", "t")].into(),
        };
        // a table found, one entity of it, and the whole root may hold records
        assert!(held.may_hold(&keys::history_prefix("main", "t")));
        assert!(held.may_hold(&keys::history_entity_prefix("main", "t", &[Cell::Int(1)])));
        assert!(held.may_hold(&keys::history_root("main")));
        // a table not found holds none, even one whose name extends the found one's
        assert!(!held.may_hold(&keys::history_prefix("main", "u")));
        assert!(!held.may_hold(&keys::history_prefix("main", "tt")));
        assert!(!held.may_hold(&keys::history_prefix("main", "")));
        // a lake whose root was not looked through is read
        assert!(held.may_hold(&keys::history_prefix("o", "u")));
    }

    #[test]
    fn spaces_are_key_prefixes() {
        let keys_in = [
            keys::sys_head(),
            keys::sys_table("main", "ducklake_snapshot"),
            keys::lake_head("other"),
            keys::snapshot("main", 3),
            keys::snapshot("other", 3),
            keys::current(
                "main",
                "ducklake_table",
                &[Cell::Int(1)],
                Some(&Cell::Int(2)),
            ),
            keys::current("other", "ducklake_table", &[Cell::Int(1)], None),
            keys::inline_chunk("main", "ducklake_inlined_data_1_1", 4),
            keys::inline_locator("main", "ducklake_inlined_data_1_1", &Cell::Int(0), 4),
        ];
        for k in keys_in {
            let Place::Space(s) = place_of(&k).unwrap() else {
                panic!("not a space")
            };
            assert!(k.starts_with(&s), "{k:?} / {s:?}");
        }
        let h = keys::history("other", "t", &[Cell::Int(1)], &Cell::Int(3), &Cell::Int(1));
        let Place::History(live) = place_of(&h).unwrap() else {
            panic!("not history")
        };
        assert_eq!(
            live,
            place_space(&keys::current_prefix("other", "t")).unwrap()
        );
        assert!(is_history_prefix(&keys::history_prefix("main", "t")).unwrap());
        assert!(!is_history_prefix(&keys::current_prefix("main", "t")).unwrap());
        assert!(is_history_prefix(&[]).is_err());
        // the end of a history range sorts after every key in it and before the next keyspace
        let end = history_range_end(&h).unwrap();
        assert!(end.as_slice() > h.as_slice());
        assert!(end.as_slice() < keys::snapshot("other", 0).as_slice());
        let main_h = keys::history("main", "t", &[Cell::Int(9)], &Cell::Int(3), &Cell::Int(1));
        let main_end = history_range_end(&main_h).unwrap();
        assert!(main_end.as_slice() > main_h.as_slice());
        assert!(main_end.as_slice() < keys::inline_chunk("main", "x", 0).as_slice());
        // two tables' spaces never nest
        let a = place_space(&keys::current_prefix("main", "t")).unwrap();
        let b = place_space(&keys::current_prefix("main", "t2")).unwrap();
        assert!(!a.starts_with(&b) && !b.starts_with(&a));
    }

    #[test]
    fn a_snapshot_half_is_served_as_the_row_record_it_holds() {
        use crate::catalog::{SnapshotHalf, SnapshotRecord};
        let full = SnapshotRecord {
            snapshot: Some(vec![Cell::Int(7), Cell::Text("t".into())]),
            changes: Some(vec![Cell::Int(7), Cell::Text("created_table:x".into())]),
        };
        let only = SnapshotRecord {
            snapshot: Some(vec![Cell::Int(8)]),
            changes: None,
        };
        for record in [full, only] {
            let bytes = Bytes::from(record.encode());
            for half in [SnapshotHalf::Snapshot, SnapshotHalf::Changes] {
                let served = SnapshotRecord::half_record(&bytes, half)
                    .unwrap()
                    .map(|r| decode_row(&r).unwrap());
                assert_eq!(&served, record.half(half));
            }
            // a damaged record is refused whichever half is asked for, as decoding it is
            let cut = bytes.slice(..bytes.len() - 1);
            assert!(SnapshotRecord::decode(&cut).is_err());
            for half in [SnapshotHalf::Snapshot, SnapshotHalf::Changes] {
                assert!(SnapshotRecord::half_record(&cut, half).is_err());
            }
        }
    }
}
