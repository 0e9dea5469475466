//! Reading an image: the committed catalog, lake heads, point reads and scans (of live records
//! from memory, of history from storage), and the image as the committed state a commit's write
//! set lies over.

use super::history::History;
use super::spaces::{is_history_prefix, place_of, place_space, Place};
use super::Image;
use crate::backend::{bulk_scan, Backend};
use crate::catalog::CommittedCatalog;
use crate::cell::{decode_row, Cell};
use crate::error::{Error, Result};
use crate::keys;
use bytes::Bytes;
use slatedb::DbSnapshot;
use std::sync::Arc;

impl Image {
    /// The head snapshot of `lake`: the default lake's is in `sys/head`, any other lake's in
    /// `lake/<lake>/head`. `None` for a lake with no snapshot yet.
    pub fn lake_snapshot(&self, lake: &str) -> Result<Option<i64>> {
        if lake == keys::DEFAULT_LAKE {
            return Ok(self.head.snapshot_id);
        }
        let key = keys::lake_head(lake);
        match self.entry(&place_space(&key)?, &key) {
            None => Ok(None),
            Some(e) => match decode_row(&e.value)?.as_slice() {
                [Cell::Int(id)] => Ok(Some(*id)),
                _ => Err(Error::Corrupt(format!("lake/{lake}/head is malformed"))),
            },
        }
    }

    /// The committed schemas and table definitions, decoded once per image.
    pub(crate) fn catalog(&self) -> Result<Arc<CommittedCatalog>> {
        if let Some(cat) = self.catalog.get() {
            return Ok(cat.clone());
        }
        let schemas = self.scan_live(&keys::sys_schema_prefix())?;
        let tables = self.scan_live(&keys::sys_table_prefix())?;
        let cat = Arc::new(CommittedCatalog::decode(
            schemas.iter().map(|(_, v)| v.as_ref()),
            tables.iter().map(|(_, v)| v.as_ref()),
        )?);
        Ok(self.catalog.get_or_init(|| cat).clone())
    }

    /// A point read at this image (history keys read on demand).
    pub(crate) async fn get(&self, backend: &Backend, key: &[u8]) -> Result<Option<Bytes>> {
        match place_of(key)? {
            Place::Space(space) => Ok(match self.space(&space)? {
                Some(s) => s.entries.get(key).map(|e| e.value.clone()),
                None => None,
            }),
            Place::Image => Err(Error::InvalidInput(
                "image/ records are not read through an image".into(),
            )),
            Place::History(_) => {
                if let Some(snap) = self.history.snapshot() {
                    match snap.get(key).await {
                        Ok(v) => return Ok(v),
                        // the snapshot's writer was fenced since (another attach took the
                        // folder role): read the state the store has now, once it holds
                        // every commit of this image
                        Err(e) if handle_closed(&e) => self.state_holds_image(backend).await?,
                        Err(e) => return Err(e.into()),
                    }
                }
                let v = match &self.history {
                    History::Latest(tail) => tail.get(key).cloned(),
                    History::Snapshot(_) => None,
                };
                let v = match v {
                    Some(v) => v,
                    None if !self.state_may_hold(key) => None,
                    None => backend.get(key).await?,
                };
                Ok(v.filter(|v| self.ended_by_head(key, v)))
            }
        }
    }

    /// Whether the state a reader's image reads history from may hold records under `prefix`
    /// (a history key or prefix): unless the image knows which ranges do (from its checkpoint,
    /// RFC 0009) and this is not one, so that a reader that started from a checkpoint opens
    /// SlateDB only for history that exists.
    fn state_may_hold(&self, prefix: &[u8]) -> bool {
        self.history_held
            .get()
            .is_none_or(|held| held.may_hold(prefix))
    }

    /// Every record under `prefix` at this image, in key order. The prefix lies within one
    /// space, spans whole spaces, or lies within the history keyspace.
    pub(crate) async fn scan(
        &self,
        backend: &Backend,
        prefix: &[u8],
    ) -> Result<Vec<(Bytes, Bytes)>> {
        if is_history_prefix(prefix)? {
            if let Some(s) = self.history.snapshot() {
                let read = async {
                    if !self.history_held(&s).await?.may_hold(prefix) {
                        return Ok(Vec::new());
                    }
                    scan_snapshot(&s, prefix).await
                };
                match read.await {
                    Ok(records) => return Ok(records),
                    // (as in `get`: the state the store has now)
                    Err(Error::Fenced(_)) => self.state_holds_image(backend).await?,
                    Err(e) => return Err(e),
                }
            }
            let records = match self.state_may_hold(prefix) {
                true => backend.scan(prefix).await?,
                false => Vec::new(),
            };
            let no_tail = super::history::Tail::new();
            let tail = match &self.history {
                History::Latest(tail) => tail,
                History::Snapshot(_) => &no_tail,
            };
            let mut merged: std::collections::BTreeMap<Bytes, Bytes> =
                records.into_iter().collect();
            let under = tail
                .range(prefix.to_vec()..)
                .take_while(|(k, _)| k.starts_with(prefix));
            for (k, v) in under {
                let k = Bytes::copy_from_slice(k);
                match v {
                    Some(v) => merged.insert(k, v.clone()),
                    None => merged.remove(&k),
                };
            }
            return Ok(merged
                .into_iter()
                .filter(|(k, v)| self.ended_by_head(k, v))
                .collect());
        }
        self.scan_live(prefix)
    }

    /// Every record under `prefix`, which lies within one space or spans whole spaces, in key
    /// order.
    fn scan_live(&self, prefix: &[u8]) -> Result<Vec<(Bytes, Bytes)>> {
        let mut out = Vec::new();
        // the space holding the prefix, if the prefix lies within one
        if let Ok(Place::Space(space_prefix)) = place_of(prefix) {
            if prefix.starts_with(&space_prefix) {
                if let Some(space) = self.space(&space_prefix)? {
                    out.extend(
                        space
                            .range(prefix)
                            .map(|(k, e)| (Bytes::copy_from_slice(k), e.value.clone())),
                    );
                }
                return Ok(out);
            }
        }
        // else every space the prefix spans, in key order
        let spanned: Vec<Vec<u8>> = self
            .sections
            .range(prefix.to_vec()..)
            .take_while(|(p, _)| p.starts_with(prefix))
            .map(|(p, _)| p.clone())
            .collect();
        for p in spanned {
            self.space(&p)?;
        }
        for (space_prefix, space) in self.loaded().range(prefix.to_vec()..) {
            if !space_prefix.starts_with(prefix) {
                break;
            }
            out.extend(
                space
                    .entries
                    .iter()
                    .map(|(k, e)| (Bytes::copy_from_slice(k), e.value.clone())),
            );
        }
        Ok(out)
    }
}

/// Whether a SlateDB error says the handle a snapshot was taken from is closed (fenced).
fn handle_closed(e: &slatedb::Error) -> bool {
    matches!(e.kind(), slatedb::ErrorKind::Closed(_))
}

pub(super) async fn scan_snapshot(snap: &DbSnapshot, prefix: &[u8]) -> Result<Vec<(Bytes, Bytes)>> {
    let mut it = snap
        .scan_prefix_with_options(prefix, .., &bulk_scan())
        .await?;
    let mut out = Vec::new();
    while let Some(kv) = it.next().await? {
        out.push((kv.key, kv.value));
    }
    Ok(out)
}

impl Image {
    /// Waits until `backend`'s state (a reader's, standing in for this image's snapshot, whose
    /// writer was fenced) holds every commit of this image. A folder fenced before SlateDB made
    /// its last folds durable leaves them to the next folder, which folds them again from their
    /// commit objects: until the reader sees that, its state lacks their ended versions, and
    /// reading history from it would miss rows. Gives up after
    /// [`FENCED_CATCH_UP_LIMIT`] with an error rather than a wrong answer.
    async fn state_holds_image(&self, backend: &Backend) -> Result<()> {
        let started = std::time::Instant::now();
        let mut read_afresh = started;
        loop {
            let held = match backend.get(&keys::sys_head()).await? {
                Some(v) => crate::head::Head::decode(&v)?.batch_count,
                None => 0,
            };
            if held >= self.head.batch_count {
                return Ok(());
            }
            if started.elapsed() >= FENCED_CATCH_UP_LIMIT {
                return Err(Error::Storage(format!(
                    "this transaction's view of the lake (batch {}) was read through a folder \
                     another attach has since replaced, and the lake's state still shows batch \
                     {held} after {} s; run the statement again",
                    self.head.batch_count,
                    FENCED_CATCH_UP_LIMIT.as_secs()
                )));
            }
            if let Backend::Reader(reader) = backend {
                // a reader's state moves when it is read afresh: every 200 ms after the last
                // read ended
                if read_afresh.elapsed() >= std::time::Duration::from_millis(200) {
                    reader.refresh(reader.read_at()).await?;
                    read_afresh = std::time::Instant::now();
                    continue;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

/// How long a history read of a fenced folder's image waits for the reader's state to hold
/// the image ([`Image::state_holds_image`]).
const FENCED_CATCH_UP_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// An image read through the store's handle: the committed state a commit's write set lies
/// over.
pub(crate) struct ImageAt<'a> {
    pub image: &'a Image,
    pub backend: &'a Backend,
}

impl crate::write_set::Committed for ImageAt<'_> {
    fn get<'a>(&'a self, key: &'a [u8]) -> futures::future::BoxFuture<'a, Result<Option<Bytes>>> {
        Box::pin(self.image.get(self.backend, key))
    }

    fn scan<'a>(
        &'a self,
        prefix: &'a [u8],
    ) -> futures::future::BoxFuture<'a, Result<Vec<(Bytes, Bytes)>>> {
        Box::pin(self.image.scan(self.backend, prefix))
    }
}
