//! Maintenance commits (RFC 0007): what a commit that mints no snapshot in a lake may carry.

use crate::catalog::{self, TableDef};
use crate::cell::Cell;
use crate::error::{Error, Result};
use crate::op::Op;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use catalog::ROW_ID_FIELD_ID;

/// What one staged operation is to a lake that the commit mints no snapshot in.
enum Role {
    /// Expiry, cleanup, drains, options: deletes of anything, the deletion schedule,
    /// `ducklake_metadata`, dropping a table, the row-id statistics row.
    Maintenance,
    /// A change to what the catalog describes: any other insert or update.
    Mutation,
    /// Schema and table creation: neither.
    Neither,
}

fn role(op: &Op, tables: &BTreeMap<(String, String), Arc<TableDef>>) -> Result<Role> {
    let (schema, table, row) = match op {
        Op::Delete { .. } | Op::DropTable { .. } => return Ok(Role::Maintenance),
        Op::CreateSchema(_) | Op::DropSchema(_) | Op::CreateTable(_) => return Ok(Role::Neither),
        Op::Insert { schema, table, row } => (schema, table, Some(row)),
        Op::Update { schema, table, .. } => (schema, table, None),
    };
    if catalog::BOOKKEEPING_TABLES.contains(&table.as_str()) {
        return Ok(Role::Maintenance);
    }
    if let (Some(row), true) = (row, table == catalog::FILE_COLUMN_STATS_TABLE) {
        let field = tables
            .get(&(schema.clone(), table.clone()))
            .and_then(|def| def.cell(row, "column_id"))
            .and_then(Cell::as_int);
        if field == Some(ROW_ID_FIELD_ID) {
            return Ok(Role::Maintenance);
        }
        return Err(Error::Constraint(format!(
            "a commit that inserts into {table} must insert a ducklake_snapshot row (without \
             one only the row-id statistics of field {ROW_ID_FIELD_ID} are maintenance)"
        )));
    }
    Ok(Role::Mutation)
}

fn describe(op: &Op) -> String {
    match op {
        Op::Insert { table, .. } => format!("inserts into {table}"),
        Op::Update { table, .. } => format!("updates {table}"),
        Op::Delete { table, .. } => format!("deletes from {table}"),
        Op::DropTable { name, .. } => format!("drops {name}"),
        Op::CreateSchema(n) | Op::DropSchema(n) => format!("changes schema {n}"),
        Op::CreateTable(d) => format!("creates {}", d.name),
    }
}

/// A lake the commit inserts no `ducklake_snapshot` row into takes one of two shapes.
/// - A maintenance commit (RFC 0007): only maintenance operations. It writes no snapshot
///   record and keeps the lake's head snapshot.
/// - A hand edit: only changes to catalog rows, made through the tables as DuckLake's own
///   catalogs accept them (its suite inserts a tag beginning at the next snapshot and clears a
///   file's mapping id this way; RFC 0007, "Hand edits").
///
/// Both at once, the mixed set, is a constraint error: DuckLake mints a snapshot for every
/// catalog change it makes, so maintenance carrying an unsnapshotted change is a broken
/// commit. An ordinary file-statistics insert is refused in either shape: DuckLake only writes
/// one with its file's snapshot.
pub(super) fn check(ops: &[Op], tables: &BTreeMap<(String, String), Arc<TableDef>>) -> Result<()> {
    let lake_of = |op: &Op| match op {
        Op::Insert { schema, .. } | Op::Update { schema, .. } | Op::Delete { schema, .. } => {
            Some(schema.clone())
        }
        Op::DropTable { schema, .. } => Some(schema.clone()),
        // neither maintenance nor a change (`role`)
        Op::CreateTable(_) | Op::CreateSchema(_) | Op::DropSchema(_) => None,
    };
    let minting: BTreeSet<String> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Insert { schema, table, .. } if table == catalog::SNAPSHOT_TABLE => {
                Some(schema.clone())
            }
            _ => None,
        })
        .collect();
    // per lake without a snapshot insert: its first maintenance and first mutation
    let mut seen: BTreeMap<String, (Option<&Op>, Option<&Op>)> = BTreeMap::new();
    for op in ops {
        let Some(lake) = lake_of(op).filter(|l| !minting.contains(l)) else {
            continue;
        };
        let entry = seen.entry(lake).or_default();
        match role(op, tables)? {
            Role::Maintenance => {
                entry.0.get_or_insert(op);
            }
            Role::Mutation => {
                entry.1.get_or_insert(op);
            }
            Role::Neither => {}
        }
    }
    for (lake, (maintenance, mutation)) in seen {
        if let (Some(m), Some(c)) = (maintenance, mutation) {
            return Err(Error::Constraint(format!(
                "a commit that {} and also {} in lake {lake} must insert a ducklake_snapshot \
                 row: maintenance mints no snapshot, and DuckLake mints one for every catalog \
                 change it makes",
                describe(c),
                describe(m)
            )));
        }
    }
    Ok(())
}
