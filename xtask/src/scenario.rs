//! What every e2e host shares: what the scenarios run against, and what one scenario file
//! came to (the SQL-logic runner in `e2e.rs` and the Python host in `python_host.rs` both
//! report through these).

use std::path::PathBuf;
use std::time::Duration;

use crate::deps::Deps;

/// What the scenarios run against.
#[derive(Debug, Clone)]
pub struct Env {
    pub deps: Deps,
    /// The built `moraine.duckdb_extension`, or `None` to run without it.
    pub moraine_ext: Option<PathBuf>,
    /// Per-statement timeout.
    pub timeout: Duration,
}

impl Env {
    pub fn timeout_from_env() -> Duration {
        let secs = std::env::var("MORAINE_E2E_TIMEOUT")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(120);
        Duration::from_secs(secs)
    }

    /// Extensions a `require` line may name.
    pub(crate) fn available(&self, name: &str) -> bool {
        match name {
            "ducklake" | "sqlite_scanner" | "sqlite" | "parquet" | "json" | "icu"
            | "core_functions" => true,
            "moraine" => self.moraine_ext.is_some(),
            _ => false,
        }
    }
}

/// One failing record.
#[derive(Debug, Clone)]
pub struct Failure {
    pub line: usize,
    pub sql: String,
    pub message: String,
}

#[derive(Debug)]
pub enum FileOutcome {
    Passed,
    Failed(Vec<Failure>),
    Skipped(String),
}
