//! The inlined tables of a catalog copied in from another catalog database (RFC 0014).
//!
//! Another database stores DuckLake's inlined values in its own forms: SQLite holds a DOUBLE and
//! a TIMESTAMP WITH TIME ZONE as text, and DuckDB's sqlite extension reads an INTEGER or a
//! BOOLEAN back as a BIGINT; Postgres holds timestamps as text and text as BYTEA, which DuckDB's
//! postgres extension reads as a BLOB. `COPY FROM DATABASE` creates the inlined tables with those types.
//! DuckLake casts what it reads from an inlined table on moraine (and on SQLite and Postgres),
//! but not on a DuckDB file, so the lake moved on into a DuckDB file would read such rows wrong.
//!
//! So an inlined table created in the same commit as the `ducklake_column` rows that describe
//! it takes, for each column whose values all convert, the type DuckLake gives it on a DuckDB
//! catalog, with its values converted. (DuckLake's own commits create inlined tables with their
//! column rows too, already declared with those types: nothing changes for them.) A column of a type not converted here (DECIMAL, UUID, BLOB, INTERVAL,
//! the nested types, ...) or with a value that does not convert keeps what it was declared
//! with, which DuckLake still reads right on moraine.

use crate::catalog::{self, TableDef};
use crate::cell::Cell;
use crate::duckdb_types as ty;
use crate::op::Op;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

type Tables = BTreeMap<(String, String), Arc<TableDef>>;

/// The type DuckLake 1.5.5 gives an inlined column of DuckLake type `ducklake` on a DuckDB
/// catalog (`DuckLakeTypes`, `GetColumnTypeInternal`), among those converted here: DuckDB's
/// name for it and its `LogicalTypeId`.
fn target(ducklake: &str) -> Option<(&'static str, u8)> {
    Some(match ducklake.to_ascii_lowercase().as_str() {
        "boolean" => ("BOOLEAN", ty::BOOLEAN),
        "int8" => ("TINYINT", ty::TINYINT),
        "int16" => ("SMALLINT", ty::SMALLINT),
        "int32" => ("INTEGER", ty::INTEGER),
        "int64" => ("BIGINT", ty::BIGINT),
        "uint8" => ("UTINYINT", ty::UTINYINT),
        "uint16" => ("USMALLINT", ty::USMALLINT),
        "uint32" => ("UINTEGER", ty::UINTEGER),
        "float32" => ("FLOAT", ty::FLOAT),
        "float64" => ("DOUBLE", ty::DOUBLE),
        "varchar" => ("VARCHAR", ty::VARCHAR),
        "date" => ("DATE", ty::DATE),
        "time" => ("TIME", ty::TIME),
        "timestamp" | "timestamp_us" => ("TIMESTAMP", ty::TIMESTAMP),
        "timestamptz" => ("TIMESTAMP WITH TIME ZONE", ty::TIMESTAMP_TZ),
        _ => return None,
    })
}

/// `cell` as a value of the type with id `id`, or `None` when it does not convert. Text is
/// read as DuckDB writes the type as text (its cast to VARCHAR, which is how SQLite's catalog
/// holds what it does not hold natively).
fn convert(cell: &Cell, id: u8) -> Option<Cell> {
    if cell.is_null() {
        return Some(Cell::Null);
    }
    match (id, cell) {
        (ty::BOOLEAN, Cell::Bool(b)) => Some(Cell::Bool(*b)),
        (ty::BOOLEAN, Cell::Int(0)) => Some(Cell::Bool(false)),
        (ty::BOOLEAN, Cell::Int(1)) => Some(Cell::Bool(true)),
        (ty::BOOLEAN, Cell::Text(t)) => match t.as_str() {
            "true" => Some(Cell::Bool(true)),
            "false" => Some(Cell::Bool(false)),
            _ => None,
        },
        (ty::FLOAT | ty::DOUBLE, Cell::Float(f)) => Some(Cell::Float(*f)),
        (ty::FLOAT | ty::DOUBLE, Cell::Int(i)) => Some(Cell::Float(*i as f64)),
        (ty::DOUBLE, Cell::Text(t)) => t.trim().parse::<f64>().ok().map(Cell::Float),
        // (read as a 32-bit float: DuckDB's text of FLOAT's largest value read as a 64-bit one
        // would lie past what a FLOAT holds)
        (ty::FLOAT, Cell::Text(t)) => t.trim().parse::<f32>().ok().map(|f| Cell::Float(f.into())),
        (ty::VARCHAR, Cell::Text(t)) => Some(Cell::Text(t.clone())),
        // Postgres's catalog holds text as BYTEA (DuckLake's PostgresMetadataManager), which
        // DuckDB's postgres extension reads as a BLOB
        (ty::VARCHAR, Cell::Blob(b)) => crate::serialized::blob(b)
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .map(Cell::Text),
        (ty::DATE, Cell::Text(t)) => parse_date(t).map(|d| serialized(id, d)),
        (ty::TIME, Cell::Text(t)) => parse_time(t).map(|us| serialized(id, us)),
        (ty::TIMESTAMP, Cell::Text(t)) => parse_timestamp(t, false).map(|us| serialized(id, us)),
        (ty::TIMESTAMP_TZ, Cell::Text(t)) => parse_timestamp(t, true).map(|us| serialized(id, us)),
        (id, Cell::Int(i)) => ty::fits(id, false, ty::Held::Int, *i, 0.0).then_some(Cell::Int(*i)),
        (id, Cell::Text(t)) if ty::held(id, false) == ty::Held::Int => {
            let i: i64 = t.trim().parse().ok()?;
            ty::fits(id, false, ty::Held::Int, i, 0.0).then_some(Cell::Int(i))
        }
        _ => None,
    }
}

/// A value DuckDB holds as an integer, serialized as DuckDB does.
fn serialized(id: u8, v: i64) -> Cell {
    Cell::Blob(crate::serialized::value(id, v))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn digits(s: &str, n: usize) -> Option<i64> {
    (s.len() == n && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// `YYYY-MM-DD` (year 1 to 9999; DuckDB writes other years with a sign or ` (BC)`, which are
/// not converted).
fn parse_date(t: &str) -> Option<i64> {
    let mut parts = t.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let (y, m, d) = (digits(y, 4)?, digits(m, 2)?, digits(d, 2)?);
    let days_in = [
        31,
        if leap(y) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if y < 1 || !(1..=12).contains(&m) || d < 1 || d > days_in[(m - 1) as usize] {
        return None;
    }
    Some(days_from_civil(y, m, d))
}

fn leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// `HH:MM:SS[.f...]` (up to six fractional digits) as microseconds.
fn parse_time(t: &str) -> Option<i64> {
    let (whole, frac) = match t.split_once('.') {
        Some((w, f)) => (w, f),
        None => (t, ""),
    };
    let mut parts = whole.split(':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || frac.len() > 6 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (h, m, s) = (digits(h, 2)?, digits(m, 2)?, digits(s, 2)?);
    if h > 23 || m > 59 || s > 59 {
        return None;
    }
    let micros = if frac.is_empty() {
        0
    } else {
        frac.parse::<i64>().ok()? * 10i64.pow(6 - frac.len() as u32)
    };
    Some(((h * 60 + m) * 60 + s) * 1_000_000 + micros)
}

/// `YYYY-MM-DD HH:MM:SS[.f...]`, with a `+HH[:MM]` or `-HH[:MM]` offset when `tz`, as
/// microseconds since 1970-01-01 00:00:00 (UTC when `tz`).
fn parse_timestamp(t: &str, tz: bool) -> Option<i64> {
    let (date, rest) = t.split_once(' ')?;
    let days = parse_date(date)?;
    let (time, offset) = if tz {
        let at = rest.rfind(['+', '-'])?;
        let (time, off) = rest.split_at(at);
        let sign = if off.starts_with('-') { -1 } else { 1 };
        let (oh, om) = match off[1..].split_once(':') {
            Some((h, m)) => (digits(h, 2)?, digits(m, 2)?),
            None => (digits(&off[1..], 2)?, 0),
        };
        (time, sign * (oh * 3600 + om * 60) * 1_000_000)
    } else {
        (rest, 0)
    };
    Some(days * 86_400_000_000 + parse_time(time)? - offset)
}

/// Gives the inlined tables `ops` creates the types DuckLake gives them on a DuckDB catalog,
/// where the `ducklake_column` rows `ops` inserts describe them and every value converts (the
/// module's doc). `tables`: the committed catalog's tables.
///
/// DuckLake's own commits that create an inlined table (a CREATE TABLE or an ALTER with rows
/// inlined) insert its column rows too, but declare each column as DuckDB names the type,
/// which is what [`target`] gives: nothing changes for them.
pub(crate) fn retype_inlined(ops: &mut [Op], tables: &Tables) {
    // in one pass: the inlined tables created, the definitions of the tables created, and
    // where each table's inserted rows are
    let mut created: Vec<(usize, i64, i64)> = Vec::new();
    let mut defs: HashMap<(String, String), Arc<TableDef>> = HashMap::new();
    let inserts: HashMap<(String, String), Vec<usize>> = {
        let mut at: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Insert { schema, table, .. } => at.entry((schema, table)).or_default().push(i),
                Op::CreateTable(def) => {
                    if let Some((t, v)) = inlined_data_name(&def.name) {
                        created.push((i, t, v));
                    }
                    defs.insert((def.schema.clone(), def.name.clone()), def.clone());
                }
                _ => {}
            }
        }
        if created.is_empty() {
            return;
        }
        at.into_iter()
            .map(|((s, t), rows)| ((s.to_string(), t.to_string()), rows))
            .collect()
    };
    let no_rows: Vec<usize> = Vec::new();
    for (at, table_id, version) in created {
        let Op::CreateTable(def) = &ops[at] else {
            continue;
        };
        let def = def.clone();
        let schema = def.schema.clone();
        // a definition created in this commit (a copy's), else the committed one
        let def_of = |name: &str| -> Option<Arc<TableDef>> {
            let key = (schema.clone(), name.to_string());
            defs.get(&key).or_else(|| tables.get(&key)).cloned()
        };
        let rows_of = |name: &str| -> &Vec<usize> {
            inserts
                .get(&(schema.clone(), name.to_string()))
                .unwrap_or(&no_rows)
        };
        let row = |i: usize| -> &Vec<Cell> {
            match &ops[i] {
                Op::Insert { row, .. } => row,
                _ => unreachable!("an insert's position"),
            }
        };
        let Some(columns) = def_of("ducklake_column") else {
            continue;
        };
        // a snapshot of the schema version the inlined table is of: the one it began at for
        // the table, or any snapshot of it (DuckLake raises the version to create a table's
        // first inlined table without a row for the table; columns do not change within one)
        let began = def_of("ducklake_schema_versions").and_then(|versions| {
            rows_of("ducklake_schema_versions")
                .iter()
                .map(|&i| row(i))
                .filter(|r| {
                    versions.cell(r, "schema_version").and_then(Cell::as_int) == Some(version)
                        && versions.cell(r, "table_id").and_then(Cell::as_int) == Some(table_id)
                })
                .filter_map(|r| versions.cell(r, "begin_snapshot").and_then(Cell::as_int))
                .min()
        });
        let began = began.or_else(|| {
            let snapshots = def_of("ducklake_snapshot")?;
            rows_of("ducklake_snapshot")
                .iter()
                .map(|&i| row(i))
                .filter(|r| {
                    snapshots.cell(r, "schema_version").and_then(Cell::as_int) == Some(version)
                })
                .filter_map(|r| snapshots.cell(r, "snapshot_id").and_then(Cell::as_int))
                .min()
        });
        let Some(began) = began else {
            continue;
        };
        // the table's top-level columns then: name -> DuckLake type
        let mut types: HashMap<String, String> = HashMap::new();
        for &i in rows_of("ducklake_column") {
            let r = row(i);
            let int = |n: &str| columns.cell(r, n).and_then(Cell::as_int);
            let alive = int("begin_snapshot").is_some_and(|b| b <= began)
                && int("end_snapshot").is_none_or(|e| e > began);
            let top = columns.cell(r, "parent_column").is_none_or(Cell::is_null);
            if int("table_id") == Some(table_id) && alive && top {
                if let (Some(Cell::Text(n)), Some(Cell::Text(t))) = (
                    columns.cell(r, "column_name"),
                    columns.cell(r, "column_type"),
                ) {
                    types.insert(n.clone(), t.clone());
                }
            }
        }
        let mut kept = (*def).clone();
        let mut changes: Vec<(usize, u8)> = Vec::new();
        for (i, c) in def.columns.iter().enumerate().skip(3) {
            let Some((name, id)) = types.get(&c.name).and_then(|t| target(t)) else {
                continue;
            };
            if c.type_name != name {
                changes.push((i, id));
                kept.columns[i].type_name = name.to_string();
                kept.columns[i].type_blob = crate::serialized::type_blob(id);
            }
        }
        if changes.is_empty() {
            continue;
        }
        // every value of a changed column must convert, or the column keeps its type
        let mine = rows_of(&def.name).clone();
        let converted: Vec<Vec<Option<Cell>>> = mine
            .iter()
            .map(|&i| {
                let r = row(i);
                changes
                    .iter()
                    .map(|&(c, id)| r.get(c).and_then(|cell| convert(cell, id)))
                    .collect()
            })
            .collect();
        let convertible: Vec<bool> = (0..changes.len())
            .map(|k| converted.iter().all(|cells| cells[k].is_some()))
            .collect();
        for (k, &(c, _)) in changes.iter().enumerate() {
            if !convertible[k] {
                kept.columns[c] = def.columns[c].clone();
            }
        }
        for (&i, cells) in mine.iter().zip(converted) {
            let Op::Insert { row, .. } = &mut ops[i] else {
                continue;
            };
            for (k, cell) in cells.into_iter().enumerate() {
                if let (true, Some(cell)) = (convertible[k], cell) {
                    row[changes[k].0] = cell;
                }
            }
        }
        ops[at] = Op::CreateTable(Arc::new(kept));
    }
}

/// `(table id, schema version)` of an inlined-data table's name.
fn inlined_data_name(name: &str) -> Option<(i64, i64)> {
    if !catalog::is_inlined_table_name(name) {
        return None;
    }
    let (t, v) = name
        .strip_prefix("ducklake_inlined_data_")?
        .split_once('_')?;
    Some((t.parse().ok()?, v.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::ColumnDef;
    use crate::cell::Cell::{Float, Int, Null, Text};
    use crate::testing::{def, row, M};

    fn col(name: &str, ty: &str) -> ColumnDef {
        ColumnDef {
            name: name.into(),
            type_name: ty.into(),
            type_blob: vec![9],
        }
    }

    fn insert(table: &str, row: Vec<Cell>) -> Op {
        Op::Insert {
            schema: M.into(),
            table: table.into(),
            row,
        }
    }

    fn column(id: i64, begin: i64, end: Option<i64>, name: &str, ty: &str) -> Op {
        insert(
            "ducklake_column",
            row(
                "ducklake_column",
                &[
                    ("column_id", Int(id)),
                    ("begin_snapshot", Int(begin)),
                    ("end_snapshot", end.map_or(Null, Int)),
                    ("table_id", Int(2)),
                    ("column_order", Int(id)),
                    ("column_name", Text(name.into())),
                    ("column_type", Text(ty.into())),
                    ("nulls_allowed", Cell::Bool(true)),
                ],
            ),
        )
    }

    /// What a copy of SQLite's catalog stages: DuckLake's tables, the column rows of table 2
    /// (one renamed at snapshot 6, one added at 8, after the inlined table's version 5 began
    /// at 7), and its inlined table of version 5 in SQLite's stored forms.
    fn sqlite_copy(ts: &str, d: &str) -> Vec<Op> {
        let inlined = TableDef {
            schema: M.into(),
            name: "ducklake_inlined_data_2_5".into(),
            columns: vec![
                col("row_id", "BIGINT"),
                col("begin_snapshot", "BIGINT"),
                col("end_snapshot", "BIGINT"),
                col("a", "BIGINT"),
                col("bb", "VARCHAR"),
                col("ts", "VARCHAR"),
                col("d", "VARCHAR"),
                col("ok", "BIGINT"),
                col("dec", "VARCHAR"),
            ],
        };
        vec![
            Op::CreateTable(Arc::new(def("ducklake_column"))),
            Op::CreateTable(Arc::new(def("ducklake_schema_versions"))),
            Op::CreateTable(Arc::new(inlined)),
            insert(
                "ducklake_inlined_data_2_5",
                vec![
                    Int(0),
                    Int(7),
                    Null,
                    Int(3),
                    Text("three".into()),
                    Text(ts.into()),
                    Text(d.into()),
                    Int(1),
                    Text("1.50".into()),
                ],
            ),
            insert(
                "ducklake_inlined_data_2_5",
                vec![Int(1), Int(7), Int(9), Null, Null, Null, Null, Int(0), Null],
            ),
            column(1, 2, None, "a", "int32"),
            column(2, 2, Some(6), "b", "varchar"),
            column(2, 6, None, "bb", "varchar"),
            column(3, 2, None, "ts", "timestamptz"),
            column(4, 2, None, "d", "float64"),
            column(5, 2, None, "ok", "boolean"),
            column(6, 2, None, "dec", "decimal(9,2)"),
            column(7, 8, None, "later", "int64"),
            insert(
                "ducklake_schema_versions",
                row(
                    "ducklake_schema_versions",
                    &[
                        ("begin_snapshot", Int(7)),
                        ("schema_version", Int(5)),
                        ("table_id", Int(2)),
                    ],
                ),
            ),
        ]
    }

    fn created(ops: &[Op]) -> &TableDef {
        match &ops[2] {
            Op::CreateTable(d) => d,
            _ => panic!(),
        }
    }

    fn first_row(ops: &[Op]) -> &Vec<Cell> {
        match &ops[3] {
            Op::Insert { row, .. } => row,
            _ => panic!(),
        }
    }

    #[test]
    fn a_copied_inlined_table_takes_ducklake_s_types_and_its_values_convert() {
        let mut ops = sqlite_copy("2025-06-07 08:09:10.5+02", "3.0");
        retype_inlined(&mut ops, &Tables::new());
        let types: Vec<&str> = created(&ops)
            .columns
            .iter()
            .map(|c| c.type_name.as_str())
            .collect();
        assert_eq!(
            types,
            [
                "BIGINT",
                "BIGINT",
                "BIGINT",
                "INTEGER",
                "VARCHAR",
                "TIMESTAMP WITH TIME ZONE",
                "DOUBLE",
                "BOOLEAN",
                // a DECIMAL is not converted here: it keeps SQLite's text
                "VARCHAR",
            ]
        );
        assert_eq!(
            created(&ops).columns[5].type_blob,
            vec![100, 0, 32, 0xFF, 0xFF]
        );
        // an unchanged column keeps the blob DuckDB serialized
        assert_eq!(created(&ops).columns[4].type_blob, vec![9]);
        let r = first_row(&ops);
        assert_eq!(r[3], Int(3));
        assert_eq!(r[6], Float(3.0));
        assert_eq!(r[7], Cell::Bool(true));
        assert_eq!(r[8], Text("1.50".into()));
        // 2025-06-07 06:09:10.5 UTC
        let Cell::Blob(b) = &r[5] else { panic!() };
        assert_eq!(
            crate::serialized::integer(b, ty::TIMESTAMP_TZ),
            Some(1_749_276_550_500_000)
        );
        match &ops[4] {
            Op::Insert { row, .. } => {
                assert_eq!(row[7], Cell::Bool(false));
                assert_eq!(row[5], Null);
            }
            _ => panic!(),
        }
    }

    #[test]
    fn a_column_with_a_value_that_does_not_convert_keeps_its_type() {
        let mut ops = sqlite_copy("2025-06-07 08:09:10 (BC)", "not a number");
        retype_inlined(&mut ops, &Tables::new());
        let d = created(&ops);
        assert_eq!(d.columns[5].type_name, "VARCHAR");
        assert_eq!(d.columns[6].type_name, "VARCHAR");
        assert_eq!(d.columns[7].type_name, "BOOLEAN");
        let r = first_row(&ops);
        assert_eq!(r[5], Text("2025-06-07 08:09:10 (BC)".into()));
        assert_eq!(r[6], Text("not a number".into()));
    }

    #[test]
    fn an_inlined_table_described_by_no_rows_of_this_commit_is_left_alone() {
        let mut ops = sqlite_copy("2025-06-07 08:09:10+00", "3.0");
        ops.retain(|op| !matches!(op, Op::Insert { table, .. } if table == "ducklake_column"));
        let before = format!("{ops:?}");
        retype_inlined(&mut ops, &Tables::new());
        assert_eq!(format!("{ops:?}"), before);
    }

    #[test]
    fn ducklake_s_own_inlined_tables_are_left_as_declared() {
        // a DuckLake commit on moraine: the column rows, and the inlined table declared with
        // DuckDB's names for the types, its values already of them
        let mut ops = sqlite_copy("2025-06-07 08:09:10+00", "3.0");
        let Op::CreateTable(d) = &ops[2] else {
            panic!()
        };
        let mut native = (**d).clone();
        for (c, t) in native.columns.iter_mut().skip(3).zip([
            "INTEGER",
            "VARCHAR",
            "TIMESTAMP WITH TIME ZONE",
            "DOUBLE",
            "BOOLEAN",
            "DECIMAL(9,2)",
        ]) {
            c.type_name = t.into();
        }
        ops[2] = Op::CreateTable(Arc::new(native));
        if let Op::Insert { row, .. } = &mut ops[3] {
            row[5] = serialized(ty::TIMESTAMP_TZ, 1_749_276_550_000_000);
            row[6] = Float(3.0);
            row[7] = Cell::Bool(true);
            row[8] = Cell::Blob(vec![1, 2, 3]);
        }
        let before = format!("{ops:?}");
        retype_inlined(&mut ops, &Tables::new());
        assert_eq!(format!("{ops:?}"), before);
    }

    #[test]
    fn a_version_begun_without_a_row_for_the_table_is_found_by_its_snapshots() {
        // DuckLake raises the schema version to create a table's first inlined table without a
        // ducklake_schema_versions row for the table: a snapshot of the version says when
        let mut ops = sqlite_copy("2025-06-07 08:09:10+00", "3.0");
        ops.retain(
            |op| !matches!(op, Op::Insert { table, .. } if table == "ducklake_schema_versions"),
        );
        ops.push(Op::CreateTable(Arc::new(def("ducklake_snapshot"))));
        for (id, version) in [(6, 4), (7, 5), (8, 5)] {
            ops.push(insert(
                "ducklake_snapshot",
                row(
                    "ducklake_snapshot",
                    &[("snapshot_id", Int(id)), ("schema_version", Int(version))],
                ),
            ));
        }
        retype_inlined(&mut ops, &Tables::new());
        let d = created(&ops);
        // at snapshot 7, b was renamed bb and "later" was not yet there
        assert_eq!(d.columns[4].type_name, "VARCHAR");
        assert_eq!(d.columns[6].type_name, "DOUBLE");
        assert_eq!(first_row(&ops)[6], Float(3.0));
        // with neither, nothing says when the version began: left alone
        let mut ops = sqlite_copy("2025-06-07 08:09:10+00", "3.0");
        ops.retain(
            |op| !matches!(op, Op::Insert { table, .. } if table == "ducklake_schema_versions"),
        );
        retype_inlined(&mut ops, &Tables::new());
        assert_eq!(created(&ops).columns[6].type_name, "VARCHAR");
    }

    #[test]
    fn values_convert_as_duckdb_writes_them_as_text() {
        let ts = |t: &str| parse_timestamp(t, true);
        assert_eq!(ts("1970-01-01 00:00:00+00"), Some(0));
        assert_eq!(ts("1970-01-01 01:00:00+01"), Some(0));
        assert_eq!(ts("1969-12-31 20:30:00-03:30"), Some(0));
        assert_eq!(
            ts("2000-02-29 12:00:00.000001+00"),
            Some(951_825_600_000_001)
        );
        assert_eq!(ts("2001-02-29 12:00:00+00"), None);
        assert_eq!(ts("infinity"), None);
        assert_eq!(
            parse_timestamp("1970-01-02 00:00:00", false),
            Some(86_400_000_000)
        );
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        assert_eq!(parse_date("2024-03-01"), Some(19_783));
        assert_eq!(parse_time("23:59:59.999999"), Some(86_399_999_999));
        assert_eq!(parse_time("24:00:00"), None);
        assert_eq!(convert(&Text("-0.0".into()), ty::DOUBLE), Some(Float(-0.0)));
        assert!(matches!(convert(&Text("nan".into()), ty::DOUBLE), Some(Float(f)) if f.is_nan()));
        assert_eq!(
            convert(&Text("-inf".into()), ty::DOUBLE),
            Some(Float(f64::NEG_INFINITY))
        );
        // FLOAT's largest value, as DuckDB writes it, is a FLOAT again
        assert_eq!(
            convert(&Text("3.4028235e+38".into()), ty::FLOAT),
            Some(Float(f32::MAX.into()))
        );
        assert_eq!(convert(&Int(300), ty::TINYINT), None);
        let mut bytea = vec![100, 0, 100, 0, ty::BLOB, 0xFF, 0xFF, 101, 0, 0, 102, 0, 11];
        bytea.extend(b"caf\\xC3\\xA9");
        bytea.extend([0xFF, 0xFF]);
        assert_eq!(
            convert(&Cell::Blob(bytea), ty::VARCHAR),
            Some(Text("café".into()))
        );
        assert_eq!(convert(&Int(-1), ty::UINTEGER), None);
        assert_eq!(convert(&Text("42".into()), ty::SMALLINT), Some(Int(42)));
        assert_eq!(convert(&Int(2), ty::BOOLEAN), None);
        assert_eq!(convert(&Null, ty::DATE), Some(Null));
        let Some(Cell::Blob(b)) = convert(&Text("2024-03-01".into()), ty::DATE) else {
            panic!()
        };
        assert_eq!(crate::serialized::integer(&b, ty::DATE), Some(19_783));
    }
}
