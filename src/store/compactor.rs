//! A writer's compactor, started when the writer has work for it rather than with the open.
//!
//! SlateDB's compactor, built into `Db::open`, resumes any compaction an earlier writer left
//! unfinished as soon as it starts. A process that attaches, reads and detaches (most
//! attaches: DuckLake's readers in writer mode, a notebook's first query) then spends its
//! first hundred milliseconds sharing the CPU with a compaction it abandons at close, and
//! starts it again the next time. So moraine opens SlateDB without its compactor and runs the
//! same compactor (`Compactor`, SlateDB's default options, the same object store and metrics)
//! beside it, started by whichever comes first:
//!
//! - the writer's first commit (once it is acknowledged);
//! - [`START_AFTER`] after the open;
//! - a reclaim, which hands its compaction to this compactor;
//! - L0 holding half of the SSTs SlateDB allows before it makes a memtable flush wait for
//!   compaction (checked at the open and before the close flushes the memtable), so that a
//!   writer never waits on a compactor that is not running.
//!
//! It stops when the store closes, before SlateDB does.

use super::*;
use slatedb::compactor::Compactor;
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
    /// Running: the compactor, to stop it, and the task that runs it.
    Running(Box<Compactor>, tokio::task::JoinHandle<()>),
    Stopped,
}

impl WriterCompactor {
    /// Starts the compactor unless it runs already (or the store has closed).
    pub(crate) fn start(
        &self,
        object_store: &Arc<dyn ObjectStore>,
        metrics: &Arc<slatedb_common::metrics::DefaultMetricsRecorder>,
    ) {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        match &*slot {
            Slot::Running(..) | Slot::Stopped => return,
            Slot::Timer(timer) => timer.abort(),
            Slot::Waiting => {}
        }
        let _enter = runtime().enter();
        let compactor = CompactorBuilder::new("", object_store.clone())
            .with_options(CompactorOptions::default())
            .with_metrics_recorder(metrics.clone())
            .build();
        let running = compactor.clone();
        let task = runtime().spawn(
            async move {
                // a compactor fenced by a newer writer's stops here; its writer is fenced too
                if let Err(e) = running.run().await {
                    tracing::warn!("moraine: the compactor stopped: {e}");
                }
            }
            .instrument(tracing::debug_span!("moraine.compactor")),
        );
        *slot = Slot::Running(Box::new(compactor), task);
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

    #[cfg(test)]
    pub(crate) fn is_running(&self) -> bool {
        matches!(
            &*self.slot.lock().unwrap_or_else(|p| p.into_inner()),
            Slot::Running(..)
        )
    }

    /// Stops the compactor (a compaction under way is abandoned, as SlateDB's close does).
    pub(crate) async fn stop(&self) -> Result<()> {
        let slot = std::mem::replace(
            &mut *self.slot.lock().unwrap_or_else(|p| p.into_inner()),
            Slot::Stopped,
        );
        match slot {
            Slot::Timer(timer) => timer.abort(),
            Slot::Running(compactor, task) => {
                compactor.stop().await?;
                let _ = task.await;
            }
            Slot::Waiting | Slot::Stopped => {}
        }
        Ok(())
    }
}

/// Whether L0 holds enough SSTs that the compactor should run now: half of what SlateDB
/// allows before a memtable flush waits for a compaction.
pub(crate) fn l0_is_filling(db: &Db) -> bool {
    db.manifest().l0().len() * 2 >= writer_settings().l0_max_ssts
}
