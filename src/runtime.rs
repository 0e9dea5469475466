//! The process-wide tokio runtime the core drives SlateDB and object storage on, and the time
//! limits every storage call runs within. DuckDB calls in from its own threads, so each call
//! blocks on this runtime ([`block_on`]); the bottom layer: it knows only errors.

use crate::error::{Error, Result};
use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;
use tracing::Instrument;

/// The runtime, started on first use: two worker threads (the machines moraine targets have two
/// cores), timers and I/O.
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("moraine-io")
            .enable_all()
            .build()
            .expect("moraine: cannot start the tokio runtime")
    })
}

/// The wall clock now, in microseconds since the Unix epoch (DuckDB's timestamps).
pub(crate) fn unix_micros_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// Run a future to completion on the core's runtime. Safe to call from any thread, including
/// one that is itself inside a tokio runtime (then a helper thread blocks instead).
pub fn block_on<F>(f: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|s| {
            s.spawn(|| runtime().block_on(f))
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    } else {
        runtime().block_on(f)
    }
}

/// `d` in seconds, for messages.
pub(crate) fn seconds(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

/// `f`, or [`Error::Unreachable`] naming `location` and `what` when it takes longer than
/// `limit` (the store's `moraine_io_timeout`). Runs in a `moraine.io` span (trace level) (`what`), opened
/// here, in the caller's span, and closed when `f` ends.
pub(crate) fn within<'a, T>(
    limit: Duration,
    location: &'a str,
    what: &'a str,
    f: impl Future<Output = Result<T>> + 'a,
) -> impl Future<Output = Result<T>> + 'a {
    let span = tracing::trace_span!("moraine.io", what, store = location);
    async move {
        match tokio::time::timeout(limit, f).await {
            Ok(done) => done.inspect_err(|e| tracing::debug!(error = %e, "moraine: {what} failed")),
            Err(_) => Err(Error::Unreachable {
                location: location.to_string(),
                reason: format!(
                    "{what} did not finish within {} (moraine_io_timeout)",
                    seconds(limit)
                ),
            }),
        }
    }
    .instrument(span)
}

/// Drop `garbage` on a thread of its own, off the caller's; on this thread if none can be
/// started (never a panic: the caller may already have committed).
pub(crate) fn free_aside<T: Send + 'static>(garbage: T) {
    // a failed spawn drops the closure, and with it `garbage`, here
    let _ = std::thread::Builder::new()
        .name("moraine-free".into())
        .spawn(move || drop(garbage));
}
