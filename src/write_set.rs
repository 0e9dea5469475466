//! A commit's write set (RFC 0006): the final value of every key the commit touches, over the
//! committed image it began on.

use crate::catalog::SnapshotRecord;
use crate::error::Result;
use crate::keys;
use bytes::Bytes;
use futures::future::BoxFuture;
use std::collections::BTreeMap;

/// The committed state a write set lies over: the image the commit began on, read through the
/// store's handle (`image/read.rs` implements it). A trait, so that the write rules of each kind,
/// which the image's serving rules sit beside, need not know the image.
pub(crate) trait Committed: Sync {
    /// The committed value of `key`.
    fn get<'a>(&'a self, key: &'a [u8]) -> BoxFuture<'a, Result<Option<Bytes>>>;
    /// Every committed (key, value) under `prefix`, in key order.
    fn scan<'a>(&'a self, prefix: &'a [u8]) -> BoxFuture<'a, Result<Vec<(Bytes, Bytes)>>>;
}

/// The keys a commit writes, laid over the image it began on: reads see the commit's own
/// earlier writes first.
pub(crate) struct WriteSet<'a> {
    committed: &'a dyn Committed,
    pending: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl<'a> WriteSet<'a> {
    pub(crate) fn new(committed: &'a dyn Committed) -> Self {
        WriteSet {
            committed,
            pending: BTreeMap::new(),
        }
    }

    /// The final value of every key the commit touches (`None` = delete).
    pub(crate) fn into_writes(self) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
        self.pending
    }

    /// Every committed (key, value) under `prefix`, without this commit's writes.
    pub(crate) async fn committed_scan(
        &self,
        prefix: &[u8],
    ) -> Result<Vec<(bytes::Bytes, bytes::Bytes)>> {
        self.committed.scan(prefix).await
    }

    pub(crate) async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.get_bytes(key).await?.map(Vec::from))
    }

    /// The value of `key` (pending, else committed), without copying a committed value out of
    /// the image.
    pub(crate) async fn get_bytes(&self, key: &[u8]) -> Result<Option<bytes::Bytes>> {
        if let Some(v) = self.pending.get(key) {
            return Ok(v.as_ref().map(|v| bytes::Bytes::copy_from_slice(v)));
        }
        self.committed.get(key).await
    }

    pub(crate) async fn exists(&self, key: &[u8]) -> Result<bool> {
        Ok(self.get(key).await?.is_some())
    }

    pub(crate) fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.pending.insert(key, Some(value));
    }

    pub(crate) fn del(&mut self, key: Vec<u8>) {
        self.pending.insert(key, None);
    }

    /// Every live (key, value) under `prefix`, committed and pending merged.
    pub(crate) async fn scan(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut merged: BTreeMap<Vec<u8>, Option<Vec<u8>>> = self
            .committed
            .scan(prefix)
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

    pub(crate) async fn snapshot_record(&self, lake: &str, id: i64) -> Result<SnapshotRecord> {
        match self.get_bytes(&keys::snapshot(lake, id)).await? {
            Some(v) => SnapshotRecord::decode(&v),
            None => Ok(SnapshotRecord::default()),
        }
    }

    pub(crate) fn put_snapshot_record(&mut self, lake: &str, id: i64, rec: &SnapshotRecord) {
        if rec.is_empty() {
            self.del(keys::snapshot(lake, id));
        } else {
            self.put(keys::snapshot(lake, id), rec.encode());
        }
    }
}
