//! What tests of the core, and of the extension built on it, share: lakes in memory and on
//! disk, and the rows DuckLake writes, built by column name. Compiled for the core's own tests
//! and, with the feature `testing`, for other crates' tests. The core's own tests also share
//! `lakes` (committing tables, reading a store back) and `faulty` (fault injection at the
//! object-store boundary), compiled for them alone.

use crate::catalog::{fixed_table_def, ColumnDef, TableDef};
use crate::cell::Cell::{self, Blob, Int, Null, Text};
use crate::cell::Row;
use crate::store::Store;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[cfg(test)]
pub(crate) mod faulty;
#[cfg(test)]
pub(crate) mod lakes;

pub const M: &str = "main";
pub const LAKE_TABLES: &[&str] = &[
    "ducklake_metadata",
    "ducklake_snapshot",
    "ducklake_snapshot_changes",
    "ducklake_table",
    "ducklake_table_stats",
    "ducklake_files_scheduled_for_deletion",
];
pub const INL: &str = "ducklake_inlined_data_1_0";

pub fn mem_url(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "memory://txn-test-{tag}-{}",
        N.fetch_add(1, Ordering::SeqCst)
    )
}

pub fn def(name: &str) -> TableDef {
    fixed_table_def(M, name).unwrap_or_else(|| panic!("tables.rs has no {name}"))
}

/// A row of a fixed table by column name; unnamed columns are NULL.
pub fn row(table: &str, vals: &[(&str, Cell)]) -> Row {
    let d = def(table);
    for (n, _) in vals {
        assert!(d.column_index(n).is_some(), "{table} has no column {n}");
    }
    d.columns
        .iter()
        .map(|c| {
            vals.iter()
                .find(|(n, _)| *n == c.name)
                .map(|(_, v)| v.clone())
                .unwrap_or(Null)
        })
        .collect()
}

pub fn col(rows: &[Row], table: &str, name: &str) -> Vec<Cell> {
    let i = def(table).column_index(name).unwrap();
    rows.iter().map(|r| r[i].clone()).collect()
}

pub fn snap(id: i64) -> Row {
    row(
        "ducklake_snapshot",
        &[
            ("snapshot_id", Int(id)),
            ("snapshot_time", Blob(vec![id as u8, 7])),
            ("schema_version", Int(id)),
            ("next_catalog_id", Int(id + 1)),
            ("next_file_id", Int(0)),
        ],
    )
}

pub fn changes(id: i64, what: &str) -> Row {
    row(
        "ducklake_snapshot_changes",
        &[
            ("snapshot_id", Int(id)),
            ("changes_made", Text(what.into())),
        ],
    )
}

pub fn table_row(id: i64, begin: i64, end: Option<i64>, name: &str) -> Row {
    row(
        "ducklake_table",
        &[
            ("table_id", Int(id)),
            ("table_uuid", Blob(vec![id as u8; 16])),
            ("begin_snapshot", Int(begin)),
            ("end_snapshot", end.map(Int).unwrap_or(Null)),
            ("schema_id", Int(0)),
            ("table_name", Text(name.into())),
            ("path", Text(format!("{name}/"))),
            ("path_is_relative", Cell::Bool(true)),
        ],
    )
}

pub fn stats_row(table_id: i64, count: i64) -> Row {
    row(
        "ducklake_table_stats",
        &[("table_id", Int(table_id)), ("record_count", Int(count))],
    )
}

pub fn gc_row(file_id: i64) -> Row {
    row(
        "ducklake_files_scheduled_for_deletion",
        &[
            ("data_file_id", Int(file_id)),
            ("path", Text(format!("f{file_id}.parquet"))),
            ("path_is_relative", Cell::Bool(true)),
        ],
    )
}

pub fn inline_def() -> TableDef {
    let c = |n: &str, t: &str| ColumnDef {
        name: n.into(),
        type_name: t.into(),
        type_blob: vec![],
    };
    TableDef {
        schema: M.into(),
        name: INL.into(),
        columns: vec![
            c("row_id", "BIGINT"),
            c("begin_snapshot", "BIGINT"),
            c("end_snapshot", "BIGINT"),
            c("a", "VARCHAR"),
            c("b", "DOUBLE"),
        ],
    }
}

pub fn inl(row_id: i64, begin: i64, end: Option<i64>, a: &str) -> Row {
    vec![
        Int(row_id),
        Int(begin),
        end.map(Int).unwrap_or(Null),
        Text(a.into()),
        Cell::Float(row_id as f64 / 2.0),
    ]
}

/// A lake the way DuckLake creates one: the tables, snapshot 0 and its changes row.
pub fn new_lake(url: &str) -> Arc<Store> {
    let store = Store::open(url, false).unwrap();
    init_lake(&store);
    store
}

pub fn init_lake(store: &Arc<Store>) {
    let mut t = store.begin();
    for name in LAKE_TABLES {
        t.create_table(def(name)).unwrap();
    }
    t.stage_insert(M, "ducklake_snapshot", vec![snap(0)])
        .unwrap();
    t.stage_insert(
        M,
        "ducklake_snapshot_changes",
        vec![changes(0, "created_schema:\"main\"")],
    )
    .unwrap();
    t.stage_insert(
        M,
        "ducklake_metadata",
        vec![row(
            "ducklake_metadata",
            &[
                ("key", Text("version".into())),
                ("value", Text("1.0".into())),
            ],
        )],
    )
    .unwrap();
    t.commit().unwrap();
}
