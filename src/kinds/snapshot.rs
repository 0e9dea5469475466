//! `ducklake_snapshot` and `ducklake_snapshot_changes`: the two halves of one record,
//! `[lake/<l>/]snapshot/<id>` (RFC 0002). A row's identity is its snapshot id.
//!
//! Serving: each record's half, in id order. Translation: an insert fills a half, an update
//! replaces it (moving it when the id changes), a delete of a snapshot removes the whole record
//! (its changes row rides it, RFC 0007) unless it is the lake's head, and a changes row may go
//! only with its snapshot.

use super::{duplicate, vanished};
use crate::catalog::{Kind, SnapshotHalf, SnapshotRecord, TableDef};
use crate::cell::{Cell, Row};
use crate::error::{Error, Result};
use crate::keys;
use crate::write_set::WriteSet;
use std::collections::{BTreeMap, BTreeSet};

/// The row records one half serves from the lake's records, in id order, kept encoded.
pub(crate) fn records<'r>(
    records: impl Iterator<Item = (&'r [u8], &'r bytes::Bytes)>,
    half: SnapshotHalf,
) -> Result<Vec<bytes::Bytes>> {
    let mut out = Vec::new();
    for (k, v) in records {
        if let Some(r) = SnapshotRecord::half_record(v, half).map_err(|e| keys::at_key(e, k))? {
            out.push(r);
        }
    }
    Ok(out)
}

pub(crate) fn snapshot_id(def: &TableDef, row: &Row) -> Result<i64> {
    match row.first() {
        Some(Cell::Int(id)) => Ok(*id),
        Some(Cell::Null) | None => Err(Error::Constraint(format!(
            "NOT NULL constraint failed: {}.snapshot_id is a key column and cannot be NULL",
            def.name
        ))),
        Some(other) => Err(Error::Constraint(format!(
            "{}.snapshot_id must be an integer, got {other}",
            def.name
        ))),
    }
}

pub(crate) async fn insert(
    ws: &mut WriteSet<'_>,
    def: &TableDef,
    half: SnapshotHalf,
    row: &Row,
) -> Result<()> {
    let sid = snapshot_id(def, row)?;
    let mut rec = ws.snapshot_record(&def.schema, sid).await?;
    if rec.half(half).is_some() {
        return Err(duplicate(def, row, &Kind::Snapshot(half)));
    }
    *rec.half_mut(half) = Some(row.clone());
    ws.put_snapshot_record(&def.schema, sid, &rec);
    Ok(())
}

pub(crate) async fn update(
    ws: &mut WriteSet<'_>,
    def: &TableDef,
    half: SnapshotHalf,
    old: &Row,
    new: &Row,
) -> Result<()> {
    let kind = Kind::Snapshot(half);
    let old_id = snapshot_id(def, old)?;
    let new_id = snapshot_id(def, new)?;
    let mut rec = ws.snapshot_record(&def.schema, old_id).await?;
    if rec.half(half).is_none() {
        return Err(vanished(def, old, &kind));
    }
    if old_id == new_id {
        *rec.half_mut(half) = Some(new.clone());
        ws.put_snapshot_record(&def.schema, old_id, &rec);
    } else {
        *rec.half_mut(half) = None;
        ws.put_snapshot_record(&def.schema, old_id, &rec);
        let mut target = ws.snapshot_record(&def.schema, new_id).await?;
        if target.half(half).is_some() {
            return Err(duplicate(def, new, &kind));
        }
        *target.half_mut(half) = Some(new.clone());
        ws.put_snapshot_record(&def.schema, new_id, &target);
    }
    Ok(())
}

/// The snapshots a commit deletes (by lake) and the changes rows it deletes apart from them, as
/// (lake, snapshot id).
#[derive(Default)]
pub(crate) struct Deletes {
    snapshots: BTreeMap<String, BTreeSet<i64>>,
    changes: Vec<(String, i64)>,
}

impl Deletes {
    /// How many snapshots the commit deletes (expires).
    pub(crate) fn snapshots(&self) -> usize {
        self.snapshots.values().map(BTreeSet::len).sum()
    }

    fn deletes(&self, lake: &str, sid: i64) -> bool {
        self.snapshots.get(lake).is_some_and(|s| s.contains(&sid))
    }

    /// Stage the delete of `old`; `head` is the head snapshot the commit leaves the lake at.
    pub(crate) async fn delete(
        &mut self,
        ws: &mut WriteSet<'_>,
        def: &TableDef,
        half: SnapshotHalf,
        old: &Row,
        head: Option<i64>,
    ) -> Result<()> {
        let sid = snapshot_id(def, old)?;
        if half == SnapshotHalf::Changes && self.deletes(&def.schema, sid) {
            return Ok(()); // carried away with its snapshot's record
        }
        let key = keys::snapshot(&def.schema, sid);
        let held = match ws.get_bytes(&key).await? {
            Some(v) => SnapshotRecord::half_record(&v, half)?.is_some(),
            None => false,
        };
        if !held {
            return Err(vanished(def, old, &Kind::Snapshot(half)));
        }
        match half {
            SnapshotHalf::Snapshot => {
                if Some(sid) == head {
                    return Err(Error::Constraint(format!(
                        "cannot delete snapshot {sid} from {}: it is the lake's head snapshot",
                        def.name
                    )));
                }
                // the whole record goes: its changes row rides it
                ws.del(key);
                match self.snapshots.get_mut(&def.schema) {
                    Some(ids) => {
                        ids.insert(sid);
                    }
                    None => {
                        self.snapshots
                            .insert(def.schema.clone(), BTreeSet::from([sid]));
                    }
                }
            }
            // validated once the whole commit has been walked
            SnapshotHalf::Changes => self.changes.push((def.schema.clone(), sid)),
        }
        Ok(())
    }

    /// A changes row goes with its snapshot's record; one whose snapshot stays cannot go alone.
    pub(crate) async fn settle(self, ws: &mut WriteSet<'_>) -> Result<()> {
        for (lake, sid) in &self.changes {
            if self.deletes(lake, *sid) {
                continue;
            }
            let mut rec = ws.snapshot_record(lake, *sid).await?;
            if rec.snapshot.is_some() {
                return Err(Error::Constraint(format!(
                    "cannot delete the ducklake_snapshot_changes row of snapshot {sid} while the \
                     snapshot stays: it goes only with its snapshot's deletion in the same \
                     transaction"
                )));
            }
            rec.changes = None;
            ws.put_snapshot_record(lake, *sid, &rec);
        }
        Ok(())
    }
}

/// Dropping one half's table empties that half of every record of the lake.
pub(crate) async fn drop_table(
    ws: &mut WriteSet<'_>,
    def: &TableDef,
    half: SnapshotHalf,
) -> Result<()> {
    for (k, v) in ws.scan(&keys::snapshot_prefix(&def.schema)).await? {
        let mut rec = SnapshotRecord::decode(&v)?;
        *rec.half_mut(half) = None;
        if rec.is_empty() {
            ws.del(k);
        } else {
            ws.put(k, rec.encode());
        }
    }
    Ok(())
}
