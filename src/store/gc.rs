//! A writer's garbage collection of SlateDB's obsolete objects: the collector that runs every
//! [`GC_INTERVAL`] while it is open (and checks whether a reclaim is due), and what its clean
//! close collects.

use super::*;
use slatedb::config::{GarbageCollectorDirectoryOptions, GarbageCollectorOptions};

/// How many times a garbage-collection pass retries a failed object-store call.
const GC_RETRIES: u32 = 3;

/// How often a writer's garbage collector runs; its first pass is one interval after the open,
/// never during an attach.
const GC_INTERVAL: Duration = Duration::from_secs(10);

/// A writer's garbage collector: a pass of SlateDB's collector with [`gc_options`] every
/// [`GC_INTERVAL`], until the store closes. (SlateDB's own background collector makes its first
/// pass as the database opens, listing every directory while the attach waits for its reads.)
/// Every minute (every pass, for an interval under a minute) it also reclaims the store's space
/// when its oldest SST or WAL object is older than `moraine_reclaim_interval` (see `reclaim.rs`),
/// and after a reclaim that failed waits ten minutes before the next check.
pub(super) fn start_collector(store: &Arc<Store>) -> tokio::task::JoinHandle<()> {
    let object_store = store.objects.store.clone();
    let boundary_files = store.boundary_files;
    let interval = store.access.reclaim_interval;
    let store = Arc::downgrade(store);
    let check_every = reclaim::check_every(interval, GC_INTERVAL);
    runtime().spawn(async move {
        let admin = slatedb::admin::Admin::builder("", object_store.clone()).build();
        let mut paused_until = None;
        for pass in 1u32.. {
            tokio::time::sleep(GC_INTERVAL).await;
            let pass_done = admin
                .run_gc_once(gc_options(boundary_files))
                .instrument(tracing::debug_span!(target: "moraine::store", "moraine.gc"));
            if let Err(e) = pass_done.await {
                tracing::warn!(
                    target: "moraine::store",
                    "moraine: collecting obsolete objects failed: {e}"
                );
            }
            let paused = paused_until.is_some_and(|t| tokio::time::Instant::now() < t);
            if pass % check_every == 0
                && !paused
                && !reclaim::reclaim_if_due(&admin, &object_store, &store, interval).await
            {
                paused_until = Some(tokio::time::Instant::now() + reclaim::RETRY_AFTER_FAILURE);
            }
        }
    })
}

/// How a writer collects SlateDB's obsolete objects (RFC 0009). Every commit writes one WAL
/// object, and every open lists the whole WAL directory, so WAL objects whose records are in
/// L0 (before the manifest's replay boundary) are collected ten seconds after they were
/// written, not SlateDB's five minutes: no writer reads them again, and a reader following the
/// manifest that finds one gone stops its replay there and catches up from the next manifest
/// (SlateDB's `WalTruncated`). Manifests and compactor state go after a minute. Compacted SSTs
/// keep SlateDB's five minutes: a reader's scan may still read them through the manifest it
/// holds.
///
/// SlateDB guards manifest and compactor-state collection with boundary objects that it
/// updates by compare-and-swap (`PutMode::Update`); an object store without that (a local
/// directory) collects them without the boundary (`boundary_files`), else it could never
/// collect them. The boundary stops a writer fenced long ago from writing a manifest at an id
/// already collected (such a writer's WAL writes still fail on SlateDB's WAL fence), and it
/// sends a reader whose next manifest was collected back to listing: a reader probes for the
/// manifest after the last one it read, and without the boundary, finding it gone, would take
/// its last one for the latest. So without the boundary manifests are kept for an hour, and
/// collected at close only once that old.
fn gc_options(boundary_files: bool) -> GarbageCollectorOptions {
    let every = |secs: u64| GarbageCollectorDirectoryOptions {
        interval: None,
        min_age: Duration::from_secs(secs),
        dry_run: false,
    };
    GarbageCollectorOptions {
        wal_options: Some(every(10)),
        // without the boundary, an hour (see above)
        manifest_options: Some(if boundary_files {
            every(60)
        } else {
            every(MANIFEST_AGE_WITHOUT_BOUNDARY.as_secs())
        }),
        compactions_options: Some(every(60)),
        boundary_files_enabled: boundary_files,
        object_store_max_retries: Some(GC_RETRIES),
        ..GarbageCollectorOptions::default()
    }
}

/// What a writer's clean close collects after flushing its memtable, whatever their age: the
/// WAL objects before the new replay boundary, the compactor's old job states and, where the
/// store keeps SlateDB's boundary objects, the manifests before the latest (without them, the
/// manifests older than the hour [`gc_options`] keeps them for: a writer that never stays open
/// for a collector pass would otherwise leave every manifest it wrote). Every open lists those
/// directories several times (SlateDB lists a directory to find its latest object), so the
/// next open lists only what is live. A reader that lists a manifest and finds it gone when it
/// reads it lists again (SlateDB's manifest store does).
pub(super) fn gc_at_close(boundary_files: bool) -> GarbageCollectorOptions {
    let now = || {
        Some(GarbageCollectorDirectoryOptions {
            interval: None,
            min_age: Duration::ZERO,
            dry_run: false,
        })
    };
    GarbageCollectorOptions {
        wal_options: now(),
        // without the boundary a reader could miss a manifest collected this soon (see above)
        manifest_options: if boundary_files {
            now()
        } else {
            Some(GarbageCollectorDirectoryOptions {
                interval: None,
                min_age: MANIFEST_AGE_WITHOUT_BOUNDARY,
                dry_run: false,
            })
        },
        compactions_options: now(),
        wal_fence_options: None,
        compacted_options: None,
        detach_options: None,
        boundary_files_enabled: boundary_files,
        object_store_max_retries: Some(GC_RETRIES),
        ..GarbageCollectorOptions::default()
    }
}

/// How long manifests are kept on a store without SlateDB's boundary objects (see
/// [`gc_options`]).
const MANIFEST_AGE_WITHOUT_BOUNDARY: Duration = Duration::from_secs(3600);
