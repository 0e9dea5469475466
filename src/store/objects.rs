//! The object store a lake is on, read beside SlateDB: image checkpoint objects, the newest of
//! which is read ahead while SlateDB opens.

use super::*;
use bytes::Bytes;

/// A checkpoint object read ahead.
pub(super) type Prefetch = tokio::task::JoinHandle<Option<Newest>>;

/// The newest checkpoint object, read ahead.
pub(super) struct Newest {
    pub(super) path: String,
    pub(super) bytes: Bytes,
    /// When a listing that began then found no commit object after it (an attach that starts
    /// from this checkpoint has then read the lake's tail to its end).
    pub(super) no_tail_since: Option<std::time::Instant>,
}

/// The newest image checkpoint object under `moraine/image/`, if any can be read: the one the
/// store's `image/checkpoint` names, unless a writer moved it meanwhile (the load checks).
/// Also whether any commit object follows it, listed beside its read. Best effort: any failure
/// leaves the load to read what the pointer names.
pub(super) async fn prefetch_checkpoint(objects: Objects) -> Option<Newest> {
    let span = tracing::debug_span!(target: "moraine::store", "moraine.checkpoint.prefetch");
    read_newest_checkpoint(objects).instrument(span).await
}

/// The object store a lake is on, and the same store when it is a local directory.
#[derive(Clone)]
pub(super) struct Objects {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) local: Option<Arc<local::LocalStore>>,
}

impl Objects {
    /// The whole object at `path`: mapped when the store is a local directory
    /// ([`local::LocalStore::map`]), else read.
    async fn read(&self, path: &object_store::path::Path) -> std::result::Result<Bytes, String> {
        if let Some(mapped) = self.local.as_ref().and_then(|l| l.map(path)) {
            return mapped.map_err(|e| e.to_string());
        }
        let got = self.store.get(path).await.map_err(|e| e.to_string())?;
        got.bytes().await.map_err(|e| e.to_string())
    }
}

async fn read_newest_checkpoint(objects: Objects) -> Option<Newest> {
    let object_store = &objects.store;
    let dir = object_store::path::Path::from(checkpoint::OBJECT_DIR);
    let listed = object_store.list_with_delimiter(Some(&dir)).await.ok()?;
    let newest = listed
        .objects
        .into_iter()
        .filter_map(|m| {
            Some((
                checkpoint::batch_of_object(m.location.as_ref())?,
                m.location,
            ))
        })
        .max_by_key(|(batch, _)| *batch)?;
    let listed_tail = async {
        let started = std::time::Instant::now();
        matches!(objects.first_commit_after(newest.0).await, Ok(None)).then_some(started)
    };
    let (bytes, no_tail_since) = futures::join!(objects.read(&newest.1), listed_tail);
    Some(Newest {
        path: newest.1.to_string(),
        bytes: bytes.ok()?,
        no_tail_since,
    })
}

impl Store {
    /// Test hook: the object store SlateDB runs on.
    #[cfg(test)]
    pub(crate) fn object_store_for_test(&self) -> Arc<dyn ObjectStore> {
        self.objects.store.clone()
    }

    /// Test hook: waits for the checkpoint read ahead at open and says which object it read
    /// (leaving it for the first load).
    #[cfg(test)]
    pub(crate) fn prefetched_path_for_test(&self) -> Option<String> {
        let task = self.take_prefetched()?;
        let got = block_on(task).ok().flatten();
        let path = got.as_ref().map(|n| n.path.clone());
        *self.prefetched.lock().unwrap() = Some(runtime().spawn(async move { got }));
        path
    }

    /// The object at `path`: the checkpoint read while SlateDB opened if it is that one (taken:
    /// only the first load can use it), else read now.
    pub(crate) async fn read_checkpoint_object(&self, path: &str) -> Result<Bytes> {
        if let Some(task) = self.take_prefetched() {
            if let Ok(Some(newest)) = task.await {
                if newest.path == path {
                    return Ok(newest.bytes);
                }
            }
        }
        self.read_object(path).await
    }

    /// Drop the checkpoint read ahead at open, if no load took it (a load that found no
    /// checkpoint, or failed before reading it): its bytes are not kept for nothing.
    pub(crate) fn drop_prefetched(&self) {
        if let Some(task) = self.take_prefetched() {
            task.abort();
        }
    }

    fn take_prefetched(&self) -> Option<Prefetch> {
        self.prefetched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// The bytes of an object beside SlateDB's (an image checkpoint).
    pub(crate) async fn read_object(&self, path: &str) -> Result<Bytes> {
        tracing::trace!(target: "moraine::store", path, "moraine: reading an object");
        let path = object_store::path::Path::from(path);
        self.objects
            .read(&path)
            .await
            .map_err(|e| Error::Storage(format!("reading {path}: {e}")))
    }
}
