//! Commit-time translation: a transaction's staged operations -> one batch of puts and deletes.
//!
//! Translation walks the staged operations in stage order against a write set laid over the
//! transaction's read point, so a later operation sees what an earlier one wrote:
//! - insert: put the row's key (refusing NULL key cells and an existing key: "primary key /
//!   unique" constraint);
//! - update: delete the old row's key, put the new row's key (an `UPDATE ... SET end_snapshot`
//!   thereby moves a version from `current/` to `history/`); the old row must still be there,
//!   else the transaction lost a race: "conflict";
//! - delete: delete the old row's key (same "conflict" rule);
//! - the snapshot tables write halves of the merged `snapshot/<id>` record;
//! - inlined tables rewrite Arrow chunks (new rows -> one new chunk; touched chunks rewritten,
//!   emptied chunks dropped, row-id locators kept in step);
//! - DDL writes `sys/` keys; DROP TABLE deletes the table's records.
//!
//! Then the commit-wide rules: the head snapshot cannot be deleted; a versioned row cannot begin
//! at a snapshot newer than the head this commit leaves; `sys/head` is always written (snapshot
//! id = the highest inserted, else unchanged; batch count + 1). Nothing is written unless all of
//! it translates.

use crate::catalog::{self, Kind, SnapshotHalf, SnapshotRecord, TableDef};
use crate::cell::{decode_row_at, encode_row, encode_row_at, Cell, Row};
use crate::chunk::{decode_chunk, encode_chunk};
use crate::error::{Error, Result};
use crate::keys;
use crate::store::{Head, ReadPoint, Store};
use crate::txn::Op;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// The result of translation: the final value of every key the commit touches (`None` =
/// delete) and the head it leaves.
#[derive(Debug)]
pub(crate) struct Translated {
    pub writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    pub head: Head,
}

/// A write set over the read point.
struct WriteSet<'a> {
    store: &'a Store,
    rp: &'a ReadPoint,
    pending: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl<'a> WriteSet<'a> {
    async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.pending.get(key) {
            return Ok(v.clone());
        }
        Ok(self.rp.get(self.store, key).await?.map(|b| b.to_vec()))
    }

    async fn exists(&self, key: &[u8]) -> Result<bool> {
        Ok(self.get(key).await?.is_some())
    }

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.pending.insert(key, Some(value));
    }

    fn del(&mut self, key: Vec<u8>) {
        self.pending.insert(key, None);
    }

    /// Every live (key, value) under `prefix`, committed and pending merged.
    async fn scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut merged: BTreeMap<Vec<u8>, Option<Vec<u8>>> = self
            .rp
            .scan(self.store, prefix)
            .await?
            .into_iter()
            .map(|(k, v)| (k.to_vec(), Some(v.to_vec())))
            .collect();
        for (k, v) in self.pending.range(prefix.to_vec()..) {
            if !k.starts_with(prefix) {
                break;
            }
            merged.insert(k.clone(), v.clone());
        }
        Ok(merged
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect())
    }

    async fn snapshot_record(&self, lake: &str, id: i64) -> Result<SnapshotRecord> {
        match self.get(&keys::snapshot(lake, id)).await? {
            Some(v) => SnapshotRecord::decode(&v),
            None => Ok(SnapshotRecord::default()),
        }
    }

    fn put_snapshot_record(&mut self, lake: &str, id: i64, rec: &SnapshotRecord) {
        if rec.is_empty() {
            self.del(keys::snapshot(lake, id));
        } else {
            self.put(keys::snapshot(lake, id), rec.encode());
        }
    }
}

fn duplicate(def: &TableDef, row: &Row, kind: &Kind) -> Error {
    let id: Vec<String> = catalog::identity(kind, row)
        .iter()
        .map(|c| c.to_string())
        .collect();
    Error::Constraint(format!(
        "duplicate key ({}) in {}: violates primary key / unique constraint",
        id.join(", "),
        def.name
    ))
}

fn vanished(def: &TableDef, row: &Row, kind: &Kind) -> Error {
    let id: Vec<String> = catalog::identity(kind, row)
        .iter()
        .map(|c| c.to_string())
        .collect();
    Error::Conflict(format!(
        "row ({}) of {} is no longer present; write conflict with an earlier change, retry",
        id.join(", "),
        def.name
    ))
}

fn snapshot_id(def: &TableDef, row: &Row) -> Result<i64> {
    match row.first() {
        Some(Cell::Int(id)) => Ok(*id),
        Some(Cell::Null) | None => Err(Error::Constraint(format!(
            "NOT NULL constraint failed: {}.snapshot_id is a key column and cannot be NULL",
            def.name
        ))),
        Some(other) => Err(Error::Constraint(format!(
            "{}.snapshot_id must be an integer, got {other}",
            def.name
        ))),
    }
}

// ---- inlined tables --------------------------------------------------------------------------

struct LoadedChunk {
    /// `None` = deleted by this commit.
    rows: Vec<Option<Row>>,
    orig_min: Cell,
    dirty: bool,
}

/// Where a row of an [`InlineModel`] lives: (chunk seq, index); new rows use seq `NEW`.
type Slot = (i64, usize);
const NEW: i64 = i64::MAX;

/// One inlined table's chunks as this commit changes them.
struct InlineModel {
    def: Arc<TableDef>,
    has_row_id: bool,
    /// Created (or re-created) in this transaction: no committed chunks.
    fresh: bool,
    /// Committed (min row id, seq) locators; loaded on first need.
    locators: Option<Vec<(Cell, i64)>>,
    chunks: BTreeMap<i64, LoadedChunk>,
    new_rows: Vec<Option<Row>>,
    /// Whole row -> its slots among loaded chunks and new rows (identity of an inlined row).
    index: HashMap<Row, BTreeSet<Slot>>,
}

impl InlineModel {
    fn new(def: Arc<TableDef>, fresh: bool) -> Self {
        let has_row_id = def.columns.first().is_some_and(|c| c.name == "row_id");
        InlineModel {
            def,
            has_row_id,
            fresh,
            locators: None,
            chunks: BTreeMap::new(),
            new_rows: Vec::new(),
            index: HashMap::new(),
        }
    }

    fn min_row_id<'r>(&self, rows: impl Iterator<Item = &'r Row>) -> Cell {
        if !self.has_row_id {
            return Cell::Null;
        }
        rows.filter_map(|r| r.first().and_then(Cell::as_int))
            .min()
            .map(Cell::Int)
            .unwrap_or(Cell::Null)
    }

    fn insert(&mut self, row: &Row) {
        self.new_rows.push(Some(row.clone()));
        self.index
            .entry(row.clone())
            .or_default()
            .insert((NEW, self.new_rows.len() - 1));
    }

    async fn locators(&mut self, ws: &WriteSet<'_>) -> Result<&Vec<(Cell, i64)>> {
        if self.locators.is_none() {
            let mut locs = Vec::new();
            if !self.fresh {
                let prefix = keys::inline_locator_prefix(&self.def.schema, &self.def.name);
                for (k, _) in ws.rp.scan(ws.store, &prefix).await? {
                    let segs = keys::decode_key(&k[prefix.len()..])?;
                    match segs.as_slice() {
                        [min, Cell::Int(seq)] => locs.push((min.clone(), *seq)),
                        _ => {
                            return Err(Error::Corrupt(format!(
                                "inline locator of {} is malformed",
                                self.def.name
                            )))
                        }
                    }
                }
            }
            self.locators = Some(locs);
        }
        Ok(self.locators.as_ref().expect("just loaded"))
    }

    fn find(&self, row: &Row) -> Option<Slot> {
        self.index.get(row).and_then(|s| s.first().copied())
    }

    /// Load committed chunks that may hold `row` until one does: by row-id locator, chunks
    /// whose lowest row id is <= the row's, nearest first; without a row id, in sequence order.
    async fn load_for(&mut self, ws: &WriteSet<'_>, row: &Row) -> Result<Option<Slot>> {
        let target = if self.has_row_id {
            row.first().and_then(Cell::as_int)
        } else {
            None
        };
        let mut candidates: Vec<(Cell, i64)> = self.locators(ws).await?.clone();
        candidates.retain(|(min, seq)| {
            !self.chunks.contains_key(seq)
                && match (target, min) {
                    (Some(t), Cell::Int(m)) => *m <= t,
                    _ => true,
                }
        });
        if target.is_some() {
            candidates.sort_by(|a, b| b.0.as_int().cmp(&a.0.as_int()).then(a.1.cmp(&b.1)));
        }
        for (min, seq) in candidates {
            let key = keys::inline_chunk(&self.def.schema, &self.def.name, seq);
            let body = ws.get(&key).await?.ok_or_else(|| {
                Error::Corrupt(format!(
                    "inline chunk {seq} of {} is missing",
                    self.def.name
                ))
            })?;
            let rows = decode_chunk(&body)?;
            for (i, r) in rows.iter().enumerate() {
                self.index.entry(r.clone()).or_default().insert((seq, i));
            }
            self.chunks.insert(
                seq,
                LoadedChunk {
                    rows: rows.into_iter().map(Some).collect(),
                    orig_min: min,
                    dirty: false,
                },
            );
            if let Some(slot) = self.find(row) {
                return Ok(Some(slot));
            }
        }
        Ok(None)
    }

    /// Apply an update (`new = Some`) or a delete (`new = None`) of the row equal to `old`.
    async fn change(&mut self, ws: &WriteSet<'_>, old: &Row, new: Option<&Row>) -> Result<()> {
        let slot = match self.find(old) {
            Some(s) => s,
            None => match self.load_for(ws, old).await? {
                Some(s) => s,
                None => return Err(vanished(&self.def, old, &Kind::Inline)),
            },
        };
        if let Some(set) = self.index.get_mut(old) {
            set.remove(&slot);
        }
        if let Some(n) = new {
            self.index.entry(n.clone()).or_default().insert(slot);
        }
        let cell = if slot.0 == NEW {
            &mut self.new_rows[slot.1]
        } else {
            let ch = self.chunks.get_mut(&slot.0).expect("loaded");
            ch.dirty = true;
            &mut ch.rows[slot.1]
        };
        *cell = new.cloned();
        Ok(())
    }

    async fn emit(mut self, ws: &mut WriteSet<'_>) -> Result<()> {
        let (schema, name) = (self.def.schema.clone(), self.def.name.clone());
        let columns: Vec<String> = self.def.columns.iter().map(|c| c.name.clone()).collect();
        // Sequences for chunks this commit creates start above every existing one.
        let committed_max = self
            .locators(ws)
            .await?
            .iter()
            .map(|(_, s)| *s)
            .max()
            .unwrap_or(0);
        let mut next_seq = committed_max.max(self.chunks.keys().copied().max().unwrap_or(0)) + 1;
        let new_rows: Vec<Row> = std::mem::take(&mut self.new_rows)
            .into_iter()
            .flatten()
            .collect();
        let this = &self;
        let put_chunk = |ws: &mut WriteSet<'_>, seq: i64, rows: &[Row]| -> Result<()> {
            let min = this.min_row_id(rows.iter());
            ws.put(
                keys::inline_chunk(&schema, &name, seq),
                encode_chunk(&name, &columns, rows)?,
            );
            ws.put(keys::inline_locator(&schema, &name, &min, seq), Vec::new());
            Ok(())
        };
        for (seq, ch) in self.chunks.iter().filter(|(_, c)| c.dirty) {
            ws.del(keys::inline_locator(&schema, &name, &ch.orig_min, *seq));
            ws.del(keys::inline_chunk(&schema, &name, *seq));
            // A partially deleted chunk becomes its contiguous surviving runs (RFC 0007): the
            // first keeps the chunk's sequence, later ones take fresh sequences. Survivors keep
            // their row ids, snapshots and values; a wholly deleted chunk is simply gone.
            let runs = ch.rows.split(Option::is_none).filter(|run| !run.is_empty());
            for (i, run) in runs.enumerate() {
                let rows: Vec<Row> = run.iter().flatten().cloned().collect();
                let seq = if i == 0 {
                    *seq
                } else {
                    next_seq += 1;
                    next_seq - 1
                };
                put_chunk(ws, seq, &rows)?;
            }
        }
        if !new_rows.is_empty() {
            put_chunk(ws, next_seq, &new_rows)?;
        }
        Ok(())
    }
}

// ---- embedded rows (RFC 0007) -----------------------------------------------------------------

/// A staged delete of an embedded row, checked when the commit has been walked.
struct ChildDelete {
    lake: String,
    parent: &'static str,
    id: Option<i64>,
    key: Vec<u8>,
}

/// The parents a commit deletes and the embedded rows it names for deletion.
#[derive(Default)]
struct EmbeddedDeletes {
    /// (lake, parent table, parent id)
    parents: BTreeSet<(String, &'static str, i64)>,
    children: Vec<ChildDelete>,
}

/// The keys (current, and history for a versioned table) of `table` that lead with one of
/// `ids`, grouped by id: one prefix scan per id, so the cost follows the ids, not the table. A
/// table the lake does not have holds none.
async fn keys_by_id(
    ws: &WriteSet<'_>,
    tables: &BTreeMap<(String, String), Arc<TableDef>>,
    lake: &str,
    table: &str,
    ids: &BTreeSet<i64>,
) -> Result<BTreeMap<i64, Vec<Vec<u8>>>> {
    let mut found: BTreeMap<i64, Vec<Vec<u8>>> = BTreeMap::new();
    let Some(def) = tables.get(&(lake.to_string(), table.to_string())) else {
        return Ok(found);
    };
    let versioned = matches!(catalog::kind_of(def)?, Kind::Versioned { .. });
    for &id in ids {
        let cells = [Cell::Int(id)];
        let mut prefixes = vec![keys::current(lake, table, &cells, None)];
        if versioned {
            prefixes.push(keys::history_entity_prefix(lake, table, &cells));
        }
        for prefix in prefixes {
            for (k, _) in ws.scan(&prefix).await? {
                found.entry(id).or_default().push(k);
            }
        }
    }
    Ok(found)
}

/// Whether no record of parent `id` is left in the write set.
async fn parent_absent(
    ws: &WriteSet<'_>,
    tables: &BTreeMap<(String, String), Arc<TableDef>>,
    lake: &str,
    parent: &str,
    id: Option<i64>,
) -> Result<bool> {
    let Some(id) = id else {
        return Ok(true); // a NULL id names no parent
    };
    Ok(keys_by_id(ws, tables, lake, parent, &BTreeSet::from([id]))
        .await?
        .is_empty())
}

impl EmbeddedDeletes {
    /// Embedded rows ride their parent: a parent this commit deletes outright (no record of it
    /// is left) takes every row embedded in it, in the same write. A staged delete of an
    /// embedded row is validated against that and writes nothing of its own; a row whose parent
    /// was gone before this commit goes with the delete that names it. An embedded row whose
    /// parent lives on cannot be deleted.
    async fn settle(
        self,
        ws: &mut WriteSet<'_>,
        tables: &BTreeMap<(String, String), Arc<TableDef>>,
    ) -> Result<()> {
        // (lake, parent table) -> the ids this commit deleted or whose embedded rows it names
        let mut named: BTreeMap<(String, &'static str), BTreeSet<i64>> = BTreeMap::new();
        for (lake, parent, id) in &self.parents {
            named
                .entry((lake.clone(), *parent))
                .or_default()
                .insert(*id);
        }
        for c in &self.children {
            if let Some(id) = c.id {
                named
                    .entry((c.lake.clone(), c.parent))
                    .or_default()
                    .insert(id);
            }
        }
        let mut gone: BTreeSet<(String, &'static str, i64)> = BTreeSet::new();
        for ((lake, parent), ids) in &named {
            let held = keys_by_id(ws, tables, lake, parent, ids).await?;
            gone.extend(
                ids.iter()
                    .filter(|id| !held.contains_key(id))
                    .map(|id| (lake.clone(), *parent, *id)),
            );
        }
        for child in &self.children {
            if let Some(id) = child
                .id
                .filter(|id| !gone.contains(&(child.lake.clone(), child.parent, *id)))
            {
                return Err(Error::Constraint(format!(
                    "cannot delete a row embedded in {} {id} while that record stays: embedded \
                     rows go only with their parent's deletion in the same transaction",
                    child.parent
                )));
            }
        }
        // the parents this commit deleted take their embedded rows with them
        let mut carried: BTreeMap<(String, &'static str), BTreeSet<i64>> = BTreeMap::new();
        for key in self.parents.intersection(&gone) {
            let (lake, parent, id) = key;
            for e in catalog::embedded_children(parent) {
                carried
                    .entry((lake.clone(), e.child))
                    .or_default()
                    .insert(*id);
            }
        }
        for ((lake, child), ids) in &carried {
            for k in keys_by_id(ws, tables, lake, child, ids)
                .await?
                .into_values()
                .flatten()
            {
                ws.del(k);
            }
        }
        for child in self.children {
            let by_parent = child.id.is_some_and(|id| {
                self.parents
                    .contains(&(child.lake.clone(), child.parent, id))
            });
            if !by_parent {
                ws.del(child.key);
            }
        }
        Ok(())
    }
}

// ---- maintenance commits (RFC 0007) -----------------------------------------------------------

/// DuckDB's reserved field id for the row-id column: the one file-statistics row a commit that
/// mints no snapshot may insert (derived from an immutable Parquet file, RFC 0007).
const ROW_ID_FIELD_ID: i64 = 2147483540;

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
    const BOOKKEEPING: &[&str] = &["ducklake_files_scheduled_for_deletion", "ducklake_metadata"];
    let (schema, table, row) = match op {
        Op::Delete { .. } | Op::DropTable { .. } => return Ok(Role::Maintenance),
        Op::CreateSchema(_) | Op::DropSchema(_) | Op::CreateTable(_) => return Ok(Role::Neither),
        Op::Insert { schema, table, row } => (schema, table, Some(row)),
        Op::Update { schema, table, .. } => (schema, table, None),
    };
    if BOOKKEEPING.contains(&table.as_str()) {
        return Ok(Role::Maintenance);
    }
    if let (Some(row), "ducklake_file_column_stats") = (row, table.as_str()) {
        let field = tables
            .get(&(schema.clone(), table.clone()))
            .and_then(|def| def.column_index("column_id"))
            .and_then(|i| row.get(i))
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
fn check_maintenance(ops: &[Op], tables: &BTreeMap<(String, String), Arc<TableDef>>) -> Result<()> {
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
            Op::Insert { schema, table, .. } if table == "ducklake_snapshot" => {
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

// ---- translation -----------------------------------------------------------------------------

/// Translate `ops` (in stage order) against the read point. `tables` is the committed catalog.
pub(crate) async fn translate(
    store: &Store,
    rp: &ReadPoint,
    committed_tables: &BTreeMap<(String, String), Arc<TableDef>>,
    ops: &[Op],
) -> Result<Translated> {
    check_maintenance(ops, committed_tables)?;
    let head = rp.head(store).await?;
    let mut ws = WriteSet {
        store,
        rp,
        pending: BTreeMap::new(),
    };
    let mut tables = committed_tables.clone();
    let mut models: HashMap<(String, String), InlineModel> = HashMap::new();
    let mut recreated: std::collections::HashSet<(String, String)> = Default::default();

    // The head each lake this commit touches is left at: the highest snapshot it inserts into
    // the lake, else the lake's committed one.
    let mut inserted: BTreeMap<&str, i64> = BTreeMap::new();
    let mut lakes: BTreeSet<&str> = BTreeSet::from([keys::DEFAULT_LAKE]);
    for op in ops {
        if let Op::Insert { schema, .. } | Op::Update { schema, .. } | Op::Delete { schema, .. } =
            op
        {
            lakes.insert(schema);
        }
        if let Op::Insert { schema, table, row } = op {
            if let (true, Some(id)) = (
                table == "ducklake_snapshot",
                row.first().and_then(Cell::as_int),
            ) {
                let max = inserted.entry(schema).or_insert(id);
                *max = (*max).max(id);
            }
        }
    }
    let mut finals: BTreeMap<&str, Option<i64>> = BTreeMap::new();
    for lake in lakes {
        let committed = rp.lake_snapshot(store, &head, lake).await?;
        let new = inserted.get(lake).copied();
        finals.insert(lake, committed.max(new));
    }
    let final_of = |lake: &str| finals.get(lake).copied().flatten();
    // (lake, table, "begins" | "ends", snapshot) of every version this commit writes
    let mut version_bounds: Vec<(String, String, &str, i64)> = Vec::new();
    // lakes whose ducklake_snapshot table this commit drops
    let mut dropped_snapshots: BTreeSet<String> = BTreeSet::new();
    let batch = head.batch_count + 1;
    let mut embedded = EmbeddedDeletes::default();
    // (lake, snapshot id) of the snapshots this commit deletes, and of the changes rows it
    // deletes apart from them
    let mut deleted_snapshots: BTreeSet<(String, i64)> = BTreeSet::new();
    let mut changes_deletes: Vec<(String, i64)> = Vec::new();

    for (position, op) in ops.iter().enumerate() {
        match op {
            Op::CreateSchema(name) => {
                ws.put(
                    keys::sys_schema(name),
                    encode_row(&[Cell::Text(name.clone())]),
                );
            }
            Op::DropSchema(name) => ws.del(keys::sys_schema(name)),
            Op::CreateTable(def) => {
                let id = (def.schema.clone(), def.name.clone());
                ws.put(keys::sys_table(&def.schema, &def.name), def.encode());
                tables.insert(id.clone(), def.clone());
                recreated.insert(id);
            }
            Op::DropTable { schema, name } => {
                let id = (schema.clone(), name.clone());
                let def = tables.remove(&id).ok_or_else(|| {
                    Error::Catalog(format!(
                        "cannot drop table {schema}.{name}: it does not exist"
                    ))
                })?;
                ws.del(keys::sys_table(schema, name));
                models.remove(&id);
                match catalog::kind_of(&def)? {
                    Kind::Inline => {
                        for (k, _) in ws.scan(&keys::inline_table_prefix(schema, name)).await? {
                            ws.del(k);
                        }
                    }
                    Kind::Snapshot(half) => {
                        if half == SnapshotHalf::Snapshot {
                            dropped_snapshots.insert(schema.clone());
                        }
                        for (k, v) in ws.scan(&keys::snapshot_prefix(schema)).await? {
                            let mut rec = SnapshotRecord::decode(&v)?;
                            *rec.half_mut(half) = None;
                            if rec.is_empty() {
                                ws.del(k);
                            } else {
                                ws.put(k, rec.encode());
                            }
                        }
                    }
                    Kind::Versioned { .. } | Kind::Unversioned { .. } => {
                        for prefix in [
                            keys::current_prefix(schema, name),
                            keys::history_prefix(schema, name),
                        ] {
                            for (k, _) in ws.scan(&prefix).await? {
                                ws.del(k);
                            }
                        }
                    }
                }
            }
            Op::Insert { schema, table, row }
            | Op::Update {
                schema,
                table,
                new: row,
                ..
            }
            | Op::Delete {
                schema,
                table,
                old: row,
            } => {
                let id = (schema.clone(), table.clone());
                let def = tables.get(&id).cloned().ok_or_else(|| {
                    Error::Catalog(format!("table {schema}.{table} does not exist"))
                })?;
                let kind = catalog::kind_of(&def)?;
                if !matches!(op, Op::Delete { .. }) {
                    catalog::check_not_null(&def, row)?;
                }
                if row.len() != def.columns.len() {
                    return Err(Error::InvalidInput(format!(
                        "{} has {} columns but a staged row has {} cells",
                        def.name,
                        def.columns.len(),
                        row.len()
                    )));
                }
                match (&kind, op) {
                    (Kind::Inline, _) => {
                        let model = models.entry(id.clone()).or_insert_with(|| {
                            InlineModel::new(def.clone(), recreated.contains(&id))
                        });
                        match op {
                            Op::Insert { row, .. } => model.insert(row),
                            Op::Update { old, new, .. } => {
                                model.change(&ws, old, Some(new)).await?
                            }
                            Op::Delete { old, .. } => model.change(&ws, old, None).await?,
                            _ => unreachable!(),
                        }
                    }
                    (Kind::Snapshot(half), Op::Insert { row, .. }) => {
                        let sid = snapshot_id(&def, row)?;
                        let mut rec = ws.snapshot_record(&def.schema, sid).await?;
                        if rec.half(*half).is_some() {
                            return Err(duplicate(&def, row, &kind));
                        }
                        *rec.half_mut(*half) = Some(row.clone());
                        ws.put_snapshot_record(&def.schema, sid, &rec);
                    }
                    (Kind::Snapshot(half), Op::Update { old, new, .. }) => {
                        let old_id = snapshot_id(&def, old)?;
                        let new_id = snapshot_id(&def, new)?;
                        let mut rec = ws.snapshot_record(&def.schema, old_id).await?;
                        if rec.half(*half).is_none() {
                            return Err(vanished(&def, old, &kind));
                        }
                        if old_id == new_id {
                            *rec.half_mut(*half) = Some(new.clone());
                            ws.put_snapshot_record(&def.schema, old_id, &rec);
                        } else {
                            *rec.half_mut(*half) = None;
                            ws.put_snapshot_record(&def.schema, old_id, &rec);
                            let mut target = ws.snapshot_record(&def.schema, new_id).await?;
                            if target.half(*half).is_some() {
                                return Err(duplicate(&def, new, &kind));
                            }
                            *target.half_mut(*half) = Some(new.clone());
                            ws.put_snapshot_record(&def.schema, new_id, &target);
                        }
                    }
                    (Kind::Snapshot(half), Op::Delete { old, .. }) => {
                        let sid = snapshot_id(&def, old)?;
                        let lake_sid = (def.schema.clone(), sid);
                        if *half == SnapshotHalf::Changes && deleted_snapshots.contains(&lake_sid) {
                            continue; // carried away with its snapshot's record
                        }
                        let rec = ws.snapshot_record(&def.schema, sid).await?;
                        if rec.half(*half).is_none() {
                            return Err(vanished(&def, old, &kind));
                        }
                        match half {
                            SnapshotHalf::Snapshot => {
                                if Some(sid) == final_of(&def.schema) {
                                    return Err(Error::Constraint(format!(
                                        "cannot delete snapshot {sid} from {}: it is the lake's \
                                         head snapshot",
                                        def.name
                                    )));
                                }
                                // the whole record goes: its changes row rides it
                                ws.del(keys::snapshot(&def.schema, sid));
                                deleted_snapshots.insert(lake_sid);
                            }
                            // validated once the whole commit has been walked
                            SnapshotHalf::Changes => changes_deletes.push(lake_sid),
                        }
                    }
                    (_, Op::Insert { row, .. }) => {
                        let key = catalog::row_key(&def, &kind, row)?;
                        if ws.exists(&key).await? {
                            return Err(duplicate(&def, row, &kind));
                        }
                        ws.put(key, encode_row_at(row, (batch, position as u64)));
                        if let Kind::Versioned { begin, end, .. } = &kind {
                            for (bound, i) in [("begins", *begin), ("ends", *end)] {
                                if let Some(s) = row[i].as_int() {
                                    version_bounds.push((
                                        def.schema.clone(),
                                        def.name.clone(),
                                        bound,
                                        s,
                                    ));
                                }
                            }
                        }
                    }
                    (_, Op::Update { old, new, .. }) => {
                        let old_key = catalog::row_key(&def, &kind, old)?;
                        let Some(stored) = ws.get(&old_key).await? else {
                            return Err(vanished(&def, old, &kind));
                        };
                        let new_key = catalog::row_key(&def, &kind, new)?;
                        if new_key != old_key && ws.exists(&new_key).await? {
                            return Err(duplicate(&def, new, &kind));
                        }
                        // an updated row keeps its place (DuckDB updates in place)
                        let value = match decode_row_at(&stored)?.1 {
                            Some(seq) => encode_row_at(new, seq),
                            None => encode_row(new), // a record from before write sequences
                        };
                        ws.del(old_key);
                        ws.put(new_key, value);
                        if let Kind::Versioned { end, .. } = &kind {
                            if let Some(s) = new[*end].as_int() {
                                version_bounds.push((
                                    def.schema.clone(),
                                    def.name.clone(),
                                    "ends",
                                    s,
                                ));
                            }
                        }
                    }
                    (_, Op::Delete { old, .. }) => {
                        let key = catalog::row_key(&def, &kind, old)?;
                        if !ws.exists(&key).await? {
                            return Err(vanished(&def, old, &kind));
                        }
                        match catalog::embedded_in(&def.name) {
                            Some(e) => {
                                let id = catalog::parent_id(&def, e, old);
                                if parent_absent(&ws, &tables, &def.schema, e.parent, id).await? {
                                    // its parent is gone already (deleted earlier in this
                                    // commit, or an orphan): nothing to wait for
                                    ws.del(key);
                                } else {
                                    // validated once the whole commit has been walked
                                    embedded.children.push(ChildDelete {
                                        lake: def.schema.clone(),
                                        parent: e.parent,
                                        id,
                                        key,
                                    });
                                }
                            }
                            None => {
                                ws.del(key);
                                // every table embedded in a parent names it by the same column
                                if let Some(e) = catalog::embedded_children(&def.name).next() {
                                    if let Some(id) = catalog::parent_id(&def, e, old) {
                                        embedded.parents.insert((def.schema.clone(), e.parent, id));
                                    }
                                }
                            }
                        }
                    }
                    _ => unreachable!(),
                }
            }
        }
    }

    embedded.settle(&mut ws, &tables).await?;
    // A changes row goes with its snapshot's record; one whose snapshot stays cannot go alone.
    for (lake, sid) in changes_deletes {
        if deleted_snapshots.contains(&(lake.clone(), sid)) {
            continue;
        }
        let mut rec = ws.snapshot_record(&lake, sid).await?;
        if rec.snapshot.is_some() {
            return Err(Error::Constraint(format!(
                "cannot delete the ducklake_snapshot_changes row of snapshot {sid} while the \
                 snapshot stays: it goes only with its snapshot's deletion in the same \
                 transaction"
            )));
        }
        rec.changes = None;
        ws.put_snapshot_record(&lake, sid, &rec);
    }

    // No version may end at a snapshot its lake will not have: a scan at head skips the history
    // keyspace because every ended version ended at or before head (RFC 0002). Nor may a commit
    // that mints snapshots carry a version beginning beyond them: DuckLake's change and its
    // snapshot disagree. (A commit minting none may begin versions ahead: a hand edit, see
    // check_maintenance.)
    for (lake, table, bound, snapshot) in &version_bounds {
        let head = final_of(lake);
        let checked = *bound == "ends" || inserted.contains_key(lake.as_str());
        if checked && head.is_none_or(|h| *snapshot > h) {
            return Err(Error::Constraint(format!(
                "a row of {table} {bound} at snapshot {snapshot}, but the lake's head is {} and \
                 this commit inserts no snapshot {snapshot}",
                head.map(|h| h.to_string())
                    .unwrap_or_else(|| "empty".into())
            )));
        }
    }

    let mut models: Vec<_> = models.into_values().collect();
    models.sort_by(|a, b| (&a.def.schema, &a.def.name).cmp(&(&b.def.schema, &b.def.name)));
    for m in models {
        m.emit(&mut ws).await?;
    }

    // a lake whose snapshot table this commit drops (and does not refill) has no head any more
    let dropped = |lake: &str| dropped_snapshots.contains(lake) && !inserted.contains_key(lake);
    let new_head = Head {
        snapshot_id: final_of(keys::DEFAULT_LAKE).filter(|_| !dropped(keys::DEFAULT_LAKE)),
        batch_count: head.batch_count + 1,
    };
    ws.put(keys::sys_head(), new_head.encode());
    for lake in dropped_snapshots
        .iter()
        .filter(|l| *l != keys::DEFAULT_LAKE)
    {
        if dropped(lake) {
            ws.del(keys::lake_head(lake));
        }
    }
    for (lake, _) in inserted.iter().filter(|(l, _)| **l != keys::DEFAULT_LAKE) {
        let id = final_of(lake).expect("a lake this commit inserts a snapshot into has a head");
        ws.put(keys::lake_head(lake), encode_row(&[Cell::Int(id)]));
    }
    Ok(Translated {
        writes: ws.pending,
        head: new_head,
    })
}
