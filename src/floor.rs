//! The schema-version floor (RFC 0007): repair on read for a lake that lost the
//! `ducklake_schema_versions` rows its oldest data files were written under.
//!
//! DuckLake maps each data file to the schema version it was written under by ranges of
//! `ducklake_schema_versions` (a file's version is the row with the highest `begin_snapshot` at
//! or below the file's). moraine never expires those rows with their snapshots, but a store
//! whose rows were lost (an earlier expiry that pruned them, a hand edit) would leave every
//! file older than the table's oldest remaining row without a version, and DuckLake's
//! compaction planner aborts on such a file. The floor closes that gap in the projection: for
//! each table whose oldest data file begins before its oldest schema-version row, a derived
//! row begins at that file. It carries the schema version of the snapshot the file began at
//! when that snapshot still exists (the version the file was written under), else the oldest
//! schema version still known for the table. Nothing is written; the row exists while its
//! inputs say it should.

use crate::catalog::TableDef;
use crate::cell::{Cell, Row};
use std::collections::BTreeMap;

/// The table the floor derives rows of.
pub const DERIVED: &str = "ducklake_schema_versions";

/// The tables it derives them from: a write to either changes the floor.
pub const INPUTS: [&str; 2] = ["ducklake_data_file", crate::catalog::SNAPSHOT_TABLE];

/// The derived floor rows of `ducklake_schema_versions`, ordered by table id, given that
/// table's rows, the rows of `ducklake_data_file` (live and ended) and each surviving
/// snapshot's schema version, all from the same view. Returns nothing when a definition lacks
/// the columns the rule reads.
pub fn schema_version_floors(
    versions_def: &TableDef,
    versions: &[Row],
    files_def: &TableDef,
    files: &[Row],
    snapshot_versions: &BTreeMap<i64, Cell>,
) -> Vec<Row> {
    let (Some(v_begin), Some(v_version), Some(v_table)) = (
        versions_def.column_index("begin_snapshot"),
        versions_def.column_index("schema_version"),
        versions_def.column_index("table_id"),
    ) else {
        return Vec::new();
    };
    let (Some(f_begin), Some(f_table)) = (
        files_def.column_index("begin_snapshot"),
        files_def.column_index("table_id"),
    ) else {
        return Vec::new();
    };
    // the oldest known (begin_snapshot, schema_version) per table
    let mut oldest: BTreeMap<i64, (i64, Cell)> = BTreeMap::new();
    for r in versions {
        let (Some(table), Some(begin)) = (r[v_table].as_int(), r[v_begin].as_int()) else {
            continue;
        };
        let entry = oldest.entry(table).or_insert((begin, r[v_version].clone()));
        if begin < entry.0 {
            *entry = (begin, r[v_version].clone());
        }
    }
    // the oldest data file per table
    let mut first_file: BTreeMap<i64, i64> = BTreeMap::new();
    for r in files {
        if let (Some(table), Some(begin)) = (r[f_table].as_int(), r[f_begin].as_int()) {
            let e = first_file.entry(table).or_insert(begin);
            *e = (*e).min(begin);
        }
    }
    oldest
        .into_iter()
        .filter_map(|(table, (begin, version))| {
            let file = *first_file.get(&table)?;
            (file < begin).then(|| {
                let mut row = vec![Cell::Null; versions_def.columns.len()];
                row[v_begin] = Cell::Int(file);
                row[v_version] = match snapshot_versions.get(&file) {
                    Some(v @ Cell::Int(_)) => v.clone(),
                    _ => version,
                };
                row[v_table] = Cell::Int(table);
                row
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::fixed_table_def;
    use Cell::Int;

    fn sv(begin: i64, version: i64, table: i64) -> Row {
        vec![Int(begin), Int(version), Int(table)]
    }

    fn file(def: &TableDef, id: i64, table: i64, begin: i64) -> Row {
        let mut r = vec![Cell::Null; def.columns.len()];
        r[def.column_index("data_file_id").unwrap()] = Int(id);
        r[def.column_index("table_id").unwrap()] = Int(table);
        r[def.column_index("begin_snapshot").unwrap()] = Int(begin);
        r
    }

    #[test]
    fn a_table_whose_oldest_file_predates_its_versions_is_floored_at_that_file() {
        let v = fixed_table_def("main", "ducklake_schema_versions").unwrap();
        let f = fixed_table_def("main", "ducklake_data_file").unwrap();
        assert_eq!(
            v.columns
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>(),
            ["begin_snapshot", "schema_version", "table_id"]
        );
        let versions = vec![sv(5, 3, 1), sv(9, 4, 1), sv(2, 1, 2)];
        let files = vec![
            file(&f, 10, 1, 7),
            file(&f, 11, 1, 3), // table 1's oldest file: before its oldest version (5)
            file(&f, 12, 2, 2), // table 2 is covered from snapshot 2
            file(&f, 13, 3, 1), // table 3 has no known version: nothing to carry
        ];
        let expired = BTreeMap::new();
        assert_eq!(
            schema_version_floors(&v, &versions, &f, &files, &expired),
            vec![sv(3, 3, 1)]
        );
        // while the file's snapshot survives, the floor carries the version it was written under
        let snapshots = BTreeMap::from([(3, Int(2)), (5, Int(3))]);
        assert_eq!(
            schema_version_floors(&v, &versions, &f, &files, &snapshots),
            vec![sv(3, 2, 1)]
        );
        // a healthy lake has no floor
        assert!(schema_version_floors(&v, &[sv(1, 1, 1)], &f, &files[..2], &expired).is_empty());
    }
}
