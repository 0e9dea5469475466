//! Serving a table's committed rows in scan order from an image: decoded once per image version
//! and shared by every transaction pinned to it, and warmed in the background after an attach.

use super::spaces::{place_space, Entry};
use super::Image;
use crate::backend::Backend;
use crate::catalog::{Kind, TableDef};
use crate::cell::decode_row_at;
use crate::error::{Error, Result};
use crate::keys;
use crate::kinds;
use crate::rowset::RowSet;
use once_cell::sync::OnceCell;
use std::sync::Arc;
use tracing::Instrument;

impl Image {
    /// The committed rows of `def` in scan order: live rows, and with `need_history` ended
    /// versions too (versioned kinds only; other kinds have none). Built once per image.
    pub(crate) async fn rows(
        &self,
        backend: &Backend,
        def: &TableDef,
        kind: &Kind,
        need_history: bool,
    ) -> Result<Arc<RowSet>> {
        if !reads_history(kind, need_history) {
            return self.live_rows(def, kind);
        }
        let live_prefix = keys::current_prefix(&def.schema, &def.name);
        let space_prefix = place_space(&live_prefix)?;
        let space = match self.space(&space_prefix)? {
            Some(space) => space,
            None => self
                .stand_ins
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(space_prefix)
                .or_default()
                .clone(),
        };
        if let Some(r) = space
            .with_history
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&def.name)
        {
            return Ok(r.clone());
        }
        let rows = async {
            let mut rows = Vec::new();
            for (k, e) in space.range(&live_prefix) {
                rows.push(decode_row_at(&e.value).map_err(|err| keys::at_key(err, k))?);
            }
            let prefix = keys::history_prefix(&def.schema, &def.name);
            for (k, v) in self.scan(backend, &prefix).await? {
                rows.push(decode_row_at(&v).map_err(|err| keys::at_key(err, &k))?);
            }
            Ok::<_, Error>(kinds::fixed::serve(rows, kind, false))
        }
        .instrument(tracing::trace_span!(
            target: "moraine::image",
            "moraine.image.serve",
            table = %def.name))
        .await?;
        let rows = Arc::new(RowSet::new(rows));
        space
            .with_history
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(def.name.clone(), rows.clone());
        Ok(rows)
    }

    /// The committed live rows of `def` in scan order, served once per image (a second reader
    /// meanwhile waits for the first).
    pub(crate) fn live_rows(&self, def: &TableDef, kind: &Kind) -> Result<Arc<RowSet>> {
        let live_prefix = match kind {
            Kind::Snapshot(_) => keys::snapshot_prefix(&def.schema),
            Kind::Inline => keys::inline_chunk_prefix(&def.schema, &def.name),
            _ => keys::current_prefix(&def.schema, &def.name),
        };
        let Some(space) = self.space(&place_space(&live_prefix)?)? else {
            return Ok(self.no_rows.clone());
        };
        let once = space
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(def.name.clone())
            .or_insert_with(|| Arc::new(OnceCell::new()))
            .clone();
        // computed once, by whichever caller asks first; a caller asking meanwhile waits for it
        // (the image's background warm-up and a query's first read of the same table do the
        // work once); a failure is not kept, and the next caller tries again
        once.get_or_try_init(|| {
            let _span = tracing::trace_span!(
                target: "moraine::image",
                "moraine.image.serve",
                table = %def.name)
            .entered();
            serve_live(kind, space.range(&live_prefix)).map(Arc::new)
        })
        .cloned()
    }

    /// Serve the live rows of the tables DuckLake reads to plan a query
    /// ([`crate::tables::read_to_plan`]), so that the first query after an attach finds them
    /// ready. Runs on a background thread after an attach's image is read; reads no storage.
    /// In the order DuckLake reads them (the list's), then the inlined-data tables. A table
    /// that cannot be served is skipped: the transaction that reads it meets the same error and
    /// reports it.
    pub(crate) fn warm(&self) {
        let _span = tracing::debug_span!(
                target: "moraine::image",
                "moraine.image.warm",
                batch = self.head.batch_count)
        .entered();
        let catalog = match self.catalog() {
            Ok(catalog) => catalog,
            Err(e) => return tracing::debug!(target: "moraine::image", "moraine: no warm-up: {e}"),
        };
        let rank = |def: &TableDef| {
            crate::tables::READ_TO_PLAN
                .iter()
                .position(|t| *t == def.name)
                .or(crate::catalog::is_inlined_table_name(&def.name)
                    .then_some(crate::tables::READ_TO_PLAN.len()))
        };
        let mut planned: Vec<(usize, &Arc<TableDef>)> = catalog
            .tables
            .values()
            .filter_map(|def| Some((rank(def)?, def)))
            .collect();
        planned.sort_by_key(|(rank, _)| *rank);
        for (_, def) in planned {
            let served = crate::catalog::kind_of(def).and_then(|kind| self.live_rows(def, &kind));
            if let Err(e) = served {
                tracing::debug!(
                    target: "moraine::image",
                    table = %def.name,
                    "moraine: not warmed: {e}"
                );
            }
        }
    }

    /// The tables whose live rows this image has served, with the rows (tests).
    #[cfg(test)]
    pub(crate) fn served_live_for_test(&self) -> std::collections::BTreeMap<String, Arc<RowSet>> {
        let mut out = std::collections::BTreeMap::new();
        let spaces: Vec<_> = self.loaded().values().cloned().collect();
        for space in spaces {
            let live = space.live.lock().unwrap_or_else(|p| p.into_inner()).clone();
            for (name, once) in live {
                if let Some(rows) = once.get().cloned() {
                    out.insert(name, rows);
                }
            }
        }
        out
    }
}

/// The live rows of a table of `kind` from its space's records under its live prefix.
fn serve_live<'a>(
    kind: &Kind,
    live: impl Iterator<Item = (&'a Vec<u8>, &'a Entry)>,
) -> Result<RowSet> {
    Ok(match kind {
        Kind::Snapshot(half) => RowSet::encoded(kinds::snapshot::records(
            live.map(|(k, e)| (&k[..], &e.value)),
            *half,
        )?),
        Kind::Inline => {
            let chunks = live
                .map(|(k, e)| e.chunk_rows().map_err(|err| keys::at_key(err, k)))
                .collect::<Result<Vec<_>>>()?;
            RowSet::new(kinds::inline::rows(chunks.iter().map(|c| c.as_slice())))
        }
        // kept encoded, decoded as they are read
        Kind::Versioned { .. } | Kind::Unversioned { .. } => RowSet::encoded(
            kinds::fixed::serve_encoded(live.map(|(k, e)| (&k[..], &e.value)), kind)?,
        ),
    })
}

/// Whether the committed rows of a table of `kind` asked with `need_history` include ended
/// versions, which live in storage; every other read is served from the image's memory.
pub(crate) fn reads_history(kind: &Kind, need_history: bool) -> bool {
    need_history && matches!(kind, Kind::Versioned { .. })
}
