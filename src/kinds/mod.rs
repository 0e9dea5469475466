//! Each kind's rules in one place (RFC 0002, RFC 0006): how its committed records become the rows
//! a scan serves (used by the image) and how a staged insert, update or delete becomes writes
//! (used by translation). Identity, keys and lifecycle are declared with the kind in
//! `catalog` ([`Kind`]); the overlay applies staged rows by that identity.
//!
//! - [`fixed`]: DuckLake's versioned and unversioned tables, one record per row;
//! - [`snapshot`]: `ducklake_snapshot` and `ducklake_snapshot_changes`, halves of one record;
//! - [`inline`]: the inlined data tables, rows in Arrow chunks.

pub(crate) mod fixed;
pub(crate) mod inline;
pub(crate) mod snapshot;

use crate::catalog::{self, Kind, TableDef};
use crate::cell::Row;
use crate::error::Error;

/// A row's identity as the errors show it.
fn shown(row: &Row, kind: &Kind) -> String {
    let cells: Vec<String> = catalog::identity(kind, row)
        .iter()
        .map(|c| c.to_string())
        .collect();
    cells.join(", ")
}

/// A row whose identity is already stored: DuckLake retries on this wording.
pub(crate) fn duplicate(def: &TableDef, row: &Row, kind: &Kind) -> Error {
    Error::Duplicate(format!(
        "duplicate key ({}) in {}: violates primary key / unique constraint",
        shown(row, kind),
        def.name
    ))
}

/// A row a staged change names that is no longer stored: a lost race, which DuckLake retries.
pub(crate) fn vanished(def: &TableDef, row: &Row, kind: &Kind) -> Error {
    Error::Conflict(format!(
        "row ({}) of {} is no longer present; write conflict with an earlier change, retry",
        shown(row, kind),
        def.name
    ))
}
