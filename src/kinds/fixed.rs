//! DuckLake's fixed tables other than the snapshot pair: one record per row. A versioned kind's
//! live version is `current/<table>/<key>/<begin>` and an ended one
//! `history/<table>/<key>/<end>/<begin>`; an unversioned kind's row is `current/<table>/<key>`
//! (RFC 0002). Identity, key and lifecycle are declared in `catalog::kind_of`.
//!
//! Serving: rows in the order they were first written (a DuckDB-file catalog's scan order).
//! Translation: an insert puts its key (a stored identity is a unique violation), an update
//! moves the old key to the new one keeping the row's first-write place (so `SET end_snapshot`
//! moves a version to history), a delete removes the key; a change of a row no longer stored is
//! a conflict.

use super::{duplicate, vanished};
use crate::catalog::{self, Kind, TableDef};
use crate::cell::{
    decode_row_at, encode_row, encode_row_at, walk_row, Cell, CellRef, Row, WriteSeq,
};
use crate::error::Result;
use crate::keys;
use crate::write_set::WriteSet;
use bytes::Bytes;

/// Rows in the order they were first written, as a DuckDB-file catalog scans them, so readers
/// that take "the first row" without ORDER BY see what they would there. Records without a
/// write sequence come first, versions by the snapshot that began them, then by key.
///
/// `key_ordered`: the rows come in key order (one key range), so a stable sort by (sequence,
/// begin) keeps key order for ties without computing keys.
pub(crate) fn serve(
    mut rows: Vec<(Row, Option<WriteSeq>)>,
    kind: &Kind,
    key_ordered: bool,
) -> Vec<Row> {
    let begin = begin_column(kind);
    if key_ordered {
        rows.sort_by_key(|(row, seq)| (*seq, begin.and_then(|b| row[b].as_int())));
    } else {
        rows.sort_by_cached_key(|(row, seq)| {
            let key_cells: Vec<Cell> = match kind {
                Kind::Versioned { key, .. } => key.iter().map(|&i| row[i].clone()).collect(),
                _ => Vec::new(),
            };
            (
                *seq,
                begin.and_then(|b| row[b].as_int()),
                keys::encode_key(&key_cells),
            )
        });
    }
    rows.into_iter().map(|(row, _)| row).collect()
}

/// The column holding the snapshot that began a version, which orders rows after their write
/// sequence.
fn begin_column(kind: &Kind) -> Option<usize> {
    match kind {
        Kind::Versioned { begin, .. } => Some(*begin),
        _ => None,
    }
}

/// [`serve`] of live records in key order, keeping them encoded: each is checked whole and
/// only its sequence and begin cell are read. The records in scan order.
pub(crate) fn serve_encoded<'r>(
    records: impl Iterator<Item = (&'r [u8], &'r Bytes)>,
    kind: &Kind,
) -> Result<Vec<Bytes>> {
    let begin = begin_column(kind);
    let mut keyed = Vec::new();
    for (key, record) in records {
        let mut began = None;
        let seq = walk_row(record, |column, cell| {
            if Some(column) == begin {
                if let CellRef::Int(v) = cell {
                    began = Some(v);
                }
            }
        })
        .map_err(|e| keys::at_key(e, key))?;
        keyed.push(((seq, began), record.clone()));
    }
    // the same order as `serve`'s, stable: ties keep key order
    keyed.sort_by_key(|(order, _)| *order);
    Ok(keyed.into_iter().map(|(_, r)| r).collect())
}

/// A version bound a written row carries: (begins | ends, snapshot).
pub(crate) type Bound = (&'static str, i64);

/// Stage an insert; `seq` is the row's first-write place. Returns the bounds of the version.
pub(crate) async fn insert(
    ws: &mut WriteSet<'_>,
    def: &TableDef,
    kind: &Kind,
    row: &Row,
    seq: WriteSeq,
) -> Result<Vec<Bound>> {
    let key = catalog::row_key(def, kind, row)?;
    if ws.exists(&key).await? {
        return Err(duplicate(def, row, kind));
    }
    ws.put(key, encode_row_at(row, seq));
    let mut bounds = Vec::new();
    if let Kind::Versioned { begin, end, .. } = kind {
        for (bound, i) in [("begins", *begin), ("ends", *end)] {
            if let Some(s) = row[i].as_int() {
                bounds.push((bound, s));
            }
        }
    }
    Ok(bounds)
}

/// Stage an update of the stored row `old` to `new`. Returns the bound the new version ends at.
pub(crate) async fn update(
    ws: &mut WriteSet<'_>,
    def: &TableDef,
    kind: &Kind,
    old: &Row,
    new: &Row,
) -> Result<Vec<Bound>> {
    let old_key = catalog::row_key(def, kind, old)?;
    let Some(stored) = ws.get(&old_key).await? else {
        return Err(vanished(def, old, kind));
    };
    let new_key = catalog::row_key(def, kind, new)?;
    if new_key != old_key && ws.exists(&new_key).await? {
        return Err(duplicate(def, new, kind));
    }
    // an updated row keeps its place (DuckDB updates in place)
    let value = match decode_row_at(&stored)?.1 {
        Some(seq) => encode_row_at(new, seq),
        None => encode_row(new), // a record from before write sequences
    };
    ws.del(old_key);
    ws.put(new_key, value);
    let mut bounds = Vec::new();
    if let Kind::Versioned { end, .. } = kind {
        if let Some(s) = new[*end].as_int() {
            bounds.push(("ends", s));
        }
    }
    Ok(bounds)
}

/// The key of the stored row `old` a delete names (the caller deletes it, or defers an
/// embedded row's delete to its parent, RFC 0007).
pub(crate) async fn stored_key(
    ws: &WriteSet<'_>,
    def: &TableDef,
    kind: &Kind,
    old: &Row,
) -> Result<Vec<u8>> {
    let key = catalog::row_key(def, kind, old)?;
    if !ws.exists(&key).await? {
        return Err(vanished(def, old, kind));
    }
    Ok(key)
}

/// Dropping a fixed table deletes its live and ended rows.
pub(crate) async fn drop_table(ws: &mut WriteSet<'_>, def: &TableDef) -> Result<()> {
    for prefix in [
        keys::current_prefix(&def.schema, &def.name),
        keys::history_prefix(&def.schema, &def.name),
    ] {
        for (k, _) in ws.scan(&prefix).await? {
            ws.del(k);
        }
    }
    Ok(())
}
