//! Where a byte string lies in the objects of a store (`moraine_objects_holding`): an operator's
//! check that withdrawn values left no byte behind (docs/operating-a-lake.md, "Withdrawing
//! data"). Every object under the store's prefix is read whole and searched as it is stored,
//! and the objects whose encoding could hide the bytes are decoded and searched again: SlateDB's
//! SSTs and WAL objects entry by entry (every version and tombstone they hold, as SlateDB
//! decodes its blocks), image checkpoints record by record, and commit objects write by write.

use super::*;
use bytes::Bytes;
use futures::TryStreamExt;
use slatedb::{SstReader, ValueDeletable, WalReader};

/// An object of the store that holds the bytes looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holding {
    /// The object's path under the store's prefix.
    pub object: String,
    /// `stored`: its bytes as stored hold them; `decoded`: only its decoded entries do.
    pub found: &'static str,
}

/// What an object is, by its path, for decoding it.
enum Kind {
    Sst(ulid::Ulid),
    Wal(u64),
    Checkpoint,
    Commit(u64),
    Other,
}

fn kind_of(path: &str) -> Kind {
    let stem = |dir: &str, ext: &str| {
        path.strip_prefix(dir)?
            .strip_suffix(ext)
            .map(str::to_string)
    };
    if let Some(id) = stem("compacted/", ".sst").and_then(|s| ulid::Ulid::from_string(&s).ok()) {
        return Kind::Sst(id);
    }
    if let Some(id) = stem("wal/", ".sst").and_then(|s| s.parse().ok()) {
        return Kind::Wal(id);
    }
    if checkpoint::batch_of_object(path).is_some() {
        return Kind::Checkpoint;
    }
    match checkpoint::batch_of_log_object(path) {
        Some(batch) => Kind::Commit(batch),
        None => Kind::Other,
    }
}

fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}

/// An object store holding only `bytes` at `path`: SlateDB's readers decode the object read
/// once, not fetched again block by block (nor gone if collected meanwhile).
async fn only(path: &str, bytes: Bytes) -> Result<Arc<dyn ObjectStore>> {
    let one = object_store::memory::InMemory::new();
    one.put(&object_store::path::Path::from(path), bytes.into())
        .await?;
    Ok(Arc::new(one))
}

impl Store {
    /// Every object of the store that holds `needle`, as stored or once decoded. Each object's
    /// read has the store's time limit; an object collected while the search ran is skipped.
    pub fn objects_holding(&self, needle: &[u8]) -> Result<Vec<Holding>> {
        let span = tracing::info_span!(target: "moraine::store", "moraine.objects_holding", store = %self.url);
        let _enter = span.enter();
        if needle.is_empty() {
            return Err(Error::InvalidInput(
                "moraine_objects_holding: the bytes to look for are empty".into(),
            ));
        }
        let os = self.objects.store.clone();
        let listed: Vec<object_store::ObjectMeta> = self
            .bounded("listing the store's objects", async {
                Ok(os.list(None).try_collect().await?)
            })?;
        let mut out = Vec::new();
        for meta in listed {
            let path = meta.location.to_string();
            let found = self.bounded("reading an object", self.object_holds(&path, needle))?;
            if let Some(found) = found {
                out.push(Holding {
                    object: path,
                    found,
                });
            }
        }
        Ok(out)
    }

    /// How `path` holds `needle`, if it does (`None` too when it was collected meanwhile).
    async fn object_holds(&self, path: &str, needle: &[u8]) -> Result<Option<&'static str>> {
        let os = self.objects.store.clone();
        let location = object_store::path::Path::from(path);
        let bytes = match os.get(&location).await {
            Ok(got) => got.bytes().await?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if holds(&bytes, needle) {
            return Ok(Some("stored"));
        }
        let decoded = decoded_holds(path, bytes, needle)
            .await
            .map_err(|e| match e {
                // (which object could not be decoded)
                Error::Storage(why) => Error::Storage(format!("decoding {path}: {why}")),
                other => other,
            })?;
        Ok(decoded.then_some("decoded"))
    }
}

/// Whether `path`, whose bytes are `bytes`, holds `needle` once decoded (`false` for an
/// object moraine does not decode).
async fn decoded_holds(path: &str, bytes: Bytes, needle: &[u8]) -> Result<bool> {
    Ok(match kind_of(path) {
        Kind::Sst(id) => {
            let reader = SstReader::new("", only(path, bytes).await?, None, None);
            let sst = reader.open(id).await?;
            let blocks = sst.index().await?.len();
            let mut found = false;
            for block in 0..blocks {
                found = sst
                    .read_block(block)
                    .await?
                    .iter()
                    .any(|e| entry_holds(&e.key, &e.value, needle));
                if found {
                    break;
                }
            }
            found
        }
        Kind::Wal(id) => {
            let mut it = WalReader::new("", only(path, bytes).await?)
                .get(id)
                .iterator()
                .await?;
            let mut found = false;
            while let Some(e) = it.next().await? {
                if entry_holds(&e.key, &e.value, needle) {
                    found = true;
                    break;
                }
            }
            found
        }
        Kind::Checkpoint => {
            let cp = checkpoint::decode_checkpoint(bytes, path)?;
            let mut found = false;
            for section in cp.sections.values() {
                found = checkpoint::decode_section(&section.decompressed()?)?
                    .iter()
                    .any(|(k, v)| holds(k, needle) || holds(v, needle));
                if found {
                    break;
                }
            }
            found
        }
        Kind::Commit(batch) => checkpoint::Commit::decode(&bytes, batch)?
            .writes
            .iter()
            .any(|(k, v)| holds(k, needle) || v.as_ref().is_some_and(|v| holds(v, needle))),
        Kind::Other => false,
    })
}

fn entry_holds(key: &[u8], value: &ValueDeletable, needle: &[u8]) -> bool {
    holds(key, needle)
        || match value {
            ValueDeletable::Value(v) | ValueDeletable::Merge(v) => holds(v, needle),
            ValueDeletable::Tombstone => false,
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::lakes::*;
    use crate::testing::*;

    #[test]
    fn finds_bytes_as_stored_and_only_once_decoded() {
        // uncompressed, a value is stored as it is (in the commit objects at least)
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().display().to_string();
        let none = [("compression".to_string(), "none".to_string())];
        let store = Store::open_with(&url, false, &none).unwrap();
        init_lake(&store);
        commit_table(&store, 1, 1, "a_table_named_07");
        let found = store.objects_holding(b"a_table_named_07").unwrap();
        assert!(
            found.iter().any(|h| h.found == "stored"),
            "a value is stored as it is: {found:?}"
        );
        drop(store);

        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().display().to_string();
        let store = new_lake(&url);
        for i in 0..20 {
            commit_table(&store, 1 + i, 1 + i, &format!("a_table_named_{i:02}"));
        }
        // the memtable to an L0 SST and an image checkpoint
        store.close().unwrap();
        let store = Store::open(&url, false).unwrap();
        let found = store.objects_holding(b"a_table_named_07").unwrap();
        // compressed (zstd by default), only decoding finds a value: in the tables, the
        // checkpoints and the commit objects (and a key after the first of an SST block is
        // stored without the prefix it shares with the key before it)
        assert!(
            found.len() >= 3 && found.iter().all(|h| h.found == "decoded"),
            "{found:?}"
        );
        // each kind of object moraine decodes finds it once decoded too
        let os = store.objects.store.clone();
        let listed: Vec<_> = block_on(os.list(None).try_collect::<Vec<_>>()).unwrap();
        let mut decoded = Vec::new();
        for meta in listed {
            let path = meta.location.to_string();
            let bytes = block_on(async { os.get(&meta.location).await?.bytes().await }).unwrap();
            for needle in [&b"a_table_named_07"[..], b"no such bytes anywhere"] {
                if block_on(decoded_holds(&path, bytes.clone(), needle)).unwrap() {
                    assert_eq!(needle, b"a_table_named_07", "{path}");
                    decoded.push(path.clone());
                }
            }
        }
        for kind in ["compacted/", "moraine/image/", "moraine/log/"] {
            assert!(
                decoded.iter().any(|p| p.starts_with(kind)),
                "a {kind} object decoded holds it: {decoded:?}"
            );
        }
        assert_eq!(
            store.objects_holding(b"no such bytes anywhere").unwrap(),
            vec![]
        );
        let err = store.objects_holding(b"").unwrap_err().to_string();
        assert!(err.contains("the bytes to look for are empty"), "{err}");
    }
}
