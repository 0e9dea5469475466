//! `cargo xtask demo`: a stock DuckDB CLI session on a DuckLake whose catalog is moraine.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::deps::{self, Deps};

pub struct DemoOptions {
    pub dir: PathBuf,
    /// The built moraine extension; `None` runs the same demo on DuckLake's
    /// own DuckDB-file catalog (to check the demo plumbing without moraine).
    pub moraine_ext: Option<PathBuf>,
}

/// The init script: prelude, ATTACH, and a short demo.
pub fn init_script(deps: &Deps, opts: &DemoOptions) -> String {
    let lit = |p: &Path| deps::sql_escape(&p.display().to_string());
    let dir = &opts.dir;
    let mut s = String::new();
    s.push_str(&deps::no_autoload_sql(&dir.join(".duckdb_extensions")));
    s.push_str(&format!("LOAD '{}';\n", lit(&deps.ducklake_ext)));
    let attach_target = match &opts.moraine_ext {
        Some(m) => {
            s.push_str(&format!("LOAD '{}';\n", lit(m)));
            format!("ducklake:moraine:{}", lit(&dir.join("meta")))
        }
        None => format!("ducklake:{}", lit(&dir.join("meta.ducklake"))),
    };
    let data = format!("{}/", lit(&dir.join("data")));
    s.push_str(&format!(
        ".print \"-- ATTACH '{attach_target}' AS lake (DATA_PATH '{data}')\"\n"
    ));
    s.push_str(&format!(
        "ATTACH '{attach_target}' AS lake (DATA_PATH '{data}');\n"
    ));
    s.push_str(
        "\
.print -- a table, a few rows (each run of the demo appends three more)
CREATE TABLE IF NOT EXISTS lake.demo_events (id BIGINT, kind VARCHAR, amount DECIMAL(10, 2));
INSERT INTO lake.demo_events
  SELECT (SELECT coalesce(max(id), 0) FROM lake.demo_events) + n,
         ['signup', 'order', 'refund'][n], [0, 42.50, -12.25][n]
  FROM range(1, 4) t(n);
.print -- query
SELECT kind, count(*) AS events, sum(amount) AS total FROM lake.demo_events GROUP BY kind ORDER BY kind;
.print -- the lake's snapshots
SELECT snapshot_id, schema_version, changes FROM lake.snapshots() ORDER BY snapshot_id;
USE lake;
",
    );
    s
}

pub fn run(deps: &Deps, opts: &DemoOptions) -> Result<(), String> {
    std::fs::create_dir_all(opts.dir.join("data"))
        .map_err(|e| format!("{}: {e}", opts.dir.display()))?;
    let init = opts.dir.join("demo-init.sql");
    std::fs::write(&init, init_script(deps, opts))
        .map_err(|e| format!("{}: {e}", init.display()))?;
    let interactive = std::io::stdin().is_terminal();
    let mut cmd = Command::new(&deps.cli);
    cmd.arg("-unsigned").arg("-init").arg(&init);
    if interactive {
        eprintln!("xtask demo: lake in {}; the catalog is attached as `lake` (current database). Ctrl-D to leave.", opts.dir.display());
    } else {
        // no terminal: run the demo script and exit
        cmd.arg("-no-stdin");
    }
    let status = cmd
        .status()
        .map_err(|e| format!("running {}: {e}", deps.cli.display()))?;
    if !status.success() {
        return Err(format!("duckdb exited with {status}"));
    }
    Ok(())
}
