//! The rows a scan's pushed-down integer filters choose from a row set, and what is known of
//! them.
//!
//! DuckLake repeats its catalog queries with the same literals for as long as the lake's head
//! stays (`table_id = 35 AND 150 >= begin_snapshot ...` in every planning of a query over one
//! table), so a row set keeps the selections asked of it: the second transaction pinned to the
//! same image finds the positions, and the integer bounds the planner asked of them, already
//! computed. A row set is immutable, so a kept selection never goes stale; it lives as long as
//! the row set (one image version of one table, or one transaction's overlay).

use crate::image::{IntBounds, RowSet};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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

    /// The bounds of integer `column` of `rows` (the set this selection was made from) over
    /// the selected rows; `None` when a cell there is not an integer.
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
/// Bounded: DuckLake's literals change with each new snapshot, and a long-lived image of a
/// table no commit touches would otherwise keep every old query's positions. When a new entry
/// would pass [`Kept::MAX_ENTRIES`] entries, or hold more positions in all than
/// [`Kept::MAX_POSITIONS_PER_ROW`] times the set's rows (plus a floor for small sets), the
/// kept selections are dropped and the new one starts afresh: a miss costs one computation.
#[derive(Default)]
pub(crate) struct Kept {
    entries: HashMap<Vec<Narrowing>, Option<Arc<Selection>>>,
    positions: usize,
}

impl Kept {
    const MAX_ENTRIES: usize = 64;
    const MAX_POSITIONS_PER_ROW: usize = 4;
    const MIN_POSITIONS: usize = 64 * 1024;

    pub(crate) fn get(&self, narrowings: &[Narrowing]) -> Option<Option<Arc<Selection>>> {
        self.entries.get(narrowings).cloned()
    }

    pub(crate) fn insert(
        &mut self,
        rows: usize,
        narrowings: Vec<Narrowing>,
        selection: Option<Arc<Selection>>,
    ) {
        let adds = selection.as_ref().map_or(0, |s| s.positions.len());
        let budget = rows
            .saturating_mul(Self::MAX_POSITIONS_PER_ROW)
            .max(Self::MIN_POSITIONS);
        if self.entries.len() >= Self::MAX_ENTRIES || self.positions + adds > budget {
            self.entries.clear();
            self.positions = 0;
        }
        if adds > budget {
            return;
        }
        self.positions += adds;
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
    }

    #[test]
    fn kept_selections_are_bounded_in_number_and_in_positions() {
        let rows = set(100);
        for v in 0..(Kept::MAX_ENTRIES as i64 + 10) {
            let s = rows.select(&[Narrowing::In {
                column: 1,
                values: vec![v],
            }]);
            assert_eq!(
                s.map(|s| s.positions.clone()),
                Some(if v < 100 { vec![v as u32] } else { vec![] })
            );
            assert!(rows.selections_kept() <= Kept::MAX_ENTRIES);
        }
        let mut kept = Kept::default();
        let sized = |n: usize| Some(Arc::new(Selection::new((0..n as u32).collect())));
        let key = |v: i64| {
            vec![Narrowing::In {
                column: 0,
                values: vec![v],
            }]
        };
        // a selection over the budget by itself is not kept
        kept.insert(10, key(0), sized(Kept::MIN_POSITIONS + 1));
        assert_eq!(kept.len(), 0);
        // selections within the budget are; the one that would pass it starts afresh
        kept.insert(10, key(1), sized(Kept::MIN_POSITIONS / 2));
        kept.insert(10, key(2), sized(Kept::MIN_POSITIONS / 2));
        assert_eq!(kept.len(), 2);
        kept.insert(10, key(3), sized(1));
        assert_eq!(kept.len(), 1);
        assert!(kept.get(&key(3)).is_some() && kept.get(&key(1)).is_none());
    }
}
