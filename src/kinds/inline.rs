//! The inlined data tables (`ducklake_inlined_data_<t>_<v>`, `ducklake_inlined_delete_<t>`): rows
//! stored as Arrow IPC chunks under `inline/<schema>/<table>/chunk/<seq>`, each with a row-id
//! locator (RFC 0002). A row's identity is the whole row.
//!
//! Serving: the chunks' rows in sequence order. Translation: new rows become one new chunk;
//! a changed chunk is rewritten as its contiguous surviving runs (RFC 0007); a table dropped
//! takes all its keys.

use super::vanished;
use crate::catalog::{Kind, TableDef};
use crate::cell::{Cell, Row};
use crate::chunk::{decode_chunk, encode_chunk};
use crate::error::{Error, Result};
use crate::keys;
use crate::write_set::WriteSet;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// The rows an inlined table serves: its chunks' rows in sequence order.
pub(crate) fn rows<'c>(chunks: impl Iterator<Item = &'c [Row]>) -> Vec<Row> {
    chunks.flat_map(|c| c.iter().cloned()).collect()
}

/// Dropping an inlined table deletes its chunks and locators.
pub(crate) async fn drop_table(ws: &mut WriteSet<'_>, def: &TableDef) -> Result<()> {
    for (k, _) in ws
        .scan(&keys::inline_table_prefix(&def.schema, &def.name))
        .await?
    {
        ws.del(k);
    }
    Ok(())
}

/// Write every changed inlined table's chunks, in table order.
pub(crate) async fn emit_all(
    models: HashMap<(String, String), InlineModel>,
    ws: &mut WriteSet<'_>,
) -> Result<()> {
    let mut models: Vec<_> = models.into_values().collect();
    models.sort_by(|a, b| (&a.def.schema, &a.def.name).cmp(&(&b.def.schema, &b.def.name)));
    for m in models {
        m.emit(ws).await?;
    }
    Ok(())
}

struct LoadedChunk {
    /// `None` = deleted by this commit.
    rows: Vec<Option<Row>>,
    orig_min: Cell,
    dirty: bool,
}

/// How many chunks a table holds before new rows join its last chunk.
const MANY_CHUNKS: usize = 64;

/// The size up to which a table's last chunk takes a commit's new rows: rows, and bytes (a
/// commit that appends rewrites the chunk, so a chunk of large rows takes no more).
const APPEND_BELOW_ROWS: usize = 1024;
const APPEND_BELOW_BYTES: usize = 1 << 20;

/// About how many bytes a row's cells take in a chunk.
fn row_bytes(row: &Row) -> usize {
    row.iter()
        .map(|c| match c {
            Cell::Text(s) => s.len() + 4,
            Cell::Blob(b) => b.len() + 4,
            _ => 8,
        })
        .sum()
}

/// Where a row of an [`InlineModel`] lives: (chunk seq, index); new rows use seq `NEW`.
type Slot = (i64, usize);
const NEW: i64 = i64::MAX;

/// One inlined table's chunks as this commit changes them.
pub(crate) struct InlineModel {
    pub(crate) def: Arc<TableDef>,
    has_row_id: bool,
    /// Created (or re-created) in this transaction: no committed chunks.
    fresh: bool,
    /// Committed (min row id, seq) locators; loaded on first need.
    locators: Option<Vec<(Cell, i64)>>,
    chunks: BTreeMap<i64, LoadedChunk>,
    new_rows: Vec<Option<Row>>,
    /// Whole row -> its slots among loaded chunks and new rows (identity of an inlined row).
    index: HashMap<Row, BTreeSet<Slot>>,
}

impl InlineModel {
    pub(crate) fn new(def: Arc<TableDef>, fresh: bool) -> Self {
        let has_row_id = def.columns.first().is_some_and(|c| c.name == "row_id");
        InlineModel {
            def,
            has_row_id,
            fresh,
            locators: None,
            chunks: BTreeMap::new(),
            new_rows: Vec::new(),
            index: HashMap::new(),
        }
    }

    fn min_row_id<'r>(&self, rows: impl Iterator<Item = &'r Row>) -> Cell {
        if !self.has_row_id {
            return Cell::Null;
        }
        rows.filter_map(|r| r.first().and_then(Cell::as_int))
            .min()
            .map(Cell::Int)
            .unwrap_or(Cell::Null)
    }

    pub(crate) fn insert(&mut self, row: &Row) {
        self.new_rows.push(Some(row.clone()));
        self.index
            .entry(row.clone())
            .or_default()
            .insert((NEW, self.new_rows.len() - 1));
    }

    async fn locators(&mut self, ws: &WriteSet<'_>) -> Result<&Vec<(Cell, i64)>> {
        if self.locators.is_none() {
            let mut locs = Vec::new();
            if !self.fresh {
                let prefix = keys::inline_locator_prefix(&self.def.schema, &self.def.name);
                for (k, _) in ws.committed_scan(&prefix).await? {
                    let segs = keys::decode_key(&k[prefix.len()..])?;
                    match segs.as_slice() {
                        [min, Cell::Int(seq)] => locs.push((min.clone(), *seq)),
                        _ => {
                            return Err(Error::Corrupt(format!(
                                "inline locator of {} is malformed",
                                self.def.name
                            )))
                        }
                    }
                }
            }
            self.locators = Some(locs);
        }
        Ok(self.locators.as_ref().expect("just loaded"))
    }

    fn find(&self, row: &Row) -> Option<Slot> {
        self.index.get(row).and_then(|s| s.first().copied())
    }

    /// Load committed chunks that may hold `row` until one does: by row-id locator, chunks
    /// whose lowest row id is <= the row's, nearest first; without a row id, in sequence order.
    async fn load_for(&mut self, ws: &WriteSet<'_>, row: &Row) -> Result<Option<Slot>> {
        let target = if self.has_row_id {
            row.first().and_then(Cell::as_int)
        } else {
            None
        };
        let mut candidates: Vec<(Cell, i64)> = self.locators(ws).await?.clone();
        candidates.retain(|(min, seq)| {
            !self.chunks.contains_key(seq)
                && match (target, min) {
                    (Some(t), Cell::Int(m)) => *m <= t,
                    _ => true,
                }
        });
        if target.is_some() {
            candidates.sort_by(|a, b| b.0.as_int().cmp(&a.0.as_int()).then(a.1.cmp(&b.1)));
        }
        for (min, seq) in candidates {
            self.load_chunk(ws, min, seq).await?;
            if let Some(slot) = self.find(row) {
                return Ok(Some(slot));
            }
        }
        Ok(None)
    }

    /// Load committed chunk `seq` (whose locator holds `min`) and index its rows.
    async fn load_chunk(&mut self, ws: &WriteSet<'_>, min: Cell, seq: i64) -> Result<()> {
        let key = keys::inline_chunk(&self.def.schema, &self.def.name, seq);
        let body = ws.get(&key).await?.ok_or_else(|| {
            Error::Corrupt(format!(
                "inline chunk {seq} of {} is missing",
                self.def.name
            ))
        })?;
        let rows = decode_chunk(&body)?;
        for (i, r) in rows.iter().enumerate() {
            self.index.entry(r.clone()).or_default().insert((seq, i));
        }
        self.chunks.insert(
            seq,
            LoadedChunk {
                rows: rows.into_iter().map(Some).collect(),
                orig_min: min,
                dirty: false,
            },
        );
        Ok(())
    }

    /// Once a table holds many chunks, a commit's new rows join its last chunk while that chunk
    /// is small and the commit changes no other chunk: a lake of thousands of one-row inserts
    /// keeps a few dozen chunks (each decoded on a cold read) instead of one per insert. The
    /// rows are served in the same order either way (the last chunk's rows, then the new ones).
    /// Returns the rows that did not join it.
    async fn append_to_last_chunk(
        &mut self,
        ws: &WriteSet<'_>,
        new_rows: Vec<Row>,
    ) -> Result<Vec<Row>> {
        if new_rows.is_empty() || self.fresh || self.chunks.values().any(|c| c.dirty) {
            return Ok(new_rows);
        }
        let locators = self.locators(ws).await?;
        if locators.len() < MANY_CHUNKS {
            return Ok(new_rows);
        }
        let Some((min, last)) = locators.iter().max_by_key(|(_, seq)| *seq).cloned() else {
            return Ok(new_rows);
        };
        if !self.chunks.contains_key(&last) {
            self.load_chunk(ws, min, last).await?;
        }
        let chunk = self.chunks.get_mut(&last).expect("loaded");
        let bytes: usize = chunk
            .rows
            .iter()
            .flatten()
            .chain(&new_rows)
            .map(row_bytes)
            .sum();
        if chunk.rows.len() + new_rows.len() > APPEND_BELOW_ROWS || bytes > APPEND_BELOW_BYTES {
            return Ok(new_rows);
        }
        chunk.rows.extend(new_rows.into_iter().map(Some));
        chunk.dirty = true;
        Ok(Vec::new())
    }

    /// Apply an update (`new = Some`) or a delete (`new = None`) of the row equal to `old`.
    pub(crate) async fn change(
        &mut self,
        ws: &WriteSet<'_>,
        old: &Row,
        new: Option<&Row>,
    ) -> Result<()> {
        let slot = match self.find(old) {
            Some(s) => s,
            None => match self.load_for(ws, old).await? {
                Some(s) => s,
                None => return Err(vanished(&self.def, old, &Kind::Inline)),
            },
        };
        if let Some(set) = self.index.get_mut(old) {
            set.remove(&slot);
        }
        if let Some(n) = new {
            self.index.entry(n.clone()).or_default().insert(slot);
        }
        let cell = if slot.0 == NEW {
            &mut self.new_rows[slot.1]
        } else {
            let ch = self.chunks.get_mut(&slot.0).expect("loaded");
            ch.dirty = true;
            &mut ch.rows[slot.1]
        };
        *cell = new.cloned();
        Ok(())
    }

    pub(crate) async fn emit(mut self, ws: &mut WriteSet<'_>) -> Result<()> {
        let (schema, name) = (self.def.schema.clone(), self.def.name.clone());
        let columns: Vec<String> = self.def.columns.iter().map(|c| c.name.clone()).collect();
        // Sequences for chunks this commit creates start above every existing one.
        let committed_max = self
            .locators(ws)
            .await?
            .iter()
            .map(|(_, s)| *s)
            .max()
            .unwrap_or(0);
        let mut next_seq = committed_max.max(self.chunks.keys().copied().max().unwrap_or(0)) + 1;
        let new_rows: Vec<Row> = std::mem::take(&mut self.new_rows)
            .into_iter()
            .flatten()
            .collect();
        let new_rows = self.append_to_last_chunk(ws, new_rows).await?;
        let this = &self;
        let put_chunk = |ws: &mut WriteSet<'_>, seq: i64, rows: &[Row]| -> Result<()> {
            let min = this.min_row_id(rows.iter());
            ws.put(
                keys::inline_chunk(&schema, &name, seq),
                encode_chunk(&name, &columns, rows)?,
            );
            ws.put(keys::inline_locator(&schema, &name, &min, seq), Vec::new());
            Ok(())
        };
        for (seq, ch) in self.chunks.iter().filter(|(_, c)| c.dirty) {
            ws.del(keys::inline_locator(&schema, &name, &ch.orig_min, *seq));
            ws.del(keys::inline_chunk(&schema, &name, *seq));
            // A partially deleted chunk becomes its contiguous surviving runs (RFC 0007): the
            // first keeps the chunk's sequence, later ones take fresh sequences. Survivors keep
            // their row ids, snapshots and values; a wholly deleted chunk is simply gone.
            let runs = ch.rows.split(Option::is_none).filter(|run| !run.is_empty());
            for (i, run) in runs.enumerate() {
                let rows: Vec<Row> = run.iter().flatten().cloned().collect();
                let seq = if i == 0 {
                    *seq
                } else {
                    next_seq += 1;
                    next_seq - 1
                };
                put_chunk(ws, seq, &rows)?;
            }
        }
        if !new_rows.is_empty() {
            put_chunk(ws, next_seq, &new_rows)?;
        }
        Ok(())
    }
}
