//! Read-your-writes: a transaction's staged row operations laid over committed rows.
//!
//! Staged rows are DuckLake's own cells, untranslated, so what a transaction sees is fixed the
//! moment it stages a row. The overlay applies them in stage order:
//! - insert appends the row;
//! - update replaces the row whose identity equals the old row's identity (an
//!   `UPDATE ... SET end_snapshot` ends the live version, `SET begin_snapshot` rebases it,
//!   an unversioned kind overwrites by key);
//! - delete removes that row (a hard delete of exactly the named version).
//!
//! Identity is the table's [`identity`]: key cells + begin_snapshot for versioned kinds, key
//! cells for unversioned kinds, the snapshot id for the snapshot tables, the whole row for the
//! inlined tables. The overlay validates nothing: an operation that names no row is skipped
//! here and refused at commit by translation, where the refusal belongs.

use crate::catalog::{identity, is_ended, Kind};
use crate::cell::{Cell, Row};
use std::collections::{BTreeSet, HashMap};

/// One staged row operation on one table.
#[derive(Debug, Clone, Copy)]
pub enum RowOp<'a> {
    Insert(&'a Row),
    Update { old: &'a Row, new: &'a Row },
    Delete(&'a Row),
}

/// Apply staged operations in stage order. With `need_history == false` a versioned table's
/// result holds only live rows, like the committed `current/` scan it started from.
///
/// Rows are matched through an identity index (built on the first update or delete), so a
/// transaction that stages thousands of deletes against a large table stays linear; when
/// several rows share an identity, the earliest one in the list is the one changed.
pub fn apply<'a>(
    kind: &Kind,
    rows: &mut Vec<Row>,
    ops: impl IntoIterator<Item = RowOp<'a>>,
    need_history: bool,
) {
    let mut slots: Vec<Option<Row>> = rows.drain(..).map(Some).collect();
    let mut index: Option<HashMap<Vec<Cell>, BTreeSet<usize>>> = None;
    fn build(kind: &Kind, slots: &[Option<Row>]) -> HashMap<Vec<Cell>, BTreeSet<usize>> {
        let mut idx: HashMap<Vec<Cell>, BTreeSet<usize>> = HashMap::new();
        for (i, r) in slots.iter().enumerate() {
            if let Some(r) = r {
                idx.entry(identity(kind, r)).or_default().insert(i);
            }
        }
        idx
    }
    for op in ops {
        match op {
            RowOp::Insert(row) => {
                slots.push(Some(row.clone()));
                if let Some(idx) = index.as_mut() {
                    idx.entry(identity(kind, row))
                        .or_default()
                        .insert(slots.len() - 1);
                }
            }
            RowOp::Update { old, new } => {
                let idx = index.get_or_insert_with(|| build(kind, &slots));
                let old_id = identity(kind, old);
                let Some(i) = idx.get(&old_id).and_then(|s| s.first().copied()) else {
                    continue;
                };
                let new_id = identity(kind, new);
                if new_id != old_id {
                    idx.get_mut(&old_id).expect("present").remove(&i);
                    idx.entry(new_id).or_default().insert(i);
                }
                slots[i] = Some(new.clone());
            }
            RowOp::Delete(old) => {
                let idx = index.get_or_insert_with(|| build(kind, &slots));
                let old_id = identity(kind, old);
                let Some(i) = idx.get(&old_id).and_then(|s| s.first().copied()) else {
                    continue;
                };
                idx.get_mut(&old_id).expect("present").remove(&i);
                slots[i] = None;
            }
        }
    }
    rows.extend(slots.into_iter().flatten());
    if !need_history && matches!(kind, Kind::Versioned { .. }) {
        rows.retain(|r| !is_ended(kind, r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::SnapshotHalf;

    fn versioned() -> Kind {
        // (id, begin_snapshot, end_snapshot, name)
        Kind::Versioned {
            key: vec![0],
            begin: 1,
            end: 2,
        }
    }

    fn v(id: i64, begin: i64, end: Option<i64>, name: &str) -> Row {
        vec![
            Cell::Int(id),
            Cell::Int(begin),
            end.map(Cell::Int).unwrap_or(Cell::Null),
            Cell::Text(name.into()),
        ]
    }

    #[test]
    fn insert_appends_in_stage_order() {
        let mut rows = vec![v(1, 0, None, "a")];
        let (b, c) = (v(2, 1, None, "b"), v(3, 1, None, "c"));
        apply(
            &versioned(),
            &mut rows,
            [RowOp::Insert(&b), RowOp::Insert(&c)],
            true,
        );
        assert_eq!(rows, vec![v(1, 0, None, "a"), b, c]);
    }

    #[test]
    fn end_snapshot_update_ends_the_live_version() {
        let committed = vec![v(1, 0, None, "a"), v(2, 0, None, "b")];
        let old = v(1, 0, None, "a");
        let ended = v(1, 0, Some(3), "a");
        let next = v(1, 3, None, "a2");
        let ops = [
            RowOp::Update {
                old: &old,
                new: &ended,
            },
            RowOp::Insert(&next),
        ];
        let mut all = committed.clone();
        apply(&versioned(), &mut all, ops, true);
        assert_eq!(all, vec![ended.clone(), v(2, 0, None, "b"), next.clone()]);
        // the head view keeps only live rows
        let mut live = committed;
        apply(&versioned(), &mut live, ops, false);
        assert_eq!(live, vec![v(2, 0, None, "b"), next]);
    }

    #[test]
    fn begin_snapshot_update_rebases_and_identity_follows() {
        let mut rows = vec![v(5, 2, None, "f")];
        let old = v(5, 2, None, "f");
        let rebased = v(5, 4, None, "f");
        let ended = v(5, 4, Some(6), "f");
        // the second update names the rebased version, so it must find it
        apply(
            &versioned(),
            &mut rows,
            [
                RowOp::Update {
                    old: &old,
                    new: &rebased,
                },
                RowOp::Update {
                    old: &rebased,
                    new: &ended,
                },
            ],
            true,
        );
        assert_eq!(rows, vec![ended]);
    }

    #[test]
    fn delete_drops_exactly_the_named_version() {
        let mut rows = vec![
            v(1, 0, Some(2), "a"),
            v(1, 2, None, "a2"),
            v(2, 0, None, "b"),
        ];
        let target = v(1, 0, Some(2), "a");
        apply(&versioned(), &mut rows, [RowOp::Delete(&target)], true);
        assert_eq!(rows, vec![v(1, 2, None, "a2"), v(2, 0, None, "b")]);
        // deleting something that is not there changes nothing (translation refuses it later)
        let ghost = v(9, 0, None, "x");
        apply(&versioned(), &mut rows, [RowOp::Delete(&ghost)], true);
        assert_eq!(rows.len(), 2);
    }

    #[test]
    fn unversioned_overwrites_and_removes_by_key() {
        let kind = Kind::Unversioned { key: vec![0] };
        let mut rows = vec![
            vec![Cell::Int(1), Cell::Int(10)],
            vec![Cell::Int(2), Cell::Int(20)],
        ];
        let old_stats = vec![Cell::Int(1), Cell::Int(999)]; // only the key matters
        let new_stats = vec![Cell::Int(1), Cell::Int(11)];
        let gone = vec![Cell::Int(2), Cell::Null];
        apply(
            &kind,
            &mut rows,
            [
                RowOp::Update {
                    old: &old_stats,
                    new: &new_stats,
                },
                RowOp::Delete(&gone),
            ],
            false,
        );
        assert_eq!(rows, vec![vec![Cell::Int(1), Cell::Int(11)]]);
    }

    #[test]
    fn stage_order_matters() {
        let kind = Kind::Unversioned { key: vec![0] };
        let a = vec![Cell::Int(1), Cell::Text("a".into())];
        let b = vec![Cell::Int(1), Cell::Text("b".into())];
        // insert then delete: gone; delete then insert: present
        let mut rows = vec![];
        apply(
            &kind,
            &mut rows,
            [RowOp::Insert(&a), RowOp::Delete(&a)],
            false,
        );
        assert!(rows.is_empty());
        let mut rows = vec![a.clone()];
        apply(
            &kind,
            &mut rows,
            [RowOp::Delete(&a), RowOp::Insert(&b)],
            false,
        );
        assert_eq!(rows, vec![b.clone()]);
        let mut rows = vec![a.clone()];
        apply(
            &kind,
            &mut rows,
            [RowOp::Insert(&b), RowOp::Delete(&a)],
            false,
        );
        assert_eq!(rows, vec![b]);
    }

    #[test]
    fn duplicates_change_the_earliest_and_large_batches_stay_fast() {
        let kind = Kind::Inline;
        let r = vec![Cell::Int(1)];
        let mut rows = vec![r.clone(), vec![Cell::Int(2)], r.clone()];
        let n = vec![Cell::Int(9)];
        apply(&kind, &mut rows, [RowOp::Update { old: &r, new: &n }], true);
        assert_eq!(rows, vec![n.clone(), vec![Cell::Int(2)], r.clone()]);
        apply(
            &kind,
            &mut rows,
            [RowOp::Delete(&r), RowOp::Delete(&r)],
            true,
        );
        assert_eq!(rows, vec![n, vec![Cell::Int(2)]]);

        let kind = Kind::Unversioned { key: vec![0] };
        let mut rows: Vec<Row> = (0..20_000)
            .map(|i| vec![Cell::Int(i), Cell::Int(0)])
            .collect();
        let dels: Vec<Row> = (0..20_000)
            .step_by(2)
            .map(|i| vec![Cell::Int(i), Cell::Int(0)])
            .collect();
        let start = std::time::Instant::now();
        apply(&kind, &mut rows, dels.iter().map(RowOp::Delete), false);
        assert_eq!(rows.len(), 10_000);
        assert!(rows.iter().all(|r| r[0].as_int().unwrap() % 2 == 1));
        assert!(
            start.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn snapshot_and_inline_identities() {
        let snap = Kind::Snapshot(SnapshotHalf::Snapshot);
        let mut rows = vec![
            vec![Cell::Int(0), Cell::Text("t0".into())],
            vec![Cell::Int(1), Cell::Text("t1".into())],
        ];
        let del = vec![Cell::Int(0), Cell::Null];
        apply(&snap, &mut rows, [RowOp::Delete(&del)], true);
        assert_eq!(rows.len(), 1);

        let r1 = vec![
            Cell::Int(1),
            Cell::Int(3),
            Cell::Null,
            Cell::Text("x".into()),
        ];
        let r1b = vec![
            Cell::Int(1),
            Cell::Int(3),
            Cell::Null,
            Cell::Text("y".into()),
        ];
        let mut rows = vec![r1.clone(), r1b.clone()];
        let ended = vec![
            Cell::Int(1),
            Cell::Int(3),
            Cell::Int(4),
            Cell::Text("y".into()),
        ];
        apply(
            &Kind::Inline,
            &mut rows,
            [RowOp::Update {
                old: &r1b,
                new: &ended,
            }],
            true,
        );
        assert_eq!(rows, vec![r1, ended]);
    }
}
