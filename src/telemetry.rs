//! Where moraine's `tracing` spans and events go: one line each on the process's stderr,
//! filtered by the `moraine_log_level` setting (see [`set_filter`] for its syntax).
//!
//! The subscriber is installed once, when DuckDB loads the extension ([`install`]); the
//! filter is process-wide, like stderr. A span's line is written when it closes, with how long
//! it was open, so `debug` shows what each attach, refresh, commit and checkpoint did and how
//! long it took; `trace` adds every store read and each table a transaction scans. Libraries
//! that log through the `log` crate (SlateDB, reqwest) go through the same filter and lines.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};

use crate::error::{Error, Result};

/// What `moraine_log_level` is until it is set: moraine's and SlateDB's warnings.
pub const DEFAULT_FILTER: &str = "warn,slatedb=warn";

/// The targets a directive may name (moraine's own, and the libraries it drives).
const TARGETS: &[&str] = &["moraine", "slatedb", "object_store", "reqwest"];

/// A parsed `moraine_log_level`: the level each target (a module path prefix) logs at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    directives: Vec<(String, LevelFilter)>,
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
        let mut directives: Vec<(String, LevelFilter)> =
            vec![("moraine".to_string(), LevelFilter::WARN)];
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (target, lvl) = match item.split_once('=') {
                Some((t, l)) => (t.trim().to_ascii_lowercase(), level(l)?),
                None => ("moraine".to_string(), level(item)?),
            };
            if !TARGETS.contains(&target.as_str()) {
                return Err(bad(format!("'{target}' is not a target moraine logs")));
            }
            directives.retain(|(t, _)| *t != target);
            directives.push((target, lvl));
        }
        Ok(Filter { directives })
    }

    /// The level `target` logs at: that of the directive naming its first path segment.
    fn level_of(&self, target: &str) -> LevelFilter {
        let root = target.split("::").next().unwrap_or(target);
        self.directives
            .iter()
            .find(|(t, _)| t == root)
            .map(|(_, l)| *l)
            .unwrap_or(LevelFilter::OFF)
    }

    pub fn enabled(&self, meta: &Metadata<'_>) -> bool {
        *meta.level() <= self.level_of(meta.target())
    }

    /// The `log` crate's view of [`Filter::max`].
    fn log_max(&self) -> log::LevelFilter {
        match self.max() {
            LevelFilter::OFF => log::LevelFilter::Off,
            LevelFilter::ERROR => log::LevelFilter::Error,
            LevelFilter::WARN => log::LevelFilter::Warn,
            LevelFilter::INFO => log::LevelFilter::Info,
            LevelFilter::DEBUG => log::LevelFilter::Debug,
            _ => log::LevelFilter::Trace,
        }
    }

    fn max(&self) -> LevelFilter {
        self.directives
            .iter()
            .map(|(_, l)| *l)
            .max()
            .unwrap_or(LevelFilter::OFF)
    }
}

fn filter() -> &'static RwLock<Filter> {
    static FILTER: OnceLock<RwLock<Filter>> = OnceLock::new();
    FILTER.get_or_init(|| RwLock::new(Filter::parse(DEFAULT_FILTER).expect("the default parses")))
}

/// The process's filter, read in place (a guard: hold it only for the check).
fn current() -> std::sync::RwLockReadGuard<'static, Filter> {
    filter().read().unwrap_or_else(|p| p.into_inner())
}

/// Set the process's filter from a `moraine_log_level` value; a value that does not parse is
/// an error naming it, and the filter stays as it was.
pub fn set_filter(spec: &str) -> Result<()> {
    let parsed = Filter::parse(spec)?;
    let log_max = parsed.log_max();
    *filter().write().unwrap_or_else(|p| p.into_inner()) = parsed;
    // callsites cached their interest under the old filter
    tracing::callsite::rebuild_interest_cache();
    log::set_max_level(log_max);
    Ok(())
}

/// Install the stderr subscriber as the process's (this library's) default, and the `log`
/// crate's logger beside it, once. A process that installed others first keeps them.
pub fn install() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let _ = tracing::subscriber::set_global_default(Stderr::default());
        if log::set_logger(&LOG).is_ok() {
            log::set_max_level(current().log_max());
        }
    });
}

/// The `log` crate's records (SlateDB's, reqwest's), through the same filter and lines.
struct Log;

static LOG: Log = Log;

fn tracing_level(level: log::Level) -> Level {
    match level {
        log::Level::Error => Level::ERROR,
        log::Level::Warn => Level::WARN,
        log::Level::Info => Level::INFO,
        log::Level::Debug => Level::DEBUG,
        log::Level::Trace => Level::TRACE,
    }
}

impl log::Log for Log {
    fn enabled(&self, meta: &log::Metadata<'_>) -> bool {
        tracing_level(meta.level()) <= current().level_of(meta.target())
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            Stderr::write_line(
                &tracing_level(record.level()),
                record.target(),
                "",
                &record.args().to_string(),
                None,
            );
        }
    }

    fn flush(&self) {}
}

/// An open span: what its line shows.
struct SpanData {
    meta: &'static Metadata<'static>,
    name: &'static str,
    target: &'static str,
    level: Level,
    fields: String,
    parent: Option<u64>,
    opened: Instant,
    refs: usize,
}

#[derive(Default)]
struct Stderr {
    spans: Mutex<HashMap<u64, SpanData>>,
    next_id: AtomicU64,
    /// Where a test collects the lines instead of stderr.
    #[cfg(test)]
    sink: Option<std::sync::Arc<Mutex<String>>>,
}

thread_local! {
    /// The spans entered on this thread, innermost last.
    static ENTERED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Fields as ` name=value`, the message first and bare.
#[derive(Default)]
struct Fields {
    message: String,
    rest: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.rest, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else if value.is_empty() || value.contains(char::is_whitespace) {
            let _ = write!(self.rest, " {}={value:?}", field.name());
        } else {
            let _ = write!(self.rest, " {}={value}", field.name());
        }
    }
}

impl Stderr {
    /// The open span `id`, to change it.
    fn with_span(&self, id: &Id, f: impl FnOnce(&mut SpanData)) {
        if let Some(s) = self
            .spans
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&id.into_u64())
        {
            f(s);
        }
    }

    /// The parent of a new span or event: the innermost entered span when it is contextual,
    /// else the one it names.
    fn parent(contextual: bool, explicit: Option<&Id>) -> Option<u64> {
        if contextual {
            Stderr::innermost()
        } else {
            explicit.map(Id::into_u64)
        }
    }

    fn innermost() -> Option<u64> {
        // (a thread being torn down has no entered spans)
        ENTERED
            .try_with(|e| e.borrow().last().copied())
            .ok()
            .flatten()
    }

    /// `outer{fields}:inner{fields}` for the span `id` and its parents.
    fn chain(spans: &HashMap<u64, SpanData>, id: Option<u64>) -> String {
        let mut names = Vec::new();
        let mut next = id;
        while let Some(span) = next.and_then(|id| spans.get(&id)) {
            let fields = span.fields.trim_start();
            names.push(if fields.is_empty() {
                span.name.to_string()
            } else {
                format!("{}{{{fields}}}", span.name)
            });
            next = span.parent;
        }
        names.reverse();
        names.join(":")
    }

    fn line(&self, level: &Level, target: &str, context: &str, text: &str) {
        #[cfg(test)]
        let sink = self.sink.as_deref();
        #[cfg(not(test))]
        let sink = None;
        Stderr::write_line(level, target, context, text, sink);
    }

    fn write_line(
        level: &Level,
        target: &str,
        context: &str,
        text: &str,
        sink: Option<&Mutex<String>>,
    ) {
        let mut line = format!("{} {level:>5} {target}", timestamp(SystemTime::now()));
        if !context.is_empty() {
            line.push(' ');
            line.push_str(context);
        }
        line.push_str(": ");
        line.push_str(text.trim_start());
        line.push('\n');
        match sink {
            Some(sink) => sink
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push_str(&line),
            None => {
                let _ = std::io::stderr().lock().write_all(line.as_bytes());
            }
        }
    }
}

impl Subscriber for Stderr {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if current().enabled(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        current().enabled(meta)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(current().max())
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let parent = Stderr::parent(attrs.is_contextual(), attrs.parent());
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let mut spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        // a span holds its parent open, so its line can name it
        let parent = parent.filter(|p| match spans.get_mut(p) {
            Some(p) => {
                p.refs += 1;
                true
            }
            None => false,
        });
        let meta = attrs.metadata();
        spans.insert(
            id,
            SpanData {
                meta,
                name: meta.name(),
                target: meta.target(),
                level: *meta.level(),
                fields: fields.rest,
                parent,
                opened: Instant::now(),
                refs: 1,
            },
        );
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut fields = Fields::default();
        values.record(&mut fields);
        self.with_span(span, |s| s.fields.push_str(&fields.rest));
    }

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let parent = Stderr::parent(event.is_contextual(), event.parent());
        let context = Stderr::chain(
            &self.spans.lock().unwrap_or_else(|p| p.into_inner()),
            parent,
        );
        let meta = event.metadata();
        self.line(
            meta.level(),
            meta.target(),
            &context,
            &format!("{}{}", fields.message, fields.rest),
        );
    }

    fn enter(&self, span: &Id) {
        let _ = ENTERED.try_with(|e| e.borrow_mut().push(span.into_u64()));
    }

    fn exit(&self, span: &Id) {
        let id = span.into_u64();
        let _ = ENTERED.try_with(|e| {
            let mut e = e.borrow_mut();
            if let Some(at) = e.iter().rposition(|s| *s == id) {
                e.remove(at);
            }
        });
    }

    fn current_span(&self) -> tracing_core::span::Current {
        let spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        match Stderr::innermost().and_then(|id| spans.get(&id).map(|s| (id, s.meta))) {
            Some((id, meta)) => tracing_core::span::Current::new(Id::from_u64(id), meta),
            None => tracing_core::span::Current::none(),
        }
    }

    fn clone_span(&self, span: &Id) -> Id {
        self.with_span(span, |s| s.refs += 1);
        span.clone()
    }

    fn try_close(&self, span: Id) -> bool {
        let mut spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = Some(span.into_u64());
        let mut closed_first = false;
        // closing a span releases its hold on its parent, which may close too
        while let Some(id) = next.take() {
            let Some(s) = spans.get_mut(&id) else { break };
            s.refs -= 1;
            if s.refs > 0 {
                break;
            }
            let context = Stderr::chain(&spans, Some(id));
            let s = spans.remove(&id).expect("present");
            closed_first |= id == span.into_u64();
            if current().level_of(s.target) >= s.level {
                self.line(
                    &s.level,
                    s.target,
                    &context,
                    &format!("closed after {}", millis(s.opened.elapsed())),
                );
            }
            next = s.parent;
        }
        closed_first
    }
}

/// `d` in milliseconds, for lines.
fn millis(d: std::time::Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// `t` as an RFC 3339 UTC timestamp with microseconds.
pub(crate) fn timestamp(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // civil date from days since 1970-01-01 (Howard Hinnant's algorithm)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        since.subsec_micros()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_targets_parse_and_anything_else_is_refused_by_name() {
        let f = Filter::parse("debug,slatedb=info").unwrap();
        assert_eq!(f.level_of("moraine::store"), LevelFilter::DEBUG);
        assert_eq!(f.level_of("slatedb::db"), LevelFilter::INFO);
        assert_eq!(f.level_of("object_store::aws"), LevelFilter::OFF);
        assert_eq!(f.level_of("tokio"), LevelFilter::OFF);
        assert_eq!(f.max(), LevelFilter::DEBUG);
        assert_eq!(
            Filter::parse("OFF").unwrap().level_of("moraine"),
            LevelFilter::OFF
        );
        assert_eq!(
            Filter::parse(" trace , moraine=warn ")
                .unwrap()
                .level_of("moraine"),
            LevelFilter::WARN
        );
        for bad in ["loud", "debug,tokio=trace", "slatedb=often"] {
            let e = Filter::parse(bad).unwrap_err();
            assert_eq!(e.kind(), crate::error::Kind::InvalidInput);
            assert!(e.to_string().contains(bad), "{e}");
        }
    }

    #[test]
    fn an_empty_spec_is_refused_and_naming_another_target_keeps_moraines_warnings() {
        assert!(Filter::parse(" ").is_err());
        let f = Filter::parse("slatedb=info").unwrap();
        assert_eq!(f.level_of("moraine::store"), LevelFilter::WARN);
        assert_eq!(f.level_of("slatedb"), LevelFilter::INFO);
        let d = Filter::parse(DEFAULT_FILTER).unwrap();
        assert_eq!(d.level_of("moraine"), LevelFilter::WARN);
        assert_eq!(d.level_of("slatedb::db"), LevelFilter::WARN);
    }

    /// Nested spans name their chain and fields on each line, close with their time, serve
    /// `Span::current()`, and leave nothing open; a span whose level the filter no longer
    /// takes closes without a line.
    #[test]
    fn spans_nest_record_close_and_leave_nothing_open() {
        let sink = std::sync::Arc::new(Mutex::new(String::new()));
        let sub = std::sync::Arc::new(Stderr {
            sink: Some(sink.clone()),
            ..Default::default()
        });
        set_filter("trace").unwrap();
        tracing::subscriber::with_default(sub.clone(), || {
            let outer = tracing::info_span!("outer", a = 1);
            let _o = outer.enter();
            {
                let inner = tracing::debug_span!("inner", b = tracing::field::Empty);
                let _i = inner.enter();
                tracing::Span::current().record("b", 2);
                tracing::info!(x = 3, "hello");
            }
            let quiet = tracing::debug_span!("quiet");
            let _q = quiet.clone().entered();
            set_filter("info").unwrap();
        });
        set_filter(DEFAULT_FILTER).unwrap();
        let text = sink.lock().unwrap().clone();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[0].ends_with("INFO moraine::telemetry::tests outer{a=1}:inner{b=2}: hello x=3"),
            "{text}"
        );
        assert!(lines[1]
            .contains("DEBUG moraine::telemetry::tests outer{a=1}:inner{b=2}: closed after "));
        assert!(lines[2].contains(" INFO moraine::telemetry::tests outer{a=1}: closed after "));
        assert!(sub.spans.lock().unwrap().is_empty(), "every span closed");
    }

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        let at = |s: u64| timestamp(UNIX_EPOCH + std::time::Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00.000000Z");
        assert_eq!(at(1_796_166_896), "2026-12-01T23:14:56.000000Z");
    }
}
