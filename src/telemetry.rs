//! Where moraine's `tracing` spans and events go: one line each on the process's stderr,
//! filtered by the `moraine_log_level` setting (see [`Filter::parse`] for its syntax).
//!
//! tracing-subscriber does the work: a [`Registry`] with an [`EnvFilter`] behind a
//! [`reload`] handle (the setting changes it at run time), and its `fmt` layer writing a line
//! per event, and one per span when it closes, with how long it was busy (entered) and idle;
//! UTC timestamps. So `debug` shows what each attach, refresh, commit and checkpoint did and how
//! long it took; `trace` adds every store read and each table a transaction scans. Libraries
//! that log through the `log` crate (SlateDB, reqwest) reach the same filter and lines through
//! tracing-log's `LogTracer`.
//!
//! The subscriber is installed once, when DuckDB loads the extension ([`install`]); the filter
//! is process-wide, like stderr.

use std::sync::{Mutex, MutexGuard, OnceLock};

use tracing::level_filters::LevelFilter;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{reload, EnvFilter, Registry};

use crate::error::{Error, Result};

/// What `moraine_log_level` is until it is set: moraine's and SlateDB's warnings.
pub const DEFAULT_FILTER: &str = "warn,slatedb=warn";

/// SlateDB's metrics registry, which warns of every handle a process opens after its first.
const SLATEDB_METRICS: &str = "slatedb_common::metrics";

/// The targets a directive may name (moraine's own, and the libraries it drives).
const TARGETS: &[&str] = &["moraine", "slatedb", "object_store", "reqwest"];

/// A parsed `moraine_log_level`: the level each target logs at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    directives: Vec<(&'static str, LevelFilter)>,
}

impl Filter {
    /// `spec` is a comma-separated list of directives: a level (`off`, `error`, `warn`, `info`,
    /// `debug`, `trace`) sets moraine's own; `target=level` sets one of [`TARGETS`]' (e.g.
    /// `debug,slatedb=info`). moraine logs its warnings unless a directive names its level;
    /// other targets not named log nothing. An empty spec is refused (`off` turns it all off).
    pub fn parse(spec: &str) -> Result<Filter> {
        let bad = |what: String| {
            Error::InvalidInput(format!(
                "moraine_log_level '{spec}': {what}; give a level (off, error, warn, info, \
                 debug, trace) for moraine, optionally followed by target=level for {}, e.g. \
                 'debug,slatedb=info'",
                TARGETS[1..].join(", ")
            ))
        };
        let level = |text: &str| match text.trim().to_ascii_lowercase().as_str() {
            "off" | "none" => Ok(LevelFilter::OFF),
            "error" => Ok(LevelFilter::ERROR),
            "warn" | "warning" => Ok(LevelFilter::WARN),
            "info" => Ok(LevelFilter::INFO),
            "debug" => Ok(LevelFilter::DEBUG),
            "trace" => Ok(LevelFilter::TRACE),
            other => Err(bad(format!("'{other}' is not a level"))),
        };
        if spec.trim().is_empty() {
            return Err(bad("it names no level".into()));
        }
        let mut directives = vec![("moraine", LevelFilter::WARN)];
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (target, lvl) = match item.split_once('=') {
                Some((t, l)) => (t.trim().to_ascii_lowercase(), level(l)?),
                None => ("moraine".to_string(), level(item)?),
            };
            let Some(&target) = TARGETS.iter().find(|t| **t == target) else {
                return Err(bad(format!("'{target}' is not a target moraine logs")));
            };
            directives.retain(|(t, _)| *t != target);
            directives.push((target, lvl));
        }
        Ok(Filter { directives })
    }

    /// The filter as [`EnvFilter`] directives. EnvFilter's bare level applies to every target,
    /// so it is `off` and each target is named: `debug,slatedb=info` is
    /// `off,moraine=debug,slatedb=info`. (EnvFilter matches a target by prefix, so `moraine`
    /// covers the extension's `moraine_extension` and `slatedb` SlateDB's `slatedb_*` crates.)
    ///
    /// SlateDB warns each time a process opens another handle on a database ("duplicate metric
    /// registration": its metrics registry is per process), which moraine does by design (a
    /// re-ATTACH, a reader beside a writer, a demoted folder): that target logs errors only,
    /// unless SlateDB is asked for less.
    pub fn directives(&self) -> String {
        let mut text = String::from("off");
        for (target, level) in &self.directives {
            text.push_str(&format!(",{target}={level}"));
            if *target == "slatedb" {
                let metrics = (*level).min(LevelFilter::ERROR);
                text.push_str(&format!(",{SLATEDB_METRICS}={metrics}"));
            }
        }
        text
    }

    fn env_filter(&self) -> EnvFilter {
        // (never lossy: the directives are built from TARGETS and levels, see the tests)
        EnvFilter::builder()
            .with_regex(false)
            .parse_lossy(self.directives())
    }
}

/// Changes the installed subscriber's filter.
type Handle = reload::Handle<EnvFilter, Registry>;

/// moraine's subscriber writing its lines to `writer`, and the handle that changes its filter.
fn subscriber<W>(filter: &Filter, writer: W) -> (impl tracing::Subscriber + Send + Sync, Handle)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let (filter, handle) = reload::Layer::new(filter.env_filter());
    // the default timer: RFC 3339 UTC with microseconds
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(false)
        .with_span_events(FmtSpan::CLOSE);
    (Registry::default().with(filter).with(lines), handle)
}

/// The filter `moraine_log_level` last set (the default until it is).
fn current() -> MutexGuard<'static, Filter> {
    static FILTER: OnceLock<Mutex<Filter>> = OnceLock::new();
    FILTER
        .get_or_init(|| Mutex::new(Filter::parse(DEFAULT_FILTER).expect("the default parses")))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Set once by [`install`]: the handle of moraine's subscriber, or `None` when the process had
/// another one already.
static INSTALLED: OnceLock<Option<Handle>> = OnceLock::new();

/// Set the process's filter from a `moraine_log_level` value; a value that does not parse is
/// an error naming it, and the filter stays as it was.
pub fn set_filter(spec: &str) -> Result<()> {
    let parsed = Filter::parse(spec)?;
    let mut filter = current();
    if let Some(Some(handle)) = INSTALLED.get() {
        handle
            .reload(parsed.env_filter())
            .map_err(|e| Error::Internal(format!("moraine_log_level '{spec}': {e}")))?;
    }
    *filter = parsed;
    Ok(())
}

/// Install the stderr subscriber as the process's global default, and tracing-log's `log`
/// logger beside it, once. A process that installed others first keeps them: moraine's events
/// (and, through the `LogTracer` when no logger was set, `log`'s records) then go to its
/// subscriber, and `moraine_log_level` changes nothing.
pub fn install() {
    // held while installing, so a concurrent set_filter waits and then reloads
    let filter = current();
    INSTALLED.get_or_init(|| {
        let (subscriber, handle) = subscriber(&filter, std::io::stderr);
        let ours = tracing::subscriber::set_global_default(subscriber).is_ok();
        // its max level is `trace`; each record is checked against tracing's current one
        let _ = tracing_log::LogTracer::init();
        ours.then_some(handle)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tracing_log::log;

    /// Collects a subscriber's lines in memory.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Sink {
        type Writer = Sink;

        fn make_writer(&'a self) -> Sink {
            self.clone()
        }
    }

    impl Sink {
        fn take(&self) -> String {
            String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap()
        }
    }

    /// `what` as SlateDB logs it, through the `log` crate and tracing-log (not installed as the
    /// process's logger: its `Log` called directly, which the installed one is).
    fn slatedb_log(level: log::Level, what: &str) {
        log::Log::log(
            &tracing_log::LogTracer::new(),
            &log::Record::builder()
                .target("slatedb::db")
                .level(level)
                .args(format_args!("{what}"))
                .build(),
        );
    }

    /// Whether `line` starts with an RFC 3339 UTC timestamp with microseconds and a space.
    fn stamped(line: &str) -> bool {
        let b = line.as_bytes();
        b.len() > 28
            && (0..27).all(|i| match i {
                4 | 7 => b[i] == b'-',
                10 => b[i] == b'T',
                13 | 16 => b[i] == b':',
                19 => b[i] == b'.',
                26 => b[i] == b'Z',
                _ => b[i].is_ascii_digit(),
            })
            && b[27] == b' '
    }

    #[test]
    fn a_spec_translates_to_envfilter_directives_naming_each_target() {
        let cases = [
            (
                "debug,slatedb=info",
                "off,moraine=debug,slatedb=info,slatedb_common::metrics=error",
            ),
            (
                DEFAULT_FILTER,
                "off,moraine=warn,slatedb=warn,slatedb_common::metrics=error",
            ),
            (
                "slatedb=info",
                "off,moraine=warn,slatedb=info,slatedb_common::metrics=error",
            ),
            ("OFF", "off,moraine=off"),
            (" trace , moraine=warn ", "off,moraine=warn"),
            (
                "error,reqwest=Debug,object_store=warning,slatedb=none",
                "off,moraine=error,reqwest=debug,object_store=warn,slatedb=off,\
                 slatedb_common::metrics=off",
            ),
        ];
        for (spec, directives) in cases {
            let f = Filter::parse(spec).unwrap();
            assert_eq!(f.directives(), directives, "{spec}");
            // what env_filter() parses lossily parses strictly
            EnvFilter::builder()
                .with_regex(false)
                .parse(f.directives())
                .unwrap();
        }
    }

    #[test]
    fn an_unknown_level_or_target_and_an_empty_spec_are_refused_by_name() {
        for (bad, named) in [
            ("loud", "'loud' is not a level"),
            ("debug,tokio=trace", "'tokio' is not a target moraine logs"),
            ("slatedb=often", "'often' is not a level"),
            (" ", "it names no level"),
        ] {
            let e = Filter::parse(bad).unwrap_err();
            assert_eq!(e.kind(), crate::error::Kind::InvalidInput);
            let text = e.to_string();
            assert!(
                text.contains(&format!("moraine_log_level '{bad}'")),
                "{text}"
            );
            assert!(text.contains(named), "{text}");
            assert!(text.contains("e.g. 'debug,slatedb=info'"), "{text}");
        }
        // and the filter stays as it was
        let before = current().clone();
        assert!(set_filter("loud").is_err());
        assert_eq!(*current(), before);
    }

    /// At the default, only warnings of moraine and SlateDB are written: nothing of a healthy
    /// session's spans and events, nor of a target not named.
    #[test]
    fn the_default_writes_nothing_but_warnings() {
        let sink = Sink::default();
        let (sub, _handle) = subscriber(&Filter::parse(DEFAULT_FILTER).unwrap(), sink.clone());
        tracing::subscriber::with_default(sub, || {
            let outer = tracing::info_span!("moraine.attach", url = "/lakes/meta");
            let _o = outer.enter();
            let _inner = tracing::debug_span!("moraine.commit", batch = 1).entered();
            tracing::trace!("a read");
            tracing::info!("a commit");
            slatedb_log(log::Level::Info, "flushed");
            tracing::warn!(target: "tokio::runtime", "not ours");
        });
        assert_eq!(sink.take(), "", "a healthy session writes nothing");

        let (sub, _handle) = subscriber(&Filter::parse(DEFAULT_FILTER).unwrap(), sink.clone());
        tracing::subscriber::with_default(sub, || {
            tracing::warn!("moraine: a checkpoint failed");
            slatedb_log(log::Level::Warn, "a WAL flush failed");
        });
        let text = sink.take();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines.iter().all(|l| stamped(l)), "{text}");
        assert!(
            lines[0].ends_with("  WARN moraine::telemetry::tests: moraine: a checkpoint failed"),
            "{text}"
        );
        assert!(
            lines[1].ends_with("  WARN slatedb::db: a WAL flush failed"),
            "{text}"
        );
    }

    /// Nested spans name their chain and fields on each line, and each writes a line with its
    /// busy and idle times when it closes; a reload changes what is written.
    #[test]
    fn spans_close_with_their_time_and_a_reload_changes_the_filter() {
        let sink = Sink::default();
        let (sub, handle) = subscriber(&Filter::parse("info").unwrap(), sink.clone());
        tracing::subscriber::with_default(sub, || {
            let outer = tracing::info_span!("outer", a = 1);
            let _o = outer.enter();
            tracing::debug!("not at info");
            handle
                .reload(Filter::parse("trace").unwrap().env_filter())
                .unwrap();
            {
                let inner = tracing::debug_span!("inner", b = tracing::field::Empty);
                let _i = inner.enter();
                tracing::Span::current().record("b", 2);
                tracing::info!(x = 3, "hello");
            }
            handle
                .reload(Filter::parse("off").unwrap().env_filter())
                .unwrap();
            tracing::warn!("not at off");
        });
        let text = sink.take();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines.iter().all(|l| stamped(l)), "{text}");
        assert!(
            lines[0].ends_with(" INFO outer{a=1}:inner{b=2}: moraine::telemetry::tests: hello x=3"),
            "{text}"
        );
        // (times are not asserted: only that they are there)
        let closed = |line: &str, head: &str| {
            let Some((_, rest)) = line.split_once(head) else {
                return false;
            };
            let rest = rest.strip_prefix("time.busy=").unwrap_or("");
            matches!(rest.split_once(" time.idle="), Some((busy, idle))
                if busy.ends_with('s') && idle.ends_with('s'))
        };
        assert!(
            closed(
                lines[1],
                "DEBUG outer{a=1}:inner{b=2}: moraine::telemetry::tests: close "
            ),
            "{text}"
        );
        // (a span opened before the reload still closes with its line)
        assert!(
            closed(
                lines[2],
                " INFO outer{a=1}: moraine::telemetry::tests: close "
            ),
            "{text}"
        );
    }
}
