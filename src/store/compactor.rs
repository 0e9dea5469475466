//! A writer's compactor, started when the writer has work for it rather than with the open.
//!
//! SlateDB's compactor, built into `Db::open`, resumes any compaction an earlier writer left
//! unfinished as soon as it starts. A process that attaches, reads and detaches (a short query
//! session, a notebook's first query) then spends its first hundred milliseconds sharing the
//! CPU with a compaction it abandons at close, and starts it again the next time. So moraine
//! opens SlateDB without its compactor and runs the same compactor (`Compactor`, SlateDB's
//! default options, the same object store and metrics) beside it, started by whichever comes
//! first:
//!
//! - the writer's first commit (once it is acknowledged; every later commit starts it again
//!   if it stopped on an error);
//! - [`START_AFTER`] after the open;
//! - a reclaim, which hands its compaction to this compactor;
//! - the close, when L0 holds as many SSTs as SlateDB allows before it makes a memtable flush
//!   wait for a compaction and the close's flush will add to it (the replay marker, or this
//!   writer's commits): that flush then waits for this compactor's compaction, never for one
//!   that is not running.
//!
//! Not the open, even with L0 full. A writer's close often leaves L0 full (its last flush
//! fills it), and starting at the open then made every later short attach resume the same
//! compaction and abandon it, until one session lasted long enough to finish it. What else
//! can flush a memtable after the open is rare and waits at most for the timer: a WAL replay
//! of more than a memtable's worth (a writer that stopped with over 64 MiB unflushed), a
//! format upgrade's write at the open, or the close's flush of what the open replayed.
//!
//! A writer that another writer fenced starts none (it could fence the newer writer's). It
//! stops when the store closes, before SlateDB does.

use super::*;
use slatedb::config::CompactorOptions;
use slatedb::CompactorBuilder;

/// How long after the open a writer with no other reason to starts its compactor.
pub(crate) const START_AFTER: Duration = Duration::from_secs(2);

/// A writer's compactor: not started yet, running, stopping, or stopped at close, and the pace
/// it should run at. Shared with the tasks that change its pace, which outlive their callers.
#[derive(Default)]
pub(crate) struct WriterCompactor {
    inner: Arc<Mutex<Inner>>,
    /// How many compactor tasks of this store are alive now, and the most there ever were.
    live: Arc<Live>,
}

#[derive(Default)]
struct Live {
    now: std::sync::atomic::AtomicUsize,
    peak: std::sync::atomic::AtomicUsize,
}

/// Counts a compactor task among the live ones while it is held.
struct LiveTask(Arc<Live>);

impl LiveTask {
    fn new(live: &Arc<Live>) -> Self {
        let now = live.now.fetch_add(1, Ordering::SeqCst) + 1;
        live.peak.fetch_max(now, Ordering::SeqCst);
        LiveTask(live.clone())
    }
}

impl Drop for LiveTask {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Default)]
struct Inner {
    slot: Slot,
    /// The pace the compactor runs at from its next start: the latest [`WriterCompactor::set_pace`].
    pace: Pace,
    /// What the SSTs it writes are compressed with: the writer's codec.
    codec: Codec,
}

#[derive(Default)]
enum Slot {
    /// Not started, and nothing scheduled to start it.
    #[default]
    Waiting,
    /// Not started; the timer that will start it.
    Timer(tokio::task::JoinHandle<()>),
    /// Started at `pace`: what tells its task to stop it, and when the task has ended (at once
    /// if the compactor stopped by itself, on an error).
    Running {
        stop: tokio::sync::oneshot::Sender<()>,
        ended: Ended,
        pace: Pace,
    },
    /// Told to stop, and not ended yet: nothing starts another until it has (two compactors
    /// of one store would take each other's compactions).
    Stopping(Ended),
    Stopped,
}

/// Whether a compactor's task has ended: its sender is dropped when it does (or panics).
#[derive(Clone)]
struct Ended(tokio::sync::watch::Receiver<()>);

impl Ended {
    fn now(&self) -> bool {
        self.0.has_changed().is_err()
    }

    async fn wait(mut self) {
        while self.0.changed().await.is_ok() {}
    }
}

/// How often a compactor looks for work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Pace {
    /// SlateDB's defaults: it reads the manifest and its compactions every 5 s, which is what
    /// an idle writer pays on object storage.
    #[default]
    Routine,
    /// While a reclaim waits for its compaction: every 20 ms, so that the compaction it submits
    /// is scheduled, run and committed at once instead of over three 5 s ticks; and a
    /// compaction an earlier compactor left running is taken over within 2 s.
    Reclaim,
}

impl Pace {
    /// SlateDB's compactor options at this pace, its SSTs compressed with `codec`.
    fn options(self, codec: Codec) -> CompactorOptions {
        let defaults = CompactorOptions::default();
        let routine = CompactorOptions {
            worker: defaults
                .worker
                .clone()
                .map(|w| slatedb::config::CompactionWorkerOptions {
                    compression_codec: codec.slatedb(),
                    ..w
                }),
            ..defaults
        };
        match self {
            Pace::Routine => routine,
            Pace::Reclaim => {
                let tick = Duration::from_millis(20);
                CompactorOptions {
                    poll_interval: tick,
                    commit_compacted_interval: tick,
                    worker_heartbeat_timeout: Duration::from_secs(2),
                    worker: routine.worker.clone().map(|w| {
                        slatedb::config::CompactionWorkerOptions {
                            compactions_poll_interval: tick,
                            heartbeat_interval: Duration::from_millis(200),
                            ..w
                        }
                    }),
                    ..routine
                }
            }
        }
    }
}

impl WriterCompactor {
    /// A compactor not started yet, whose SSTs will be compressed with `codec`.
    pub(crate) fn new(codec: Codec) -> WriterCompactor {
        let compactor = WriterCompactor::default();
        compactor.lock().codec = codec;
        compactor
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the compactor at its pace unless it runs or stops already (a pace change under
    /// way starts it) or the store has closed; one that stopped on an error is started again.
    pub(crate) fn start(
        &self,
        object_store: &Arc<dyn ObjectStore>,
        metrics: &Arc<slatedb_common::metrics::DefaultMetricsRecorder>,
    ) {
        let mut inner = self.lock();
        match &inner.slot {
            Slot::Running { ended, .. } | Slot::Stopping(ended) if !ended.now() => return,
            Slot::Stopped => return,
            Slot::Timer(timer) => timer.abort(),
            Slot::Running { .. } | Slot::Stopping(_) | Slot::Waiting => {}
        }
        let (pace, codec) = (inner.pace, inner.codec);
        inner.slot = spawn(object_store, metrics, pace, codec, &self.live);
    }

    /// Runs the compactor at `pace` from now: the one that runs at another pace is stopped
    /// (abandoning a compaction under way, which the next one takes over) and, once it has
    /// ended, one at `pace` started. The change is made by a task of the store's runtime, which
    /// goes on if the caller stops waiting for it; it answers false once the store has closed,
    /// or when `open` says no before it starts one (a writer fenced meanwhile).
    /// The latest call's pace wins.
    pub(crate) fn set_pace(
        &self,
        object_store: &Arc<dyn ObjectStore>,
        metrics: &Arc<slatedb_common::metrics::DefaultMetricsRecorder>,
        pace: Pace,
        open: impl Fn() -> bool + Send + 'static,
    ) -> tokio::task::JoinHandle<bool> {
        self.lock().pace = pace;
        let (inner, live) = (self.inner.clone(), self.live.clone());
        let (object_store, metrics) = (object_store.clone(), metrics.clone());
        runtime().spawn(async move {
            loop {
                let ended = {
                    let mut inner = inner.lock().unwrap_or_else(|p| p.into_inner());
                    let pace = inner.pace;
                    match std::mem::take(&mut inner.slot) {
                        Slot::Stopped => {
                            inner.slot = Slot::Stopped;
                            return false;
                        }
                        Slot::Running {
                            stop,
                            ended,
                            pace: running,
                        } if !ended.now() => {
                            if running == pace {
                                inner.slot = Slot::Running { stop, ended, pace };
                                return true;
                            }
                            let _ = stop.send(());
                            inner.slot = Slot::Stopping(ended.clone());
                            ended
                        }
                        Slot::Stopping(ended) if !ended.now() => {
                            inner.slot = Slot::Stopping(ended.clone());
                            ended
                        }
                        slot if !open() => {
                            inner.slot = slot;
                            return false;
                        }
                        Slot::Timer(timer) => {
                            timer.abort();
                            inner.slot = spawn(&object_store, &metrics, pace, inner.codec, &live);
                            return true;
                        }
                        Slot::Running { .. } | Slot::Stopping(_) | Slot::Waiting => {
                            inner.slot = spawn(&object_store, &metrics, pace, inner.codec, &live);
                            return true;
                        }
                    }
                };
                ended.wait().await;
            }
        })
    }

    /// Starts the compactor [`START_AFTER`] from now unless something starts it sooner.
    pub(crate) fn start_later(&self, store: &Arc<Store>) {
        let weak = Arc::downgrade(store);
        let timer = runtime().spawn(async move {
            tokio::time::sleep(START_AFTER).await;
            if let Some(store) = weak.upgrade() {
                store.start_compactor();
            }
        });
        let mut inner = self.lock();
        match &inner.slot {
            Slot::Waiting => inner.slot = Slot::Timer(timer),
            _ => timer.abort(),
        }
    }

    /// Whether the compactor was started and has not stopped, and at which pace.
    #[cfg(test)]
    pub(crate) fn running(&self) -> Option<Pace> {
        match &self.lock().slot {
            Slot::Running { ended, pace, .. } if !ended.now() => Some(*pace),
            _ => None,
        }
    }

    /// How many compactor tasks are alive now, and the most that ever were at once.
    #[cfg(test)]
    pub(crate) fn live(&self) -> (usize, usize) {
        (
            self.live.now.load(Ordering::SeqCst),
            self.live.peak.load(Ordering::SeqCst),
        )
    }

    /// Stops the compactor, and waits for one that is stopping (a compaction under way is
    /// abandoned, as SlateDB's close does); it is not started again. A compactor that failed is
    /// logged, never a reason not to close.
    pub(crate) async fn stop(&self) {
        let slot = std::mem::replace(&mut self.lock().slot, Slot::Stopped);
        match slot {
            Slot::Timer(timer) => timer.abort(),
            Slot::Running { stop, ended, .. } => {
                let _ = stop.send(());
                ended.wait().await;
            }
            Slot::Stopping(ended) => ended.wait().await,
            Slot::Waiting | Slot::Stopped => {}
        }
    }
}

/// A compactor at `pace`, running in a task of the store's runtime.
fn spawn(
    object_store: &Arc<dyn ObjectStore>,
    metrics: &Arc<slatedb_common::metrics::DefaultMetricsRecorder>,
    pace: Pace,
    codec: Codec,
    live: &Arc<Live>,
) -> Slot {
    let _enter = runtime().enter();
    let compactor = CompactorBuilder::new("", object_store.clone())
        .with_options(pace.options(codec))
        .with_metrics_recorder(metrics.clone())
        .build();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (ended_tx, ended) = tokio::sync::watch::channel(());
    let live = LiveTask::new(live);
    runtime().spawn(
        async move {
            // dropped when the task ends, however it ends: first the count, then the signal
            let _ended = ended_tx;
            let _live = live;
            let run = Box::pin(compactor.run());
            match futures::future::select(run, stopped).await {
                futures::future::Either::Left((Ok(()), _)) => {}
                futures::future::Either::Left((Err(e), _)) => {
                    tracing::warn!("moraine: the compactor stopped: {e}");
                }
                // told to stop (or its store is gone): the run is dropped where it waits,
                // before its tasks are registered or while it joins them, and the tasks it
                // registered are shut down (a stop that came before them would find none
                // and leave the run to register them unstopped)
                futures::future::Either::Right((_, run)) => {
                    drop(run);
                    if let Err(e) = compactor.stop().await {
                        tracing::debug!("moraine: stopping the compactor: {e}");
                    }
                }
            }
        }
        .instrument(tracing::debug_span!(parent: None, "moraine.compactor", ?pace)),
    );
    Slot::Running {
        stop,
        ended: Ended(ended),
        pace,
    }
}

/// Whether a memtable flush would wait for a compaction: L0 holds as many SSTs as SlateDB
/// allows (its check counts flushes under way too; a close flushes once, and a writer that
/// commits runs its compactor anyway).
pub(crate) fn l0_is_full(db: &Db) -> bool {
    db.manifest().l0().len() >= writer_settings(Codec::None).l0_max_ssts
}

impl Store {
    /// Whether this writer's compactor runs (tests).
    #[cfg(test)]
    pub(crate) fn compactor_running(&self) -> bool {
        self.compactor.running().is_some()
    }

    /// The pace this writer's compactor runs at, if it runs (tests).
    #[cfg(test)]
    pub(crate) fn compactor_pace(&self) -> Option<Pace> {
        self.compactor.running()
    }

    /// Starts a writer's compactor now, if it is not running yet (`compactor.rs`).
    pub(crate) fn start_compactor(&self) {
        if let Backend::Writer(..) = &*self.backend() {
            // a fenced writer's compactor would fence the newer writer's
            if self.close_reason().is_none() {
                self.compactor.start(&self.objects.store, &self.metrics);
            }
        }
    }

    /// Runs a writer's compactor at `pace` from now (stopping the one that runs at another
    /// pace first), unless the store was fenced or closed (`compactor.rs`). Waits for the change
    /// within the store's time limit; past it, the change goes on in the background.
    pub(crate) fn pace_compactor(&self, pace: Pace) {
        if let Some(change) = self.set_compactor_pace(pace) {
            let changed = async {
                change
                    .await
                    .map_err(|e| Error::Storage(format!("restarting the compactor: {e}")))?;
                Ok(())
            };
            if let Err(e) = self.bounded("restarting the compactor", changed) {
                tracing::warn!(
                    target: "moraine::store",
                    "moraine: the compactor is not at {pace:?} yet: {e}"
                );
            }
        }
    }

    /// [`Store::pace_compactor`] without waiting: the change is made in the background.
    pub(crate) fn pace_compactor_later(&self, pace: Pace) {
        drop(self.set_compactor_pace(pace));
    }

    fn set_compactor_pace(&self, pace: Pace) -> Option<tokio::task::JoinHandle<bool>> {
        match &*self.backend() {
            Backend::Writer(_, status) if self.close_reason().is_none() => {
                // asked again before the change starts a compactor: a writer fenced or closed
                // meanwhile starts none
                let (status, fenced) = (status.clone(), self.fenced.clone());
                let open = move || {
                    status.borrow().close_reason.is_none() && !fenced.load(Ordering::SeqCst)
                };
                Some(
                    self.compactor
                        .set_pace(&self.objects.store, &self.metrics, pace, open),
                )
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::init_lake;

    /// Pace changes in a row, not waited for, and a start while one is under way leave one
    /// compactor at a time, at the latest pace; a close while one is stopping waits for it,
    /// and nothing starts one after the close.
    #[test]
    fn pace_changes_run_one_compactor_at_a_time_at_the_latest_pace() {
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().join("lake").to_str().unwrap().to_string();
        let store = Store::open(&url, false).unwrap();
        init_lake(&store);
        assert_eq!(store.compactor_pace(), Some(Pace::Routine));
        store.pace_compactor_later(Pace::Reclaim);
        store.start_compactor();
        store.pace_compactor_later(Pace::Routine);
        store.start_compactor();
        store.pace_compactor(Pace::Reclaim);
        assert_eq!(store.compactor_pace(), Some(Pace::Reclaim));
        let (_, peak) = store.compactor.live();
        assert_eq!(peak, 1, "never two compactors at once");

        // a change to the routine pace, not waited for, and the close at once
        store.pace_compactor_later(Pace::Routine);
        store.close().unwrap();
        assert_eq!(store.compactor.live(), (0, 1), "none left running");
        store.start_compactor();
        store.pace_compactor(Pace::Reclaim);
        assert_eq!(store.compactor_pace(), None, "none after the close");
        assert_eq!(store.compactor.live().0, 0);
    }

    /// A start while a compactor is stopping starts none; a pace change waits for it to end and
    /// then starts one, unless the writer was fenced meanwhile; after the stop, nothing starts one.
    #[test]
    fn nothing_starts_a_compactor_while_one_stops_or_after_the_stop() {
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().join("lake").to_str().unwrap().to_string();
        let store = Store::open(&url, false).unwrap();
        init_lake(&store);
        // the store's own compactor stops first: one compactor per store
        block_on(store.compactor.stop());
        let (os, m) = (&store.objects.store, &store.metrics);
        let c = WriterCompactor::default();
        let (stopping, ended) = tokio::sync::watch::channel(());
        c.lock().slot = Slot::Stopping(Ended(ended));
        c.start(os, m);
        assert!(matches!(c.lock().slot, Slot::Stopping(_)));
        assert_eq!(c.live(), (0, 0), "a start while one stops starts none");
        let change = c.set_pace(os, m, Pace::Reclaim, || true);
        drop(stopping);
        assert!(block_on(change).unwrap());
        assert_eq!((c.running(), c.live()), (Some(Pace::Reclaim), (1, 1)));
        // a change that finds the writer fenced stops the one that runs and starts none
        assert!(!block_on(c.set_pace(os, m, Pace::Routine, || false)).unwrap());
        assert_eq!((c.running(), c.live().0), (None, 0));
        c.start(os, m);
        assert_eq!(c.running(), Some(Pace::Routine));
        block_on(c.stop());
        c.start(os, m);
        assert!(!block_on(c.set_pace(os, m, Pace::Reclaim, || true)).unwrap());
        assert_eq!((c.running(), c.live()), (None, (0, 1)));
    }
}
