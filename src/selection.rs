//! The rows a scan's pushed-down integer filters choose from a row set, and what is known of
//! them.
//!
//! DuckLake repeats its catalog queries with the same literals for as long as the lake's head
//! stays (`table_id = 35 AND 150 >= begin_snapshot ...` in every planning of a query over one
//! table), so a row set keeps the selections asked of it: the second transaction pinned to the
//! same image finds the positions, and the integer bounds the planner asked of them, already
//! computed. A row set is immutable, so a kept selection never goes stale; it lives as long as
//! the row set (one image version of one table, one transaction's overlay, or the one empty set
//! the images of a lake serve for every table they hold no record of).

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
}
