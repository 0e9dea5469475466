//! Embedded rows ride their parent's deletion (RFC 0007): validated at commit, written with the
//! parent.

use crate::catalog::{self, Kind, TableDef};
use crate::cell::Cell;
use crate::error::{Error, Result};
use crate::keys;
use crate::write_set::WriteSet;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A staged delete of an embedded row, checked when the commit has been walked.
pub(super) struct ChildDelete {
    pub(super) lake: String,
    pub(super) parent: &'static str,
    pub(super) id: Option<i64>,
    pub(super) key: Vec<u8>,
}

/// The parents a commit deletes and the embedded rows it names for deletion.
#[derive(Default)]
pub(super) struct EmbeddedDeletes {
    /// (lake, parent table, parent id)
    pub(super) parents: BTreeSet<(String, &'static str, i64)>,
    pub(super) children: Vec<ChildDelete>,
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
pub(super) async fn parent_absent(
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
    pub(super) async fn settle(
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
