//! Fault injection at the object-store boundary, with real SlateDB on top: an `ObjectStore`
//! that delegates to an `InMemory` and, while switched on, fails every write (`put`,
//! `put_opts`, `put_multipart`, `copy`); and the lakes the failure tests build on it.

use super::lakes::commit_table;
use super::{changes, init_lake, snap, stats_row, table_row, M};
use crate::error::Result;
use crate::head::Head;
use crate::store::Store;
use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

pub const MESSAGE: &str = "injected object-store write failure";

#[derive(Debug)]
pub struct FaultyStore {
    inner: Arc<InMemory>,
    failing: AtomicBool,
    /// Retryable errors (what a network failure or a 5xx is) or not.
    retryable: AtomicBool,
    /// Creates of commit objects (`moraine/log/`) take effect and then fail, as when the answer
    /// is lost; and, with `unreadable_commits`, reads of those that exist fail too.
    lose_answers: AtomicBool,
    unreadable_commits: AtomicBool,
    /// Writes under this prefix fail (retryable), whatever `failing` says.
    failing_under: std::sync::Mutex<Option<String>>,
    pub injected: AtomicUsize,
    /// Every request made, as "<op> <path>", while `recording`.
    requests: std::sync::Mutex<Vec<String>>,
    recording: AtomicBool,
    /// Each read takes this many milliseconds more (0: none), as over a network; and how many
    /// reads were under way at once, now and at most.
    read_delay_ms: std::sync::atomic::AtomicU64,
    reading: AtomicUsize,
    pub most_reading: AtomicUsize,
}

impl FaultyStore {
    pub fn new(inner: Arc<InMemory>) -> Arc<Self> {
        Arc::new(FaultyStore {
            inner,
            failing: AtomicBool::new(false),
            retryable: AtomicBool::new(true),
            lose_answers: AtomicBool::new(false),
            unreadable_commits: AtomicBool::new(false),
            failing_under: Default::default(),
            injected: AtomicUsize::new(0),
            requests: Default::default(),
            recording: AtomicBool::new(false),
            read_delay_ms: Default::default(),
            reading: Default::default(),
            most_reading: Default::default(),
        })
    }

    /// Every read takes `ms` milliseconds more from now on (0: none).
    pub fn delay_reads(&self, ms: u64) {
        self.read_delay_ms.store(ms, Ordering::SeqCst);
    }

    /// Record every request from now on (dropping those recorded so far).
    pub fn record_requests(&self) {
        self.requests.lock().unwrap().clear();
        self.recording.store(true, Ordering::SeqCst);
    }

    /// The requests recorded since [`FaultyStore::record_requests`], which go on recording.
    pub fn recorded(&self) -> Vec<String> {
        std::mem::take(&mut *self.requests.lock().unwrap())
    }

    fn note(&self, op: &str, location: impl std::fmt::Display) {
        if self.recording.load(Ordering::SeqCst) {
            self.requests
                .lock()
                .unwrap()
                .push(format!("{op} {location}"));
        }
    }

    pub fn fail_writes(&self, on: bool, retryable: bool) {
        self.retryable.store(retryable, Ordering::SeqCst);
        self.failing.store(on, Ordering::SeqCst);
    }

    /// Every write under `prefix` fails with a retryable error (`None`: none does).
    pub fn fail_writes_under(&self, prefix: Option<&str>) {
        *self.failing_under.lock().unwrap() = prefix.map(str::to_string);
    }

    /// Creates of commit objects take effect and then fail with a retryable error (`on`); reads
    /// of commit objects that exist fail as well (`unreadable`).
    pub fn lose_commit_answers(&self, on: bool, unreadable: bool) {
        self.lose_answers.store(on, Ordering::SeqCst);
        self.unreadable_commits.store(unreadable, Ordering::SeqCst);
    }

    fn lost(&self, op: &str, location: &Path) -> object_store::Error {
        self.injected.fetch_add(1, Ordering::SeqCst);
        object_store::Error::Generic {
            store: "FaultyStore",
            source: format!("{MESSAGE} ({op} {location}: the answer was lost)").into(),
        }
    }

    fn is_commit(location: &Path) -> bool {
        location.as_ref().starts_with("moraine/log/")
    }

    pub fn injected(&self) -> usize {
        self.injected.load(Ordering::SeqCst)
    }

    fn check(&self, op: &str, location: &Path) -> object_store::Result<()> {
        let under = self.failing_under.lock().unwrap().clone();
        if under.is_some_and(|p| location.as_ref().starts_with(&p)) {
            return Err(self.lost(op, location));
        }
        if !self.failing.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.injected.fetch_add(1, Ordering::SeqCst);
        let source = format!("{MESSAGE} ({op} {location})").into();
        Err(if self.retryable.load(Ordering::SeqCst) {
            object_store::Error::Generic {
                store: "FaultyStore",
                source,
            }
        } else {
            object_store::Error::NotSupported { source }
        })
    }
}

impl std::fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.note("put", location);
        self.check("put", location)?;
        let put = self.inner.put_opts(location, payload, opts).await;
        if put.is_ok() && Self::is_commit(location) && self.lose_answers.load(Ordering::SeqCst) {
            return Err(self.lost("put", location));
        }
        put
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.note("put_multipart", location);
        self.check("put_multipart", location)?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.note(if options.head { "head" } else { "get" }, location);
        let delay = self.read_delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            // (counted down also when the read is dropped midway)
            struct Reading<'a>(&'a AtomicUsize);
            impl Drop for Reading<'_> {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, Ordering::SeqCst);
                }
            }
            let now = self.reading.fetch_add(1, Ordering::SeqCst) + 1;
            let _reading = Reading(&self.reading);
            self.most_reading.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        }
        let got = self.inner.get_opts(location, options).await;
        // (an absent one still answers "not found": only what exists cannot be read)
        if got.is_ok()
            && Self::is_commit(location)
            && self.unreadable_commits.load(Ordering::SeqCst)
        {
            return Err(self.lost("get", location));
        }
        got
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[std::ops::Range<u64>],
    ) -> object_store::Result<Vec<bytes::Bytes>> {
        self.note("get_ranges", location);
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.note("delete", "(stream)");
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.note("list", prefix.map(|p| p.to_string()).unwrap_or_default());
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.note("list", prefix.map(|p| p.to_string()).unwrap_or_default());
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.note("list", prefix.map(|p| p.to_string()).unwrap_or_default());
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.note("copy", to);
        self.check("copy", to)?;
        self.inner.copy_opts(from, to, options).await
    }
}

/// Commit snapshot 2: a table `lost` and its stats (what the failure tests try to store).
pub(crate) fn commit_snapshot_2(store: &Arc<Store>) -> Result<()> {
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(2)])?;
    t.stage_insert(
        M,
        "ducklake_snapshot_changes",
        vec![changes(2, "created_table")],
    )?;
    t.stage_insert(M, "ducklake_table", vec![table_row(2, 2, None, "lost")])?;
    t.stage_insert(M, "ducklake_table_stats", vec![stats_row(2, 7)])?;
    t.commit()
}

/// Start `commit_snapshot_2` on a helper thread; its result arrives on the receiver.
pub(crate) fn commit_snapshot_2_in_background(
    store: &Arc<Store>,
) -> std::sync::mpsc::Receiver<Result<()>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let store = store.clone();
    std::thread::spawn(move || {
        let _ = tx.send(commit_snapshot_2(&store));
    });
    rx
}

/// A lake on a fault-injecting object store over `mem`, holding snapshots 0 and 1 (table `kept`).
pub(crate) fn faulty_lake(
    mem: &Arc<object_store::memory::InMemory>,
) -> (Arc<FaultyStore>, Arc<Store>) {
    let faulty = FaultyStore::new(mem.clone());
    let store = Store::open_on(faulty.clone(), false, "faulty://lake").unwrap();
    init_lake(&store);
    commit_table(&store, 1, 1, "kept");
    // (a background checkpoint of the setup must not meet the faults a test injects next)
    store.settle_checkpoint_for_test();
    (faulty, store)
}

pub(crate) fn reopen(mem: &Arc<object_store::memory::InMemory>) -> Arc<Store> {
    Store::open_on(mem.clone(), false, "memory://reopened").unwrap()
}

/// [`reopen`], taking the folder role at once as the attach's first commit would (fencing the
/// attach that held it).
pub(crate) fn reopen_folder(mem: &Arc<object_store::memory::InMemory>) -> Arc<Store> {
    let store = reopen(mem);
    store.take_folder_role().unwrap();
    store
}

pub(crate) const AFTER_COMMIT_1: Head = Head {
    snapshot_id: Some(1),
    batch_count: 2,
};
