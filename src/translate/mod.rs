//! Commit-time translation (RFC 0006): a transaction's staged operations -> one batch of puts and
//! deletes.
//!
//! [`translate`] is a dispatcher plus named passes. It walks the staged operations in stage
//! order against a write set over the image the transaction pinned, so a later operation sees
//! what an earlier one wrote, and hands each row operation to its kind's rules (`kinds`):
//! - DDL writes `sys/` keys; DROP TABLE deletes the table's records;
//! - a row operation is checked (NOT NULL columns, width) and applied by its kind.
//!
//! Then the passes, each named for the rule it enforces:
//! - [`maintenance::check`] (first): a lake without a snapshot insert carries maintenance or hand
//!   edits, not both (RFC 0007);
//! - [`EmbeddedDeletes::settle`]: embedded rows ride their parent's deletion (RFC 0007);
//! - `kinds::snapshot::Deletes::settle`: a changes row goes only with its snapshot;
//! - [`check_version_bounds`]: no version ends after its lake's head, and a commit minting
//!   snapshots begins no version beyond them;
//! - the inlined tables' chunks are written;
//! - [`Heads::write`]: `sys/head` (batch count + 1 always) and each lake's head.
//!
//! Nothing is written unless all of it translates.

pub(crate) mod copied;
mod embedded;
#[cfg(test)]
mod expiry_tests;
mod maintenance;

use crate::catalog::{self, Kind, TableDef};
use crate::cell::{encode_row, Cell, Row};
use crate::error::{Error, Result};
use crate::head::Head;
use crate::image::Image;
use crate::keys;
use crate::kinds::{self, fixed, inline::InlineModel, snapshot};
use crate::op::Op;
use crate::store::Store;
use crate::write_set::WriteSet;
use embedded::{parent_absent, ChildDelete, EmbeddedDeletes};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// The result of translation: the final value of every key the commit touches (`None` =
/// delete) and the head it leaves.
#[derive(Debug)]
pub(crate) struct Translated {
    pub writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    pub head: Head,
}

type Tables = BTreeMap<(String, String), Arc<TableDef>>;

/// The heads a commit leaves: per lake it touches, the highest snapshot it inserts into the lake,
/// else the lake's committed one.
struct Heads<'o> {
    committed: Head,
    inserted: BTreeMap<&'o str, i64>,
    finals: BTreeMap<&'o str, Option<i64>>,
    /// lakes whose ducklake_snapshot table this commit drops
    dropped: BTreeSet<String>,
}

impl<'o> Heads<'o> {
    fn plan(image: &Image, ops: &'o [Op]) -> Result<Heads<'o>> {
        let mut inserted: BTreeMap<&str, i64> = BTreeMap::new();
        let mut lakes: BTreeSet<&str> = BTreeSet::from([keys::DEFAULT_LAKE]);
        for op in ops {
            if let Op::Insert { schema, .. }
            | Op::Update { schema, .. }
            | Op::Delete { schema, .. } = op
            {
                lakes.insert(schema);
            }
            if let Op::Insert { schema, table, row } = op {
                if let (true, Some(id)) = (
                    table == catalog::SNAPSHOT_TABLE,
                    row.first().and_then(Cell::as_int),
                ) {
                    let max = inserted.entry(schema).or_insert(id);
                    *max = (*max).max(id);
                }
            }
        }
        let mut finals = BTreeMap::new();
        for lake in lakes {
            let committed = image.lake_snapshot(lake)?;
            finals.insert(lake, committed.max(inserted.get(lake).copied()));
        }
        Ok(Heads {
            committed: image.head(),
            inserted,
            finals,
            dropped: BTreeSet::new(),
        })
    }

    /// The head snapshot the commit leaves `lake` at.
    fn of(&self, lake: &str) -> Option<i64> {
        self.finals.get(lake).copied().flatten()
    }

    fn mints(&self, lake: &str) -> bool {
        self.inserted.contains_key(lake)
    }

    /// Write `sys/head` and the heads of the other lakes the commit changed.
    fn write(&self, ws: &mut WriteSet<'_>) -> Head {
        // a lake whose snapshot table this commit drops (and does not refill) has no head
        let dropped = |lake: &str| self.dropped.contains(lake) && !self.mints(lake);
        let head = Head {
            snapshot_id: self
                .of(keys::DEFAULT_LAKE)
                .filter(|_| !dropped(keys::DEFAULT_LAKE)),
            batch_count: self.committed.batch_count + 1,
        };
        ws.put(keys::sys_head(), head.encode());
        for lake in self.dropped.iter().filter(|l| *l != keys::DEFAULT_LAKE) {
            if dropped(lake) {
                ws.del(keys::lake_head(lake));
            }
        }
        for lake in self.inserted.keys().filter(|l| **l != keys::DEFAULT_LAKE) {
            let id = self
                .of(lake)
                .expect("a lake this commit inserts a snapshot into has a head");
            ws.put(keys::lake_head(lake), encode_row(&[Cell::Int(id)]));
        }
        head
    }
}

/// (lake, table, "begins" | "ends", snapshot) of every version this commit writes.
type VersionBounds = Vec<(String, String, &'static str, i64)>;

/// No version may end at a snapshot its lake will not have: a scan at head skips the history
/// keyspace because every ended version ended at or before head (RFC 0002). Nor may a commit
/// that mints snapshots carry a version beginning beyond them: DuckLake's change and its
/// snapshot disagree. (A commit minting none may begin versions ahead: a hand edit, see
/// `maintenance`.)
fn check_version_bounds(bounds: &VersionBounds, heads: &Heads) -> Result<()> {
    for (lake, table, bound, snapshot) in bounds {
        let head = heads.of(lake);
        let checked = *bound == "ends" || heads.mints(lake);
        if checked && head.is_none_or(|h| *snapshot > h) {
            return Err(Error::Constraint(format!(
                "a row of {table} {bound} at snapshot {snapshot}, but the lake's head is {} and \
                 this commit inserts no snapshot {snapshot}",
                head.map(|h| h.to_string())
                    .unwrap_or_else(|| "empty".into())
            )));
        }
    }
    Ok(())
}

/// What translation gathers while it walks the staged operations.
struct Walk {
    tables: Tables,
    recreated: std::collections::HashSet<(String, String)>,
    inline: HashMap<(String, String), InlineModel>,
    embedded: EmbeddedDeletes,
    snapshot_deletes: snapshot::Deletes,
    bounds: VersionBounds,
    batch: u64,
    /// the table the previous row operation named (forgotten at any DDL)
    last_table: Option<(Arc<TableDef>, Kind)>,
}

impl Walk {
    fn def(&self, schema: &str, table: &str) -> Result<Arc<TableDef>> {
        self.tables
            .get(&(schema.to_string(), table.to_string()))
            .cloned()
            .ok_or_else(|| Error::Catalog(format!("table {schema}.{table} does not exist")))
    }

    /// The definition and kind of a table row operations name; consecutive operations on one
    /// table (a DELETE of thousands of rows) look it up once.
    fn def_and_kind(&mut self, schema: &str, table: &str) -> Result<(Arc<TableDef>, Kind)> {
        if let Some((def, kind)) = &self.last_table {
            if def.schema == schema && def.name == table {
                return Ok((def.clone(), kind.clone()));
            }
        }
        let def = self.def(schema, table)?;
        let kind = catalog::kind_of(&def)?;
        self.last_table = Some((def.clone(), kind.clone()));
        Ok((def, kind))
    }

    async fn ddl(&mut self, ws: &mut WriteSet<'_>, heads: &mut Heads<'_>, op: &Op) -> Result<()> {
        match op {
            Op::CreateSchema(name) => ws.put(
                keys::sys_schema(name),
                encode_row(&[Cell::Text(name.clone())]),
            ),
            Op::DropSchema(name) => ws.del(keys::sys_schema(name)),
            Op::CreateTable(def) => {
                let id = (def.schema.clone(), def.name.clone());
                ws.put(keys::sys_table(&def.schema, &def.name), def.encode());
                self.tables.insert(id.clone(), def.clone());
                self.recreated.insert(id);
            }
            Op::DropTable { schema, name } => {
                let id = (schema.clone(), name.clone());
                let def = self.tables.remove(&id).ok_or_else(|| {
                    Error::Catalog(format!(
                        "cannot drop table {schema}.{name}: it does not exist"
                    ))
                })?;
                ws.del(keys::sys_table(schema, name));
                self.inline.remove(&id);
                match catalog::kind_of(&def)? {
                    Kind::Inline => kinds::inline::drop_table(ws, &def).await?,
                    Kind::Snapshot(half) => {
                        if half == catalog::SnapshotHalf::Snapshot {
                            heads.dropped.insert(schema.clone());
                        }
                        snapshot::drop_table(ws, &def, half).await?
                    }
                    Kind::Versioned { .. } | Kind::Unversioned { .. } => {
                        fixed::drop_table(ws, &def).await?
                    }
                }
            }
            Op::Insert { .. } | Op::Update { .. } | Op::Delete { .. } => {
                unreachable!("row operations are not DDL")
            }
        }
        Ok(())
    }

    /// Hand one row operation to its kind's rules.
    async fn row_op(
        &mut self,
        ws: &mut WriteSet<'_>,
        heads: &Heads<'_>,
        position: usize,
        op: &Op,
        schema: &str,
        table: &str,
        row: &Row,
    ) -> Result<()> {
        let (def, kind) = self.def_and_kind(schema, table)?;
        if !matches!(op, Op::Delete { .. }) {
            catalog::check_not_null(&def, row)?;
            catalog::check_catalog_version(&def, row)?;
        }
        if row.len() != def.columns.len() {
            return Err(Error::InvalidInput(format!(
                "{} has {} columns but a staged row has {} cells",
                def.name,
                def.columns.len(),
                row.len()
            )));
        }
        let bound = |bounds: Vec<fixed::Bound>, this: &mut Self| {
            this.bounds.extend(
                bounds
                    .into_iter()
                    .map(|(b, s)| (def.schema.clone(), def.name.clone(), b, s)),
            );
        };
        match (&kind, op) {
            (Kind::Inline, _) => {
                let id = (def.schema.clone(), def.name.clone());
                let fresh = self.recreated.contains(&id);
                let model = self
                    .inline
                    .entry(id)
                    .or_insert_with(|| InlineModel::new(def.clone(), fresh));
                match op {
                    Op::Insert { row, .. } => model.insert(row),
                    Op::Update { old, new, .. } => model.change(ws, old, Some(new)).await?,
                    Op::Delete { old, .. } => model.change(ws, old, None).await?,
                    _ => unreachable!(),
                }
            }
            (Kind::Snapshot(half), Op::Insert { row, .. }) => {
                snapshot::insert(ws, &def, *half, row).await?
            }
            (Kind::Snapshot(half), Op::Update { old, new, .. }) => {
                snapshot::update(ws, &def, *half, old, new).await?
            }
            (Kind::Snapshot(half), Op::Delete { old, .. }) => {
                self.snapshot_deletes
                    .delete(ws, &def, *half, old, heads.of(&def.schema))
                    .await?
            }
            (_, Op::Insert { row, .. }) => {
                let b = fixed::insert(ws, &def, &kind, row, (self.batch, position as u64)).await?;
                bound(b, self);
            }
            (_, Op::Update { old, new, .. }) => {
                let b = fixed::update(ws, &def, &kind, old, new).await?;
                bound(b, self);
            }
            (_, Op::Delete { old, .. }) => {
                let key = fixed::stored_key(ws, &def, &kind, old).await?;
                self.delete_fixed(ws, &def, old, key).await?;
            }
            _ => unreachable!(),
        }
        Ok(())
    }

    /// A fixed row's delete: an embedded row waits for its parent (RFC 0007); a parent's
    /// delete is remembered so its embedded rows go with it.
    async fn delete_fixed(
        &mut self,
        ws: &mut WriteSet<'_>,
        def: &TableDef,
        old: &Row,
        key: Vec<u8>,
    ) -> Result<()> {
        match catalog::embedded_in(&def.name) {
            Some(e) => {
                let id = catalog::parent_id(def, e, old);
                if parent_absent(ws, &self.tables, &def.schema, e.parent, id).await? {
                    // its parent is gone already (deleted earlier in this commit, or an
                    // orphan): nothing to wait for
                    ws.del(key);
                } else {
                    // validated once the whole commit has been walked
                    self.embedded.children.push(ChildDelete {
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
                    if let Some(id) = catalog::parent_id(def, e, old) {
                        self.embedded
                            .parents
                            .insert((def.schema.clone(), e.parent, id));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Translate `ops` (in stage order) against `image`, the image the transaction pinned.
/// `committed_tables` is the committed catalog.
pub(crate) async fn translate(
    store: &Store,
    image: &Image,
    committed_tables: &Tables,
    ops: &[Op],
) -> Result<Translated> {
    use tracing::Instrument;
    maintenance::check(ops, committed_tables)?;
    let mut heads = Heads::plan(image, ops)?;
    let committed = crate::image::ImageAt {
        image,
        backend: &store.backend(),
    };
    let mut ws = WriteSet::new(&committed);
    let mut walk = Walk {
        tables: committed_tables.clone(),
        recreated: Default::default(),
        inline: HashMap::new(),
        embedded: EmbeddedDeletes::default(),
        snapshot_deletes: snapshot::Deletes::default(),
        bounds: Vec::new(),
        batch: heads.committed.batch_count + 1,
        last_table: None,
    };
    for (position, op) in ops.iter().enumerate() {
        match op {
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
                walk.row_op(&mut ws, &heads, position, op, schema, table, row)
                    .await?
            }
            _ => {
                walk.last_table = None;
                walk.ddl(&mut ws, &mut heads, op).await?
            }
        }
    }
    // expiry (RFC 0007): what the deleted snapshots take with them
    let expiry = tracing::debug_span!(
        "moraine.translate.expiry",
        snapshots = walk.snapshot_deletes.snapshots(),
        parents = walk.embedded.parents.len()
    );
    async {
        walk.embedded.settle(&mut ws, &walk.tables).await?;
        walk.snapshot_deletes.settle(&mut ws).await
    }
    .instrument(expiry)
    .await?;
    check_version_bounds(&walk.bounds, &heads)?;
    kinds::inline::emit_all(walk.inline, &mut ws).await?;
    let head = heads.write(&mut ws);
    Ok(Translated {
        writes: ws.into_writes(),
        head,
    })
}
