//! A row set: the rows of one table a scan serves, in order, with the integer indexes, column
//! copies and bounds built on demand from them, and the selections pushed-down filters make of
//! them (kept for the next scan asking the same).
//!
//! Selections: DuckLake repeats its catalog queries with the same literals for as long as the
//! lake's head stays (`table_id = 35 AND 150 >= begin_snapshot ...` in every planning of a query
//! over one table), so a row set keeps the selections asked of it: the second transaction pinned
//! to the same image finds the positions, and the integer bounds the planner asked of them,
//! already computed. A row set is immutable, so a kept selection never goes stale; it lives as
//! long as the row set (one image version of one table, one transaction's overlay, or the one
//! empty set the images of a lake serve for every table they hold no record of).

use crate::cell::{cell_at, decode_row, Cell, CellRef, Row};
use bytes::Bytes;
use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex, OnceLock};

/// Rows in the order a scan serves them, with integer indexes built on demand.
///
/// A row set served from the image's records keeps them encoded (sharing the records' bytes)
/// and decodes a row when it is first read: a scan narrowed by an index decodes only the rows
/// it emits, and the indexes are built from the one column they need. Every record was checked
/// whole when the set was built, so a later decode cannot fail.
pub struct RowSet {
    /// Every row decoded: given at construction, or built when something needs them all.
    decoded: OnceLock<Vec<Row>>,
    /// The rows as records, each decoded on first read; empty for a set built from rows.
    encoded: Vec<(Bytes, OnceLock<Row>)>,
    /// column -> (value -> positions in `rows`, ascending), built from `ints`;
    /// `None` for a column with cells that are not integers.
    index: Mutex<HashMap<usize, Option<Arc<HashMap<i64, Vec<u32>>>>>>,
    /// column -> (value, position) sorted by value, for ranges; `None` as above.
    sorted: Mutex<HashMap<usize, Option<Arc<Vec<(i64, u32)>>>>>,
    /// column -> its cells as integers, in row order: what the indexes are built from, and
    /// what scans emit whole vectors from; `None` as above.
    ints: Mutex<HashMap<usize, Option<Arc<IntColumn>>>>,
    /// column -> the bounds of every row's cell; `None` as above.
    bounds: Mutex<HashMap<usize, Option<IntBounds>>>,
    /// The selections pushed-down filters made of these rows, kept for the next scan asking
    /// the same (bounded, see [`crate::rowset::Kept`]).
    selections: Mutex<crate::rowset::Kept>,
}

/// What the rows of an integer column hold: the least and greatest value (`None` when every
/// row holds NULL, or there is no row) and whether a row holds NULL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntBounds {
    pub range: Option<(i64, i64)>,
    pub has_null: bool,
}

impl IntBounds {
    const NONE: IntBounds = IntBounds {
        range: None,
        has_null: false,
    };

    fn add(&mut self, value: i64, valid: u8) {
        if valid == 0 {
            self.has_null = true;
            return;
        }
        self.range = Some(match self.range {
            None => (value, value),
            Some((lo, hi)) => (lo.min(value), hi.max(value)),
        });
    }
}

/// One integer column of a [`RowSet`]: `valid[i]` is 0 where row `i` holds NULL. The indexes
/// are built from it.
pub struct IntColumn {
    pub values: Vec<i64>,
    pub valid: Vec<u8>,
    /// How many of `valid`'s flags are 0 (NULL cells): a scan of a column with none, or with
    /// nothing else, need not count its vectors' NULLs.
    pub nulls: usize,
}

impl IntColumn {
    /// The bounds of the rows at `rows`; a position past the end counts as NULL.
    fn bounds(&self, rows: impl Iterator<Item = usize>) -> IntBounds {
        let mut b = IntBounds::NONE;
        for r in rows {
            match (self.values.get(r), self.valid.get(r)) {
                (Some(v), Some(ok)) => b.add(*v, *ok),
                _ => b.add(0, 0),
            }
        }
        b
    }

    /// (position, value) of every row that is not NULL, in row order.
    fn present(&self) -> impl Iterator<Item = (u32, i64)> + '_ {
        self.values
            .iter()
            .zip(&self.valid)
            .enumerate()
            .filter(|(_, (_, valid))| **valid != 0)
            .map(|(i, (v, _))| (i as u32, *v))
    }
}

/// Every row, decoded (for the callers that read them all: overlays, tests).
impl Deref for RowSet {
    type Target = Vec<Row>;
    fn deref(&self) -> &Vec<Row> {
        self.decoded.get_or_init(|| {
            // (rows already read are copied; the others are decoded here, not cached twice)
            self.encoded
                .iter()
                .map(|(record, row)| match row.get() {
                    Some(r) => r.clone(),
                    None => decode_row(record).unwrap_or_default(),
                })
                .collect()
        })
    }
}

impl std::fmt::Debug for RowSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl RowSet {
    pub fn new(rows: Vec<Row>) -> RowSet {
        RowSet::with(OnceLock::from(rows), Vec::new())
    }

    /// Rows kept as the records that hold them, in this order. Each record must have passed
    /// [`crate::cell::walk_row`].
    pub(crate) fn encoded(records: Vec<Bytes>) -> RowSet {
        RowSet::with(
            OnceLock::new(),
            records.into_iter().map(|r| (r, OnceLock::new())).collect(),
        )
    }

    fn with(decoded: OnceLock<Vec<Row>>, encoded: Vec<(Bytes, OnceLock<Row>)>) -> RowSet {
        RowSet {
            decoded,
            encoded,
            index: Mutex::new(HashMap::new()),
            sorted: Mutex::new(HashMap::new()),
            ints: Mutex::new(HashMap::new()),
            bounds: Mutex::new(HashMap::new()),
            selections: Mutex::new(Default::default()),
        }
    }

    pub fn len(&self) -> usize {
        match self.decoded.get() {
            Some(rows) => rows.len(),
            None => self.encoded.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i`, decoded on first read.
    pub fn get(&self, i: usize) -> Option<&Row> {
        if let Some(rows) = self.decoded.get() {
            return rows.get(i);
        }
        let (record, row) = self.encoded.get(i)?;
        // checked when the set was built: a record that fails now is a bug, served as no row
        Some(row.get_or_init(|| decode_row(record).unwrap_or_default()))
    }

    /// The positions of the rows whose `column` holds one of `values`, ascending: exactly the
    /// rows `column = v` / `column IN (values)` admits (a NULL cell is in none). The first call
    /// for a column walks the rows once and keeps the index; later calls are lookups.
    pub fn positions(&self, column: usize, values: &[i64]) -> Vec<u32> {
        let index = {
            let mut cache = self.index.lock().unwrap_or_else(|p| p.into_inner());
            cache
                .entry(column)
                .or_insert_with(|| {
                    let mut idx: HashMap<i64, Vec<u32>> = HashMap::new();
                    for (i, v) in self.int_column(column)?.present() {
                        idx.entry(v).or_default().push(i);
                    }
                    Some(Arc::new(idx))
                })
                .clone()
        };
        let Some(index) = index else {
            // a column holding cells other than integers: only its integer cells can be equal
            return self.positions_where(column, |v| values.contains(&v));
        };
        let mut out: Vec<u32> = Vec::new();
        for v in values {
            if let Some(p) = index.get(v) {
                out.extend_from_slice(p);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The rows every one of `narrowings` admits (`None`: every row), computed on the first ask
    /// and kept for the next scan of this set that asks the same.
    pub fn select(&self, narrowings: &[Narrowing]) -> Option<Arc<Selection>> {
        if narrowings.is_empty() {
            return None;
        }
        let kept = || self.selections.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(selection) = kept().get(narrowings) {
            return selection;
        }
        let selection = crate::rowset::compute(self, narrowings);
        kept().insert(self.len(), narrowings.to_vec(), selection.clone());
        selection
    }

    /// Whether every row is decoded, and how many records were decoded one by one (tests).
    #[cfg(test)]
    pub(crate) fn decoded_for_test(&self) -> (bool, usize) {
        let one_by_one = self.encoded.iter().filter(|(_, r)| r.get().is_some());
        (self.decoded.get().is_some(), one_by_one.count())
    }

    #[cfg(test)]
    pub(crate) fn selections_kept(&self) -> usize {
        self.selections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// The positions of the rows whose `column` holds an integer `keep` admits, by walking them
    /// (for a column that holds other cells too, which no index covers).
    fn positions_where(&self, column: usize, keep: impl Fn(i64) -> bool) -> Vec<u32> {
        (0..self.len())
            .filter(|&i| matches!(self.get(i).and_then(|r| r.get(column)), Some(Cell::Int(v)) if keep(*v)))
            .map(|i| i as u32)
            .collect()
    }
}

impl RowSet {
    /// The bounds of integer column `column` over the rows at `positions` (every row when
    /// `None`; computed once per column then); `None` when a cell there is not an integer.
    pub fn int_bounds(&self, column: usize, positions: Option<&[u32]>) -> Option<IntBounds> {
        let Some(positions) = positions else {
            if let Some(b) = self
                .bounds
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&column)
            {
                return *b;
            }
            let bounds = self.int_column(column).map(|c| c.bounds(0..c.values.len()));
            self.bounds
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(column, bounds);
            return bounds;
        };
        let built = self
            .ints
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&column)
            .cloned()
            .flatten();
        if built.is_none() && self.few(positions.len()) {
            // a few rows and no integer column built yet (by an earlier scan of this image):
            // read their cells rather than build the whole column
            let mut b = IntBounds::NONE;
            for &p in positions {
                match self.get(p as usize).and_then(|r| r.get(column)) {
                    Some(Cell::Int(v)) => b.add(*v, 1),
                    Some(Cell::Null) | None => b.add(0, 0),
                    Some(_) => return None,
                }
            }
            return Some(b);
        }
        let c = match built {
            Some(c) => c,
            None => self.int_column(column)?,
        };
        Some(c.bounds(positions.iter().map(|&p| p as usize)))
    }

    /// Whether `selected` of this set's rows are few enough that reading their cells one by
    /// one beats building (or reading) the whole integer column.
    pub fn few(&self, selected: usize) -> bool {
        selected.saturating_mul(4) < self.len()
    }

    /// `column` as integers in row order, built on first use; `None` when it holds cells other
    /// than integers and NULLs.
    pub fn int_column(&self, column: usize) -> Option<Arc<IntColumn>> {
        let mut cache = self.ints.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .entry(column)
            .or_insert_with(|| {
                let mut col = IntColumn {
                    values: Vec::with_capacity(self.len()),
                    valid: Vec::with_capacity(self.len()),
                    nulls: 0,
                };
                let mut push = |cell: Option<CellRef<'_>>| match cell {
                    Some(CellRef::Int(v)) => {
                        col.values.push(v);
                        col.valid.push(1);
                        true
                    }
                    Some(CellRef::Null) | None => {
                        col.values.push(0);
                        col.valid.push(0);
                        col.nulls += 1;
                        true
                    }
                    Some(_) => false,
                };
                let all_ints = match self.decoded.get() {
                    Some(rows) => rows.iter().all(|r| push(r.get(column).map(Cell::as_ref))),
                    // only the column's cell of each record (checked whole when served)
                    None => self
                        .encoded
                        .iter()
                        .all(|(record, _)| cell_at(record, column).is_ok_and(&mut push)),
                };
                all_ints.then(|| Arc::new(col))
            })
            .clone()
    }

    /// The positions of the rows whose `column` holds a value in `lo..=hi`, ascending: exactly
    /// the rows the range admits (NULLs are in no range); `None` when that is every row.
    pub fn positions_between(&self, column: usize, lo: i64, hi: i64) -> Option<Vec<u32>> {
        let sorted = {
            let mut cache = self.sorted.lock().unwrap_or_else(|p| p.into_inner());
            cache
                .entry(column)
                .or_insert_with(|| {
                    let mut values: Vec<(i64, u32)> = self
                        .int_column(column)?
                        .present()
                        .map(|(i, v)| (v, i))
                        .collect();
                    values.sort_unstable();
                    Some(Arc::new(values))
                })
                .clone()
        };
        let Some(sorted) = sorted else {
            // a column holding cells other than integers: only its integer cells are in range
            let out = self.positions_where(column, |v| (lo..=hi).contains(&v));
            return (out.len() < self.len()).then_some(out);
        };
        if lo > hi {
            return Some(Vec::new());
        }
        let start = sorted.partition_point(|(v, _)| *v < lo);
        let end = sorted.partition_point(|(v, _)| *v <= hi);
        if end - start == self.len() {
            return None;
        }
        let mut out: Vec<u32> = sorted[start..end].iter().map(|(_, p)| *p).collect();
        out.sort_unstable();
        Some(out)
    }
}

/// One pushed-down filter the scan applies in DuckDB's stead.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Narrowing {
    /// `column = v` or `column IN (values)`: a NULL cell is in none.
    In { column: usize, values: Vec<i64> },
    /// `column BETWEEN lo AND hi` (inclusive): a NULL cell is in no range.
    Between { column: usize, lo: i64, hi: i64 },
}

/// The positions a narrowed scan emits (ascending), and the bounds of its integer columns over
/// them, each computed once for every scan and planning callback that reads this selection.
pub struct Selection {
    pub positions: Vec<u32>,
    bounds: Mutex<HashMap<usize, Option<IntBounds>>>,
}

impl Selection {
    fn new(positions: Vec<u32>) -> Selection {
        Selection {
            positions,
            bounds: Mutex::new(HashMap::new()),
        }
    }

    /// The bounds of integer `column` of `rows` over the selected rows; `None` when a cell
    /// there is not an integer. `rows` must be the set this selection was made from: the
    /// bounds are kept, for every transaction reading the selection.
    pub fn int_bounds(&self, rows: &RowSet, column: usize) -> Option<IntBounds> {
        let mut kept = self.bounds.lock().unwrap_or_else(|p| p.into_inner());
        *kept
            .entry(column)
            .or_insert_with(|| rows.int_bounds(column, Some(&self.positions)))
    }
}

/// The selections a row set keeps, by the filters that made them. `None` is a selection of
/// every row (the filters reject none).
///
/// Bounded: DuckLake's literals change with each new snapshot, and the rows of a table no
/// commit touches (shared by the image versions that follow) would otherwise keep every old
/// query's positions. What an entry holds is counted as its positions plus the values of its
/// `IN` lists; when a new entry would pass [`Kept::MAX_ENTRIES`] entries, or more than
/// [`Kept::MAX_HELD_PER_ROW`] times the set's rows held in all (at least
/// [`Kept::MIN_HELD`]), the kept selections are dropped and the new one starts afresh: a miss
/// costs one computation. An entry over that budget by itself is not kept.
#[derive(Default)]
pub(crate) struct Kept {
    entries: HashMap<Vec<Narrowing>, Option<Arc<Selection>>>,
    held: usize,
}

impl Kept {
    const MAX_ENTRIES: usize = 64;
    const MAX_HELD_PER_ROW: usize = 4;
    const MIN_HELD: usize = 64 * 1024;

    pub(crate) fn get(&self, narrowings: &[Narrowing]) -> Option<Option<Arc<Selection>>> {
        self.entries.get(narrowings).cloned()
    }

    pub(crate) fn insert(
        &mut self,
        rows: usize,
        narrowings: Vec<Narrowing>,
        selection: Option<Arc<Selection>>,
    ) {
        if self.entries.contains_key(&narrowings) {
            // (another scan computed the same meanwhile: it is kept already)
            return;
        }
        let values: usize = narrowings
            .iter()
            .map(|n| match n {
                Narrowing::In { values, .. } => values.len(),
                Narrowing::Between { .. } => 0,
            })
            .sum();
        let adds = selection.as_ref().map_or(0, |s| s.positions.len()) + values;
        let budget = rows
            .saturating_mul(Self::MAX_HELD_PER_ROW)
            .max(Self::MIN_HELD);
        if self.entries.len() >= Self::MAX_ENTRIES || self.held + adds > budget {
            self.entries.clear();
            self.held = 0;
        }
        if adds > budget {
            return;
        }
        self.held += adds;
        self.entries.insert(narrowings, selection);
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The rows of `rows` that every one of `narrowings` admits: `None` when that is every row.
pub(crate) fn compute(rows: &RowSet, narrowings: &[Narrowing]) -> Option<Arc<Selection>> {
    let mut chosen: Option<Vec<u32>> = None;
    for n in narrowings {
        let next = match n {
            Narrowing::In { column, values } => Some(rows.positions(*column, values)),
            Narrowing::Between { column, lo, hi } => rows.positions_between(*column, *lo, *hi),
        };
        chosen = match (chosen, next) {
            (before, None) => before,
            (None, Some(next)) => Some(next),
            (Some(before), Some(next)) => Some(intersect(&before, &next)),
        };
    }
    chosen.map(|positions| Arc::new(Selection::new(positions)))
}

/// The positions in both ascending lists, ascending.
fn intersect(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (mut out, mut j) = (Vec::new(), 0);
    for &p in a {
        while j < b.len() && b[j] < p {
            j += 1;
        }
        if j < b.len() && b[j] == p {
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::Cell;

    /// Row i: (i % 10, i, NULL for every third row else i % 5).
    fn set(n: i64) -> RowSet {
        RowSet::new(
            (0..n)
                .map(|i| {
                    let third = if i % 3 == 0 {
                        Cell::Null
                    } else {
                        Cell::Int(i % 5)
                    };
                    vec![Cell::Int(i % 10), Cell::Int(i), third]
                })
                .collect(),
        )
    }

    #[test]
    fn a_selection_is_what_its_filters_admit_and_is_kept_for_the_next_ask() {
        let rows = set(1000);
        let filters = vec![
            Narrowing::In {
                column: 0,
                values: vec![4, 3],
            },
            Narrowing::Between {
                column: 1,
                lo: 100,
                hi: 500,
            },
            Narrowing::In {
                column: 2,
                values: vec![3, 4],
            },
        ];
        let want: Vec<u32> = (0..1000_i64)
            .filter(|i| [3, 4].contains(&(i % 10)) && (100..=500).contains(i))
            .filter(|i| i % 3 != 0 && [3, 4].contains(&(i % 5)))
            .map(|i| i as u32)
            .collect();
        assert!(!want.is_empty());
        let first = rows.select(&filters).expect("a narrowing selection");
        assert_eq!(first.positions, want);
        let again = rows.select(&filters).expect("a narrowing selection");
        assert!(
            Arc::ptr_eq(&first, &again),
            "the second ask is served the kept selection"
        );
        assert_eq!(rows.selections_kept(), 1);
        // the bounds are over the selected rows only, and kept with the selection
        let bounds = IntBounds {
            range: Some((want[0] as i64, *want.last().unwrap() as i64)),
            has_null: false,
        };
        assert_eq!(first.int_bounds(&rows, 1), Some(bounds));
        assert!(
            again.bounds.lock().unwrap().contains_key(&1),
            "the bounds are kept"
        );
        assert_eq!(again.int_bounds(&rows, 1), Some(bounds));
        // other filters, in another order, are another selection
        let reordered: Vec<Narrowing> = filters.iter().rev().cloned().collect();
        assert_eq!(rows.select(&reordered).unwrap().positions, want);
        assert_eq!(rows.selections_kept(), 2);
        // a range admitting every row selects them all; a filter admitting none selects none
        let all = [Narrowing::Between {
            column: 1,
            lo: i64::MIN,
            hi: i64::MAX,
        }];
        assert!(rows.select(&all).is_none());
        let none = [Narrowing::In {
            column: 2,
            values: vec![7],
        }];
        assert!(rows.select(&none).unwrap().positions.is_empty());
        assert!(rows.select(&[]).is_none());
        // a range admitting every row leaves the other filters' selection as it is, in
        // either order; an empty range admits none
        let in_only = [filters[0].clone()];
        let want_in: Vec<u32> = (0..1000).filter(|i| [3, 4].contains(&(i % 10))).collect();
        assert_eq!(rows.select(&in_only).unwrap().positions, want_in);
        for with_all in [
            vec![filters[0].clone(), all[0].clone()],
            vec![all[0].clone(), filters[0].clone()],
        ] {
            assert_eq!(rows.select(&with_all).unwrap().positions, want_in);
        }
        let empty = [Narrowing::Between {
            column: 1,
            lo: 5,
            hi: 4,
        }];
        assert!(rows.select(&empty).unwrap().positions.is_empty());
    }

    #[test]
    fn kept_selections_are_bounded_in_number_and_in_what_they_hold() {
        let rows = set(100);
        let one = |v: i64| {
            [Narrowing::In {
                column: 1,
                values: vec![v],
            }]
        };
        for v in 0..Kept::MAX_ENTRIES as i64 {
            let s = rows.select(&one(v));
            assert_eq!(s.map(|s| s.positions.clone()), Some(vec![v as u32]));
            assert_eq!(rows.selections_kept(), v as usize + 1);
        }
        // asking one kept again keeps them all; the next new one starts afresh
        rows.select(&one(0));
        assert_eq!(rows.selections_kept(), Kept::MAX_ENTRIES);
        assert_eq!(
            rows.select(&one(1000)).unwrap().positions,
            Vec::<u32>::new()
        );
        assert_eq!(rows.selections_kept(), 1);

        let mut kept = Kept::default();
        let sized = |n: usize| Some(Arc::new(Selection::new((0..n as u32).collect())));
        let key = |v: i64| {
            vec![Narrowing::In {
                column: 0,
                values: vec![v],
            }]
        };
        // (each key below holds one IN value besides its positions)
        // a selection over the budget by itself is not kept
        kept.insert(10, key(0), sized(Kept::MIN_HELD));
        assert_eq!(kept.len(), 0);
        // selections within the budget are; the one that would pass it starts afresh
        kept.insert(10, key(1), sized(Kept::MIN_HELD / 2 - 1));
        kept.insert(10, key(2), sized(Kept::MIN_HELD / 2 - 1));
        assert_eq!(kept.len(), 2);
        kept.insert(10, key(2), sized(Kept::MIN_HELD / 2 - 1));
        assert_eq!(kept.len(), 2, "a key kept already changes nothing");
        kept.insert(10, key(3), sized(1));
        assert_eq!(kept.len(), 1);
        assert!(kept.get(&key(3)).is_some() && kept.get(&key(1)).is_none());
        // an IN list's values count: a key with more values than the budget is not kept
        let long = vec![Narrowing::In {
            column: 0,
            values: (0..=Kept::MIN_HELD as i64).collect(),
        }];
        kept.insert(10, long.clone(), None);
        assert!(kept.get(&long).is_none());
    }

    #[test]
    fn int_bounds_hold_exactly_the_selected_rows_values() {
        // column 0: i; column 1: NULL on every third row; column 2: all NULL; column 3: text
        let rows: Vec<Row> = (0..40i64)
            .map(|i| {
                vec![
                    Cell::Int(i * 10 - 100),
                    if i % 3 == 0 { Cell::Null } else { Cell::Int(i) },
                    Cell::Null,
                    Cell::Text(format!("r{i}")),
                ]
            })
            .collect();
        let records: Vec<Bytes> = rows
            .iter()
            .map(|r| Bytes::from(crate::cell::encode_row(r)))
            .collect();
        let sets = [RowSet::new(rows.clone()), RowSet::encoded(records)];
        let bounds = |range, has_null| IntBounds { range, has_null };
        let sparse = |set: &RowSet| {
            assert_eq!(
                set.int_bounds(0, Some(&[5, 7])),
                Some(bounds(Some((-50, -30)), false))
            );
            assert_eq!(set.int_bounds(1, Some(&[3, 6])), Some(bounds(None, true)));
            // a position past the last row holds no value: it counts as NULL
            assert_eq!(
                set.int_bounds(0, Some(&[5, 99])),
                Some(bounds(Some((-50, -50)), true))
            );
        };
        for set in &sets {
            // a sparse selection before any column is built: read row by row
            sparse(set);
            assert!(set.ints.lock().unwrap().is_empty());
            // every row (twice: the second from the cache)
            for _ in 0..2 {
                assert_eq!(
                    set.int_bounds(0, None),
                    Some(bounds(Some((-100, 290)), false))
                );
                assert_eq!(set.int_bounds(1, None), Some(bounds(Some((1, 38)), true)));
                assert_eq!(set.int_bounds(2, None), Some(bounds(None, true)));
                assert_eq!(set.int_bounds(3, None), None);
            }
            // the same sparse selection from the columns built meanwhile, and a dense one
            sparse(set);
            let dense: Vec<u32> = (10..35).collect();
            assert_eq!(
                set.int_bounds(0, Some(&dense)),
                Some(bounds(Some((0, 240)), false))
            );
            assert_eq!(
                set.int_bounds(1, Some(&dense)),
                Some(bounds(Some((10, 34)), true))
            );
            assert_eq!(set.int_bounds(3, Some(&dense)), None);
            assert_eq!(set.int_bounds(3, Some(&[1])), None);
            // no row selected: no value, no NULL
            assert_eq!(set.int_bounds(0, Some(&[])), Some(IntBounds::NONE));
        }
    }

    #[test]
    fn positions_come_from_an_index() {
        let rows: Vec<Row> = (0..10)
            .map(|i| vec![Cell::Int(i % 3), Cell::Int(i)])
            .collect();
        let set = RowSet::new(rows);
        assert_eq!(set.positions(0, &[1]), vec![1, 4, 7]);
        assert_eq!(set.positions(0, &[2, 0, 2]), vec![0, 2, 3, 5, 6, 8, 9]);
        assert_eq!(set.positions(0, &[7]), Vec::<u32>::new());
        // a column that is not all integers has no index, and is still narrowed exactly (the
        // scan applies the filter in DuckDB's stead): only its integer cells can pass
        let mixed = RowSet::new(vec![
            vec![Cell::Int(1)],
            vec![Cell::Text("1".into())],
            vec![Cell::Null],
            vec![Cell::Int(6)],
        ]);
        assert_eq!(mixed.positions(0, &[1]), vec![0]);
        assert_eq!(mixed.positions(0, &[1, 6]), vec![0, 3]);
        assert_eq!(mixed.positions_between(0, 5, 9), Some(vec![3]));
        assert_eq!(
            mixed.positions_between(0, i64::MIN, i64::MAX),
            Some(vec![0, 3])
        );
        let ints = RowSet::new(vec![vec![Cell::Int(1)], vec![Cell::Int(2)]]);
        assert_eq!(ints.positions_between(0, 1, 2), None);
        // ranges: inclusive bounds, NULLs in none, positions ascending
        let mut rows: Vec<Row> = (0..10).rev().map(|i| vec![Cell::Int(i)]).collect();
        rows.push(vec![Cell::Null]);
        let set = RowSet::new(rows);
        assert_eq!(set.positions_between(0, 7, i64::MAX), Some(vec![0, 1, 2]));
        assert_eq!(set.positions_between(0, i64::MIN, 1), Some(vec![8, 9]));
        assert_eq!(set.positions_between(0, 3, 3), Some(vec![6]));
        assert_eq!(set.positions_between(0, 4, 3), Some(vec![]));
        // a range holding every row narrows nothing; one NULL row keeps it a narrowing
        let all = RowSet::new((0..4).map(|i| vec![Cell::Int(i)]).collect());
        assert_eq!(all.positions_between(0, 0, 3), None);
        assert_eq!(set.positions_between(0, 0, 9), Some((0..10).collect()));
    }
}
