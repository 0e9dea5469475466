//! One scan of a table in one transaction (RFC 0009, "Scans"). DuckDB pushes its filters down
//! as neutral predicates; this module decides which of them the scan applies through the rows'
//! indexes (DuckDB then drops them), whether the scan must read ended versions (history), and
//! which rows it emits. The rows are kept: DuckDB's planning callbacks (cardinality, statistics,
//! partition statistics) and the scan itself all read the same ones.

use std::sync::{Arc, Mutex};

use crate::catalog::TableDef;
use crate::cell::Cell;
use crate::error::{Error, Result};
use crate::rowset::{IntBounds, Narrowing, Selection};
use crate::serialized;
use crate::txn::{rowid, Materialized, Stamp, Transaction};

/// How a predicate compares its column with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
    /// `column IS NULL` (the value is ignored).
    IsNull,
}

/// One comparison of a table column with a constant, as DuckDB bound it (the column on the
/// left). A filter is the conjunction of its clauses; a clause the disjunction of its
/// predicates: `c IN (1, 2)` is one clause of two `Eq`, `c BETWEEN 1 AND 5` two clauses.
#[derive(Debug, Clone)]
pub struct Predicate {
    /// The filter's place in the list DuckDB pushed down.
    pub filter: usize,
    pub clause: usize,
    /// The column's index in the table.
    pub column: usize,
    pub op: Op,
    pub value: Cell,
}

/// What DuckDB is told after a pushdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushdown {
    /// For each filter, whether the scan applies it exactly (DuckDB drops it and does not
    /// evaluate it again).
    pub applied: Vec<bool>,
    /// The scan emits no row: DuckDB is handed a constant FALSE filter, which plans the scan
    /// (and a join over it) away as for an empty table of its own.
    pub empty: bool,
}

/// What the filters pushed down so far tell the scan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Filters {
    /// Applied exactly, through the rows' indexes (each recorded once: DuckDB pushes down more
    /// than once per query, and a filter put back comes again).
    narrowings: Vec<Narrowing>,
    /// Only rows with `end_snapshot IS NULL` can pass.
    only_live: bool,
    /// Only rows with `end_snapshot` NULL or above this snapshot can pass.
    live_after: Option<i64>,
}

/// What one filter tells the scan.
#[derive(Debug, PartialEq, Eq)]
enum Reading {
    Applied(Vec<Narrowing>),
    OnlyLive,
    LiveAfter(i64),
    Nothing,
}

/// Whether moraine holds a column of this DuckDB type as integer cells (the only columns an
/// index serves).
fn held_as_integer(type_name: &str) -> bool {
    matches!(
        type_name,
        "TINYINT" | "SMALLINT" | "INTEGER" | "BIGINT" | "UTINYINT" | "USMALLINT" | "UINTEGER"
    )
}

/// The committed history holds only versions that ended at or before head: a scan whose filter
/// keeps only live versions, or versions still live after a snapshot at or after head, never
/// needs it. This is how loading the catalog at head stays off the history keyspace (RFC 0002).
const END_SNAPSHOT: &str = "end_snapshot";

/// One filter, as its clauses of predicates.
fn read(def: &TableDef, clauses: &[Vec<&Predicate>]) -> Reading {
    let integer = |p: &Predicate| {
        def.columns
            .get(p.column)
            .is_some_and(|c| held_as_integer(&c.type_name))
    };
    let value = |p: &Predicate| match p.value {
        Cell::Int(v) => Some(v),
        _ => None,
    };
    // every clause a narrowing on an integer column: applied
    let narrowing = |clause: &Vec<&Predicate>| -> Option<Narrowing> {
        let first = clause.first()?;
        if !clause
            .iter()
            .all(|p| integer(p) && p.column == first.column)
        {
            return None;
        }
        if clause.iter().all(|p| p.op == Op::Eq) {
            let values = clause
                .iter()
                .map(|p| value(p))
                .collect::<Option<Vec<_>>>()?;
            return Some(Narrowing::In {
                column: first.column,
                values,
            });
        }
        let [p] = clause.as_slice() else {
            return None;
        };
        let v = value(p)?;
        let (lo, hi) = match p.op {
            Op::Lt => (i64::MIN, v.checked_sub(1)?),
            Op::Le => (i64::MIN, v),
            Op::Gt => (v.checked_add(1)?, i64::MAX),
            Op::Ge => (v, i64::MAX),
            Op::Eq | Op::IsNull => return None,
        };
        Some(Narrowing::Between {
            column: p.column,
            lo,
            hi,
        })
    };
    if let Some(narrowings) = clauses.iter().map(narrowing).collect::<Option<Vec<_>>>() {
        if !narrowings.is_empty() {
            return Reading::Applied(narrowings);
        }
    }
    let end = |p: &Predicate| {
        def.columns
            .get(p.column)
            .is_some_and(|c| c.name == END_SNAPSHOT)
    };
    match clauses {
        [clause] => match clause.as_slice() {
            [p] if p.op == Op::IsNull && end(p) => Reading::OnlyLive,
            // `end_snapshot IS NULL OR end_snapshot > S` (or >=), in either order
            [a, b] => {
                let (null, above) = if a.op == Op::IsNull { (a, b) } else { (b, a) };
                if null.op != Op::IsNull || !end(null) || !end(above) {
                    return Reading::Nothing;
                }
                let floor = match (above.op, value(above)) {
                    (Op::Gt, Some(s)) => s,
                    (Op::Ge, Some(s)) => match s.checked_sub(1) {
                        Some(floor) => floor,
                        None => return Reading::Nothing,
                    },
                    _ => return Reading::Nothing,
                };
                if floor < 0 {
                    Reading::Nothing
                } else {
                    Reading::LiveAfter(floor)
                }
            }
            _ => Reading::Nothing,
        },
        _ => Reading::Nothing,
    }
}

impl Filters {
    /// Takes in what the pushed-down `predicates` of `filters` filters say; returns which the
    /// scan applies.
    fn push(&mut self, def: &TableDef, predicates: &[Predicate], filters: usize) -> Vec<bool> {
        let mut applied = vec![false; filters];
        for (f, applied) in applied.iter_mut().enumerate() {
            let mut clauses: Vec<Vec<&Predicate>> = Vec::new();
            for p in predicates.iter().filter(|p| p.filter == f) {
                if clauses.len() <= p.clause {
                    clauses.resize_with(p.clause + 1, Vec::new);
                }
                clauses[p.clause].push(p);
            }
            if clauses.iter().any(|c| c.is_empty()) {
                continue;
            }
            match read(def, &clauses) {
                Reading::Applied(narrowings) => {
                    for n in narrowings {
                        if !self.narrowings.contains(&n) {
                            self.narrowings.push(n);
                        }
                    }
                    *applied = true;
                }
                Reading::OnlyLive => self.only_live = true,
                // every such filter is a conjunct: the highest floor holds, and a scan told it
                // needs no history is never told otherwise by a later pass
                Reading::LiveAfter(s) => {
                    self.live_after = Some(self.live_after.map_or(s, |floor| floor.max(s)))
                }
                Reading::Nothing => {}
            }
        }
        applied
    }

    /// Whether the scan reads ended versions, given the lake's head snapshot (`None`: the lake
    /// has none yet, so nothing has ended).
    fn need_history(&self, head: impl FnOnce() -> Result<Option<i64>>) -> Result<bool> {
        if self.only_live {
            return Ok(false);
        }
        let Some(floor) = self.live_after else {
            return Ok(true);
        };
        Ok(head()?.is_some_and(|head| floor < head))
    }
}

/// A scan of one table: its pushed-down filters and the rows it emits, kept until the
/// transaction's stamp or the filters change.
pub struct Scan {
    schema: String,
    table: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    filters: Filters,
    kept: Option<(Stamp, Filters, Emitted)>,
}

impl Scan {
    pub fn new(schema: &str, table: &str) -> Scan {
        Scan {
            schema: schema.into(),
            table: table.into(),
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// DuckDB's filter pushdown: `predicates` describe (some of) its `filters` filters; a
    /// filter with no predicate, or one DuckDB could not describe, stays with DuckDB. When the
    /// rows cannot be read, the applied filters stay with DuckDB as well (and the scan, which
    /// still applies them, reports the error).
    pub fn push(
        &self,
        txn: &mut Transaction,
        predicates: &[Predicate],
        filters: usize,
    ) -> Pushdown {
        let nothing = Pushdown {
            applied: vec![false; filters],
            empty: false,
        };
        let Ok(Some(def)) = txn.table(&self.schema, &self.table) else {
            return nothing;
        };
        let applied = self.state().filters.push(&def, predicates, filters);
        if !applied.contains(&true) {
            return Pushdown {
                applied,
                empty: false,
            };
        }
        match self.rows(txn) {
            Ok(rows) => Pushdown {
                applied,
                empty: rows.is_empty(),
            },
            Err(_) => nothing,
        }
    }

    /// The rows the scan emits in `txn`: the table's rows (with its ended versions when the
    /// filters may need them), narrowed by the applied filters.
    pub fn rows(&self, txn: &mut Transaction) -> Result<Emitted> {
        let stamp = txn.stamp();
        let filters = {
            let state = self.state();
            if let Some((s, f, rows)) = &state.kept {
                if *s == stamp && *f == state.filters {
                    return Ok(rows.clone());
                }
            }
            state.filters.clone()
        };
        let lake = &self.schema;
        let history = filters.need_history(|| txn.head_snapshot(lake))?;
        let mat = txn.rows(&self.schema, &self.table, history)?;
        let selection = mat.rows.0.select(&filters.narrowings);
        let rows = Emitted {
            by_index: !filters.narrowings.is_empty(),
            mat,
            table: format!("{}.{}", self.schema, self.table).into(),
            name_at: self.schema.len() + 1,
            selection,
            history,
        };
        self.state().kept = Some((stamp, filters, rows.clone()));
        Ok(rows)
    }
}

/// Where [`Emitted::ints`] writes a vector of integers: DuckDB's 64- or 32-bit integers.
pub enum IntsOut<'a> {
    I64(&'a mut [i64]),
    I32(&'a mut [i32]),
}

impl IntsOut<'_> {
    fn len(&self) -> usize {
        match self {
            IntsOut::I64(v) => v.len(),
            IntsOut::I32(v) => v.len(),
        }
    }

    /// Writes `v` at `i`; false when the vector's type cannot hold it.
    fn set(&mut self, i: usize, v: i64) -> bool {
        match self {
            IntsOut::I64(out) => out[i] = v,
            IntsOut::I32(out) => match i32::try_from(v) {
                Ok(v) => out[i] = v,
                Err(_) => return false,
            },
        }
        true
    }
}

/// The rows one scan emits: a materialization, or the positions the applied filters selected
/// (ascending), which keep their rowids.
#[derive(Clone)]
pub struct Emitted {
    mat: Arc<Materialized>,
    /// `schema.table`, for errors about its cells, and where the table's name starts in it.
    table: Arc<str>,
    name_at: usize,
    /// Shared by every copy, and with the later scans of the same rows that ask the same
    /// ([`crate::rowset::RowSet::select`]).
    selection: Option<Arc<Selection>>,
    /// Whether the rows include ended versions.
    history: bool,
    /// Whether applied filters selected them.
    by_index: bool,
}

impl Emitted {
    pub fn len(&self) -> usize {
        match &self.selection {
            Some(sel) => sel.positions.len(),
            None => self.mat.rows.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn position(&self, index: usize) -> usize {
        match &self.selection {
            Some(sel) => sel.positions.get(index).map_or(usize::MAX, |&p| p as usize),
            None => index,
        }
    }

    /// The rowid of the `index`-th row: it names that row of this materialization.
    pub fn rowid(&self, index: usize) -> i64 {
        rowid(self.mat.id, self.position(index))
    }

    /// The cell at column `col` of the `index`-th row; `None` past the end or the row.
    pub fn cell(&self, index: usize, col: usize) -> Option<&Cell> {
        self.mat
            .rows
            .get(self.position(index))
            .and_then(|r| r.get(col))
    }

    /// Rows `start..start + out.len()` of column `col` as integers, `valid[i]` 0 for a NULL (and
    /// a row past the end): one vector in one call. The cells are integers (`blob_type` 0), or
    /// DuckDB values of the type with that id serialized ([`serialized::integer`]). Returns how
    /// many are NULL; when all are, `out` may be left unwritten (the caller emits a constant
    /// NULL: DuckLake's `end_snapshot` of live rows). `None`, with nothing to rely on written,
    /// when a cell is of another kind or does not fit `out` (the caller reads cell by cell).
    ///
    /// An unnarrowed or densely narrowed scan of integer cells copies from the column the row
    /// set keeps as integers; a sparse selection (an index lookup of a few rows), or serialized
    /// values, are read row by row.
    pub fn ints(
        &self,
        start: usize,
        col: usize,
        blob_type: u8,
        mut out: IntsOut<'_>,
        valid: &mut [u8],
    ) -> Option<usize> {
        let count = out.len();
        let rows = &self.mat.rows.0;
        let sparse = self
            .selection
            .as_ref()
            .is_some_and(|sel| rows.few(sel.positions.len()));
        let column = match &out {
            IntsOut::I64(_) if blob_type == 0 && !sparse => rows.int_column(col),
            _ => None,
        };
        let Some(column) = column else {
            let mut nulls = 0;
            for (i, valid) in valid.iter_mut().enumerate().take(count) {
                let v = match start.checked_add(i).and_then(|r| self.cell(r, col)) {
                    Some(Cell::Int(v)) if blob_type == 0 => *v,
                    Some(Cell::Blob(b)) if blob_type != 0 => serialized::integer(b, blob_type)?,
                    Some(Cell::Null) | None => {
                        *valid = 0;
                        nulls += 1;
                        continue;
                    }
                    Some(_) => return None,
                };
                if !out.set(i, v) {
                    return None;
                }
                *valid = 1;
            }
            return Some(nulls);
        };
        let IntsOut::I64(values) = out else {
            return None;
        };
        match &self.selection {
            None => {
                let len = column.values.len();
                let from = start.min(len);
                let end = start.saturating_add(count).min(len);
                let n = end - from;
                valid[..n].copy_from_slice(&column.valid[from..end]);
                valid[n..count].fill(0);
                // (rows past the end count as NULL)
                let nulls = count - n
                    + match column.nulls {
                        0 => 0,
                        all if all == len => n,
                        _ => nulls_in(&valid[..n]),
                    };
                if nulls < count {
                    values[..n].copy_from_slice(&column.values[from..end]);
                }
                Some(nulls)
            }
            Some(sel) => {
                for i in 0..count {
                    match start
                        .checked_add(i)
                        .and_then(|r| sel.positions.get(r))
                        .map(|&p| p as usize)
                    {
                        Some(p) if p < column.values.len() => {
                            values[i] = column.values[p];
                            valid[i] = column.valid[p];
                        }
                        _ => valid[i] = 0,
                    }
                }
                Some(nulls_in(&valid[..count]))
            }
        }
    }

    /// The bounds of integer column `col` over the emitted rows; `None` when a cell there is
    /// not an integer or NULL.
    pub fn int_bounds(&self, col: usize) -> Option<IntBounds> {
        let rows = &self.mat.rows.0;
        match &self.selection {
            // every row: the row set keeps the bounds
            None => rows.int_bounds(col, None),
            Some(sel) => sel.int_bounds(rows, col),
        }
    }

    /// What EXPLAIN ANALYZE shows of the scan: the table, whether it read ended versions, and
    /// how many rows it emits (and whether an index selected them).
    pub fn explain(&self) -> Vec<(&'static str, String)> {
        vec![
            ("Table", self.table[self.name_at..].to_string()),
            (
                "History read",
                if self.history { "yes" } else { "no" }.into(),
            ),
            (
                "Rows",
                format!(
                    "{}{}",
                    self.len(),
                    if self.by_index { " (by index)" } else { "" }
                ),
            ),
        ]
    }

    /// The error for the cell at column `col` of the `index`-th row, which the caller could
    /// not write into its column (`column`, of DuckDB type `column_type`; `why`, possibly
    /// empty, says what failed): a corrupt record (it reaches DuckDB as an `IOException`, never
    /// as the `InternalException` that would end the database instance), naming the table,
    /// the column and its type, the row and what is stored.
    pub fn misfit(
        &self,
        index: usize,
        col: usize,
        column: &str,
        column_type: &str,
        why: &str,
    ) -> Error {
        let which = if why.is_empty() {
            format!("which {column_type} cannot hold")
        } else {
            format!("which {why}")
        };
        Error::Corrupt(format!(
            "{}, column {column} ({column_type}), rowid {}: the store holds {}, {which}",
            self.table,
            self.rowid(index),
            describe(self.cell(index, col))
        ))
    }
}

/// How many of `valid`'s flags (each 0 or 1) say NULL: eight flags per population count.
fn nulls_in(valid: &[u8]) -> usize {
    let words = valid.chunks_exact(8);
    let rest: usize = words.remainder().iter().map(|&v| usize::from(v)).sum();
    let ones: usize = words
        .map(|w| u64::from_ne_bytes(w.try_into().unwrap_or_default()).count_ones() as usize)
        .sum();
    valid.len() - ones - rest
}

/// What a stored cell is, for an error message: its kind and its value (long text and blobs
/// shortened).
fn describe(cell: Option<&Cell>) -> String {
    const SHOWN: usize = 64;
    match cell {
        None => "no cell".into(),
        Some(Cell::Null) => "NULL".into(),
        Some(Cell::Int(v)) => format!("the integer {v}"),
        Some(Cell::Bool(v)) => format!("the boolean {v}"),
        Some(Cell::Float(v)) => format!("the floating-point number {v}"),
        Some(Cell::Text(t)) => {
            let shown: String = t.chars().take(SHOWN).collect();
            let more = if shown.len() < t.len() { "..." } else { "" };
            format!("the text {shown:?}{more} ({} bytes)", t.len())
        }
        Some(Cell::Blob(b)) => {
            let hex: String = b
                .iter()
                .take(SHOWN / 2)
                .map(|x| format!("{x:02x}"))
                .collect();
            let more = if b.len() > SHOWN / 2 { "..." } else { "" };
            format!(
                "a serialized DuckDB value of {} bytes ({hex}{more})",
                b.len()
            )
        }
    }
}

#[cfg(test)]
mod tests;
