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

use crate::catalog::{identity_columns, is_ended, Kind};
use crate::cell::{CellRef, Row};
use crate::rowset::{IntColumn, RowSet};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// One staged row operation on one table.
#[derive(Debug, Clone, Copy)]
pub enum RowOp<'a> {
    Insert(&'a Row),
    Update { old: &'a Row, new: &'a Row },
    Delete(&'a Row),
}

/// Apply staged operations in stage order to `committed`, returning the rows the transaction
/// sees. With `need_history == false` a versioned table's result holds only live rows, like
/// the committed `current/` scan it started from.
///
/// Rows are matched through an identity index (built on the first update or delete), so a
/// transaction that stages thousands of deletes against a large table stays linear; when
/// several rows share an identity, the earliest one in the list is the one changed. Committed
/// rows are referred to by position until the end, and only the rows that remain are copied
/// out; the index reads a committed row's identity from the set's integer columns when every
/// identity column is one, without decoding the row.
pub fn apply<'a>(
    kind: &Kind,
    committed: &'a RowSet,
    ops: impl IntoIterator<Item = RowOp<'a>>,
    need_history: bool,
) -> Vec<Row> {
    let mut rows = Slots::new(kind, committed);
    for op in ops {
        match op {
            RowOp::Insert(row) => rows.push(row),
            RowOp::Update { old, new } => rows.replace(old, Some(new)),
            RowOp::Delete(old) => rows.replace(old, None),
        }
    }
    rows.slots
        .into_iter()
        .flatten()
        .filter_map(|slot| match slot {
            Slot::Committed(i) => committed.get(i as usize),
            Slot::Staged(row) => Some(row),
        })
        .filter(|row| need_history || !is_ended(kind, row))
        .cloned()
        .collect()
}

/// A row of the result being built: a committed row by position, or a staged row.
#[derive(Clone, Copy)]
enum Slot<'a> {
    Committed(u32),
    Staged(&'a Row),
}

/// The result being built, and the index from a row's identity (hashed) to its slots.
struct Slots<'a> {
    committed: &'a RowSet,
    /// the identity's columns (`catalog::identity_columns`); `None`: the whole row
    columns: Option<Vec<usize>>,
    /// the committed set's integer column of each identity column, when all are integers
    /// (read when the index is built)
    ints: Option<Vec<Arc<IntColumn>>>,
    slots: Vec<Option<Slot<'a>>>,
    /// identity hash -> positions in `slots` of the rows with that hash, ascending
    index: Option<HashMap<u64, Vec<u32>>>,
}

impl<'a> Slots<'a> {
    fn new(kind: &Kind, committed: &'a RowSet) -> Self {
        Slots {
            committed,
            columns: identity_columns(kind),
            ints: None,
            slots: (0..committed.len() as u32)
                .map(|i| Some(Slot::Committed(i)))
                .collect(),
            index: None,
        }
    }

    /// The identity cells of `slot` (as `catalog::identity` names them: a missing cell is NULL).
    fn identity(&self, slot: Slot<'a>, out: &mut Vec<CellRef<'a>>) {
        out.clear();
        let row: &'a Row = match slot {
            Slot::Committed(i) => {
                if let Some(ints) = &self.ints {
                    out.extend(ints.iter().map(|c| {
                        let i = i as usize;
                        match c.valid.get(i) {
                            Some(1..) => CellRef::Int(c.values[i]),
                            _ => CellRef::Null,
                        }
                    }));
                    return;
                }
                match self.committed.get(i as usize) {
                    Some(row) => row,
                    None => return, // no such row: matches no staged row
                }
            }
            Slot::Staged(row) => row,
        };
        match &self.columns {
            Some(cols) => out.extend(
                cols.iter()
                    .map(|&c| row.get(c).map_or(CellRef::Null, |cell| cell.as_ref())),
            ),
            None => out.extend(row.iter().map(|cell| cell.as_ref())),
        }
    }

    fn hash(&self, slot: Slot<'a>, buf: &mut Vec<CellRef<'a>>) -> u64 {
        self.identity(slot, buf);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        buf.len().hash(&mut h);
        for cell in buf.iter() {
            hash_cell(*cell, &mut h);
        }
        h.finish()
    }

    fn index(&mut self) -> &mut HashMap<u64, Vec<u32>> {
        if self.index.is_none() {
            // read by column only when something is matched (an insert-only overlay never is)
            self.ints = self.columns.as_ref().and_then(|cols| {
                cols.iter()
                    .map(|&c| self.committed.int_column(c))
                    .collect::<Option<Vec<_>>>()
            });
            let mut buf = Vec::new();
            let mut idx: HashMap<u64, Vec<u32>> = HashMap::with_capacity(self.slots.len());
            for (i, slot) in self.slots.iter().enumerate() {
                if let Some(slot) = slot {
                    idx.entry(self.hash(*slot, &mut buf))
                        .or_default()
                        .push(i as u32);
                }
            }
            self.index = Some(idx);
        }
        self.index.as_mut().expect("built above")
    }

    fn push(&mut self, row: &'a Row) {
        let at = self.slots.len() as u32;
        self.slots.push(Some(Slot::Staged(row)));
        if self.index.is_some() {
            let h = self.hash(Slot::Staged(row), &mut Vec::new());
            // the newest slot: positions stay ascending
            self.index().entry(h).or_default().push(at);
        }
    }

    /// Replace (`Some`) or remove (`None`) the earliest row whose identity is `old`'s; an `old`
    /// that names no row changes nothing.
    fn replace(&mut self, old: &'a Row, new: Option<&'a Row>) {
        let (mut wanted, mut found) = (Vec::new(), Vec::new());
        self.index();
        let h = self.hash(Slot::Staged(old), &mut wanted);
        let index = self.index.as_ref().expect("built above");
        let Some(at) = index.get(&h).and_then(|bucket| {
            bucket.iter().copied().find(|&i| {
                let Some(slot) = self.slots[i as usize] else {
                    return false;
                };
                self.identity(slot, &mut found);
                found.len() == wanted.len() && found.iter().zip(&wanted).all(|(a, b)| same(*a, *b))
            })
        }) else {
            return;
        };
        let moved_to = new.map(|row| self.hash(Slot::Staged(row), &mut found));
        self.slots[at as usize] = new.map(Slot::Staged);
        if moved_to == Some(h) {
            return;
        }
        let index = self.index.as_mut().expect("built above");
        if let Some(bucket) = index.get_mut(&h) {
            bucket.retain(|&i| i != at);
        }
        if let Some(to) = moved_to {
            let bucket = index.entry(to).or_default();
            let p = bucket.partition_point(|&i| i < at);
            bucket.insert(p, at);
        }
    }
}

fn hash_cell(cell: CellRef<'_>, h: &mut impl Hasher) {
    match cell {
        CellRef::Null => 0u8.hash(h),
        CellRef::Int(v) => (1u8, v).hash(h),
        CellRef::Bool(v) => (2u8, v).hash(h),
        CellRef::Float(v) => (3u8, v.to_bits()).hash(h),
        CellRef::Text(v) => (4u8, v).hash(h),
        CellRef::Blob(v) => (5u8, v).hash(h),
    }
}

/// Cell equality as `Cell`'s (floats by their bits).
fn same(a: CellRef<'_>, b: CellRef<'_>) -> bool {
    match (a, b) {
        (CellRef::Float(x), CellRef::Float(y)) => x.to_bits() == y.to_bits(),
        (a, b) => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::SnapshotHalf;
    use crate::cell::Cell;

    /// [`apply`] to `rows` as the committed rows, in place.
    fn apply_to<'a>(
        kind: &Kind,
        rows: &mut Vec<Row>,
        ops: impl IntoIterator<Item = RowOp<'a>>,
        need_history: bool,
    ) {
        let ops: Vec<RowOp<'_>> = ops.into_iter().collect();
        let committed = RowSet::new(std::mem::take(rows));
        *rows = apply(kind, &committed, ops, need_history);
    }

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
        apply_to(
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
        apply_to(&versioned(), &mut all, ops, true);
        assert_eq!(all, vec![ended.clone(), v(2, 0, None, "b"), next.clone()]);
        // the head view keeps only live rows
        let mut live = committed;
        apply_to(&versioned(), &mut live, ops, false);
        assert_eq!(live, vec![v(2, 0, None, "b"), next]);
    }

    #[test]
    fn begin_snapshot_update_rebases_and_identity_follows() {
        let mut rows = vec![v(5, 2, None, "f")];
        let old = v(5, 2, None, "f");
        let rebased = v(5, 4, None, "f");
        let ended = v(5, 4, Some(6), "f");
        // the second update names the rebased version, so it must find it
        apply_to(
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
        apply_to(&versioned(), &mut rows, [RowOp::Delete(&target)], true);
        assert_eq!(rows, vec![v(1, 2, None, "a2"), v(2, 0, None, "b")]);
        // deleting something that is not there changes nothing (translation refuses it later)
        let ghost = v(9, 0, None, "x");
        apply_to(&versioned(), &mut rows, [RowOp::Delete(&ghost)], true);
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
        apply_to(
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
        apply_to(
            &kind,
            &mut rows,
            [RowOp::Insert(&a), RowOp::Delete(&a)],
            false,
        );
        assert!(rows.is_empty());
        let mut rows = vec![a.clone()];
        apply_to(
            &kind,
            &mut rows,
            [RowOp::Delete(&a), RowOp::Insert(&b)],
            false,
        );
        assert_eq!(rows, vec![b.clone()]);
        let mut rows = vec![a.clone()];
        apply_to(
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
        apply_to(&kind, &mut rows, [RowOp::Update { old: &r, new: &n }], true);
        assert_eq!(rows, vec![n.clone(), vec![Cell::Int(2)], r.clone()]);
        apply_to(
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
        apply_to(&kind, &mut rows, dels.iter().map(RowOp::Delete), false);
        assert_eq!(rows.len(), 10_000);
        assert!(rows.iter().all(|r| r[0].as_int().unwrap() % 2 == 1));
    }

    #[test]
    fn snapshot_and_inline_identities() {
        let snap = Kind::Snapshot(SnapshotHalf::Snapshot);
        let mut rows = vec![
            vec![Cell::Int(0), Cell::Text("t0".into())],
            vec![Cell::Int(1), Cell::Text("t1".into())],
        ];
        let del = vec![Cell::Int(0), Cell::Null];
        apply_to(&snap, &mut rows, [RowOp::Delete(&del)], true);
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
        apply_to(
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

    /// The overlay as a plain list walk by `catalog::identity`, to check [`apply`] against.
    fn reference(kind: &Kind, rows: &[Row], ops: &[RowOp<'_>], need_history: bool) -> Vec<Row> {
        let id = |r: &Row| crate::catalog::identity(kind, r);
        let mut slots: Vec<Option<Row>> = rows.iter().cloned().map(Some).collect();
        for op in ops {
            match op {
                RowOp::Insert(row) => slots.push(Some((*row).clone())),
                RowOp::Update { old, new } | RowOp::Delete(old @ new) => {
                    let want = id(old);
                    let Some(i) = slots
                        .iter()
                        .position(|s| s.as_ref().is_some_and(|r| id(r) == want))
                    else {
                        continue;
                    };
                    slots[i] = match op {
                        RowOp::Delete(_) => None,
                        _ => Some((*new).clone()),
                    };
                }
            }
        }
        slots
            .into_iter()
            .flatten()
            .filter(|r| need_history || !is_ended(kind, r))
            .collect()
    }

    /// A xorshift generator: the same sequence every run.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }

        fn cell(&mut self, text: bool) -> Cell {
            match self.below(6) {
                0 => Cell::Null,
                v if text => Cell::Text(format!("k{v}")),
                v => Cell::Int(v as i64),
            }
        }

        /// (key, begin, end, payload); small domains so identities collide and repeat
        fn row(&mut self, text_key: bool) -> Row {
            let end = if self.below(2) == 0 {
                Cell::Null
            } else {
                self.cell(false)
            };
            vec![self.cell(text_key), self.cell(false), end, self.cell(true)]
        }
    }

    #[test]
    fn agrees_with_a_list_walk_over_random_operations() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let kinds = [
            versioned(),
            Kind::Unversioned { key: vec![0] },
            Kind::Snapshot(SnapshotHalf::Snapshot),
            Kind::Inline,
        ];
        for round in 0..400 {
            let kind = &kinds[round % kinds.len()];
            let text_key = round % 3 == 0; // a key that is not an integer column
            let committed: Vec<Row> = (0..rng.below(12)).map(|_| rng.row(text_key)).collect();
            let staged: Vec<(u64, Row, Row)> = (0..rng.below(16))
                .map(|_| (rng.below(3), rng.row(text_key), rng.row(text_key)))
                .collect();
            // old rows named by updates and deletes are often committed or staged ones
            let pool: Vec<Row> = committed
                .iter()
                .chain(staged.iter().map(|(_, _, n)| n))
                .cloned()
                .collect();
            let olds: Vec<Row> = staged
                .iter()
                .map(|(_, r, _)| {
                    if pool.is_empty() || rng.below(4) == 0 {
                        r.clone()
                    } else {
                        pool[rng.below(pool.len() as u64) as usize].clone()
                    }
                })
                .collect();
            let ops: Vec<RowOp<'_>> = staged
                .iter()
                .zip(&olds)
                .map(|((what, _, new), old)| match what {
                    0 => RowOp::Insert(new),
                    1 => RowOp::Update { old, new },
                    _ => RowOp::Delete(old),
                })
                .collect();
            for need_history in [true, false] {
                // as rows, and as encoded records (the image's form, read by column)
                let set = if round % 2 == 0 {
                    RowSet::new(committed.clone())
                } else {
                    RowSet::encoded(
                        committed
                            .iter()
                            .map(|r| bytes::Bytes::from(crate::cell::encode_row(r)))
                            .collect(),
                    )
                };
                assert_eq!(
                    apply(kind, &set, ops.iter().copied(), need_history),
                    reference(kind, &committed, &ops, need_history),
                    "round {round}, {kind:?}, need_history {need_history}"
                );
            }
        }
    }
}
