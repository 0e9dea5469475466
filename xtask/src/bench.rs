//! `cargo xtask bench`: the same DuckLake workloads on moraine and, in the same run, on
//! DuckLake's own DuckDB-file and SQLite catalogs (and Postgres with `--postgres`), tabulated
//! side by side with moraine's ratio to the DuckDB-file catalog.
//!
//! The workloads are `tests/bench/bench.py`, hosted by the pinned `duckdb==1.5.5` Python
//! package: one process per (workload, catalog), each in a fresh work directory, printing one
//! JSON line per figure; then `turns`, one process for every catalog, which times the history
//! and files workloads' warm queries, and their attach + first query in fresh processes, again
//! on copies of their lakes, every catalog's processes taking turns. This module builds (or
//! takes) the extension, installs the pinned pieces, runs the driver, and renders a markdown
//! table. It asserts nothing about timing: the command fails only when none of moraine's
//! workloads ran.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::json::{self, Json};
use crate::{deps, ext, paths};

pub const USAGE: &str = "\
usage: cargo xtask bench [--quick] [--store s3 [--rtt MS]] [--postgres CONNSTR] [--only NAME,...]
                         [--compression CODEC] [--out FILE]

Runs tests/bench/bench.py on moraine, DuckLake's DuckDB-file catalog and its SQLite catalog
(and Postgres with --postgres), then prints a markdown table: each figure per catalog and
moraine's ratio to the DuckDB-file catalog. Nothing about timing is asserted.

  --quick             small sizes (about 2 minutes for all catalogs on 2 cores)
  --store s3          the commit, history, readers and writers workloads with every lake's data
                      files, and moraine's catalog, on a moto_server (the pinned S3 test
                      server) on 127.0.0.1, started for each run; DuckLake's own catalogs stay
                      local files. Adds the requests the server answered per commit, per warm
                      query and per attach, for the catalog's prefix and for the data path
  --rtt MS            with --store s3: every request to the server takes MS milliseconds
                      more (a delay line in front of it), as over a network
  --postgres CONNSTR  also DuckLake's Postgres catalog on this libpq connection string (each
                      lake in a fresh METADATA_SCHEMA, dropped afterwards); installs PyPI
                      duckdb-extension-postgres-scanner==1.5.5
  --only NAME,...     workloads: commit, history (with expiry), files (with memory), readers,
                      writers, and scale (a million data files, about an hour: only when
                      named here; moraine and the DuckDB file, Postgres when given),
                      move (a 100,000-file lake onto moraine and back) and move-scale
                      (the same at a million files, from the DuckDB file): only when named;
                      after history or files (local store), turns times their warm queries
                      and their fresh-process attach + first query again on copies of their
                      lakes, every catalog's processes taking turns
  --compression CODEC moraine's writers compress with CODEC (zstd, lz4, none: the
                      moraine_compression setting) instead of its default
  --out FILE          also write the report to FILE

environment: MORAINE_EXTENSION (use this extension instead of building one),
MORAINE_BENCH_TIMEOUT (seconds per workload and catalog; default 600 quick, 7200 full)
";

/// The workloads, in run order: (name, what it measures).
const WORKLOADS: &[(&str, &str)] = &[
    (
        "commit",
        "1. commit of a one-row (inlined) and a 10-row (Parquet) insert",
    ),
    (
        "history",
        "2-3. after N one-row commits: attach, warm query; expiry and cleanup",
    ),
    (
        "files",
        "4, 6. many data files: count(*) of one table, peak memory, catalog rows",
    ),
    (
        "scale",
        "a million data files (1,000 tables x 1,000): build, count(*) of one table, a one-file \
         commit, peak memory, catalog bytes; only with --only scale; moraine and the DuckDB \
         file (and Postgres with --postgres)",
    ),
    (
        "move",
        "a lake of 100,000 data files (100 tables x 1,000) moved onto moraine and back with \
         COPY FROM DATABASE: time and peak memory of each move beside a fresh attach of the \
         imported lake; only with --only move",
    ),
    (
        "move-scale",
        "move at a million data files (1,000 tables x 1,000), from the DuckDB file only (its \
         build takes minutes; SQLite's the better part of an hour); only with --only move-scale",
    ),
    (
        "readers",
        "5. READ_ONLY reader processes beside a writer committing 15 times a second",
    ),
    (
        "writers",
        "7. K = 1, 2 and 4 writer processes (own tables; K = 2 on S3), a maintenance process \
         (flush, expiry, cleanup) and two READ_ONLY readers together; every acknowledged \
         commit checked afterwards",
    ),
    (
        "turns",
        "2, 4 again: the warm queries, and attach + first query in fresh processes, on copies \
         of the history and files lakes, every catalog's processes taking turns (after those \
         workloads, one run for all catalogs; local lakes, not Postgres)",
    ),
];

/// The workloads a run includes only when `--only` names them (they take long).
const ON_REQUEST: &[&str] = &["scale", "move", "move-scale"];

/// The catalogs a workload runs on, of the run's: the scale workload skips SQLite (its
/// million-file build alone takes the better part of an hour here); move-scale moves the
/// DuckDB file's lake only.
fn catalogs_for<'a>(workload: &str, catalogs: &'a [&'a str]) -> Vec<&'a str> {
    catalogs
        .iter()
        .copied()
        .filter(|c| workload != "scale" || *c != "sqlite")
        .filter(|c| workload != "move-scale" || *c == "duckdb")
        .collect()
}

/// The workloads that keep copies of their lakes for `turns`.
const KEEPING: &[&str] = &["history", "files"];

#[derive(Debug, Default)]
struct Options {
    quick: bool,
    s3: bool,
    postgres: Option<String>,
    only: Vec<&'static str>,
    out: Option<PathBuf>,
    rtt: Option<u32>,
    compression: Option<String>,
    help: bool,
}

fn workload_name(s: &str) -> Result<&'static str, String> {
    match s.trim() {
        "commit" | "1" => Ok("commit"),
        "history" | "expiry" | "2" | "3" => Ok("history"),
        "files" | "memory" | "4" | "6" => Ok("files"),
        "scale" => Ok("scale"),
        "move" | "import" | "export" => Ok("move"),
        "move-scale" => Ok("move-scale"),
        "readers" | "5" => Ok("readers"),
        "writers" | "7" => Ok("writers"),
        other => Err(format!(
            "bench: unknown workload {other:?} (commit, history, files, scale, move, move-scale, readers, writers)"
        )),
    }
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("bench: {name} needs a value")),
            }
        };
        match flag {
            "--quick" => o.quick = true,
            "--store" => match value("--store")?.as_str() {
                "s3" => o.s3 = true,
                "local" => o.s3 = false,
                other => return Err(format!("bench: unknown store {other:?} (local, s3)")),
            },
            "--postgres" => o.postgres = Some(value("--postgres")?),
            "--only" => {
                for w in value("--only")?.split(',').filter(|w| !w.trim().is_empty()) {
                    let w = workload_name(w)?;
                    if !o.only.contains(&w) {
                        o.only.push(w);
                    }
                }
            }
            "--out" => o.out = Some(PathBuf::from(value("--out")?)),
            "--rtt" => {
                let v = value("--rtt")?;
                o.rtt = Some(
                    v.parse()
                        .map_err(|_| format!("bench: --rtt takes whole milliseconds, not {v:?}"))?,
                )
            }
            "--compression" => {
                let v = value("--compression")?;
                if !["zstd", "lz4", "none"].contains(&v.as_str()) {
                    return Err(format!(
                        "bench: --compression takes zstd, lz4 or none, not {v:?}"
                    ));
                }
                o.compression = Some(v)
            }
            "-h" | "--help" => o.help = true,
            other => return Err(format!("bench: unexpected argument {other:?}\n\n{USAGE}")),
        }
    }
    if o.rtt.is_some() && !o.s3 {
        return Err("bench: --rtt delays the S3 test server's answers: it needs --store s3".into());
    }
    if o.s3 {
        if let Some(w) = o.only.iter().find(|w| !S3_WORKLOADS.contains(w)) {
            return Err(format!(
                "bench: --store s3 runs {}, not {w}",
                S3_WORKLOADS.join(" and ")
            ));
        }
        if o.only.is_empty() {
            o.only = S3_WORKLOADS.to_vec();
        }
    }
    Ok(o)
}

/// The workloads `--store s3` runs (expiry's lake copies and the 20,000-file lake stay local).
const S3_WORKLOADS: &[&str] = &["commit", "history", "readers", "writers"];

/// The sizes handed to bench.py for a workload: quick or full.
fn sizes(workload: &str, quick: bool, s3: bool) -> Vec<String> {
    if workload == "writers" {
        // K writers (each 5 commits/s), two readers, maintenance every `period` seconds
        let (seconds, writers, period) = match (quick, s3) {
            (true, true) => ("10", "2", "5"),
            (false, true) => ("60", "2", "10"),
            (true, false) => ("10", "1,4", "5"),
            (false, false) => ("60", "1,2,4", "10"),
        };
        return [
            "--seconds",
            seconds,
            "--writers",
            writers,
            "--rate",
            "5",
            "--readers",
            "2",
            "--period",
            period,
        ]
        .map(String::from)
        .to_vec();
    }
    if s3 && workload == "history" {
        let commits = if quick { "20,100" } else { "100,1000" };
        let reps = if quick { "10" } else { "20" };
        return [
            "--commits",
            commits,
            "--warm-reps",
            reps,
            "--probe-reps",
            "3",
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
    }
    let s: &[&str] = match (workload, quick) {
        ("commit", true) => &["--reps", "10"],
        ("commit", false) => &["--reps", "50"],
        ("history", true) => &[
            "--commits",
            "20,100",
            "--warm-reps",
            "10",
            "--probe-reps",
            "3",
            "--expiry-reps",
            "1",
        ],
        ("history", false) => &[
            "--commits",
            "100,1000,4000",
            "--warm-reps",
            "200",
            "--probe-reps",
            "9",
            "--expiry-reps",
            "3",
        ],
        ("files", true) => &[
            "--files",
            "2000",
            "--tables",
            "10",
            "--warm-reps",
            "10",
            "--probe-reps",
            "3",
        ],
        ("files", false) => &[
            "--files",
            "20000",
            "--tables",
            "50",
            "--warm-reps",
            "200",
            "--probe-reps",
            "9",
        ],
        ("scale", true) => &[
            "--files",
            "20000",
            "--tables",
            "20",
            "--warm-reps",
            "10",
            "--probe-reps",
            "3",
            "--commit-reps",
            "5",
        ],
        ("scale", false) => &[
            "--files",
            "1000000",
            "--tables",
            "1000",
            "--warm-reps",
            "50",
            "--probe-reps",
            "5",
            "--commit-reps",
            "20",
        ],
        ("move", true) => &["--files", "2000", "--tables", "10", "--probe-reps", "3"],
        ("move", false) => &["--files", "100000", "--tables", "100", "--probe-reps", "5"],
        ("move-scale", true) => &["--files", "20000", "--tables", "20", "--probe-reps", "3"],
        ("move-scale", false) => &[
            "--files",
            "1000000",
            "--tables",
            "1000",
            "--probe-reps",
            "3",
        ],
        ("readers", true) => &["--seconds", "10", "--readers", "3", "--rate", "15"],
        ("readers", false) => &["--seconds", "60", "--readers", "3", "--rate", "15"],
        _ => &[],
    };
    s.iter().map(|x| x.to_string()).collect()
}

// ---- the figures --------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Cell {
    Num(f64),
    Text(String),
    Error(String),
}

#[derive(Debug, Clone, PartialEq)]
struct Figure {
    workload: String,
    /// The catalog the line names (the turns workload measures every catalog in one run);
    /// otherwise the run's.
    catalog: Option<String>,
    figure: String,
    unit: Option<String>,
    cell: Cell,
}

/// One stdout line of bench.py as a figure (None for anything else).
fn parse_figure(line: &str) -> Option<Figure> {
    // bench.py prints flat objects (string keys; string, number, boolean or null values)
    let obj = json::parse(line).ok()?;
    let get = |k: &str| obj.get(k);
    let s = |k: &str| get(k).and_then(Json::as_str).map(String::from);
    let cell = if let Some(e) = s("error") {
        Cell::Error(e)
    } else if let Some(t) = s("text") {
        Cell::Text(t)
    } else {
        Cell::Num(get("value").and_then(Json::as_f64)?)
    };
    Some(Figure {
        workload: s("workload")?,
        catalog: s("catalog"),
        figure: s("figure")?,
        unit: s("unit"),
        cell,
    })
}

// ---- the table ----------------------------------------------------------------------------------

#[derive(Debug)]
struct Row {
    workload: String,
    figure: String,
    unit: Option<String>,
    cells: HashMap<String, Cell>,
}

/// Every figure of the run, in first-seen order, plus the runs that failed.
#[derive(Debug, Default)]
struct Results {
    catalogs: Vec<String>,
    rows: Vec<Row>,
    /// (workload, catalog) -> why that run did not finish
    failed: HashMap<(String, String), String>,
}

impl Results {
    fn new(catalogs: &[&str]) -> Self {
        Results {
            catalogs: catalogs.iter().map(|c| c.to_string()).collect(),
            ..Default::default()
        }
    }

    fn add(&mut self, catalog: &str, f: Figure) {
        let pos = self
            .rows
            .iter()
            .position(|r| r.workload == f.workload && r.figure == f.figure);
        let row = match pos {
            Some(p) => &mut self.rows[p],
            None => {
                // keep a workload's rows together even when a later catalog adds a row
                let at = self
                    .rows
                    .iter()
                    .rposition(|r| r.workload == f.workload)
                    .map_or(self.rows.len(), |p| p + 1);
                self.rows.insert(
                    at,
                    Row {
                        workload: f.workload.clone(),
                        figure: f.figure.clone(),
                        unit: None,
                        cells: HashMap::new(),
                    },
                );
                &mut self.rows[at]
            }
        };
        if row.unit.is_none() {
            row.unit = f.unit;
        }
        row.cells
            .insert(f.catalog.unwrap_or_else(|| catalog.to_string()), f.cell);
    }

    fn fail(&mut self, workload: &str, catalog: &str, why: String) {
        self.failed
            .insert((workload.to_string(), catalog.to_string()), why);
    }

    /// Whether moraine produced at least one measurement.
    fn moraine_ran(&self) -> bool {
        self.rows
            .iter()
            .any(|r| matches!(r.cells.get("moraine"), Some(Cell::Num(_))))
    }
}

/// A number with about three significant digits (integers as integers).
fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// moraine / duckdb, when both are measurements and the divisor is not zero.
fn ratio(moraine: Option<&Cell>, duckdb: Option<&Cell>) -> Option<f64> {
    match (moraine?, duckdb?) {
        (Cell::Num(m), Cell::Num(d)) if *d != 0.0 && m.is_finite() && d.is_finite() => Some(m / d),
        _ => None,
    }
}

fn fmt_ratio(r: Option<f64>) -> String {
    match r {
        Some(r) if r >= 100.0 => format!("{r:.0}x"),
        Some(r) if r >= 10.0 => format!("{r:.1}x"),
        Some(r) => format!("{r:.2}x"),
        None => String::new(),
    }
}

/// Text fit for one markdown table cell.
fn md_cell(s: &str, max: usize) -> String {
    let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let short = if one_line.chars().count() > max {
        let cut: String = one_line.chars().take(max).collect();
        format!("{cut}...")
    } else {
        one_line
    };
    short.replace('|', "\\|")
}

const CELL_MAX: usize = 60;

fn render_table(r: &Results) -> String {
    let mut out = String::new();
    let mut head = vec!["workload".to_string(), "figure".to_string()];
    head.extend(r.catalogs.iter().cloned());
    head.push("moraine/duckdb".into());
    out.push_str(&format!("| {} |\n", head.join(" | ")));
    let aligns: Vec<&str> = head
        .iter()
        .enumerate()
        .map(|(i, _)| if i < 2 { "---" } else { "---:" })
        .collect();
    out.push_str(&format!("| {} |\n", aligns.join(" | ")));
    for row in &r.rows {
        let label = match row.unit.as_deref() {
            Some(u) if !matches!(u, "count" | "rows") => format!("{} ({u})", row.figure),
            _ => row.figure.clone(),
        };
        let mut cells = vec![md_cell(&row.workload, CELL_MAX), md_cell(&label, 200)];
        for c in &r.catalogs {
            cells.push(match row.cells.get(c) {
                Some(Cell::Num(v)) => fmt_num(*v),
                Some(Cell::Text(t)) => md_cell(t, CELL_MAX),
                Some(Cell::Error(e)) => md_cell(&format!("error: {e}"), CELL_MAX),
                None => match r.failed.get(&(row.workload.clone(), c.clone())) {
                    Some(why) => md_cell(&format!("error: {why}"), CELL_MAX),
                    None => "-".into(),
                },
            });
        }
        cells.push(fmt_ratio(ratio(
            row.cells.get("moraine"),
            row.cells.get("duckdb"),
        )));
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    // a failed run that printed no figure at all still gets a row
    let mut lost: Vec<_> = r
        .failed
        .iter()
        .filter(|((w, _), _)| !r.rows.iter().any(|row| &row.workload == w))
        .collect();
    lost.sort();
    for ((w, c), why) in lost {
        let mut cells = vec![w.clone(), "(workload)".into()];
        for cat in &r.catalogs {
            cells.push(if cat == c {
                md_cell(&format!("error: {why}"), CELL_MAX)
            } else {
                "-".into()
            });
        }
        cells.push(String::new());
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

/// The errors in full (the table shortens them).
fn render_errors(r: &Results) -> String {
    let mut lines = Vec::new();
    for row in &r.rows {
        for c in &r.catalogs {
            if let Some(Cell::Error(e)) = row.cells.get(c) {
                lines.push(format!("- {c}, {} / {}: {e}", row.workload, row.figure));
            }
        }
    }
    let mut failed: Vec<_> = r.failed.iter().collect();
    failed.sort();
    for ((w, c), why) in failed {
        lines.push(format!("- {c}, {w}: the run failed: {why}"));
    }
    if lines.is_empty() {
        String::new()
    } else {
        format!("\nErrors in full:\n\n{}\n", lines.join("\n"))
    }
}

// ---- the machine --------------------------------------------------------------------------------

fn machine() -> String {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get().to_string())
        .unwrap_or_else(|_| "?".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map(|kb| format!("{:.1} GiB memory", kb / 1024.0 / 1024.0))
        .unwrap_or_else(|| "memory unknown".into());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "model name").then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| "CPU model unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| format!(", Linux {}", s.trim()))
        .unwrap_or_default();
    format!("{cpus} CPUs (nproc), {mem}, {model}{kernel}")
}

/// `YYYY-MM-DD HH:MM UTC` for a Unix time (days-to-civil after Howard Hinnant).
fn utc(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

// ---- running bench.py ---------------------------------------------------------------------------

struct Setup {
    script: PathBuf,
    python: std::ffi::OsString,
    env: Vec<(String, PathBuf)>,
    postgres: Option<String>,
    quick: bool,
    s3: bool,
    rtt: Option<u32>,
    compression: Option<String>,
    timeout: Duration,
}

struct RunOutcome {
    figures: Vec<Figure>,
    /// Why the process did not finish cleanly, if it did not.
    failure: Option<String>,
}

fn run_one(s: &Setup, workload: &str, catalog: &str, dir: &Path, extra: &[String]) -> RunOutcome {
    let fail = |why: String| RunOutcome {
        figures: Vec::new(),
        failure: Some(why),
    };
    let mut cmd = Command::new(&s.python);
    cmd.arg(&s.script)
        .args(["--catalog", catalog, "--workload", workload, "--dir"])
        .arg(dir)
        .args(sizes(workload, s.quick, s.s3))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if s.quick {
        cmd.arg("--quick");
    }
    if s.s3 {
        cmd.args(["--store", "s3"]);
    }
    if let Some(ms) = s.rtt {
        cmd.args(["--rtt".to_string(), ms.to_string()]);
    }
    if let Some(codec) = &s.compression {
        cmd.env("MORAINE_BENCH_COMPRESSION", codec);
    }
    if let (Some(pg), "postgres") = (&s.postgres, catalog) {
        cmd.args(["--postgres", pg]);
    }
    for (k, v) in &s.env {
        cmd.env(k, v);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return fail(format!("running {:?}: {e}", s.python)),
    };
    let stdout = child.stdout.take().expect("piped stdout");
    let stderr = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    // progress passes through; the tail is kept for the error message
    let tail = Arc::new(Mutex::new(Vec::<String>::new()));
    let tail_w = Arc::clone(&tail);
    let err_reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            let mut t = tail_w.lock().unwrap();
            t.push(line);
            if t.len() > 20 {
                t.remove(0);
            }
        }
    });
    let started = Instant::now();
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if started.elapsed() > s.timeout => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(_) => break None,
        }
    };
    let lines = out_reader.join().unwrap_or_default();
    let _ = err_reader.join();
    let figures: Vec<Figure> = lines.iter().filter_map(|l| parse_figure(l)).collect();
    let failure = if timed_out {
        Some(format!(
            "timed out after {} s (MORAINE_BENCH_TIMEOUT)",
            s.timeout.as_secs()
        ))
    } else {
        match status {
            Some(st) if st.success() => None,
            other => {
                let t = tail.lock().unwrap();
                // the exception line of a traceback, else the last line
                let last = t
                    .iter()
                    .rev()
                    .find(|l| !l.starts_with(' ') && l.contains("Error"))
                    .or(t.last())
                    .cloned()
                    .unwrap_or_default();
                let st = other.map_or("unknown status".to_string(), |s| s.to_string());
                Some(format!("bench.py {st}: {last}"))
            }
        }
    };
    RunOutcome { figures, failure }
}

/// One run's progress line.
fn report_outcome(workload: &str, catalog: &str, outcome: &RunOutcome, t0: Instant) {
    eprintln!(
        "xtask bench: {workload} on {catalog}: {} figures in {:.1} s{}",
        outcome.figures.len(),
        t0.elapsed().as_secs_f64(),
        outcome
            .failure
            .as_deref()
            .map(|f| format!(", FAILED: {f}"))
            .unwrap_or_default()
    );
}

// ---- the postgres_scanner extension -------------------------------------------------------------

const POSTGRES_REQ: &str = "duckdb-extension-postgres-scanner==1.5.5";

/// Installs (if needed) the pinned postgres_scanner extension into `$MORAINE_CACHE/pypi-postgres`
/// (`deps::ensure_set`) and returns its path.
fn ensure_postgres_ext() -> Result<PathBuf, String> {
    let ext = Path::new("duckdb_extension_postgres_scanner/extensions")
        .join(deps::DUCKDB_VERSION)
        .join("postgres_scanner.duckdb_extension");
    Ok(deps::ensure_set("pypi-postgres", &[POSTGRES_REQ], &ext)?.join(ext))
}

/// Removes the work directory, its subdirectories (one per run) in parallel.
fn remove_work_dir(work: &Path) {
    let subdirs: Vec<PathBuf> = std::fs::read_dir(work)
        .map(|rd| rd.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    std::thread::scope(|s| {
        for d in &subdirs {
            s.spawn(move || std::fs::remove_dir_all(d));
        }
    });
    let _ = std::fs::remove_dir_all(work);
}

// ---- the command --------------------------------------------------------------------------------

pub fn run(args: &[String]) -> Result<bool, String> {
    let opts = parse_args(args)?;
    if opts.help {
        print!("{USAGE}");
        return Ok(true);
    }
    let started = Instant::now();
    let moraine_ext = match std::env::var_os("MORAINE_EXTENSION") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => ext::build()?,
    };
    if !moraine_ext.is_file() {
        return Err(format!("no extension at {}", moraine_ext.display()));
    }
    let d = deps::ensure()?;
    deps::check(&d)?;
    let mut env = vec![
        ("PYTHONPATH".to_string(), d.python_path.clone()),
        ("DUCKLAKE_EXT".to_string(), d.ducklake_ext.clone()),
        ("SQLITE_EXT".to_string(), d.sqlite_ext.clone()),
        ("MORAINE_EXT".to_string(), moraine_ext.clone()),
    ];
    if opts.s3 {
        for (k, v) in deps::s3_test_env()? {
            env.push((k.to_string(), PathBuf::from(v)));
        }
    }
    let mut catalogs = vec!["moraine", "duckdb", "sqlite"];
    if opts.postgres.is_some() {
        env.push(("POSTGRES_EXT".to_string(), ensure_postgres_ext()?));
        catalogs.push("postgres");
    }
    let timeout = std::env::var("MORAINE_BENCH_TIMEOUT")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(if opts.quick { 600 } else { 7200 });
    let setup = Setup {
        script: paths::workspace_root().join("tests/bench/bench.py"),
        python: deps::python(),
        env,
        postgres: opts.postgres.clone(),
        quick: opts.quick,
        s3: opts.s3,
        rtt: opts.rtt,
        compression: opts.compression.clone(),
        timeout: Duration::from_secs(timeout),
    };
    let work = paths::fresh_temp_dir("moraine-bench").map_err(|e| format!("temp dir: {e}"))?;
    let mut results = Results::new(&catalogs);
    let kept = work.join("kept");
    let keep = vec!["--keep".to_string(), kept.display().to_string()];
    let mut ran = Vec::new();
    for (workload, _) in WORKLOADS {
        if *workload == "turns" {
            // once, for every catalog, on the lakes the keeping workloads left (local only)
            if opts.s3 || !ran.iter().any(|w| KEEPING.contains(w)) {
                continue;
            }
            let dir = work.join("turns");
            eprintln!("xtask bench: turns, every catalog (in {})", dir.display());
            let t0 = Instant::now();
            let mut extra = keep.clone();
            extra.extend(["--catalogs".to_string(), catalogs.join(",")]);
            let outcome = run_one(&setup, workload, "moraine", &dir, &extra);
            report_outcome(workload, "every catalog", &outcome, t0);
            ran.push(*workload);
            for f in outcome.figures {
                results.add("moraine", f);
            }
            if let Some(why) = outcome.failure {
                // (Postgres lakes are not kept: it takes no turns)
                for catalog in catalogs.iter().filter(|c| **c != "postgres") {
                    results.fail(workload, catalog, why.clone());
                }
            }
            continue;
        }
        if (!opts.only.is_empty() || ON_REQUEST.contains(workload)) && !opts.only.contains(workload)
        {
            continue;
        }
        ran.push(*workload);
        let extra: &[String] = if !opts.s3 && KEEPING.contains(workload) {
            &keep
        } else {
            &[]
        };
        for catalog in &catalogs_for(workload, &catalogs) {
            let dir = work.join(format!("{workload}-{catalog}"));
            eprintln!(
                "xtask bench: {workload} on {catalog} (in {})",
                dir.display()
            );
            let t0 = Instant::now();
            let outcome = run_one(&setup, workload, catalog, &dir, extra);
            report_outcome(workload, catalog, &outcome, t0);
            for f in outcome.figures {
                results.add(catalog, f);
            }
            if let Some(why) = outcome.failure {
                results.fail(workload, catalog, why);
            }
        }
    }
    let took = started.elapsed().as_secs_f64();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mode = match (opts.quick, opts.s3) {
        (true, false) => "--quick",
        (false, false) => "full",
        (true, true) => "--quick --store s3",
        (false, true) => "full, --store s3",
    };
    let lakes = if opts.s3 {
        format!(
            "every lake's data files, and moraine's catalog, on moto_server (S3 API, on \
             127.0.0.1, one server per run{}); DuckLake's DuckDB-file and SQLite catalogs as \
             local files in {}; requests are those the server logged",
            match opts.rtt {
                Some(ms) => format!(", every request delayed by {ms} ms"),
                None => String::new(),
            },
            work.display()
        )
    } else {
        format!("every lake on local disk in {}", work.display())
    };
    let mut report = format!(
        "## moraine benchmark ({mode}), {}\n\n\
         - machine: {}\n\
         - DuckDB 1.5.5 (Python package), DuckLake 1.5.5, sqlite_scanner 1.5.5; moraine {}{}\n\
         - {lakes}; figures are medians (ms unless noted); \
         ratio = moraine / DuckDB-file catalog\n\
         - took {took:.0} s (extension build and deps included)\n\n",
        utc(now),
        machine(),
        moraine_ext.display(),
        match &opts.compression {
            Some(codec) => format!(" (moraine_compression = '{codec}')"),
            None => String::new(),
        },
    );
    for (w, what) in WORKLOADS {
        if ran.contains(w) {
            report.push_str(&format!("- `{w}`: {what}\n"));
        }
    }
    report.push('\n');
    report.push_str(&render_table(&results));
    report.push_str(&render_errors(&results));
    print!("{report}");
    if let Some(out) = &opts.out {
        std::fs::write(out, &report).map_err(|e| format!("write {}: {e}", out.display()))?;
        eprintln!("xtask bench: wrote {}", out.display());
    }
    // after the report: every unlink of a written file costs milliseconds on some disks
    eprintln!("xtask bench: removing {}", work.display());
    remove_work_dir(&work);
    if !results.moraine_ran() {
        eprintln!("xtask bench: none of moraine's workloads ran");
        return Ok(false);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(workload: &str, figure: &str, unit: Option<&str>, cell: Cell) -> Figure {
        Figure {
            workload: workload.into(),
            catalog: None,
            figure: figure.into(),
            unit: unit.map(String::from),
            cell,
        }
    }

    #[test]
    fn numbers_keep_about_three_digits_and_ratios_divide_moraine_by_duckdb() {
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(42.0), "42");
        assert_eq!(fmt_num(1234.56), "1235");
        assert_eq!(fmt_num(123.456), "123");
        assert_eq!(fmt_num(12.345), "12.3");
        assert_eq!(fmt_num(1.2345), "1.23");
        assert_eq!(fmt_num(0.012345), "0.012");
        let n = |v| Some(Cell::Num(v));
        assert_eq!(ratio(n(20.0).as_ref(), n(10.0).as_ref()), Some(2.0));
        assert_eq!(fmt_ratio(ratio(n(27.9).as_ref(), n(9.9).as_ref())), "2.82x");
        assert_eq!(
            fmt_ratio(ratio(n(1690.0).as_ref(), n(116.0).as_ref())),
            "14.6x"
        );
        assert_eq!(
            fmt_ratio(ratio(n(5000.0).as_ref(), n(10.0).as_ref())),
            "500x"
        );
        assert_eq!(ratio(n(1.0).as_ref(), n(0.0).as_ref()), None);
        assert_eq!(
            ratio(n(1.0).as_ref(), Some(&Cell::Text("n/a".into()))),
            None
        );
        assert_eq!(ratio(None, n(1.0).as_ref()), None);
        assert_eq!(fmt_ratio(None), "");
    }

    #[test]
    fn table_has_a_column_per_catalog_units_ratios_and_errors() {
        let mut r = Results::new(&["moraine", "duckdb", "sqlite"]);
        r.add(
            "moraine",
            fig("commit", "one-row", Some("ms"), Cell::Num(12.5)),
        );
        r.add(
            "moraine",
            fig("readers", "reader attach", None, Cell::Text("ok".into())),
        );
        r.add(
            "duckdb",
            fig("commit", "one-row", Some("ms"), Cell::Num(5.0)),
        );
        // a row only a later catalog has stays with its workload
        r.add(
            "duckdb",
            fig("commit", "note", None, Cell::Text("a | b".into())),
        );
        r.add(
            "duckdb",
            fig(
                "readers",
                "reader attach",
                None,
                Cell::Text("n/a (single process file lock)".into()),
            ),
        );
        r.add(
            "moraine",
            fig("commit", "rows", Some("rows"), Cell::Error("boom".into())),
        );
        r.fail(
            "commit",
            "sqlite",
            "bench.py exit status: 1: IOException".into(),
        );
        r.fail("files", "sqlite", "timed out".into());
        let t = render_table(&r);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "| workload | figure | moraine | duckdb | sqlite | moraine/duckdb |"
        );
        assert_eq!(lines[1], "| --- | --- | ---: | ---: | ---: | ---: |");
        assert_eq!(
            lines[2],
            "| commit | one-row (ms) | 12.5 | 5 | error: bench.py exit status: 1: IOException | 2.50x |"
        );
        assert_eq!(
            lines[3],
            "| commit | note | - | a \\| b | error: bench.py exit status: 1: IOException |  |"
        );
        assert_eq!(
            lines[4],
            "| commit | rows | error: boom | - | error: bench.py exit status: 1: IOException |  |"
        );
        assert_eq!(
            lines[5],
            "| readers | reader attach | ok | n/a (single process file lock) | - |  |"
        );
        assert_eq!(
            lines[6],
            "| files | (workload) | - | - | error: timed out |  |"
        );
        assert_eq!(lines.len(), 7);
        assert!(r.moraine_ran());
        let e = render_errors(&r);
        assert!(e.contains("- moraine, commit / rows: boom"), "{e}");
        assert!(
            e.contains("- sqlite, files: the run failed: timed out"),
            "{e}"
        );

        let mut none = Results::new(&["moraine", "duckdb"]);
        none.add(
            "moraine",
            fig("commit", "x", Some("ms"), Cell::Error("no".into())),
        );
        none.add("duckdb", fig("commit", "x", Some("ms"), Cell::Num(1.0)));
        assert!(!none.moraine_ran());
    }

    #[test]
    fn figure_lines_parse_with_escapes_and_anything_else_is_skipped() {
        let f = parse_figure(
            r#"{"workload": "history", "figure": "N=100: warm query", "unit": "ms", "value": 1.5e1}"#,
        )
        .unwrap();
        assert_eq!(
            f,
            fig("history", "N=100: warm query", Some("ms"), Cell::Num(15.0))
        );
        let f = parse_figure(
            r#"{"workload": "readers", "figure": "a", "text": "say \"hi\"\n\u00e9\ud83e\udd86 \\ /"}"#,
        )
        .unwrap();
        assert_eq!(
            f.cell,
            Cell::Text("say \"hi\"\n\u{e9}\u{1F986} \\ /".into())
        );
        let f = parse_figure(
            r#"{"workload": "turns", "catalog": "duckdb", "figure": "f", "unit": "ms", "value": 2}"#,
        )
        .unwrap();
        assert_eq!(f.catalog.as_deref(), Some("duckdb"));
        let mut r = Results::new(&["moraine", "duckdb"]);
        r.add("moraine", f);
        assert_eq!(r.rows[0].cells.get("duckdb"), Some(&Cell::Num(2.0)));
        assert!(!r.rows[0].cells.contains_key("moraine"));
        let f = parse_figure(r#"{"workload":"w","figure":"f","error":"x","value":null}"#).unwrap();
        assert_eq!(f.cell, Cell::Error("x".into()));
        assert_eq!(parse_figure("Traceback (most recent call last):"), None);
        assert_eq!(parse_figure(r#"{"workload": "w", "figure": "f"}"#), None);
        assert_eq!(
            parse_figure(r#"{"workload": "w", "figure": "f", "value": 1"#),
            None
        );
        // Python's json.dumps writes NaN for a float that is not a number
        let f = parse_figure(r#"{"workload": "w", "figure": "f", "value": NaN}"#).unwrap();
        assert!(matches!(f.cell, Cell::Num(v) if v.is_nan()));
    }

    #[test]
    fn options_and_dates() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let o = parse_args(&v(&[
            "--quick",
            "--only",
            "expiry,commit",
            "--out=r.md",
            "--postgres",
            "dbname=x host=127.0.0.1",
        ]))
        .unwrap();
        assert!(o.quick);
        assert_eq!(o.only, vec!["history", "commit"]);
        assert_eq!(o.out, Some(PathBuf::from("r.md")));
        assert_eq!(o.postgres.as_deref(), Some("dbname=x host=127.0.0.1"));
        assert!(parse_args(&v(&["--only", "nope"])).is_err());
        assert!(parse_args(&v(&["--out"])).is_err());
        assert!(parse_args(&v(&["extra"])).is_err());
        // --store s3 runs the commit, history, readers and writers workloads only
        let o = parse_args(&v(&["--store", "s3"])).unwrap();
        assert!(o.s3);
        assert_eq!(o.only, vec!["commit", "history", "readers", "writers"]);
        assert!(parse_args(&v(&["--store", "s3", "--only", "files"])).is_err());
        // --rtt delays the S3 server: it needs one
        let o = parse_args(&v(&["--store", "s3", "--rtt", "20", "--only", "writers"])).unwrap();
        assert_eq!(o.rtt, Some(20));
        assert!(parse_args(&v(&["--rtt", "20"])).is_err());
        let o = parse_args(&v(&["--compression", "lz4"])).unwrap();
        assert_eq!(o.compression.as_deref(), Some("lz4"));
        assert!(parse_args(&v(&["--compression", "gzip"])).is_err());
        assert!(parse_args(&v(&["--store", "s3", "--rtt", "2.5"])).is_err());
        assert_eq!(
            parse_args(&v(&["--store=s3", "--only", "2"])).unwrap().only,
            vec!["history"]
        );
        let e = parse_args(&v(&["--store", "s3", "--only", "files"])).unwrap_err();
        assert!(e.contains("not files"), "{e}");
        assert!(parse_args(&v(&["--store", "gcs"])).is_err());
        assert!(!parse_args(&v(&["--store", "local"])).unwrap().s3);
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400 + 3_661), "2000-02-29 01:01 UTC");
        assert_eq!(utc(1_798_761_599), "2026-12-31 23:59 UTC");
    }
}
