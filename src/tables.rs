//! The fixed tables DuckLake 1.5.5 creates for a spec 1.0 catalog (from DuckLake's own CREATE TABLE statements at commit d8a1881e).
//!
//! Source: `DuckLakeMetadataManager::InitializeDuckLake`, `src/storage/ducklake_metadata_manager.cpp:182-240`
//! (the generic / DuckDB-dialect manager; the SQLite and Postgres managers do not override it, so every
//! backend gets these exact statements). Each is issued as
//! `CREATE TABLE {METADATA_CATALOG}.<name>(...)` (no `IF NOT EXISTS`), followed in the same batch by
//! `INSERT INTO ducklake_snapshot VALUES (0, NOW(), 0, 1, 0)`, `INSERT INTO ducklake_snapshot_changes VALUES
//! (0, 'created_schema:"main"', NULL, NULL, NULL)`, `INSERT INTO ducklake_metadata (key, value) VALUES
//! ('version','1.0'), ('created_by','DuckDB <source id>'), ('data_path', '<path>'), ('encrypted','true|false')`
//! and `INSERT INTO ducklake_schema VALUES (0, UUID(), 0, NULL, 'main', 'main/', true)`.
//!
//! Declared constraints (DuckLake never relies on them except through the error text of a violation, which
//! its commit loop retries on: "primary key" / "unique" / "conflict" / "concurrent"):
//! `ducklake_metadata.key` and `.value` are `NOT NULL`; `PRIMARY KEY` on `ducklake_snapshot.snapshot_id`,
//! `ducklake_snapshot_changes.snapshot_id`, `ducklake_schema.schema_id`, `ducklake_data_file.data_file_id`,
//! `ducklake_delete_file.delete_file_id`. No other constraints, no defaults, no indexes.
//!
//! # Dynamic tables (created on demand, not part of [`FIXED_TABLES`])
//!
//! `ducklake_inlined_data_<table_id>_<schema_version>` — inlined rows of one DuckLake table at one schema
//! version (`InlinedTableNameFor`, ducklake_metadata_manager.cpp:2471; DDL at :2475):
//! `CREATE TABLE IF NOT EXISTS {METADATA_CATALOG}."ducklake_inlined_data_<t>_<v>"(row_id BIGINT,
//! begin_snapshot BIGINT, end_snapshot BIGINT, <user columns>)`. Leading columns:
//! `row_id` "BIGINT", `begin_snapshot` "BIGINT", `end_snapshot` "BIGINT", then one column per top-level
//! user column, in table order, named by the user column name (quoted identifier) and typed by
//! `GetColumnType` (:2436): `STRUCT(<child> <type>, ...)`, `<type>[]`, `MAP(<k>, <v>)` rebuilt from the
//! DuckLake column tree, otherwise `LogicalType::ToString()` of the DuckLake type (any DuckDB type except
//! GEOMETRY, which is never inlined; VARIANT *is* inlined by the generic manager). Registered by a row
//! `(table_id, '<name>', schema_version)` in `ducklake_inlined_data_tables` in the same commit batch.
//! Rows: inserted with `end_snapshot = NULL`; deleted logically by `SET end_snapshot`; removed physically
//! by `DELETE ... WHERE begin_snapshot <= n` (flush). Row identity: `(row_id, begin_snapshot)` (an UPDATE of
//! an inlined row re-inserts the same `row_id` at the new snapshot while ending the old version).
//!
//! `ducklake_inlined_delete_<table_id>` — inlined deletions of rows in Parquet data files
//! (`InlinedFileDeletionTableName`, :2824; DDL at :2838 and :2975):
//! `CREATE TABLE IF NOT EXISTS {METADATA_CATALOG}.ducklake_inlined_delete_<t>(file_id BIGINT, row_id BIGINT,
//! begin_snapshot BIGINT)`. Columns: `file_id` "BIGINT", `row_id` "BIGINT", `begin_snapshot` "BIGINT"
//! (no end_snapshot). Not registered anywhere: DuckLake discovers it by probing
//! `SELECT NULL FROM {METADATA_CATALOG}.ducklake_inlined_delete_<t> LIMIT 1` and treating any error as
//! "does not exist". Rows are only inserted, and removed wholesale by `DELETE FROM` (flush) or
//! `DROP TABLE IF EXISTS` (expire_snapshots of a dropped table). Treat all three columns as the row key:
//! two racing transactions can both record the same `(file_id, row_id)` (DuckLake's conflict check does
//! not look at this table), and they differ only in `begin_snapshot`.

/// The fixed tables DuckLake reads to plan a query, at the pinned commit: the snapshot
/// (`DuckLakeMetadataManager::GetSnapshot`, ducklake_metadata_manager.cpp:4091), the catalog at
/// it (`GetCatalogForSnapshot`, :578, and `GetGlobalTableStats`, :984), and a scanned table's
/// files (`GetFilesForTable`, :1587, which reads `ducklake_file_column_stats` only to prune by a
/// filter, so it is not listed). A scan of a table with inlined rows also reads its inlined-data
/// tables. An attach serves these tables' live rows on a background thread (RFC 0009).
pub const READ_TO_PLAN: &[&str] = &[
    "ducklake_metadata",
    "ducklake_snapshot",
    "ducklake_schema",
    "ducklake_table",
    "ducklake_view",
    "ducklake_tag",
    "ducklake_column",
    "ducklake_column_tag",
    "ducklake_macro",
    "ducklake_macro_impl",
    "ducklake_macro_parameters",
    "ducklake_inlined_data_tables",
    "ducklake_partition_info",
    "ducklake_partition_column",
    "ducklake_sort_info",
    "ducklake_sort_expression",
    "ducklake_table_stats",
    "ducklake_table_column_stats",
    "ducklake_data_file",
    "ducklake_delete_file",
];

/// Whether `name` is a fixed table in [`READ_TO_PLAN`].
pub fn read_to_plan(name: &str) -> bool {
    READ_TO_PLAN.contains(&name)
}

/// One column of a fixed DuckLake table: its name and its DuckDB type as `LogicalType::ToString()` prints it (e.g. "BIGINT", "VARCHAR", "BOOLEAN", "TIMESTAMP WITH TIME ZONE", "UUID").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedColumn {
    pub name: &'static str,
    pub ty: &'static str,
}

/// How a table's rows live in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// Has begin_snapshot / end_snapshot columns; an entity version.
    Versioned,
    /// No lifecycle; rows are overwritten/removed by key.
    Unversioned,
}

#[derive(Debug, Clone, Copy)]
pub struct FixedTable {
    pub name: &'static str,
    pub columns: &'static [FixedColumn],
    /// Columns that identify one row. For Versioned tables: the entity identity WITHOUT begin/end_snapshot (e.g. ["table_id"] for ducklake_table, ["column_id","table_id"] for ducklake_column); together with begin_snapshot it must be unique. For Unversioned tables: the columns that are unique per row (e.g. ["snapshot_id"] for ducklake_snapshot, ["data_file_id","column_id"] for ducklake_file_column_stats). If a table has no natural unique key, list ALL its columns and say so in a comment.
    pub key: &'static [&'static str],
    pub lifecycle: Lifecycle,
}

const BIGINT: &str = "BIGINT";
const VARCHAR: &str = "VARCHAR";
const BOOLEAN: &str = "BOOLEAN";
const UUID: &str = "UUID";
const TIMESTAMPTZ: &str = "TIMESTAMP WITH TIME ZONE";

const fn c(name: &'static str, ty: &'static str) -> FixedColumn {
    FixedColumn { name, ty }
}

/// All 28 fixed tables, in the order `InitializeDuckLake` creates them; columns in declared order
/// (DuckLake's positional `INSERT INTO t VALUES (...)` depends on that order).
pub const FIXED_TABLES: &[FixedTable] = &[
    // CREATE TABLE ducklake_metadata(key VARCHAR NOT NULL, value VARCHAR NOT NULL, scope VARCHAR, scope_id BIGINT)
    // Global options have scope = NULL and scope_id = NULL; scoped ones ('schema'|'table', id).
    // Written by InitializeDuckLake (column-list INSERT (key, value)) and SetConfigOption, which does
    // SELECT COUNT(*) ... WHERE key = k AND <scope filter> and then INSERT or
    // UPDATE ... SET value = v WHERE key = k AND <scope filter> (ducklake_metadata_manager.cpp:5182-5225):
    // unique per (key, scope, scope_id). scope and scope_id are NULL for global rows: the key encoding
    // must represent NULL.
    FixedTable {
        name: "ducklake_metadata",
        columns: &[
            c("key", VARCHAR),
            c("value", VARCHAR),
            c("scope", VARCHAR),
            c("scope_id", BIGINT),
        ],
        key: &["key", "scope", "scope_id"],
        lifecycle: Lifecycle::Unversioned,
    },
    // CREATE TABLE ducklake_snapshot(snapshot_id BIGINT PRIMARY KEY, snapshot_time TIMESTAMPTZ,
    //   schema_version BIGINT, next_catalog_id BIGINT, next_file_id BIGINT)
    // One INSERT per commit (InsertSnapshotSql, :3971); DELETE WHERE snapshot_id IN (...) on expire.
    FixedTable {
        name: "ducklake_snapshot",
        columns: &[
            c("snapshot_id", BIGINT),
            c("snapshot_time", TIMESTAMPTZ),
            c("schema_version", BIGINT),
            c("next_catalog_id", BIGINT),
            c("next_file_id", BIGINT),
        ],
        key: &["snapshot_id"],
        lifecycle: Lifecycle::Unversioned,
    },
    // CREATE TABLE ducklake_snapshot_changes(snapshot_id BIGINT PRIMARY KEY, changes_made VARCHAR,
    //   author VARCHAR, commit_message VARCHAR, commit_extra_info VARCHAR)
    FixedTable {
        name: "ducklake_snapshot_changes",
        columns: &[
            c("snapshot_id", BIGINT),
            c("changes_made", VARCHAR),
            c("author", VARCHAR),
            c("commit_message", VARCHAR),
            c("commit_extra_info", VARCHAR),
        ],
        key: &["snapshot_id"],
        lifecycle: Lifecycle::Unversioned,
    },
    // CREATE TABLE ducklake_schema(schema_id BIGINT PRIMARY KEY, schema_uuid UUID, begin_snapshot BIGINT,
    //   end_snapshot BIGINT, schema_name VARCHAR, path VARCHAR, path_is_relative BOOLEAN)
    // schema_id comes from next_catalog_id and is never re-inserted (no schema rename): one version per id.
    FixedTable {
        name: "ducklake_schema",
        columns: &[
            c("schema_id", BIGINT),
            c("schema_uuid", UUID),
            c("begin_snapshot", BIGINT),
            c("end_snapshot", BIGINT),
            c("schema_name", VARCHAR),
            c("path", VARCHAR),
            c("path_is_relative", BOOLEAN),
        ],
        key: &["schema_id"],
        lifecycle: Lifecycle::Versioned,
    },
    // CREATE TABLE ducklake_table(table_id BIGINT, table_uuid UUID, begin_snapshot BIGINT, end_snapshot BIGINT,
    //   schema_id BIGINT, table_name VARCHAR, path VARCHAR, path_is_relative BOOLEAN)
    // A rename ends the live row (UPDATE ... SET end_snapshot WHERE end_snapshot IS NULL AND table_id IN)
    // and inserts a new row with the SAME table_id at the commit snapshot: many versions per table_id.
    FixedTable {
        name: "ducklake_table",
        columns: &[
            c("table_id", BIGINT),
            c("table_uuid", UUID),
            c("begin_snapshot", BIGINT),
            c("end_snapshot", BIGINT),
            c("schema_id", BIGINT),
            c("table_name", VARCHAR),
            c("path", VARCHAR),
            c("path_is_relative", BOOLEAN),
        ],
        key: &["table_id"],
        lifecycle: Lifecycle::Versioned,
    },
    // CREATE TABLE ducklake_view(view_id BIGINT, view_uuid UUID, begin_snapshot BIGINT, end_snapshot BIGINT,
    //   schema_id BIGINT, view_name VARCHAR, dialect VARCHAR, sql VARCHAR, column_aliases VARCHAR)
    // Same rename pattern as ducklake_table (same view_id re-inserted).
    FixedTable {
        name: "ducklake_view",
        columns: &[
            c("view_id", BIGINT),
            c("view_uuid", UUID),
            c("begin_snapshot", BIGINT),
            c("end_snapshot", BIGINT),
            c("schema_id", BIGINT),
            c("view_name", VARCHAR),
            c("dialect", VARCHAR),
            c("sql", VARCHAR),
            c("column_aliases", VARCHAR),
        ],
        key: &["view_id"],
        lifecycle: Lifecycle::Versioned,
    },
    // CREATE TABLE ducklake_tag(object_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, key VARCHAR, value VARCHAR)
    // WriteNewTags (:4347): UPDATE ... SET end_snapshot FROM (VALUES (tid, key)) WHERE object_id=tid AND
    // ducklake_tag.key=overwritten_tags.key AND end_snapshot IS NULL, then INSERT the new (object_id, key).
    FixedTable {
        name: "ducklake_tag",
        columns: &[
            c("object_id", BIGINT),
            c("begin_snapshot", BIGINT),
            c("end_snapshot", BIGINT),
            c("key", VARCHAR),
            c("value", VARCHAR),
        ],
        key: &["object_id", "key"],
        lifecycle: Lifecycle::Versioned,
    },
    // CREATE TABLE ducklake_column_tag(table_id BIGINT, column_id BIGINT, begin_snapshot BIGINT,
    //   end_snapshot BIGINT, key VARCHAR, value VARCHAR)
    // WriteNewColumnTags (:4388): same pattern keyed by (table_id, column_id, key).
    FixedTable {
        name: "ducklake_column_tag",
        columns: &[
            c("table_id", BIGINT),
            c("column_id", BIGINT),
            c("begin_snapshot", BIGINT),
            c("end_snapshot", BIGINT),
            c("key", VARCHAR),
            c("value", VARCHAR),
        ],
        key: &["table_id", "column_id", "key"],
        lifecycle: Lifecycle::Versioned,
    },
    // CREATE TABLE ducklake_data_file(data_file_id BIGINT PRIMARY KEY, table_id BIGINT, begin_snapshot BIGINT,
    //   end_snapshot BIGINT, file_order BIGINT, path VARCHAR, path_is_relative BOOLEAN, file_format VARCHAR,
    //   record_count BIGINT, file_size_bytes BIGINT, footer_size BIGINT, row_id_start BIGINT,
    //   partition_id BIGINT, encryption_key VARCHAR, mapping_id BIGINT, partial_max BIGINT)
    // data_file_id is unique (next_file_id). Note: begin_snapshot of an inserted row is NOT always the
    // commit snapshot (merge_adjacent_files keeps the first source's begin_snapshot), rewrite_data_files
    // does UPDATE ... SET begin_snapshot = n WHERE data_file_id = x, and merge/expire hard-DELETE rows.
    FixedTable {
        name: "ducklake_data_file",
        columns: &[
            c("data_file_id", BIGINT),
            c("table_id", BIGINT),
            c("begin_snapshot", BIGINT),
            c("end_snapshot", BIGINT),
            c("file_order", BIGINT),
            c("path", VARCHAR),
            c("path_is_relative", BOOLEAN),
            c("file_format", VARCHAR),
            c("record_count", BIGINT),
            c("file_size_bytes", BIGINT),
            c("footer_size", BIGINT),
            c("row_id_start", BIGINT),
            c("partition_id", BIGINT),
            c("encryption_key", VARCHAR),
            c("mapping_id", BIGINT),
            c("partial_max", BIGINT),
        ],
        key: &["data_file_id"],
        lifecycle: Lifecycle::Versioned,
    },
    // CREATE TABLE ducklake_file_column_stats(data_file_id BIGINT, table_id BIGINT, column_id BIGINT,
    //   column_size_bytes BIGINT, value_count BIGINT, null_count BIGINT, min_value VARCHAR, max_value VARCHAR,
    //   contains_nan BOOLEAN, extra_stats VARCHAR)
    // One row per (file, column): DuckLakeFileInfo::column_stats is a map keyed by FieldIndex.
    FixedTable {
        name: "ducklake_file_column_stats",
        columns: &[
            c("data_file_id", BIGINT),
            c("table_id", BIGINT),
            c("column_id", BIGINT),
            c("column_size_bytes", BIGINT),
            c("value_count", BIGINT),
            c("null_count", BIGINT),
            c("min_value", VARCHAR),
            c("max_value", VARCHAR),
            c("contains_nan", BOOLEAN),
            c("extra_stats", VARCHAR),
        ],
        key: &["data_file_id", "column_id"],
        lifecycle: Lifecycle::Unversioned,
    },
    // CREATE TABLE ducklake_file_variant_stats(data_file_id BIGINT, table_id BIGINT, column_id BIGINT,
    //   variant_path VARCHAR, shredded_type VARCHAR, column_size_bytes BIGINT, value_count BIGINT,
    //   null_count BIGINT, min_value VARCHAR, max_value VARCHAR, contains_nan BOOLEAN, extra_stats VARCHAR)
    // One row per shredded field: shredded_field_stats is a map keyed by the variant path.
    FixedTable {
        name: "ducklake_file_variant_stats",
        columns: &[
            c("data_file_id", BIGINT),
            c("table_id", BIGINT),
            c("column_id", BIGINT),
            c("variant_path", VARCHAR),
            c("shredded_type", VARCHAR),
            c("column_size_bytes", BIGINT),
            c("value_count", BIGINT),
            c("null_count", BIGINT),
            c("min_value", VARCHAR),
            c("max_value", VARCHAR),
            c("contains_nan", BOOLEAN),
            c("extra_stats", VARCHAR),
        ],
        key: &["data_file_id", "column_id", "variant_path"],
        lifecycle: Lifecycle::Unversioned,
    },
    // CREATE TABLE ducklake_delete_file(delete_file_id BIGINT PRIMARY KEY, table_id BIGINT,
    //   begin_snapshot BIGINT, end_snapshot BIGINT, data_file_id BIGINT, path VARCHAR, path_is_relative BOOLEAN,
    //   format VARCHAR, delete_count BIGINT, file_size_bytes BIGINT, footer_size BIGINT, encryption_key VARCHAR,
    //   partial_max BIGINT)
    // delete_file_id is unique (next_file_id, shared with data files and mappings). An overwritten delete
    // file is hard-DELETEd in the same commit that inserts its replacement (:3833).
    FixedTable {
        name: "ducklake_delete_file",
        columns: &[
            c("delete_file_id", BIGINT),
            c("table_id", BIGINT),
            c("begin_snapshot", BIGINT),
            c("end_snapshot", BIGINT),
            c("data_file_id", BIGINT),
            c("path", VARCHAR),
            c("path_is_relative", BOOLEAN),
            c("format", VARCHAR),
            c("delete_count", BIGINT),
            c("file_size_bytes", BIGINT),
            c("footer_size", BIGINT),
            c("encryption_key", VARCHAR),
            c("partial_max", BIGINT),
        ],
        key: &["delete_file_id"],
        lifecycle: Lifecycle::Versioned,
    },
    // CREATE TABLE ducklake_column(column_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT,
    //   table_id BIGINT, column_order BIGINT, column_name VARCHAR, column_type VARCHAR, initial_default VARCHAR,
    //   default_value VARCHAR, nulls_allowed BOOLEAN, parent_column BIGINT, default_value_type VARCHAR,
    //   default_value_dialect VARCHAR)
    // column_id is a FieldIndex, unique only within a table (nested children have their own ids). ALTERs end
    // the row (UPDATE ... FROM (VALUES (tid, cid)) WHERE table_id=tid AND column_id=cid AND end_snapshot IS
    // NULL) and insert a new version with the same (table_id, column_id).
    FixedTable {
        name: "ducklake_column",
        columns: &[
            c("column_id", BIGINT),
            c("begin_snapshot", BIGINT),
            c("end_snapshot", BIGINT),
            c("table_id", BIGINT),
            c("column_order", BIGINT),
            c("column_name", VARCHAR),
            c("column_type", VARCHAR),
            c("initial_default", VARCHAR),
            c("default_value", VARCHAR),
            c("nulls_allowed", BOOLEAN),
            c("parent_column", BIGINT),
            c("default_value_type", VARCHAR),
            c("default_value_dialect", VARCHAR),
        ],
        key: &["column_id", "table_id"],
        lifecycle: Lifecycle::Versioned,
    },
    // CREATE TABLE ducklake_table_stats(table_id BIGINT, record_count BIGINT, next_row_id BIGINT, file_size_bytes BIGINT)
    // INSERT once per table, then UPDATE ... SET record_count=, file_size_bytes=, next_row_id= WHERE table_id=.
    FixedTable {
        name: "ducklake_table_stats",
        columns: &[
            c("table_id", BIGINT),
            c("record_count", BIGINT),
            c("next_row_id", BIGINT),
            c("file_size_bytes", BIGINT),
        ],
        key: &["table_id"],
        lifecycle: Lifecycle::Unversioned,
    },
    // CREATE TABLE ducklake_table_column_stats(table_id BIGINT, column_id BIGINT, contains_null BOOLEAN,
    //   contains_nan BOOLEAN, min_value VARCHAR, max_value VARCHAR, extra_stats VARCHAR)
    // UPDATE ... FROM (VALUES ...) WHERE table_id=tid AND column_id=cid.
    FixedTable {
        name: "ducklake_table_column_stats",
        columns: &[
            c("table_id", BIGINT),
            c("column_id", BIGINT),
            c("contains_null", BOOLEAN),
            c("contains_nan", BOOLEAN),
            c("min_value", VARCHAR),
            c("max_value", VARCHAR),
            c("extra_stats", VARCHAR),
        ],
        key: &["table_id", "column_id"],
        lifecycle: Lifecycle::Unversioned,
    },
    // CREATE TABLE ducklake_partition_info(partition_id BIGINT, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT)
    // partition_id comes from next_catalog_id (globally unique, never re-inserted); ended by table_id.
    FixedTable {
        name: "ducklake_partition_info",
        columns: &[
            c("partition_id", BIGINT),
            c("table_id", BIGINT),
            c("begin_snapshot", BIGINT),
            c("end_snapshot", BIGINT),
        ],
        key: &["partition_id"],
        lifecycle: Lifecycle::Versioned,
    },
    // CREATE TABLE ducklake_partition_column(partition_id BIGINT, table_id BIGINT, partition_key_index BIGINT,
    //   column_id BIGINT, transform VARCHAR)
    FixedTable {
        name: "ducklake_partition_column",
        columns: &[
            c("partition_id", BIGINT),
            c("table_id", BIGINT),
            c("partition_key_index", BIGINT),
            c("column_id", BIGINT),
            c("transform", VARCHAR),
        ],
        key: &["partition_id", "partition_key_index"],
        lifecycle: Lifecycle::Unversioned,
    },
    // CREATE TABLE ducklake_file_partition_value(data_file_id BIGINT, table_id BIGINT, partition_key_index BIGINT,
    //   partition_value VARCHAR)
    FixedTable {
        name: "ducklake_file_partition_value",
        columns: &[
            c("data_file_id", BIGINT),
            c("table_id", BIGINT),
            c("partition_key_index", BIGINT),
            c("partition_value", VARCHAR),
        ],
        key: &["data_file_id", "partition_key_index"],
        lifecycle: Lifecycle::Unversioned,
    },
    // CREATE TABLE ducklake_files_scheduled_for_deletion(data_file_id BIGINT, path VARCHAR,
    //   path_is_relative BOOLEAN, schedule_start TIMESTAMPTZ)
    // data_file_id holds a data_file_id OR a delete_file_id (both from next_file_id, so still unique); a
    // row is inserted in the same transaction that hard-deletes the file's own metadata row (overwritten
    // delete file, merge_adjacent_files, expire_snapshots), so an id is scheduled at most once.
    // Removed by DELETE ... WHERE data_file_id IN (...) (ducklake_cleanup_old_files).
    FixedTable {
        name: "ducklake_files_scheduled_for_deletion",
        columns: &[
            c("data_file_id", BIGINT),
            c("path", VARCHAR),
            c("path_is_relative", BOOLEAN),
            c("schedule_start", TIMESTAMPTZ),
        ],
        key: &["data_file_id"],
        lifecycle: Lifecycle::Unversioned,
    },
    // CREATE TABLE ducklake_inlined_data_tables(table_id BIGINT, table_name VARCHAR, schema_version BIGINT)
    // Registry of ducklake_inlined_data_<table_id>_<schema_version>; table_name is a function of the two ids.
    // Removed by DELETE ... WHERE table_id=t AND schema_version=v, or WHERE table_id IN (...).
    FixedTable {
        name: "ducklake_inlined_data_tables",
        columns: &[
            c("table_id", BIGINT),
            c("table_name", VARCHAR),
            c("schema_version", BIGINT),
        ],
        key: &["table_id", "schema_version"],
        lifecycle: Lifecycle::Unversioned,
    },
    // CREATE TABLE ducklake_column_mapping(mapping_id BIGINT, table_id BIGINT, type VARCHAR)
    // mapping_id comes from next_file_id. Keyed (mapping_id, table_id): dead-table cleanup
    // deletes it by table_id, the one unversioned kind on that path (RFC 0007).
    FixedTable {
        name: "ducklake_column_mapping",
        columns: &[
            c("mapping_id", BIGINT),
            c("table_id", BIGINT),
            c("type", VARCHAR),
        ],
        key: &["mapping_id", "table_id"],
        lifecycle: Lifecycle::Unversioned,
    },
    // CREATE TABLE ducklake_name_mapping(mapping_id BIGINT, column_id BIGINT, source_name VARCHAR,
    //   target_field_id BIGINT, parent_column BIGINT, is_partition BOOLEAN)
    // column_id is a running counter within one mapping (ConvertNameMapColumn, transaction_state.cpp:494).
    FixedTable {
        name: "ducklake_name_mapping",
        columns: &[
            c("mapping_id", BIGINT),
            c("column_id", BIGINT),
            c("source_name", VARCHAR),
            c("target_field_id", BIGINT),
            c("parent_column", BIGINT),
            c("is_partition", BOOLEAN),
        ],
        key: &["mapping_id", "column_id"],
        lifecycle: Lifecycle::Unversioned,
    },
    // CREATE TABLE ducklake_schema_versions(begin_snapshot BIGINT, schema_version BIGINT, table_id BIGINT)
    // InsertNewSchema (:5127): one row per (table with a schema change, commit snapshot); no end_snapshot.
    FixedTable {
        name: "ducklake_schema_versions",
        columns: &[
            c("begin_snapshot", BIGINT),
            c("schema_version", BIGINT),
            c("table_id", BIGINT),
        ],
        key: &["table_id", "begin_snapshot"],
        lifecycle: Lifecycle::Unversioned,
    },
    // CREATE TABLE ducklake_macro(schema_id BIGINT, macro_id BIGINT, macro_name VARCHAR, begin_snapshot BIGINT, end_snapshot BIGINT)
    // macro_id comes from next_catalog_id and is never re-inserted.
    FixedTable {
        name: "ducklake_macro",
        columns: &[
            c("schema_id", BIGINT),
            c("macro_id", BIGINT),
            c("macro_name", VARCHAR),
            c("begin_snapshot", BIGINT),
            c("end_snapshot", BIGINT),
        ],
        key: &["macro_id"],
        lifecycle: Lifecycle::Versioned,
    },
    // CREATE TABLE ducklake_macro_impl(macro_id BIGINT, impl_id BIGINT, dialect VARCHAR, sql VARCHAR, type VARCHAR)
    // impl_id is the index of the implementation within its macro.
    FixedTable {
        name: "ducklake_macro_impl",
        columns: &[
            c("macro_id", BIGINT),
            c("impl_id", BIGINT),
            c("dialect", VARCHAR),
            c("sql", VARCHAR),
            c("type", VARCHAR),
        ],
        key: &["macro_id", "impl_id"],
        lifecycle: Lifecycle::Unversioned,
    },
    // CREATE TABLE ducklake_macro_parameters(macro_id BIGINT, impl_id BIGINT, column_id BIGINT,
    //   parameter_name VARCHAR, parameter_type VARCHAR, default_value VARCHAR, default_value_type VARCHAR)
    // column_id is the parameter index within the implementation.
    FixedTable {
        name: "ducklake_macro_parameters",
        columns: &[
            c("macro_id", BIGINT),
            c("impl_id", BIGINT),
            c("column_id", BIGINT),
            c("parameter_name", VARCHAR),
            c("parameter_type", VARCHAR),
            c("default_value", VARCHAR),
            c("default_value_type", VARCHAR),
        ],
        key: &["macro_id", "impl_id", "column_id"],
        lifecycle: Lifecycle::Unversioned,
    },
    // CREATE TABLE ducklake_sort_info(sort_id BIGINT, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT)
    // sort_id comes from next_catalog_id; ended by table_id like partition_info.
    FixedTable {
        name: "ducklake_sort_info",
        columns: &[
            c("sort_id", BIGINT),
            c("table_id", BIGINT),
            c("begin_snapshot", BIGINT),
            c("end_snapshot", BIGINT),
        ],
        key: &["sort_id"],
        lifecycle: Lifecycle::Versioned,
    },
    // CREATE TABLE ducklake_sort_expression(sort_id BIGINT, table_id BIGINT, sort_key_index BIGINT,
    //   expression VARCHAR, dialect VARCHAR, sort_direction VARCHAR, null_order VARCHAR)
    FixedTable {
        name: "ducklake_sort_expression",
        columns: &[
            c("sort_id", BIGINT),
            c("table_id", BIGINT),
            c("sort_key_index", BIGINT),
            c("expression", VARCHAR),
            c("dialect", VARCHAR),
            c("sort_direction", VARCHAR),
            c("null_order", VARCHAR),
        ],
        key: &["sort_id", "sort_key_index"],
        lifecycle: Lifecycle::Unversioned,
    },
];

pub fn fixed_table(name: &str) -> Option<&'static FixedTable> {
    FIXED_TABLES.iter().find(|t| t.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn has_column(t: &FixedTable, name: &str) -> bool {
        t.columns.iter().any(|c| c.name == name)
    }

    #[test]
    fn the_tables_read_to_plan_are_fixed_tables() {
        for name in READ_TO_PLAN {
            assert!(fixed_table(name).is_some(), "{name} is not a fixed table");
        }
        assert!(!read_to_plan("ducklake_file_column_stats"));
    }

    #[test]
    fn there_are_28_fixed_tables() {
        assert_eq!(FIXED_TABLES.len(), 28);
    }

    #[test]
    fn table_names_are_unique_and_prefixed() {
        let mut seen = HashSet::new();
        for t in FIXED_TABLES {
            assert!(t.name.starts_with("ducklake_"), "{}", t.name);
            assert!(seen.insert(t.name), "duplicate table {}", t.name);
        }
    }

    #[test]
    fn column_names_are_unique_within_a_table() {
        for t in FIXED_TABLES {
            let mut seen = HashSet::new();
            for col in t.columns {
                assert!(
                    seen.insert(col.name),
                    "duplicate column {}.{}",
                    t.name,
                    col.name
                );
            }
        }
    }

    #[test]
    fn key_columns_exist_and_are_not_repeated() {
        for t in FIXED_TABLES {
            assert!(!t.key.is_empty(), "{} has an empty key", t.name);
            let mut seen = HashSet::new();
            for k in t.key {
                assert!(has_column(t, k), "{}: key column {} missing", t.name, k);
                assert!(seen.insert(*k), "{}: key column {} repeated", t.name, k);
            }
        }
    }

    #[test]
    fn versioned_tables_have_a_lifecycle_and_keys_exclude_it() {
        for t in FIXED_TABLES {
            match t.lifecycle {
                Lifecycle::Versioned => {
                    assert!(has_column(t, "begin_snapshot"), "{}", t.name);
                    assert!(has_column(t, "end_snapshot"), "{}", t.name);
                    for k in t.key {
                        assert!(
                            *k != "begin_snapshot" && *k != "end_snapshot",
                            "{}: versioned key must not contain {}",
                            t.name,
                            k
                        );
                    }
                }
                Lifecycle::Unversioned => {
                    assert!(
                        !has_column(t, "end_snapshot"),
                        "{} has end_snapshot but is Unversioned",
                        t.name
                    );
                }
            }
        }
    }

    #[test]
    fn types_are_logical_type_to_string_spellings() {
        let allowed = [BIGINT, VARCHAR, BOOLEAN, UUID, TIMESTAMPTZ];
        for t in FIXED_TABLES {
            for col in t.columns {
                assert!(
                    allowed.contains(&col.ty),
                    "{}.{}: {}",
                    t.name,
                    col.name,
                    col.ty
                );
            }
        }
        let snap = fixed_table("ducklake_snapshot").unwrap();
        assert_eq!(
            snap.columns[1],
            FixedColumn {
                name: "snapshot_time",
                ty: "TIMESTAMP WITH TIME ZONE"
            }
        );
    }

    #[test]
    fn spot_checks() {
        assert_eq!(
            FIXED_TABLES
                .iter()
                .filter(|t| t.lifecycle == Lifecycle::Versioned)
                .count(),
            11
        );
        assert_eq!(fixed_table("ducklake_data_file").unwrap().columns.len(), 16);
        assert_eq!(
            fixed_table("ducklake_delete_file").unwrap().columns.len(),
            13
        );
        assert_eq!(fixed_table("ducklake_column").unwrap().columns.len(), 13);
        assert_eq!(fixed_table("ducklake_table").unwrap().key, &["table_id"]);
        assert_eq!(
            fixed_table("ducklake_column").unwrap().key,
            &["column_id", "table_id"]
        );
        assert!(fixed_table("ducklake_inlined_data_1_2").is_none());
        assert!(fixed_table("ducklake_file_column_statistics").is_none());
    }
}
