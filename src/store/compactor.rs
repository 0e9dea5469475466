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

/// A writer's compactor: not started yet, running, or stopped at close.
#[derive(Default)]
pub(crate) struct WriterCompactor {
    slot: Mutex<Slot>,
}

#[derive(Default)]
enum Slot {
    /// Not started, and nothing scheduled to start it.
    #[default]
    Waiting,
    /// Not started; the timer that will start it.
    Timer(tokio::task::JoinHandle<()>),
    /// Started: what tells its task to stop it, and the task (finished if the compactor
    /// stopped by itself, on an error).
    Running {
        stop: tokio::sync::oneshot::Sender<()>,
        task: tokio::task::JoinHandle<()>,
    },
    Stopped,
}

/// How often a compactor looks for work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pace {
    /// SlateDB's defaults: it reads the manifest and its compactions every 5 s, which is what
    /// an idle writer pays on object storage.
    Routine,
    /// While a reclaim waits for its compaction: every 20 ms, so that the compaction it submits
    /// is scheduled, run and committed at once instead of over three 5 s ticks; and a
    /// compaction an earlier compactor left running is taken over within 2 s.
    Reclaim,
}

impl Pace {
    fn options(self) -> CompactorOptions {
        let routine = CompactorOptions::default();
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
    /// Starts the compactor at its routine pace unless it runs already or the store has closed;
    /// one that stopped on an error is started again.
    pub(crate) fn start(
        &self,
        object_store: &Arc<dyn ObjectStore>,
        metrics: &Arc<slatedb_common::metrics::DefaultMetricsRecorder>,
    ) {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        match &*slot {
            Slot::Running { task, .. } if !task.is_finished() => return,
            Slot::Stopped => return,
            Slot::Timer(timer) => timer.abort(),
            Slot::Running { .. } | Slot::Waiting => {}
        }
        *slot = Self::spawn(object_store, metrics, Pace::Routine);
    }

    /// Stops the compactor that runs (abandoning a compaction under way, which the next one
    /// takes over) and starts one at `pace`; false once the store has closed.
    pub(crate) async fn restart(
        &self,
        object_store: &Arc<dyn ObjectStore>,
        metrics: &Arc<slatedb_common::metrics::DefaultMetricsRecorder>,
        pace: Pace,
    ) -> bool {
        loop {
            // one compactor at a time: the running one is stopped, and waited for, first
            let (stop, task) = {
                let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
                match std::mem::take(&mut *slot) {
                    Slot::Stopped => {
                        *slot = Slot::Stopped;
                        return false;
                    }
                    Slot::Running { stop, task } if !task.is_finished() => (stop, task),
                    Slot::Timer(timer) => {
                        timer.abort();
                        *slot = Self::spawn(object_store, metrics, pace);
                        return true;
                    }
                    Slot::Running { .. } | Slot::Waiting => {
                        *slot = Self::spawn(object_store, metrics, pace);
                        return true;
                    }
                }
            };
            let _ = stop.send(());
            let _ = task.await;
        }
    }

    fn spawn(
        object_store: &Arc<dyn ObjectStore>,
        metrics: &Arc<slatedb_common::metrics::DefaultMetricsRecorder>,
        pace: Pace,
    ) -> Slot {
        let _enter = runtime().enter();
        let compactor = CompactorBuilder::new("", object_store.clone())
            .with_options(pace.options())
            .with_metrics_recorder(metrics.clone())
            .build();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = runtime().spawn(
            async move {
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
        Slot::Running { stop, task }
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
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        match &*slot {
            Slot::Waiting => *slot = Slot::Timer(timer),
            _ => timer.abort(),
        }
    }

    /// Whether the compactor was started and has not stopped.
    #[cfg(test)]
    pub(crate) fn is_running(&self) -> bool {
        matches!(
            &*self.slot.lock().unwrap_or_else(|p| p.into_inner()),
            Slot::Running { task, .. } if !task.is_finished()
        )
    }

    /// Stops the compactor (a compaction under way is abandoned, as SlateDB's close does); it
    /// is not started again. A compactor that failed is logged, never a reason not to close.
    pub(crate) async fn stop(&self) {
        let slot = std::mem::replace(
            &mut *self.slot.lock().unwrap_or_else(|p| p.into_inner()),
            Slot::Stopped,
        );
        match slot {
            Slot::Timer(timer) => timer.abort(),
            Slot::Running { stop, task } => {
                let _ = stop.send(());
                let _ = task.await;
            }
            Slot::Waiting | Slot::Stopped => {}
        }
    }
}

/// Whether a memtable flush would wait for a compaction: L0 holds as many SSTs as SlateDB
/// allows (its check counts flushes under way too; a close flushes once, and a writer that
/// commits runs its compactor anyway).
pub(crate) fn l0_is_full(db: &Db) -> bool {
    db.manifest().l0().len() >= writer_settings().l0_max_ssts
}
