//! Table definitions held in the store, and what kind of record each table's rows become.
//!
//! moraine serves exactly DuckLake's tables: the fixed ones (`tables::FIXED_TABLES`, validated
//! column by column at CREATE) and the dynamic inlined tables `ducklake_inlined_data_<t>_<v>` /
//! `ducklake_inlined_delete_<t>`. A table's [`Kind`] decides how its rows are keyed (RFC 0002)
//! and how a staged row names the row it changes (its identity, RFC 0006).

use crate::cell::{decode_row, encode_row, Cell, Row};
use crate::error::{Error, Result};
use crate::keys;
use crate::tables;
use std::ops::Range;

/// One column of a table as DuckDB declared it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDef {
    pub name: String,
    /// DuckDB's type name (`BIGINT`, `VARCHAR`, `TIMESTAMP WITH TIME ZONE`, ...).
    pub type_name: String,
    /// DuckDB's serialized LogicalType, opaque to the core.
    pub type_blob: Vec<u8>,
}

/// A table as stored under `sys/table/<schema>/<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDef {
    pub schema: String,
    pub name: String,
    pub columns: Vec<ColumnDef>,
}

/// The committed schemas and table definitions of one image, decoded from its `sys/schema/` and
/// `sys/table/` records.
#[derive(Debug, Default)]
pub struct CommittedCatalog {
    pub schemas: std::collections::BTreeSet<String>,
    pub tables: std::collections::BTreeMap<(String, String), std::sync::Arc<TableDef>>,
    /// Unique in the process to this decoded catalog, which every image advanced from it by
    /// commits that wrote no definition shares: transactions that see the same id see the same
    /// schemas and tables, so the DuckDB entries built for one serve the others (the C++ layer
    /// keeps them across transactions). A catalog decoded again gets a new id, even with the
    /// same definitions: its entries are built again, never those of other definitions reused.
    pub id: u64,
}

static NEXT_CATALOG: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl CommittedCatalog {
    /// Decodes the values of the schema and table records (the default schema always exists).
    pub fn decode<'a>(
        schema_records: impl IntoIterator<Item = &'a [u8]>,
        table_records: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<CommittedCatalog> {
        let mut cat = CommittedCatalog {
            id: NEXT_CATALOG.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            ..CommittedCatalog::default()
        };
        cat.schemas.insert(keys::DEFAULT_LAKE.to_string());
        for v in schema_records {
            match decode_row(v)?.as_slice() {
                [Cell::Text(name)] => {
                    cat.schemas.insert(name.clone());
                }
                _ => return Err(Error::Corrupt("schema record is malformed".into())),
            }
        }
        for v in table_records {
            let def = TableDef::decode(v)?;
            cat.tables.insert(
                (def.schema.clone(), def.name.clone()),
                std::sync::Arc::new(def),
            );
        }
        Ok(cat)
    }
}

const TABLE_DEF_VERSION: i64 = 1;

impl TableDef {
    /// Encode with the row codec: `[version, schema, name, ncols, (name, type, blob)*]`.
    pub fn encode(&self) -> Vec<u8> {
        let mut cells = vec![
            Cell::Int(TABLE_DEF_VERSION),
            Cell::Text(self.schema.clone()),
            Cell::Text(self.name.clone()),
            Cell::Int(self.columns.len() as i64),
        ];
        for c in &self.columns {
            cells.push(Cell::Text(c.name.clone()));
            cells.push(Cell::Text(c.type_name.clone()));
            cells.push(Cell::Blob(c.type_blob.clone()));
        }
        encode_row(&cells)
    }

    pub fn decode(bytes: &[u8]) -> Result<TableDef> {
        let cells = decode_row(bytes)?;
        let bad = || Error::Corrupt("table definition record is malformed".into());
        let text = |c: &Cell| c.as_text().map(str::to_string).ok_or_else(bad);
        if cells.len() < 4 || cells[0] != Cell::Int(TABLE_DEF_VERSION) {
            return Err(bad());
        }
        // (a corrupt count must not overflow: 4 + 3n is checked, never wrapped)
        let n = usize::try_from(cells[3].as_int().ok_or_else(bad)?).map_err(|_| bad())?;
        if n.checked_mul(3).and_then(|c| c.checked_add(4)) != Some(cells.len()) {
            return Err(bad());
        }
        let mut columns = Vec::with_capacity(n);
        for i in 0..n {
            let base = 4 + 3 * i;
            columns.push(ColumnDef {
                name: text(&cells[base])?,
                type_name: text(&cells[base + 1])?,
                type_blob: match &cells[base + 2] {
                    Cell::Blob(b) => b.clone(),
                    _ => return Err(bad()),
                },
            });
        }
        Ok(TableDef {
            schema: text(&cells[1])?,
            name: text(&cells[2])?,
            columns,
        })
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// The cell of `row` (a row of this table) in column `name`, if the table has it.
    pub fn cell<'r>(&self, row: &'r [Cell], name: &str) -> Option<&'r Cell> {
        self.column_index(name).and_then(|i| row.get(i))
    }
}

/// Which half of the merged `snapshot/<id>` record a snapshot table's rows are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotHalf {
    /// `ducklake_snapshot`
    Snapshot,
    /// `ducklake_snapshot_changes`
    Changes,
}

/// How a table's rows are stored and identified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// `ducklake_snapshot` / `ducklake_snapshot_changes`: one half of `snapshot/<id>`;
    /// identity = the snapshot id (column 0).
    Snapshot(SnapshotHalf),
    /// A versioned fixed kind: `current/` while end_snapshot is NULL, `history/` once ended;
    /// identity = key cells + begin_snapshot.
    Versioned {
        key: Vec<usize>,
        begin: usize,
        end: usize,
    },
    /// An unversioned fixed kind: `current/<table>/<key cells>`; identity = key cells.
    Unversioned { key: Vec<usize> },
    /// A dynamic inlined table stored as Arrow chunks; identity = the whole row.
    Inline,
}

// ---- DuckLake's tables that moraine's commit rules name (RFC 0007) ---------------------------

/// A commit that inserts into it mints a snapshot of its lake (and moves the lake's head).
pub const SNAPSHOT_TABLE: &str = "ducklake_snapshot";

/// Bookkeeping a maintenance commit (one that mints no snapshot) may write: the deletion
/// schedule and the lake's options.
pub const BOOKKEEPING_TABLES: &[&str] =
    &["ducklake_files_scheduled_for_deletion", "ducklake_metadata"];

/// File statistics: written only with the file's snapshot, except the row-id field's row.
pub const FILE_COLUMN_STATS_TABLE: &str = "ducklake_file_column_stats";

/// DuckDB's reserved field id for the row-id column: the one file-statistics row a commit that
/// mints no snapshot may insert (derived from an immutable Parquet file, RFC 0007).
pub const ROW_ID_FIELD_ID: i64 = 2147483540;

/// Whether `name` is one of the dynamic tables DuckLake creates for inlined data.
pub fn is_inlined_table_name(name: &str) -> bool {
    fn digits(s: &str) -> bool {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
    }
    if let Some(rest) = name.strip_prefix("ducklake_inlined_data_") {
        return match rest.split_once('_') {
            Some((t, v)) => digits(t) && digits(v),
            None => false,
        };
    }
    if let Some(rest) = name.strip_prefix("ducklake_inlined_delete_") {
        return digits(rest);
    }
    false
}

/// The DuckLake catalog version moraine serves: the one DuckLake 1.5.5 writes as
/// `ducklake_metadata`'s `version`.
pub const CATALOG_VERSION: &str = "1.0";

/// What a fixed table that does not match tells about where it came from.
const OTHER_VERSION_HINT: &str = "moraine serves the catalog of DuckLake 1.5.5, catalog version 1.0; a catalog of an older version must first be attached once by DuckLake 1.5.5 with AUTOMATIC_MIGRATION TRUE, which upgrades it";

/// The catalog versions DuckLake 1.5.5 upgrades to [`CATALOG_VERSION`] when attached with
/// `AUTOMATIC_MIGRATION TRUE` (`ducklake_initializer.cpp`).
const OLDER_VERSIONS: &[&str] = &["0.1", "0.2", "0.3-dev1", "0.3", "0.4-dev1", "0.4"];

/// When `declared` is how another DuckLake catalog database stores a column moraine serves as
/// `served`, holding the same values, the `LogicalTypeId` of `served`: SQLite's catalog holds
/// DuckLake's booleans as integers and its timestamps with time zone and UUIDs as text (DuckDB's
/// sqlite extension reads them back as BIGINT and VARCHAR). A table created with such a column
/// is served with DuckLake's type, and DuckDB casts the values inserted into it (`COPY FROM
/// DATABASE` from a SQLite catalog; RFC 0014).
fn stored_form_of(served: &str, declared: &str) -> Option<u8> {
    use crate::duckdb_types::{BOOLEAN, TIMESTAMP_TZ, UUID};
    match (served, declared) {
        ("BOOLEAN", "BIGINT") => Some(BOOLEAN),
        ("TIMESTAMP WITH TIME ZONE", "VARCHAR") => Some(TIMESTAMP_TZ),
        ("UUID", "VARCHAR") => Some(UUID),
        _ => None,
    }
}

/// Check a CREATE TABLE against what moraine serves, and return the definition moraine keeps:
/// a fixed table's columns declared in another catalog's stored form ([`stored_form_of`]) take
/// DuckLake's own type.
pub fn validate_new_table(def: &TableDef) -> Result<TableDef> {
    let mut seen = std::collections::HashSet::new();
    for c in &def.columns {
        if !seen.insert(c.name.as_str()) {
            return Err(Error::Schema(format!(
                "table {}.{} declares column {} twice",
                def.schema, def.name, c.name
            )));
        }
    }
    if let Some(fixed) = tables::fixed_table(&def.name) {
        let expected: Vec<(&str, &str)> = fixed_columns(fixed);
        let mut kept = def.clone();
        for (i, (name, ty)) in expected.iter().enumerate() {
            let stored = kept
                .columns
                .get(i)
                .and_then(|c| stored_form_of(ty, &c.type_name));
            match (kept.columns.get_mut(i), stored) {
                (Some(c), _) if c.name == *name && c.type_name == *ty => {}
                (Some(c), Some(id)) if c.name == *name => {
                    c.type_name = ty.to_string();
                    c.type_blob = crate::serialized::type_blob(id);
                }
                (Some(c), _) => {
                    return Err(Error::Schema(format!(
                        "table {} does not match DuckLake's definition: column {} is {} {} but moraine serves {} {} ({OTHER_VERSION_HINT})",
                        def.name,
                        i + 1,
                        c.name,
                        c.type_name,
                        name,
                        ty
                    )))
                }
                (None, _) => {
                    return Err(Error::Schema(format!(
                        "table {} does not match DuckLake's definition: column {name} {ty} is missing ({OTHER_VERSION_HINT})",
                        def.name
                    )))
                }
            }
        }
        if def.columns.len() > expected.len() {
            let extra = &def.columns[expected.len()];
            return Err(Error::Schema(format!(
                "table {} does not match DuckLake's definition: unexpected column {} {} ({OTHER_VERSION_HINT})",
                def.name, extra.name, extra.type_name
            )));
        }
        return Ok(kept);
    }
    if is_inlined_table_name(&def.name) {
        if def.columns.is_empty() {
            return Err(Error::Schema(format!("table {} has no columns", def.name)));
        }
        return Ok(def.clone());
    }
    Err(Error::Catalog(format!(
        "moraine serves only DuckLake's tables; cannot create {}",
        def.name
    )))
}

/// Refuse a `ducklake_metadata` row that says the lake is a catalog version moraine does not
/// serve (`key = 'version'`, no scope): a catalog copied from another DuckLake release, whose
/// rows DuckLake 1.5.5 would read as the wrong things.
pub fn check_catalog_version(def: &TableDef, row: &[Cell]) -> Result<()> {
    if def.name != "ducklake_metadata" {
        return Ok(());
    }
    let text = |name: &str| def.cell(row, name).and_then(Cell::as_text);
    let global = def.cell(row, "scope").is_none_or(Cell::is_null);
    match (text("key"), text("value")) {
        (Some("version"), Some(v)) if global && v != CATALOG_VERSION => {
            let how = if OLDER_VERSIONS.contains(&v) {
                "attach it once with DuckLake 1.5.5 and AUTOMATIC_MIGRATION TRUE, which upgrades it to 1.0, then copy it"
            } else {
                "DuckLake 1.5.5 does not read it either"
            };
            Err(Error::Schema(format!(
                "this is a catalog of DuckLake catalog version {v}; moraine serves version {CATALOG_VERSION} (DuckLake 1.5.5): {how}"
            )))
        }
        _ => Ok(()),
    }
}

/// What a CREATE TABLE does when the table exists (DuckDB's `OnCreateConflict`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnConflict {
    /// Fail: plain `CREATE TABLE`.
    Error,
    /// Keep the table there: `CREATE TABLE IF NOT EXISTS`.
    Ignore,
    /// `CREATE OR REPLACE TABLE`, which moraine refuses.
    Replace,
}

/// The error of a CREATE TABLE of a table that exists. One of DuckLake's fixed tables exists
/// only in a store that holds a lake, which a copy of another catalog (`COPY FROM DATABASE`)
/// cannot go into.
pub fn already_exists(schema: &str, name: &str) -> String {
    if tables::fixed_table(name).is_some() {
        format!(
            "table {schema}.{name} already exists: this store already holds a DuckLake catalog, and a catalog can be copied only into a new, empty store"
        )
    } else {
        format!("table {schema}.{name} already exists")
    }
}

/// DuckLake's definition of a fixed table, as a [`TableDef`] in `schema` (empty type blobs).
pub fn fixed_table_def(schema: &str, name: &str) -> Option<TableDef> {
    let t = tables::fixed_table(name)?;
    Some(TableDef {
        schema: schema.to_string(),
        name: name.to_string(),
        columns: fixed_columns(t)
            .into_iter()
            .map(|(n, ty)| ColumnDef {
                name: n.to_string(),
                type_name: ty.to_string(),
                type_blob: Vec::new(),
            })
            .collect(),
    })
}

/// The kind of a table (its definition has passed [`validate_new_table`]).
pub fn kind_of(def: &TableDef) -> Result<Kind> {
    match def.name.as_str() {
        SNAPSHOT_TABLE => return Ok(Kind::Snapshot(SnapshotHalf::Snapshot)),
        "ducklake_snapshot_changes" => return Ok(Kind::Snapshot(SnapshotHalf::Changes)),
        _ => {}
    }
    if let Some(fixed) = tables::fixed_table(&def.name) {
        let col = |name: &str| {
            def.column_index(name)
                .ok_or_else(|| Error::Schema(format!("table {} has no column {name}", def.name)))
        };
        let key = fixed_key(fixed)
            .iter()
            .map(|k| col(k))
            .collect::<Result<Vec<_>>>()?;
        return Ok(if fixed_versioned(fixed) {
            Kind::Versioned {
                key,
                begin: col("begin_snapshot")?,
                end: col("end_snapshot")?,
            }
        } else {
            Kind::Unversioned {
                key: unversioned_identity(def, key),
            }
        });
    }
    if is_inlined_table_name(&def.name) {
        return Ok(Kind::Inline);
    }
    Err(Error::Catalog(format!(
        "moraine serves only DuckLake's tables; {} is not one",
        def.name
    )))
}

/// DuckLake declares no primary key on its unversioned tables, so two rows may share the
/// columns that usually name one (e.g. two `ducklake_file_partition_value` rows for one file
/// and key index, as `ducklake_add_data_files` writes for hive paths). A row is therefore named
/// by its declared key columns followed by all its other columns: distinct rows never collide,
/// and rows still sort by the declared key. The deletion schedule is the exception: it is keyed
/// by `data_file_id` alone, DuckLake's identity for it (a file is scheduled at most once).
fn unversioned_identity(def: &TableDef, declared: Vec<usize>) -> Vec<usize> {
    if def.name == "ducklake_files_scheduled_for_deletion" {
        return declared;
    }
    let rest: Vec<usize> = (0..def.columns.len())
        .filter(|i| !declared.contains(i))
        .collect();
    declared.into_iter().chain(rest).collect()
}

/// The columns whose cells name a row of `kind`, in order; `None`: the whole row (the inlined
/// tables, whose rows have no key).
pub fn identity_columns(kind: &Kind) -> Option<Vec<usize>> {
    match kind {
        Kind::Snapshot(_) => Some(vec![0]),
        Kind::Versioned { key, begin, .. } => Some(key.iter().copied().chain([*begin]).collect()),
        Kind::Unversioned { key } => Some(key.clone()),
        Kind::Inline => None,
    }
}

/// The cells that name a row: what a staged UPDATE/DELETE's old row is matched by (a missing
/// cell is NULL).
pub fn identity(kind: &Kind, row: &[Cell]) -> Vec<Cell> {
    match identity_columns(kind) {
        Some(columns) => columns
            .iter()
            .map(|&i| row.get(i).cloned().unwrap_or(Cell::Null))
            .collect(),
        None => row.to_vec(),
    }
}

/// Whether a row of a versioned kind has ended (end_snapshot is set).
pub fn is_ended(kind: &Kind, row: &[Cell]) -> bool {
    match kind {
        Kind::Versioned { end, .. } => row.get(*end).is_some_and(|c| !c.is_null()),
        _ => false,
    }
}

/// Columns DuckLake declares `NOT NULL` or `PRIMARY KEY` in its own CREATE TABLE statements.
/// These, and only these, refuse NULL: other key columns may hold NULL (e.g. a global
/// `ducklake_metadata` option has NULL `scope` and `scope_id`), which the key encoding orders
/// first.
pub const NOT_NULL_COLUMNS: &[(&str, &str)] = &[
    ("ducklake_metadata", "key"),
    ("ducklake_metadata", "value"),
    ("ducklake_snapshot", "snapshot_id"),
    ("ducklake_snapshot_changes", "snapshot_id"),
    ("ducklake_schema", "schema_id"),
    ("ducklake_data_file", "data_file_id"),
    ("ducklake_delete_file", "delete_file_id"),
];

/// Refuse NULL in a column DuckLake declares NOT NULL / PRIMARY KEY.
pub fn check_not_null(def: &TableDef, row: &[Cell]) -> Result<()> {
    for (table, column) in NOT_NULL_COLUMNS {
        if *table != def.name {
            continue;
        }
        if let Some(i) = def.column_index(column) {
            if row.get(i).is_none_or(Cell::is_null) {
                return Err(Error::Constraint(format!(
                    "NOT NULL constraint failed: {}.{column} cannot be NULL",
                    def.name
                )));
            }
        }
    }
    Ok(())
}

/// The store key of a fixed-table row (NULL key cells encode as NULL segments).
pub fn row_key(def: &TableDef, kind: &Kind, row: &Row) -> Result<Vec<u8>> {
    let at = |i: usize| row.get(i).cloned().unwrap_or(Cell::Null);
    match kind {
        Kind::Snapshot(_) => match at(0) {
            Cell::Int(id) => Ok(keys::snapshot(&def.schema, id)),
            Cell::Null => Err(Error::Constraint(format!(
                "NOT NULL constraint failed: {}.snapshot_id cannot be NULL",
                def.name
            ))),
            other => Err(Error::Constraint(format!(
                "{}.snapshot_id must be an integer, got {other}",
                def.name
            ))),
        },
        Kind::Versioned { key, begin, end } => {
            let cells: Vec<Cell> = key.iter().map(|&i| at(i)).collect();
            let b = at(*begin);
            match at(*end) {
                Cell::Null => Ok(keys::current(&def.schema, &def.name, &cells, Some(&b))),
                e => Ok(keys::history(&def.schema, &def.name, &cells, &e, &b)),
            }
        }
        Kind::Unversioned { key } => {
            let cells: Vec<Cell> = key.iter().map(|&i| at(i)).collect();
            Ok(keys::current(&def.schema, &def.name, &cells, None))
        }
        Kind::Inline => Err(Error::Catalog(format!(
            "{} is an inlined table; its rows live in chunks, not keys",
            def.name
        ))),
    }
}

/// The committed-state prefixes that hold a fixed table's rows (current first, then history).
pub fn data_prefixes(def: &TableDef, kind: &Kind, need_history: bool) -> Vec<Vec<u8>> {
    match kind {
        Kind::Snapshot(_) => vec![keys::snapshot_prefix(&def.schema)],
        Kind::Versioned { .. } if need_history => {
            vec![
                keys::current_prefix(&def.schema, &def.name),
                keys::history_prefix(&def.schema, &def.name),
            ]
        }
        Kind::Versioned { .. } | Kind::Unversioned { .. } => {
            vec![keys::current_prefix(&def.schema, &def.name)]
        }
        Kind::Inline => vec![keys::inline_chunk_prefix(&def.schema, &def.name)],
    }
}

// ---- embedded rows (RFC 0002, RFC 0007) -------------------------------------------------------

/// A table whose rows ride a parent record: they exist while the parent does and go with it.
/// Both tables lead their key with `id`, so a parent's rows are one key prefix of the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Embedded {
    pub child: &'static str,
    pub parent: &'static str,
    pub id: &'static str,
}

/// Every embedded table DuckLake writes only in the batch that inserts the parent. Column tags
/// are not among them: DuckLake versions a column's tags on their own (COMMENT ON COLUMN ends one
/// and begins another while the column lives on), so they stay a versioned kind. A snapshot's
/// changes row rides its snapshot too, inside their merged `snapshot/<id>` record.
pub const EMBEDDED: &[Embedded] = &[
    Embedded {
        child: "ducklake_snapshot_changes",
        parent: "ducklake_snapshot",
        id: "snapshot_id",
    },
    Embedded {
        child: "ducklake_file_partition_value",
        parent: "ducklake_data_file",
        id: "data_file_id",
    },
    Embedded {
        child: "ducklake_partition_column",
        parent: "ducklake_partition_info",
        id: "partition_id",
    },
    Embedded {
        child: "ducklake_sort_expression",
        parent: "ducklake_sort_info",
        id: "sort_id",
    },
    Embedded {
        child: "ducklake_name_mapping",
        parent: "ducklake_column_mapping",
        id: "mapping_id",
    },
    Embedded {
        child: "ducklake_macro_impl",
        parent: "ducklake_macro",
        id: "macro_id",
    },
    Embedded {
        child: "ducklake_macro_parameters",
        parent: "ducklake_macro",
        id: "macro_id",
    },
];

/// The parent a table's rows ride, if they ride one.
pub fn embedded_in(table: &str) -> Option<&'static Embedded> {
    EMBEDDED.iter().find(|e| e.child == table)
}

/// The tables whose rows ride `table`'s records.
pub fn embedded_children(table: &str) -> impl Iterator<Item = &'static Embedded> + '_ {
    EMBEDDED.iter().filter(move |e| e.parent == table)
}

/// The parent id a row of `def` names in column `id`, when it is an integer.
pub fn parent_id(def: &TableDef, e: &Embedded, row: &[Cell]) -> Option<i64> {
    def.cell(row, e.id).and_then(Cell::as_int)
}

// ---- the merged snapshot record -------------------------------------------------------------

/// `snapshot/<id>`: the ducklake_snapshot row and the ducklake_snapshot_changes row of one id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotRecord {
    pub snapshot: Option<Row>,
    pub changes: Option<Row>,
}

const SNAPSHOT_RECORD_VERSION: u8 = 1;

/// Where a stored snapshot record's two row records lie (snapshot, changes).
type HalfRanges = (Option<Range<usize>>, Option<Range<usize>>);

impl SnapshotRecord {
    pub fn half(&self, h: SnapshotHalf) -> &Option<Row> {
        match h {
            SnapshotHalf::Snapshot => &self.snapshot,
            SnapshotHalf::Changes => &self.changes,
        }
    }

    pub fn half_mut(&mut self, h: SnapshotHalf) -> &mut Option<Row> {
        match h {
            SnapshotHalf::Snapshot => &mut self.snapshot,
            SnapshotHalf::Changes => &mut self.changes,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.snapshot.is_none() && self.changes.is_none()
    }

    /// `[version][flags][len][snapshot row][changes row]`
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![SNAPSHOT_RECORD_VERSION];
        let flags = (self.snapshot.is_some() as u8) | ((self.changes.is_some() as u8) << 1);
        out.push(flags);
        let a = self
            .snapshot
            .as_ref()
            .map(|r| encode_row(r))
            .unwrap_or_default();
        crate::cell::put_varint(&mut out, a.len() as u64);
        out.extend_from_slice(&a);
        if let Some(r) = &self.changes {
            out.extend_from_slice(&encode_row(r));
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<SnapshotRecord> {
        let (snapshot, changes) = Self::halves(bytes)?;
        Ok(SnapshotRecord {
            snapshot: snapshot.map(|r| decode_row(&bytes[r])).transpose()?,
            changes: changes.map(|r| decode_row(&bytes[r])).transpose()?,
        })
    }

    /// One half of a stored record as the row record it holds (sharing `bytes`), checked whole.
    pub fn half_record(bytes: &bytes::Bytes, h: SnapshotHalf) -> Result<Option<bytes::Bytes>> {
        let (snapshot, changes) = Self::halves(bytes)?;
        // both halves are checked, as decoding the record would
        for r in [&snapshot, &changes].into_iter().flatten() {
            crate::cell::walk_row(&bytes[r.clone()], |_, _| {})?;
        }
        let half = match h {
            SnapshotHalf::Snapshot => snapshot,
            SnapshotHalf::Changes => changes,
        };
        Ok(half.map(|r| bytes.slice(r)))
    }

    /// Where each half's row record lies in a stored record.
    fn halves(bytes: &[u8]) -> Result<HalfRanges> {
        let bad = || Error::Corrupt("snapshot record is malformed".into());
        if bytes.len() < 3 || bytes[0] != SNAPSHOT_RECORD_VERSION {
            return Err(bad());
        }
        let flags = bytes[1];
        let mut pos = 2;
        let mut len = 0u64;
        let mut shift = 0;
        loop {
            let b = *bytes.get(pos).ok_or_else(bad)?;
            pos += 1;
            len |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 63 {
                return Err(bad());
            }
        }
        let end = pos.checked_add(len as usize).ok_or_else(bad)?;
        if bytes.len() < end {
            return Err(bad());
        }
        let snapshot = (flags & 1 != 0).then_some(pos..end);
        let changes = if flags & 2 != 0 {
            Some(end..bytes.len())
        } else if end == bytes.len() {
            None
        } else {
            return Err(bad());
        };
        Ok((snapshot, changes))
    }
}

// ---- adapters to tables.rs -------------------------------------------------------------------
// tables.rs is owned elsewhere; these three functions are the only places that read its shape.

fn fixed_columns(t: &tables::FixedTable) -> Vec<(&'static str, &'static str)> {
    t.columns.iter().map(|c| (c.name, c.ty)).collect()
}

fn fixed_key(t: &tables::FixedTable) -> Vec<&'static str> {
    t.key.to_vec()
}

fn fixed_versioned(t: &tables::FixedTable) -> bool {
    matches!(t.lifecycle, tables::Lifecycle::Versioned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, ty: &str) -> ColumnDef {
        ColumnDef {
            name: name.into(),
            type_name: ty.into(),
            type_blob: vec![1, 2, 3],
        }
    }

    fn fixed_def(name: &str) -> TableDef {
        let t = tables::fixed_table(name).unwrap();
        TableDef {
            schema: "main".into(),
            name: name.into(),
            columns: fixed_columns(t).iter().map(|(n, ty)| col(n, ty)).collect(),
        }
    }

    #[test]
    fn inlined_names() {
        assert!(is_inlined_table_name("ducklake_inlined_data_1_0"));
        assert!(is_inlined_table_name("ducklake_inlined_data_12_345"));
        assert!(is_inlined_table_name("ducklake_inlined_delete_7"));
        for bad in [
            "ducklake_inlined_data_1",
            "ducklake_inlined_data_1_x",
            "ducklake_inlined_data__1",
            "ducklake_inlined_delete_",
            "ducklake_inlined_delete_1_2",
            "my_table",
        ] {
            assert!(!is_inlined_table_name(bad), "{bad}");
        }
    }

    #[test]
    fn table_def_round_trips() {
        let def = fixed_def("ducklake_table");
        assert_eq!(TableDef::decode(&def.encode()).unwrap(), def);
    }

    #[test]
    fn fixed_tables_are_validated_column_by_column() {
        let good = fixed_def("ducklake_table");
        validate_new_table(&good).unwrap();
        let mut wrong_type = good.clone();
        wrong_type.columns[2].type_name = "INTEGER".into();
        let e = validate_new_table(&wrong_type).unwrap_err().to_string();
        assert!(
            e.contains("ducklake_table") && e.contains("begin_snapshot"),
            "{e}"
        );
        let mut missing = good.clone();
        missing.columns.pop();
        assert!(validate_new_table(&missing).is_err());
        let mut extra = good;
        extra.columns.push(col("bonus", "BIGINT"));
        let e = validate_new_table(&extra).unwrap_err().to_string();
        assert!(e.contains("bonus"), "{e}");
    }

    #[test]
    fn another_catalog_s_stored_forms_are_served_as_ducklake_s_types() {
        // a SQLite catalog as DuckDB's sqlite extension reads it: booleans as BIGINT,
        // timestamps with time zone and UUIDs as VARCHAR
        let mut sqlite = fixed_def("ducklake_table");
        let served = sqlite.clone();
        for c in &mut sqlite.columns {
            match c.type_name.as_str() {
                "BOOLEAN" => c.type_name = "BIGINT".into(),
                "UUID" | "TIMESTAMP WITH TIME ZONE" => c.type_name = "VARCHAR".into(),
                _ => {}
            }
        }
        assert_ne!(sqlite, served);
        let kept = validate_new_table(&sqlite).unwrap();
        for (k, s) in kept.columns.iter().zip(&served.columns) {
            assert_eq!(k.type_name, s.type_name, "{}", k.name);
        }
        let uuid = kept.column_index("table_uuid").unwrap();
        assert_eq!(kept.columns[uuid].type_blob, vec![100, 0, 54, 0xFF, 0xFF]);
        let relative = kept.column_index("path_is_relative").unwrap();
        assert_eq!(
            kept.columns[relative].type_blob,
            vec![100, 0, 10, 0xFF, 0xFF]
        );
        let mut snap = fixed_def("ducklake_snapshot");
        snap.columns[1].type_name = "VARCHAR".into();
        let kept = validate_new_table(&snap).unwrap();
        assert_eq!(kept.columns[1].type_name, "TIMESTAMP WITH TIME ZONE");
        assert_eq!(kept.columns[1].type_blob, vec![100, 0, 32, 0xFF, 0xFF]);
        // a column DuckLake declares as served keeps the blob DuckDB serialized
        assert_eq!(kept.columns[0].type_blob, vec![1, 2, 3]);
        // only those stored forms: text for a BIGINT, or a BIGINT for a timestamp, is refused,
        // and a mismatch names the catalog version moraine serves
        let mut text_id = fixed_def("ducklake_snapshot");
        text_id.columns[0].type_name = "VARCHAR".into();
        let e = validate_new_table(&text_id).unwrap_err().to_string();
        assert!(
            e.contains("snapshot_id VARCHAR") && e.contains("catalog version 1.0"),
            "{e}"
        );
        let mut int_time = fixed_def("ducklake_snapshot");
        int_time.columns[1].type_name = "BIGINT".into();
        assert!(validate_new_table(&int_time).is_err());
        // inlined tables keep what they declare (DuckLake casts what it reads from them)
        let inl = TableDef {
            schema: "main".into(),
            name: "ducklake_inlined_data_1_1".into(),
            columns: vec![col("row_id", "BIGINT"), col("x", "VARCHAR")],
        };
        assert_eq!(validate_new_table(&inl).unwrap(), inl);
    }

    #[test]
    fn only_the_catalog_version_moraine_serves_is_written() {
        let meta = fixed_def("ducklake_metadata");
        let row = |k: &str, v: &str, scope: Cell| {
            vec![
                Cell::Text(k.into()),
                Cell::Text(v.into()),
                scope,
                Cell::Null,
            ]
        };
        check_catalog_version(&meta, &row("version", "1.0", Cell::Null)).unwrap();
        let e = check_catalog_version(&meta, &row("version", "0.3", Cell::Null))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("catalog version 0.3") && e.contains("AUTOMATIC_MIGRATION TRUE"),
            "{e}"
        );
        let e = check_catalog_version(&meta, &row("version", "1.1", Cell::Null))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("catalog version 1.1") && e.contains("does not read it"),
            "{e}"
        );
        // any other key, a scoped option, and other tables are not versions
        check_catalog_version(&meta, &row("data_path", "0.3", Cell::Null)).unwrap();
        check_catalog_version(&meta, &row("version", "0.3", Cell::Text("table".into()))).unwrap();
        let snap = fixed_def("ducklake_snapshot");
        check_catalog_version(
            &snap,
            &[Cell::Text("version".into()), Cell::Text("0.3".into())],
        )
        .unwrap();
    }

    #[test]
    fn a_duck_lake_table_that_exists_means_the_store_holds_a_lake() {
        let e = already_exists("main", "ducklake_snapshot");
        assert!(e.contains("already holds a DuckLake catalog"), "{e}");
        assert!(e.contains("new, empty store"), "{e}");
        let e = already_exists("main", "ducklake_inlined_data_1_1");
        assert_eq!(e, "table main.ducklake_inlined_data_1_1 already exists");
    }

    #[test]
    fn only_ducklake_tables_may_be_created() {
        let def = TableDef {
            schema: "main".into(),
            name: "users".into(),
            columns: vec![col("id", "BIGINT")],
        };
        let e = validate_new_table(&def).unwrap_err().to_string();
        assert!(
            e.contains("moraine serves only DuckLake's tables; cannot create users"),
            "{e}"
        );
        let inl = TableDef {
            schema: "main".into(),
            name: "ducklake_inlined_data_1_0".into(),
            columns: vec![col("row_id", "BIGINT"), col("x", "VARCHAR")],
        };
        validate_new_table(&inl).unwrap();
        assert_eq!(kind_of(&inl).unwrap(), Kind::Inline);
    }

    #[test]
    fn kinds_and_keys() {
        let t = fixed_def("ducklake_table");
        let kind = kind_of(&t).unwrap();
        assert!(matches!(kind, Kind::Versioned { .. }));
        let row = vec![
            Cell::Int(1),
            Cell::Blob(vec![9]),
            Cell::Int(2),
            Cell::Null,
            Cell::Int(0),
            Cell::Text("t".into()),
            Cell::Text("t/".into()),
            Cell::Bool(true),
        ];
        let k = row_key(&t, &kind, &row).unwrap();
        assert!(k.starts_with(&keys::current_prefix(&t.schema, "ducklake_table")));
        let mut ended = row.clone();
        ended[3] = Cell::Int(5);
        let k = row_key(&t, &kind, &ended).unwrap();
        assert!(k.starts_with(&keys::history_prefix(&t.schema, "ducklake_table")));
        // a NULL key cell is a NULL segment (it sorts first) ...
        let mut null_key = row;
        null_key[0] = Cell::Null;
        let k = row_key(&t, &kind, &null_key).unwrap();
        assert!(k < row_key(&t, &kind, &ended).unwrap());
        // ... but DuckLake's NOT NULL / PRIMARY KEY columns refuse NULL
        let meta = fixed_def("ducklake_metadata");
        let global = vec![
            Cell::Text("version".into()),
            Cell::Text("1.0".into()),
            Cell::Null,
            Cell::Null,
        ];
        check_not_null(&meta, &global).unwrap();
        row_key(&meta, &kind_of(&meta).unwrap(), &global).unwrap();
        let no_key = vec![Cell::Null, Cell::Text("1.0".into()), Cell::Null, Cell::Null];
        let e = check_not_null(&meta, &no_key).unwrap_err().to_string();
        assert!(e.contains("ducklake_metadata.key"), "{e}");
        let s = fixed_def("ducklake_snapshot");
        let e = row_key(&s, &kind_of(&s).unwrap(), &vec![Cell::Null; 5])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ducklake_snapshot.snapshot_id"), "{e}");
        assert_eq!(
            kind_of(&fixed_def("ducklake_snapshot_changes")).unwrap(),
            Kind::Snapshot(SnapshotHalf::Changes)
        );
    }

    #[test]
    fn snapshot_record_round_trips() {
        for rec in [
            SnapshotRecord {
                snapshot: Some(vec![Cell::Int(3), Cell::Blob(vec![1])]),
                changes: Some(vec![Cell::Int(3), Cell::Text("created_table".into())]),
            },
            SnapshotRecord {
                snapshot: Some(vec![Cell::Int(3)]),
                changes: None,
            },
            SnapshotRecord {
                snapshot: None,
                changes: Some(vec![Cell::Int(3)]),
            },
        ] {
            assert_eq!(SnapshotRecord::decode(&rec.encode()).unwrap(), rec);
        }
        assert!(SnapshotRecord::decode(&[9, 0, 0]).is_err());
    }
}
