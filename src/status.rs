//! What an operator sees of an open store: `moraine_status(lake)` (one row: the head, the
//! SlateDB manifest's writer epoch and shape, the image, this attach's commits) and
//! `moraine_metrics(lake)` (SlateDB's own counters and gauges for this store).

use slatedb_common::metrics::{DefaultMetricsRecorder, MetricValue};

/// One column of `moraine_status`.
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    /// Text; `None` is NULL.
    Text(Option<String>),
    /// An integer; `None` is NULL.
    Int(Option<i64>),
    /// A point in time as microseconds since the Unix epoch (UTC); `None` is NULL.
    Time(Option<i64>),
}

/// An open store's state, gathered by [`crate::store::Store::status`].
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub url: String,
    /// `writer` or `reader` (`READ_ONLY`).
    pub mode: &'static str,
    /// Whether this attach holds the folder role (RFC 0004 v3): SlateDB's writer, which folds
    /// every process's commits and runs the store's maintenance. Shown as the `role` column:
    /// `folder`, else the mode.
    pub folder: bool,
    /// `open`, `fenced` (another attach took the folder role, until this one notices and goes
    /// on without it), `outcome unknown` (a commit of unknown outcome, until the next statement
    /// settles it) or `closed`.
    pub state: &'static str,
    /// The store's committed head, read now; `None` when it could not be read (`problem`).
    pub head_batch: Option<u64>,
    pub head_snapshot: Option<i64>,
    /// Why the head could not be read.
    pub problem: Option<String>,
    /// SlateDB's manifest as this handle holds it; `None` while this attach has not opened
    /// SlateDB (a `READ_ONLY` attach that started from an image checkpoint opens it at its
    /// first read of history, RFC 0009).
    pub manifest_id: Option<u64>,
    pub writer_epoch: Option<u64>,
    pub l0_ssts: Option<usize>,
    pub sorted_runs: Option<usize>,
    /// The committed image new transactions pin (RFC 0009), if one is installed.
    pub image_batch: Option<u64>,
    pub image_records: Option<usize>,
    pub image_bytes: Option<usize>,
    /// The batch of the newest image checkpoint this handle knows of.
    pub checkpoint_batch: Option<u64>,
    /// Commits made through this attach, and when the last one was acknowledged.
    pub commits: u64,
    pub last_commit_micros: Option<i64>,
    pub io_timeout_ms: u64,
    pub max_commit_bytes: u64,
    pub reader_poll_ms: u64,
    pub reclaim_interval_ms: u64,
    /// What a writer of this attach compresses with (`moraine_compression`).
    pub compression: &'static str,
}

fn int<T: TryInto<i64>>(v: T) -> Field {
    Field::Int(v.try_into().ok())
}

fn opt<T: TryInto<i64>>(v: Option<T>) -> Field {
    Field::Int(v.and_then(|v| v.try_into().ok()))
}

impl Status {
    /// The row, column by column, in the order `moraine_status` returns them.
    pub fn fields(&self) -> Vec<(&'static str, Field)> {
        vec![
            ("url", Field::Text(Some(self.url.clone()))),
            ("mode", Field::Text(Some(self.mode.to_string()))),
            (
                "role",
                Field::Text(Some(
                    match (self.folder, self.mode) {
                        (true, _) => "folder",
                        (false, m) => m,
                    }
                    .to_string(),
                )),
            ),
            ("state", Field::Text(Some(self.state.to_string()))),
            ("head_batch", opt(self.head_batch)),
            ("head_snapshot", opt(self.head_snapshot)),
            ("problem", Field::Text(self.problem.clone())),
            ("manifest_id", opt(self.manifest_id)),
            ("writer_epoch", opt(self.writer_epoch)),
            ("l0_ssts", opt(self.l0_ssts)),
            ("sorted_runs", opt(self.sorted_runs)),
            ("image_batch", opt(self.image_batch)),
            ("image_records", opt(self.image_records)),
            ("image_bytes", opt(self.image_bytes)),
            ("checkpoint_batch", opt(self.checkpoint_batch)),
            ("commits", int(self.commits)),
            ("last_commit", Field::Time(self.last_commit_micros)),
            ("io_timeout_ms", int(self.io_timeout_ms)),
            ("max_commit_bytes", int(self.max_commit_bytes)),
            ("reader_poll_ms", int(self.reader_poll_ms)),
            ("reclaim_interval_ms", int(self.reclaim_interval_ms)),
            (
                "compression",
                Field::Text(Some(self.compression.to_string())),
            ),
        ]
    }
}

/// SlateDB's metrics for one store as (name, labels, value) rows: counters, gauges, and each
/// histogram as its `.count` and `.sum`. Labels read `key=value,...`.
pub fn metric_rows(recorder: &DefaultMetricsRecorder) -> Vec<(String, String, i64)> {
    let mut rows = Vec::new();
    for m in recorder.snapshot().all() {
        let labels = m
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        match &m.value {
            MetricValue::Counter(v) => rows.push((m.name.clone(), labels, clamp(*v))),
            MetricValue::Gauge(v) | MetricValue::UpDownCounter(v) => {
                rows.push((m.name.clone(), labels, *v))
            }
            MetricValue::Histogram { count, sum, .. } => {
                rows.push((format!("{}.count", m.name), labels.clone(), clamp(*count)));
                rows.push((format!("{}.sum", m.name), labels, sum.round() as i64));
            }
        }
    }
    rows.sort();
    rows
}
