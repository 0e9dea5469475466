//! Reading a store's image: from its newest image checkpoint and the commit log after it, or
//! from every live record, through a writer's SlateDB snapshot or a reader's state (RFC 0009).
//! The store's side of the image: the image itself is data, built by these functions.

use super::*;
use crate::checkpoint::{self, Writes};
use crate::image::read_live;
use bytes::Bytes;
use slatedb::DbSnapshot;

/// The commit log from batch `from` on, as far as it runs without a gap, read through `snap`
/// (a writer's) or the reader's state in one iterator.
async fn read_log(
    store: &Store,
    snap: Option<&Arc<DbSnapshot>>,
    from: u64,
) -> Result<Vec<(Head, Writes)>> {
    let range = keys::image_log(from)..keys::image_log(i64::MAX as u64);
    // (a reader's state held open while its iterator reads)
    let held;
    let mut it = match (snap, &*store.backend()) {
        (Some(s), _) => s.scan_with_options(range, &bulk_scan()).await?,
        (None, Backend::Reader(r)) => {
            held = r.held().await?;
            held.scan_with_options(range, &bulk_scan()).await?
        }
        (None, Backend::Writer(db, _)) => db.scan_with_options(range, &bulk_scan()).await?,
    };
    let mut out = Vec::new();
    let mut next = from;
    while let Some(kv) = it.next().await? {
        match keys::decode_key(&kv.key)?.as_slice() {
            [_, _, Cell::Int(b)] if *b as u64 == next => {
                out.push(checkpoint::decode_log(&kv.value, next)?);
                next += 1;
            }
            _ => break,
        }
    }
    Ok(out)
}

/// Read the image of `store` afresh, of one committed state.
///
/// A writer reads through one SlateDB snapshot. A reader has none: SlateDB 0.18's `DbReader`
/// scans each see the reader's state of the moment they start, and a state read afresh may
/// replace it between two scans. One iterator is one state, so a reader reads
/// the whole keyspace with one iterator, seeking past each history range instead of
/// reading it.
///
/// Both start from the newest image checkpoint when there is one (the checkpoint and the
/// commit log after it; see `checkpoint.rs`), and a reader that holds an image follows the
/// log from it. A reader's image is at least at `at_least`, the head it read before.
pub(crate) async fn load_image(
    store: &Store,
    previous: Option<&Image>,
    at_least: Head,
) -> Result<Image> {
    let span = tracing::debug_span!("moraine.image.load", store = store.url());
    // the checkpoint read ahead at open serves only the first load's from_checkpoint
    let loaded = load_from(store, previous, at_least).instrument(span).await;
    store.drop_prefetched();
    loaded
}

async fn load_from(store: &Store, previous: Option<&Image>, at_least: Head) -> Result<Image> {
    let unusable = |e: Error| {
        tracing::warn!("moraine: the image checkpoint cannot be used ({e}); reading records");
    };
    match &*store.backend() {
        Backend::Writer(db, _) => {
            let snap = store.take_snapshot(db)?;
            let checkpointed = match from_checkpoint(store, Some(&snap))
                .instrument(tracing::debug_span!("moraine.image.checkpoint"))
                .await
            {
                Ok(Some(image)) => image.with_held(&snap).await.map(Some),
                other => other,
            };
            match checkpointed {
                Ok(Some(image)) => return Ok(image),
                Ok(None) => {}
                Err(e) => unusable(e),
            }
            // no checkpoint to start from: every record, at the snapshot's state
            image_from_records(store, Some(snap), previous).await
        }
        Backend::Reader(_) => {
            let reaches = |i: &Image| i.head().batch_count >= at_least.batch_count;
            if let Some(prev) = previous {
                let followed = match read_log(store, None, prev.head().batch_count + 1).await {
                    Ok(log) => prev.follow(log, None),
                    Err(e) => Err(e),
                };
                match followed {
                    Ok(image) if reaches(&image) => return Ok(image),
                    Ok(_) => {}
                    Err(e) => unusable(e),
                }
            }
            match from_checkpoint(store, None)
                .instrument(tracing::debug_span!("moraine.image.checkpoint"))
                .await
            {
                Ok(Some(image)) if reaches(&image) => return Ok(image),
                Ok(_) => {}
                Err(e) => unusable(e),
            }
            image_from_records(store, None, previous).await
        }
    }
}

/// The image read from every live record (one iterator: one state), at `snap` (a
/// writer's; a writer without one takes one now) or the reader's state.
pub(crate) async fn image_from_records(
    store: &Store,
    snap: Option<Arc<DbSnapshot>>,
    previous: Option<&Image>,
) -> Result<Image> {
    let snap = match (snap, &*store.backend()) {
        (Some(s), _) => Some(s),
        (None, Backend::Writer(db, _)) => Some(store.take_snapshot(db)?),
        (None, Backend::Reader(_)) => None,
    };
    let held;
    let it = match (&snap, &*store.backend()) {
        (Some(s), _) => s.scan_with_options(.., &bulk_scan()).await?,
        (None, Backend::Reader(r)) => {
            held = r.held().await?;
            held.scan_with_options(.., &bulk_scan()).await?
        }
        (None, Backend::Writer(..)) => unreachable!("a writer reads through a snapshot"),
    };
    let records = read_live(it).await?;
    Image::from_live_records(records, snap, previous)
}

/// The image of the newest checkpoint brought up to the end of the commit log, read through
/// `snap` (a writer's) or the reader's state; `None` when the store has no checkpoint.
async fn from_checkpoint(store: &Store, snap: Option<&Arc<DbSnapshot>>) -> Result<Option<Image>> {
    let pointer = match snap {
        Some(s) => s.get(keys::image_checkpoint()).await?,
        None => store.backend().get(&keys::image_checkpoint()).await?,
    };
    let Some(pointer) = pointer else {
        return Ok(None);
    };
    let (batch, path) = checkpoint::decode_pointer(&pointer)?;
    let object = store.read_checkpoint_object(&path).await?;
    let (image, _) = checkpoint_image(object, &path, batch, "image/checkpoint", snap)?;
    let log = read_log(store, snap, batch + 1)
        .instrument(tracing::trace_span!("moraine.image.log"))
        .await?;
    let _span = tracing::trace_span!("moraine.image.follow", commits = log.len()).entered();
    Ok(Some(image.follow(log, snap.cloned())?))
}

/// The image of the checkpoint `object` at `path`, which `named_by` says holds `batch`, read
/// through `snap` (a writer's) or a reader's state; and the store format it names.
fn checkpoint_image(
    object: Bytes,
    path: &str,
    batch: u64,
    named_by: &str,
    snap: Option<&Arc<DbSnapshot>>,
) -> Result<(Image, Option<String>)> {
    let cp = checkpoint::decode_checkpoint(object, path)?;
    if cp.head.batch_count != batch {
        return Err(Error::Corrupt(format!(
            "image checkpoint {path} holds batch {}, {named_by} says {batch}",
            cp.head.batch_count
        )));
    }
    let image = Image::from_sections(cp.head, cp.sections, batch, snap.cloned())
        .with_history_held(cp.history_held);
    Ok((image, cp.store_format))
}

/// The image a `READ_ONLY` attach starts from without opening SlateDB (RFC 0009, "An attach
/// that reads what its first query needs"): the newest checkpoint object, found by listing
/// (`path`, `object`), when it says it was written in this build's store format. `None` when
/// it does not say (a checkpoint of an earlier build), names another format, or cannot be
/// decoded: the attach then opens SlateDB and reads as before, which checks the store's own
/// marker. Its writer made the folds it holds durable before writing it, so SlateDB's state,
/// once opened, is at least at its head.
pub(super) fn image_to_start_from(path: &str, object: Bytes) -> Option<Image> {
    let batch = checkpoint::batch_of_object(path)?;
    match checkpoint_image(object, path, batch, "its name", None) {
        Ok((image, format)) if format.as_deref() == Some(STORE_FORMAT) => Some(image),
        Ok((_, format)) => {
            tracing::debug!(
                target: "moraine::store",
                path,
                format,
                "moraine: the newest checkpoint is not of this build's store format; opening \
                 SlateDB"
            );
            None
        }
        Err(e) => {
            tracing::debug!(target: "moraine::store", "moraine: {e}; opening SlateDB");
            None
        }
    }
}
