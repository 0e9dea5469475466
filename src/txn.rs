//! Transactions: what the FFI calls (RFC 0006, RFC 0009).
//!
//! A [`Transaction`] pins its read point lazily (on its first read), stages DuckLake's row
//! operations untranslated in stage order, serves every table through one materialization per
//! transaction (committed rows + overlay), and commits by translating the staged operations into
//! one SlateDB write.

use crate::catalog::{self, CommittedCatalog, Kind, OnConflict, TableDef};
use crate::cell::Row;
use crate::error::{Error, Result};
use crate::floor;
use crate::head::Head;
use crate::image::Image;
use crate::keys;
pub use crate::op::Op;
use crate::overlay::{self, RowOp};
use crate::rowset::RowSet;
#[cfg(test)]
use crate::runtime::block_on;
use crate::store::Store;
use crate::translate;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// The schema every store has; it cannot be dropped.
pub const DEFAULT_SCHEMA: &str = "main";

/// One materialization of one table in one transaction.
#[derive(Debug)]
pub struct Materialized {
    pub id: u32,
    /// The rows, shared with the committed image when the transaction changed nothing in the
    /// table.
    pub rows: Rows,
    /// Rows at and after this index are derived, not stored (the schema-version floor, see
    /// `floor`): deleting one is a no-op, updating one is refused.
    pub stored: usize,
}

/// A materialization's rows: a `Vec<Row>` to read, shared by `Arc`.
#[derive(Clone)]
pub struct Rows(pub Arc<RowSet>);

impl std::ops::Deref for Rows {
    type Target = Vec<Row>;
    fn deref(&self) -> &Vec<Row> {
        &self.0
    }
}

/// Reading one row, or the count, decodes nothing else (a row set served from records
/// decodes each row on first read); the deref to `Vec<Row>` decodes them all.
impl Rows {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, i: usize) -> Option<&Row> {
        self.0.get(i)
    }
}

impl std::fmt::Debug for Rows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl<'a> IntoIterator for &'a Rows {
    type Item = &'a Row;
    type IntoIter = std::slice::Iter<'a, Row>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl PartialEq for Rows {
    fn eq(&self, other: &Rows) -> bool {
        **self == **other
    }
}

impl PartialEq<Vec<Row>> for Rows {
    fn eq(&self, other: &Vec<Row>) -> bool {
        **self == *other
    }
}

impl PartialEq<Rows> for Vec<Row> {
    fn eq(&self, other: &Rows) -> bool {
        *self == **other
    }
}

const SCHEMA_VERSIONS: &str = floor::DERIVED;
const DATA_FILE: &str = floor::INPUTS[0];
const SNAPSHOT: &str = floor::INPUTS[1];

const INDEX_BITS: u32 = 40;
const MAX_MATERIALIZATION_ID: u32 = (1 << (63 - INDEX_BITS)) - 1;

/// The rowid a scan emits for row `index` of materialization `id`.
pub fn rowid(id: u32, index: usize) -> i64 {
    ((id as i64) << INDEX_BITS) | (index as i64 & ((1i64 << INDEX_BITS) - 1))
}

/// Split a rowid into (materialization id, index).
pub fn split_rowid(rowid: i64) -> (u32, usize) {
    (
        (rowid >> INDEX_BITS) as u32,
        (rowid & ((1i64 << INDEX_BITS) - 1)) as usize,
    )
}

type TableId = (String, String);

/// A statement that stages at least this many rows into one table logs it at info: the
/// progress of a long copy (`COPY FROM DATABASE`, RFC 0014), one line per table.
const PROGRESS_ROWS: usize = 1000;

/// A committed transaction that staged at least this many operations frees them aside.
const FREE_ASIDE_OPS: usize = 1024;

/// A moraine transaction. Not thread-safe by itself; the FFI serializes calls.
pub struct Transaction {
    store: Arc<Store>,
    /// The committed image this transaction reads, pinned on its first read (RFC 0009).
    image: Option<Arc<Image>>,
    ops: Vec<Op>,
    catalog: Option<Arc<CommittedCatalog>>,
    /// The current materialization per (table, need_history); dropped when the table is written.
    cache: HashMap<(TableId, bool), Arc<Materialized>>,
    /// Every materialization of this transaction, so any rowid a scan emitted stays resolvable.
    registry: HashMap<u32, (TableId, Arc<Materialized>)>,
    /// rowid -> index in `ops` of the update/delete staged for it. A rowid named twice comes
    /// from one statement (a join matched the row twice): the change is applied once.
    touched: HashMap<i64, usize>,
    next_id: u32,
    /// The rows this transaction holds in the store's row locks (as owner `stamp.txn`).
    locked: Vec<Vec<u8>>,
    /// Identities of the rows this transaction deleted.
    deleted: std::collections::HashSet<Vec<u8>>,
    /// Unique in the process (also its owner in the row locks), with a generation bumped by
    /// every staged change: equal stamps read equal rows ([`Transaction::stamp`]).
    stamp: Stamp,
    /// Set when a read of this transaction gave up on the store (its time limit passed): the
    /// store's place and why, so that its later reads of the store fail at once rather than
    /// each waiting out the limit again (DuckDB plans a query with several reads of one table).
    unreachable: Option<(String, String)>,
}

/// What a transaction's reads depend on, so that a caller may keep what it read: two calls of
/// [`Transaction::rows`] under one stamp return the same rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The transaction, unique in the process.
    pub txn: u64,
    /// Bumped by every staged change (at least once each; the staged changes only grow).
    pub generation: u64,
}

static NEXT_TXN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Store {
    /// Begin a transaction. Cheap: the read point is pinned on first read.
    pub fn begin(self: &Arc<Self>) -> Transaction {
        Transaction {
            store: self.clone(),
            image: None,
            ops: Vec::new(),
            catalog: None,
            cache: HashMap::new(),
            registry: HashMap::new(),
            touched: HashMap::new(),
            next_id: 1,
            locked: Vec::new(),
            deleted: Default::default(),
            unreachable: None,
            stamp: Stamp {
                txn: NEXT_TXN.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                generation: 0,
            },
        }
    }
}

impl Transaction {
    /// The image this transaction reads: pinned on first use, then fixed.
    fn pinned(&mut self) -> Result<Arc<Image>> {
        if let Some(image) = &self.image {
            return Ok(image.clone());
        }
        let image = self.store.pin_image()?;
        self.image = Some(image.clone());
        Ok(image)
    }

    /// The committed head this transaction reads.
    pub fn head(&mut self) -> Result<Head> {
        Ok(self.pinned()?.head())
    }

    /// The committed head snapshot of the lake in schema `lake` this transaction reads; `None`
    /// before its first snapshot.
    pub fn head_snapshot(&mut self, lake: &str) -> Result<Option<i64>> {
        self.pinned()?.lake_snapshot(lake)
    }

    /// The committed schemas and table definitions, decoded once per image (shared by every
    /// transaction pinned to it).
    fn committed_catalog(&mut self) -> Result<Arc<CommittedCatalog>> {
        if let Some(cat) = &self.catalog {
            return Ok(cat.clone());
        }
        let image = self.pinned()?;
        let cat = image.catalog()?;
        self.catalog = Some(cat.clone());
        Ok(cat)
    }

    fn schema_set(&mut self) -> Result<BTreeSet<String>> {
        let mut set = self.committed_catalog()?.schemas.clone();
        for op in &self.ops {
            match op {
                Op::CreateSchema(n) => {
                    set.insert(n.clone());
                }
                Op::DropSchema(n) => {
                    set.remove(n);
                }
                _ => {}
            }
        }
        Ok(set)
    }

    fn table_map(&mut self) -> Result<BTreeMap<TableId, Arc<TableDef>>> {
        let mut map = self.committed_catalog()?.tables.clone();
        for op in &self.ops {
            match op {
                Op::CreateTable(def) => {
                    map.insert((def.schema.clone(), def.name.clone()), def.clone());
                }
                Op::DropTable { schema, name } => {
                    map.remove(&(schema.clone(), name.clone()));
                }
                _ => {}
            }
        }
        Ok(map)
    }

    fn table_def(&mut self, schema: &str, name: &str) -> Result<Arc<TableDef>> {
        self.table(schema, name)?
            .ok_or_else(|| Error::Catalog(format!("table {schema}.{name} does not exist")))
    }

    /// This transaction's [`Stamp`].
    pub fn stamp(&self) -> Stamp {
        self.stamp
    }

    fn invalidate(&mut self, schema: &str, table: &str) {
        self.stamp.generation += 1;
        let id = (schema.to_string(), table.to_string());
        self.cache.remove(&(id.clone(), false));
        self.cache.remove(&(id, true));
        if table == DATA_FILE || table == SNAPSHOT {
            // the schema-version floor is derived from the data files and snapshots
            self.invalidate(schema, SCHEMA_VERSIONS);
        }
        for e in catalog::embedded_children(table) {
            // embedded rows are served only while their parent is
            self.invalidate(schema, e.child);
        }
    }

    /// Schema names, committed and staged.
    pub fn schemas(&mut self) -> Result<Vec<String>> {
        Ok(self.schema_set()?.into_iter().collect())
    }

    pub fn create_schema(&mut self, name: &str, if_not_exists: bool) -> Result<()> {
        if name.is_empty() {
            return Err(Error::InvalidInput("a schema name cannot be empty".into()));
        }
        if self.schema_set()?.contains(name) {
            return if if_not_exists {
                Ok(())
            } else {
                Err(Error::Catalog(format!("schema {name} already exists")))
            };
        }
        self.stamp.generation += 1;
        self.ops.push(Op::CreateSchema(name.to_string()));
        Ok(())
    }

    /// Drop an empty schema.
    pub fn drop_schema(&mut self, name: &str, if_exists: bool) -> Result<()> {
        if !self.schema_set()?.contains(name) {
            return if if_exists {
                Ok(())
            } else {
                Err(Error::Catalog(format!("schema {name} does not exist")))
            };
        }
        if name == DEFAULT_SCHEMA {
            return Err(Error::Catalog(format!(
                "cannot drop schema {name}: it is the default schema"
            )));
        }
        if self.table_map()?.keys().any(|(s, _)| s == name) {
            return Err(Error::Catalog(format!(
                "cannot drop schema {name}: it still holds tables"
            )));
        }
        self.stamp.generation += 1;
        self.ops.push(Op::DropSchema(name.to_string()));
        Ok(())
    }

    /// Table definitions in `schema`, committed and staged, by name.
    pub fn tables(&mut self, schema: &str) -> Result<Vec<Arc<TableDef>>> {
        if !self.schema_set()?.contains(schema) {
            return Err(Error::Catalog(format!("schema {schema} does not exist")));
        }
        Ok(self
            .table_map()?
            .into_iter()
            .filter(|((s, _), _)| s == schema)
            .map(|(_, d)| d)
            .collect())
    }

    /// The id of the committed schemas and tables this transaction sees
    /// ([`CommittedCatalog::id`]), or `None` once it has staged DDL: its definitions are then
    /// its own, and entries built for them are not to be shared.
    pub fn definitions(&mut self) -> Result<Option<u64>> {
        let staged_ddl = self.ops.iter().any(|op| {
            matches!(
                op,
                Op::CreateSchema(_) | Op::DropSchema(_) | Op::CreateTable(_) | Op::DropTable { .. }
            )
        });
        if staged_ddl {
            return Ok(None);
        }
        Ok(Some(self.committed_catalog()?.id))
    }

    /// One table of `schema` by its exact name, committed or staged; `None` when absent.
    pub fn table(&mut self, schema: &str, name: &str) -> Result<Option<Arc<TableDef>>> {
        // the last staged create or drop of the table decides, else the committed catalog
        for op in self.ops.iter().rev() {
            match op {
                Op::CreateTable(def) if def.schema == schema && def.name == name => {
                    return Ok(Some(def.clone()))
                }
                Op::DropTable { schema: s, name: n } if s == schema && n == name => {
                    return Ok(None)
                }
                _ => {}
            }
        }
        Ok(self
            .committed_catalog()?
            .tables
            .get(&(schema.to_string(), name.to_string()))
            .cloned())
    }

    /// Create one of DuckLake's tables (validated against what moraine serves); an error if it
    /// exists.
    pub fn create_table(&mut self, def: TableDef) -> Result<()> {
        self.create_table_on_conflict(def, OnConflict::Error)
            .map(|_| ())
    }

    /// [`Self::create_table`], doing what `on_conflict` says when the table exists. Returns
    /// whether it was created: `false` when it exists and the statement said `IF NOT EXISTS`.
    pub fn create_table_on_conflict(
        &mut self,
        def: TableDef,
        on_conflict: OnConflict,
    ) -> Result<bool> {
        if !self.schema_set()?.contains(&def.schema) {
            return Err(Error::Catalog(format!(
                "cannot create table {}.{}: schema {} does not exist",
                def.schema, def.name, def.schema
            )));
        }
        if self
            .table_map()?
            .contains_key(&(def.schema.clone(), def.name.clone()))
        {
            return match on_conflict {
                OnConflict::Ignore => Ok(false),
                OnConflict::Error => Err(Error::Catalog(catalog::already_exists(
                    &def.schema,
                    &def.name,
                ))),
                OnConflict::Replace => Err(Error::Catalog(format!(
                    "CREATE OR REPLACE TABLE {}.{} is not supported: moraine replaces none of DuckLake's tables",
                    def.schema, def.name
                ))),
            };
        }
        let def = catalog::validate_new_table(&def)?;
        self.invalidate(&def.schema, &def.name);
        self.ops.push(Op::CreateTable(Arc::new(def)));
        Ok(true)
    }

    pub fn drop_table(&mut self, schema: &str, name: &str) -> Result<()> {
        self.table_def(schema, name)?;
        self.invalidate(schema, name);
        self.ops.push(Op::DropTable {
            schema: schema.to_string(),
            name: name.to_string(),
        });
        Ok(())
    }

    fn committed_rows(
        &mut self,
        def: &TableDef,
        kind: &Kind,
        need_history: bool,
    ) -> Result<Arc<RowSet>> {
        let image = self.pinned()?;
        if !crate::image::reads_history(kind, need_history) {
            // live rows are all in the image's memory: nothing to wait for, so no time limit
            // to run under (the runtime's timer costs more than serving them)
            return image.live_rows(def, kind);
        }
        if let Some((location, reason)) = &self.unreachable {
            return Err(Error::Unreachable {
                location: location.clone(),
                reason: reason.clone(),
            });
        }
        let read = || {
            self.store.bounded(
                "reading rows",
                image.rows(&self.store.backend(), def, kind, need_history),
            )
        };
        let read = match read() {
            // the folder role was taken while this transaction read through the writer: it
            // reads its pinned view through a reader of the lake from here on
            Err(Error::Fenced(_)) if !self.store.is_read_only() => {
                self.store.go_on_without_the_role()?;
                read()
            }
            read => read,
        };
        if let Err(Error::Unreachable { location, reason }) = &read {
            self.unreachable = Some((location.clone(), reason.clone()));
        }
        read
    }

    /// The table's rows as this transaction sees them (committed + staged, in stage order).
    ///
    /// Materialized once per transaction per table: repeated calls return the same `Arc` until
    /// the transaction stages a write to the table. `need_history == false` returns only live
    /// rows (end_snapshot NULL) of versioned kinds and never reads `history/`; other kinds
    /// ignore the flag (both variants are the same materialization).
    pub fn rows(
        &mut self,
        schema: &str,
        table: &str,
        need_history: bool,
    ) -> Result<Arc<Materialized>> {
        let def = self.table_def(schema, table)?;
        let kind = catalog::kind_of(&def)?;
        let need_history = need_history || !matches!(kind, Kind::Versioned { .. });
        let id: TableId = (schema.to_string(), table.to_string());
        if let Some(m) = self.cache.get(&(id.clone(), need_history)) {
            return Ok(m.clone());
        }
        let span = tracing::trace_span!(
            "moraine.scan",
            table,
            history = need_history,
            rows = tracing::field::Empty
        )
        .entered();
        // Staged ops that apply: those after the table's last (re)creation in this transaction.
        let created_at = self.ops.iter().rposition(
            |op| matches!(op, Op::CreateTable(d) if d.schema == schema && d.name == table),
        );
        let (committed, start) = match created_at {
            Some(i) => (Arc::new(RowSet::new(Vec::new())), i + 1),
            None => (self.committed_rows(&def, &kind, need_history)?, 0),
        };
        let ops: Vec<RowOp> = self.ops[start..]
            .iter()
            .filter_map(|op| match op {
                Op::Insert {
                    schema: s,
                    table: t,
                    row,
                } if s == schema && t == table => Some(RowOp::Insert(row)),
                Op::Update {
                    schema: s,
                    table: t,
                    old,
                    new,
                } if s == schema && t == table => Some(RowOp::Update { old, new }),
                Op::Delete {
                    schema: s,
                    table: t,
                    old,
                } if s == schema && t == table => Some(RowOp::Delete(old)),
                _ => None,
            })
            .collect();
        let mut rows: Option<Vec<Row>> =
            (!ops.is_empty()).then(|| overlay::apply(&kind, &committed, ops, need_history));
        if let Some(e) = catalog::embedded_in(table) {
            let gone = self.parents_deleted(schema, e)?;
            if !gone.is_empty() {
                let keep =
                    |r: &Row| catalog::parent_id(&def, e, r).is_none_or(|id| !gone.contains(&id));
                rows = Some(match rows.take() {
                    Some(mut r) => {
                        r.retain(|r| keep(r));
                        r
                    }
                    // copy out only the rows that stay
                    None => (0..committed.len())
                        .filter_map(|i| committed.get(i))
                        .filter(|r| keep(r))
                        .cloned()
                        .collect(),
                });
            }
        }
        let stored = rows.as_ref().map_or(committed.len(), Vec::len);
        if table == SCHEMA_VERSIONS {
            let floors = self.schema_version_floors(&def, rows.as_deref().unwrap_or(&committed))?;
            if !floors.is_empty() {
                rows.get_or_insert_with(|| committed.to_vec())
                    .extend(floors);
            }
        }
        // unchanged by this transaction: the image's own rows, shared
        let rows = match rows {
            Some(r) => Arc::new(RowSet::new(r)),
            None => committed,
        };

        if self.next_id > MAX_MATERIALIZATION_ID {
            return Err(Error::InvalidInput(
                "this transaction materialized too many tables; start a new transaction".into(),
            ));
        }
        span.record("rows", rows.len());
        let m = Arc::new(Materialized {
            id: self.next_id,
            rows: Rows(rows),
            stored,
        });
        self.next_id += 1;
        self.registry.insert(m.id, (id.clone(), m.clone()));
        self.cache.insert((id, need_history), m.clone());
        Ok(m)
    }

    /// The parents of an embedded table that this transaction deleted outright (no record of
    /// them is left): their embedded rows go with them, so reads no longer see those rows
    /// (RFC 0007). Translation removes the same rows at commit.
    fn parents_deleted(&mut self, schema: &str, e: &catalog::Embedded) -> Result<BTreeSet<i64>> {
        fn deleted<'o>(op: &'o Op, schema: &str, parent: &str) -> Option<&'o Row> {
            match op {
                Op::Delete {
                    schema: s,
                    table,
                    old,
                } if s == schema && table == parent => Some(old),
                _ => None,
            }
        }
        if !self
            .ops
            .iter()
            .any(|op| deleted(op, schema, e.parent).is_some())
        {
            return Ok(BTreeSet::new());
        }
        // a parent table dropped since holds no record to keep its rows alive or hide them by
        let Some(parent_def) = self
            .table_map()?
            .remove(&(schema.to_string(), e.parent.to_string()))
        else {
            return Ok(BTreeSet::new());
        };
        let mut ids: BTreeSet<i64> = self
            .ops
            .iter()
            .filter_map(|op| {
                deleted(op, schema, e.parent)
                    .and_then(|old| catalog::parent_id(&parent_def, e, old))
            })
            .collect();
        for r in &self.rows(schema, e.parent, true)?.rows {
            if let Some(id) = catalog::parent_id(&parent_def, e, r) {
                ids.remove(&id);
            }
        }
        Ok(ids)
    }

    /// The floor rows `ducklake_schema_versions` derives from this transaction's view of the
    /// lake's data files (RFC 0007); none when the lake has no data-file table.
    fn schema_version_floors(&mut self, def: &TableDef, versions: &[Row]) -> Result<Vec<Row>> {
        let schema = &def.schema;
        let table = |t: &mut Self, name: &str| -> Result<Option<Arc<TableDef>>> {
            Ok(t.table_map()?
                .get(&(schema.clone(), name.to_string()))
                .cloned())
        };
        let Some(files_def) = table(self, DATA_FILE)? else {
            return Ok(Vec::new());
        };
        let files = self.rows(schema, DATA_FILE, true)?;
        // each surviving snapshot's schema version: the version a file beginning there was
        // written under
        let mut snapshot_versions = BTreeMap::new();
        if let Some(snapshot_def) = table(self, SNAPSHOT)? {
            if let (Some(id), Some(version)) = (
                snapshot_def.column_index("snapshot_id"),
                snapshot_def.column_index("schema_version"),
            ) {
                for r in &self.rows(schema, SNAPSHOT, true)?.rows {
                    if let Some(sid) = r[id].as_int() {
                        snapshot_versions.insert(sid, r[version].clone());
                    }
                }
            }
        }
        Ok(floor::schema_version_floors(
            def,
            versions,
            &files_def,
            &files.rows,
            &snapshot_versions,
        ))
    }

    /// Resolve a rowid a scan emitted to its materialization and index.
    pub fn resolve(&self, rowid: i64) -> Result<(Arc<Materialized>, usize)> {
        if rowid < 0 {
            return Err(Error::RowId {
                rowid,
                reason: "rowids are never negative".into(),
            });
        }
        let (id, index) = split_rowid(rowid);
        let (_, m) = self.registry.get(&id).ok_or_else(|| Error::RowId {
            rowid,
            reason: format!("no materialization {id} in this transaction"),
        })?;
        if index >= m.rows.len() {
            return Err(Error::RowId {
                rowid,
                reason: format!("materialization {id} has {} rows", m.rows.len()),
            });
        }
        Ok((m.clone(), index))
    }

    /// The row a rowid names in `schema.table`, and whether it is derived (not stored).
    fn resolve_for(&self, schema: &str, table: &str, rowid: i64) -> Result<(Row, bool)> {
        let (id, _) = split_rowid(rowid);
        let (m, index) = self.resolve(rowid)?;
        let (owner, _) = &self.registry[&id];
        if owner.0 != schema || owner.1 != table {
            return Err(Error::RowId {
                rowid,
                reason: format!(
                    "it names a row of {}.{}, not {schema}.{table}",
                    owner.0, owner.1
                ),
            });
        }
        Ok((
            m.rows.get(index).cloned().unwrap_or_default(),
            index >= m.stored,
        ))
    }

    fn check_width(def: &TableDef, row: &Row) -> Result<()> {
        if row.len() != def.columns.len() {
            return Err(Error::InvalidInput(format!(
                "{}.{} has {} columns but a row has {} cells",
                def.schema,
                def.name,
                def.columns.len(),
                row.len()
            )));
        }
        Ok(())
    }

    /// A row's identity across materializations: its table and every cell.
    fn identity(schema: &str, table: &str, row: &Row) -> Vec<u8> {
        keys::current(schema, table, row, None)
    }

    /// Hold the rows this transaction deletes (or updates), as DuckDB's storage does: a row
    /// another open transaction of this process already deleted (or updated) is a conflict now,
    /// not at commit (see `row_locks`). Like DuckDB, deletes conflict with deletes and updates
    /// with updates; SlateDB catches any other overlap at commit.
    fn lock_rows<'a>(
        &mut self,
        schema: &str,
        table: &str,
        ids: impl ExactSizeIterator<Item = &'a [u8]>,
        delete: bool,
    ) -> Result<()> {
        let (tag, what) = if delete {
            (b'D', "deletion")
        } else {
            (b'U', "update")
        };
        let mut held = Vec::with_capacity(ids.len());
        for id in ids {
            let mut lock = Vec::with_capacity(id.len() + 1);
            lock.push(tag);
            lock.extend_from_slice(id);
            held.push(lock);
        }
        self.store
            .row_locks
            .acquire(self.stamp.txn, held, &mut self.locked)
            .map_err(|_| {
                Error::Conflict(format!(
                    "Conflict on tuple {what}: a row of {schema}.{table} was already {} by \
                     another open transaction; commit or roll back that one first",
                    if delete { "deleted" } else { "updated" }
                ))
            })
    }

    pub fn stage_insert(&mut self, schema: &str, table: &str, rows: Vec<Row>) -> Result<()> {
        let def = self.table_def(schema, table)?;
        for r in &rows {
            Self::check_width(&def, r)?;
        }
        self.invalidate(schema, table);
        if !self.deleted.is_empty() {
            // a row inserted again after this transaction deleted it is a new row to delete
            for r in &rows {
                self.deleted.remove(&Self::identity(schema, table, r));
            }
        }
        let n = rows.len();
        self.ops.extend(rows.into_iter().map(|row| Op::Insert {
            schema: schema.to_string(),
            table: table.to_string(),
            row,
        }));
        if n >= PROGRESS_ROWS {
            // a long copy's progress, a line per table (a catalog copied in, RFC 0014)
            tracing::info!(
                target: "moraine::txn",
                "moraine: staged {n} rows into {schema}.{table} ({} changes staged in all)",
                self.ops.len()
            );
        }
        Ok(())
    }

    /// Stage updates: each rowid names the old row; the new row is complete.
    ///
    /// Idempotent per rowid: a rowid already updated by this transaction (an `UPDATE ... FROM`
    /// join that matched the row twice) replaces that staged update's new row instead of
    /// staging a second change of a row the first one already moved; a rowid already deleted
    /// stays deleted.
    pub fn stage_update(
        &mut self,
        schema: &str,
        table: &str,
        updates: Vec<(i64, Row)>,
    ) -> Result<()> {
        let def = self.table_def(schema, table)?;
        let mut staged = Vec::with_capacity(updates.len());
        for (rowid, new) in &updates {
            Self::check_width(&def, new)?;
            let (old, derived) = self.resolve_for(schema, table, *rowid)?;
            if derived {
                return Err(Error::InvalidInput(format!(
                    "cannot update {schema}.{table} row {old:?}: moraine derives it (the \
                     schema-version floor, RFC 0007); insert the row instead"
                )));
            }
            staged.push((*rowid, old));
        }
        let ids: Vec<Vec<u8>> = staged
            .iter()
            .map(|(_, old)| Self::identity(schema, table, old))
            .collect();
        self.lock_rows(schema, table, ids.iter().map(|id| &id[..]), false)?;
        self.invalidate(schema, table);
        if !self.deleted.is_empty() {
            // a row an update makes again is a new row to delete
            for (_, new) in &updates {
                self.deleted.remove(&Self::identity(schema, table, new));
            }
        }
        for ((rowid, old), (_, new)) in staged.into_iter().zip(updates) {
            match self.touched.get(&rowid) {
                Some(&i) => {
                    if let Op::Update { new: prev, .. } = &mut self.ops[i] {
                        *prev = new;
                    }
                }
                None => {
                    self.touched.insert(rowid, self.ops.len());
                    self.ops.push(Op::Update {
                        schema: schema.to_string(),
                        table: table.to_string(),
                        old,
                        new,
                    });
                }
            }
        }
        Ok(())
    }

    /// Stage deletes of the rows the rowids name. Idempotent per row: a row this transaction
    /// already deleted, named again by this rowid or through another materialization's (a
    /// repeated selection), is not deleted twice.
    pub fn stage_delete(&mut self, schema: &str, table: &str, rowids: Vec<i64>) -> Result<()> {
        self.table_def(schema, table)?;
        let mut staged = Vec::with_capacity(rowids.len());
        for rowid in rowids {
            let (old, derived) = self.resolve_for(schema, table, rowid)?;
            if derived {
                // a derived row goes when its inputs go: deleting it is a validated no-op
                continue;
            }
            let id = Self::identity(schema, table, &old);
            staged.push((rowid, old, id));
        }
        self.lock_rows(schema, table, staged.iter().map(|(_, _, id)| &id[..]), true)?;
        self.invalidate(schema, table);
        for (rowid, old, id) in staged {
            if self.touched.contains_key(&rowid) || !self.deleted.insert(id) {
                continue;
            }
            self.touched.insert(rowid, self.ops.len());
            self.ops.push(Op::Delete {
                schema: schema.to_string(),
                table: table.to_string(),
                old,
            });
        }
        Ok(())
    }

    pub fn has_writes(&self) -> bool {
        !self.ops.is_empty()
    }

    /// The staged operations, in stage order.
    pub fn staged(&self) -> &[Op] {
        &self.ops
    }

    /// Commit: translate the staged operations and write them as ONE SlateDB write batch.
    /// Nothing is written on error. A transaction without writes commits trivially.
    /// The store this transaction reads and commits to.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub fn commit(mut self) -> Result<()> {
        if self.ops.is_empty() {
            return Ok(());
        }
        if self.store.is_read_only() {
            return Err(Error::ReadOnly(format!(
                "cannot commit changes to {}",
                self.store.url()
            )));
        }
        let image = self.pinned()?;
        let catalog = self.committed_catalog()?;
        let store = self.store.clone();
        let tables = &catalog.tables;
        let staged = self.ops.len();
        let started = std::time::Instant::now();
        if staged >= PROGRESS_ROWS {
            tracing::info!(target: "moraine::txn", "moraine: committing {staged} staged changes");
        }
        let mut ops = FreedAside(std::mem::take(&mut self.ops));
        // a catalog copied in: its inlined tables take DuckLake's own types (RFC 0014)
        translate::copied::retype_inlined(&mut ops.0, tables);
        let committed = store.commit_writes(&image, || {
            let _span = tracing::debug_span!("moraine.translate", ops = ops.0.len()).entered();
            let t = store.bounded(
                "translating the commit",
                translate::translate(&store, &image, tables, &ops.0),
            );
            // the staged rows are translated: a large commit's (a catalog copied in, RFC 0014)
            // are freed while its writes go out, not held beside them
            drop(ops);
            let t = t?;
            Ok((t.writes, t.head, ()))
        });
        if staged >= FREE_ASIDE_OPS {
            // what a large transaction staged and read (expiry's thousands of rows, and the
            // image it pinned, which may hold the only reference to what the commit replaced)
            // is freed on another thread, not while DuckDB waits for COMMIT; its row locks
            // still go at once, as the transaction drops
            let staged = (
                self.image.take(),
                self.catalog.take(),
                std::mem::take(&mut self.cache),
                std::mem::take(&mut self.registry),
                std::mem::take(&mut self.touched),
                std::mem::take(&mut self.deleted),
            );
            crate::runtime::free_aside(staged);
        }
        if staged >= PROGRESS_ROWS && committed.is_ok() {
            tracing::info!(
                target: "moraine::txn",
                "moraine: committed {staged} changes in {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
        committed
    }

    /// Discard everything staged. Writes nothing.
    pub fn rollback(self) {}

    /// Test hook: stage `op` as it is, past every check the `stage_*` methods make (rowids
    /// resolved, rows locked): a change a stale selection or a buggy caller could send.
    #[cfg(test)]
    pub(crate) fn stage_unchecked_for_test(&mut self, op: Op) {
        self.ops.push(op);
    }
}

/// Staged operations that go to the freeing thread when dropped, if there are many: however
/// a commit ends, DuckDB does not wait while a copied-in catalog's rows are freed.
struct FreedAside(Vec<Op>);

impl Drop for FreedAside {
    fn drop(&mut self) {
        if self.0.len() >= FREE_ASIDE_OPS {
            crate::runtime::free_aside(std::mem::take(&mut self.0));
        }
    }
}

impl Drop for Transaction {
    /// Committed, rolled back or abandoned: the rows it held are free again.
    fn drop(&mut self) {
        self.store.row_locks.release(self.stamp.txn, &self.locked);
    }
}

// The FFI shares stores across DuckDB threads and moves transactions between them.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    const fn movable<T: Send>() {}
    shared::<Store>();
    movable::<Transaction>();
    shared::<Materialized>();
};

#[cfg(test)]
mod tests;
