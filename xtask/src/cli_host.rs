//! Drive one long-lived stock DuckDB CLI process, one statement at a time.
//!
//! The CLI reads SQL from a stdin pipe (batch mode, `-bail` off, so it keeps
//! going after an error). Results go to stdout, error messages to stderr.
//! After each statement we send three dot commands:
//!
//! ```text
//! .print <OUT-MARKER>          -- lands on stdout after the statement's rows
//! .output /dev/stderr
//! .print <ERR-MARKER>          -- lands on stderr after the statement's error
//! .output                      -- back to stdout
//! ```
//!
//! Each stream is read by its own thread; a statement is complete when both
//! markers have arrived. Stdout and stderr are never merged, so their relative
//! ordering does not matter: each stream is ordered with itself, and the
//! markers cut each one into per-statement pieces. (Checked against the
//! v1.5.5 CLI: it flushes stdout per statement when piped, so a statement's
//! reply arrives without waiting for EOF, which is what allows a timeout per
//! statement and exact attribution of a crash to the statement that caused it.)
//!
//! Values are made unambiguous with list mode, unit separator (0x1F) between
//! columns, record separator (0x1E) after each row, no header, and NULL
//! rendered as a lone 0x02 byte; see [`parse_rows`].

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

pub const COL_SEP: char = '\x1f';
pub const ROW_SEP: char = '\x1e';
pub const NULL_MARK: &str = "\x02";

/// Dot commands that set the output format [`parse_rows`] understands.
pub fn output_format_commands() -> String {
    // .separator resolves C-style octal escapes: \037 = 0x1F, \036 = 0x1E.
    format!(".mode list\n.separator \"\\037\" \"\\036\"\n.headers off\n.nullvalue {NULL_MARK}\n")
}

/// How to start a CLI process.
#[derive(Debug, Clone)]
pub struct CliConfig {
    pub cli: PathBuf,
    /// Extra command-line arguments, e.g. `-unsigned`.
    pub args: Vec<String>,
    /// Working directory of the process.
    pub cwd: PathBuf,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
}

/// What one statement produced.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    /// Everything the statement wrote to stdout (its result rows).
    pub stdout: String,
    /// Everything it wrote to stderr: non-empty means the statement failed.
    pub stderr: String,
}

impl Reply {
    pub fn error(&self) -> Option<&str> {
        let e = self.stderr.trim_end();
        (!e.is_empty()).then_some(e)
    }
}

#[derive(Debug)]
pub enum Outcome {
    /// The statement ran (successfully or with an error: see [`Reply::error`]).
    Done(Reply),
    /// The process exited before finishing the statement.
    Died {
        partial: Reply,
        status: Option<ExitStatus>,
    },
    /// No complete reply within the timeout; the process has been killed.
    TimedOut { partial: Reply },
}

enum Chunk {
    Out(Vec<u8>),
    Err(Vec<u8>),
    OutEof,
    ErrEof,
}

pub struct CliHost {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Chunk>,
    out: Vec<u8>,
    err: Vec<u8>,
    out_eof: bool,
    err_eof: bool,
    seq: u64,
    nonce: String,
    dead: bool,
}

fn pump(mut r: impl Read + Send + 'static, tx: mpsc::Sender<Chunk>, is_out: bool) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(if is_out { Chunk::OutEof } else { Chunk::ErrEof });
                    return;
                }
                Ok(n) => {
                    let c = buf[..n].to_vec();
                    if tx
                        .send(if is_out { Chunk::Out(c) } else { Chunk::Err(c) })
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
}

/// Find `needle` in `hay`, starting near `*seen` (how far earlier calls got).
fn find_from(hay: &[u8], needle: &[u8], seen: &mut usize) -> Option<usize> {
    let start = seen.saturating_sub(needle.len());
    let found = hay[start..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + start);
    *seen = hay.len();
    found
}

impl CliHost {
    pub fn spawn(cfg: &CliConfig) -> Result<Self, String> {
        let mut cmd = Command::new(&cfg.cli);
        // -no-init: never read ~/.duckdbrc; -batch: stdin is a script, not a terminal
        cmd.args(["-no-init", "-batch"])
            .args(&cfg.args)
            .current_dir(&cfg.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &cfg.env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", cfg.cli.display()))?;
        let (tx, rx) = mpsc::channel();
        pump(child.stdout.take().unwrap(), tx.clone(), true);
        pump(child.stderr.take().unwrap(), tx, false);
        let stdin = child.stdin.take();
        let nonce = format!(
            "{:x}{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
        );
        let mut host = CliHost {
            child,
            stdin,
            rx,
            out: Vec::new(),
            err: Vec::new(),
            out_eof: false,
            err_eof: false,
            seq: 0,
            nonce,
            dead: false,
        };
        host.write(&output_format_commands())
            .map_err(|e| format!("CLI did not accept input: {e}"))?;
        Ok(host)
    }

    fn write(&mut self, s: &str) -> std::io::Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdin closed"))?;
        stdin.write_all(s.as_bytes())?;
        stdin.flush()
    }

    #[allow(dead_code)] // for conformance runners
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// Run one SQL statement (or several, `;`-separated) and wait for its reply.
    pub fn exec(&mut self, sql: &str, timeout: Duration) -> Outcome {
        let mut text = sql.trim_end().to_string();
        if !text.ends_with(';') {
            // on its own line, in case the SQL ends in a `--` comment
            text.push_str("\n;");
        }
        text.push('\n');
        self.exec_raw(&text, timeout)
    }

    /// Run a CLI dot command (e.g. `.mode csv`) and wait for its reply.
    #[allow(dead_code)] // for conformance runners
    pub fn dot(&mut self, command: &str, timeout: Duration) -> Outcome {
        let mut text = command.trim().to_string();
        text.push('\n');
        self.exec_raw(&text, timeout)
    }

    fn exec_raw(&mut self, text: &str, timeout: Duration) -> Outcome {
        if self.dead {
            return Outcome::Died {
                partial: Reply::default(),
                status: None,
            };
        }
        self.seq += 1;
        let out_mark = format!("@@moraine-{}-{}-out@@", self.nonce, self.seq);
        let err_mark = format!("@@moraine-{}-{}-err@@", self.nonce, self.seq);
        let script =
            format!("{text}.print {out_mark}\n.output /dev/stderr\n.print {err_mark}\n.output\n");
        let write_failed = self.write(&script).is_err();

        let deadline = Instant::now() + timeout;
        let (mut out_at, mut err_at) = (None, None);
        // search only the bytes not yet searched (large results arrive in many chunks)
        let (mut out_seen, mut err_seen) = (0usize, 0usize);
        loop {
            if out_at.is_none() {
                out_at = find_from(&self.out, out_mark.as_bytes(), &mut out_seen);
            }
            if err_at.is_none() {
                err_at = find_from(&self.err, err_mark.as_bytes(), &mut err_seen);
            }
            if out_at.is_some() && err_at.is_some() {
                break;
            }
            if (self.out_eof || out_at.is_some()) && (self.err_eof || err_at.is_some()) {
                // both streams closed before the markers: the process is gone
                let partial = self.take_partial();
                let status = self.reap(Duration::from_secs(5));
                self.dead = true;
                return Outcome::Died { partial, status };
            }
            let now = Instant::now();
            if now >= deadline {
                let partial = self.take_partial();
                self.kill();
                return Outcome::TimedOut { partial };
            }
            match self.rx.recv_timeout(deadline - now) {
                Ok(chunk) => self.absorb(chunk),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.out_eof = true;
                    self.err_eof = true;
                }
            }
        }
        let _ = write_failed; // a failed write shows up as EOF on both streams
        let (o, e) = (out_at.unwrap(), err_at.unwrap());
        let reply = Reply {
            stdout: String::from_utf8_lossy(&self.out[..o]).into_owned(),
            stderr: String::from_utf8_lossy(&self.err[..e]).into_owned(),
        };
        // drop the markers and the newline .print put after them
        let cut = |buf: &mut Vec<u8>, at: usize, len: usize| {
            let mut end = at + len;
            if buf.get(end) == Some(&b'\n') {
                end += 1;
            }
            buf.drain(..end);
        };
        cut(&mut self.out, o, out_mark.len());
        cut(&mut self.err, e, err_mark.len());
        Outcome::Done(reply)
    }

    fn absorb(&mut self, chunk: Chunk) {
        match chunk {
            Chunk::Out(b) => self.out.extend_from_slice(&b),
            Chunk::Err(b) => self.err.extend_from_slice(&b),
            Chunk::OutEof => self.out_eof = true,
            Chunk::ErrEof => self.err_eof = true,
        }
    }

    fn take_partial(&mut self) -> Reply {
        Reply {
            stdout: String::from_utf8_lossy(&std::mem::take(&mut self.out)).into_owned(),
            stderr: String::from_utf8_lossy(&std::mem::take(&mut self.err)).into_owned(),
        }
    }

    fn reap(&mut self, grace: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + grace;
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) => return Some(s),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = self.child.kill();
                    return self.child.wait().ok();
                }
            }
        }
    }

    fn kill(&mut self) {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.dead = true;
    }

    /// Close stdin and wait for the CLI to exit. Returns its exit status and
    /// whatever it printed after the last statement (e.g. a crash report).
    pub fn close(mut self, timeout: Duration) -> (Option<ExitStatus>, Reply) {
        if self.dead {
            return (self.child.try_wait().ok().flatten(), self.take_partial());
        }
        self.stdin = None;
        let status = self.reap(timeout);
        // collect the rest of the output
        let deadline = Instant::now() + Duration::from_secs(2);
        while !(self.out_eof && self.err_eof) && Instant::now() < deadline {
            match self.rx.recv_timeout(Duration::from_millis(100)) {
                Ok(c) => self.absorb(c),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
        self.dead = true;
        (status, self.take_partial())
    }
}

impl Drop for CliHost {
    fn drop(&mut self) {
        if !self.dead {
            self.stdin = None;
            let _ = self.reap(Duration::from_secs(10));
        }
    }
}

/// A result cell: `None` is SQL NULL.
pub type Cell = Option<String>;

/// Split a statement's stdout (in the format set by
/// [`output_format_commands`]) into rows of cells.
pub fn parse_rows(stdout: &str) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    let mut rest = stdout;
    while let Some(end) = rest.find(ROW_SEP) {
        let row = &rest[..end];
        rows.push(
            row.split(COL_SEP)
                .map(|c| {
                    if c == NULL_MARK {
                        None
                    } else {
                        Some(c.to_string())
                    }
                })
                .collect(),
        );
        rest = &rest[end + ROW_SEP.len_utf8()..];
    }
    // anything after the last row separator is not a row (e.g. a stray newline)
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_rows_handles_null_empty_tabs_newlines() {
        let s = "1\x1f\x02\x1f\x1fa\tb\x1e2\x1fx\ny\x1fNULL\x1f\x02\x1e";
        let rows = parse_rows(s);
        assert_eq!(
            rows,
            vec![
                vec![Some("1".into()), None, Some("".into()), Some("a\tb".into())],
                vec![
                    Some("2".into()),
                    Some("x\ny".into()),
                    Some("NULL".into()),
                    None
                ],
            ]
        );
        assert!(parse_rows("").is_empty());
    }

    fn host() -> Option<(CliHost, PathBuf)> {
        let d = crate::deps::installed()?;
        let dir = crate::paths::fresh_temp_dir("moraine-clihost-test").unwrap();
        let cfg = CliConfig {
            cli: d.cli,
            args: vec![],
            cwd: dir.clone(),
            env: vec![],
        };
        Some((CliHost::spawn(&cfg).unwrap(), dir))
    }

    const T: Duration = Duration::from_secs(60);

    fn done(o: Outcome) -> Reply {
        match o {
            Outcome::Done(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn statements_errors_and_values_against_stock_cli() {
        let Some((mut h, dir)) = host() else {
            eprintln!("skipped: deps not installed (cargo xtask deps)");
            return;
        };
        let r = done(h.exec(
            "SELECT 1, NULL, '', 'NULL', 'a\tb', [1, 2], 'x' || chr(10) || 'y'",
            T,
        ));
        assert_eq!(r.error(), None);
        assert_eq!(
            parse_rows(&r.stdout),
            vec![vec![
                Some("1".into()),
                None,
                Some("".into()),
                Some("NULL".into()),
                Some("a\tb".into()),
                Some("[1, 2]".into()),
                Some("x\ny".into()),
            ]]
        );
        let r = done(h.exec("SELECT * FROM nope", T));
        assert!(
            r.error()
                .unwrap()
                .contains("Table with name nope does not exist"),
            "{r:?}"
        );
        assert_eq!(r.stdout, "");
        // the process keeps going after an error, and errors do not leak forward
        let r = done(h.exec("CREATE TABLE t(i INT);\nINSERT INTO t VALUES (1), (2)", T));
        assert_eq!(r.error(), None, "{r:?}");
        let r = done(h.exec("SELECT i FROM t ORDER BY i -- trailing comment", T));
        assert_eq!(r.error(), None);
        assert_eq!(
            parse_rows(&r.stdout),
            vec![vec![Some("1".into())], vec![Some("2".into())]]
        );
        let r = done(h.exec("SELECT 1 WHERE false", T));
        assert_eq!((r.stdout.as_str(), r.error()), ("", None));
        let (status, rest) = h.close(T);
        // the CLI exits 1 when any statement failed
        assert_eq!(status.and_then(|s| s.code()), Some(1));
        assert_eq!(rest.stdout, "");
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Many statements, alternating results and errors, plus a large result:
    /// every reply is attributed to its own statement.
    #[test]
    fn attribution_is_exact_over_many_statements() {
        let Some((mut h, dir)) = host() else { return };
        for i in 0..300 {
            if i % 3 == 0 {
                let r = done(h.exec(&format!("SELECT * FROM missing_{i}"), T));
                assert!(
                    r.error().unwrap().contains(&format!("missing_{i}")),
                    "{i}: {r:?}"
                );
                assert_eq!(r.stdout, "", "{i}");
            } else {
                let r = done(h.exec(&format!("SELECT {i}, 'v{i}'"), T));
                assert_eq!(r.error(), None, "{i}");
                assert_eq!(
                    parse_rows(&r.stdout),
                    vec![vec![Some(i.to_string()), Some(format!("v{i}"))]],
                    "{i}"
                );
            }
        }
        let r = done(h.exec("SELECT i, repeat('x', 100) FROM range(200000) t(i)", T));
        let rows = parse_rows(&r.stdout);
        assert_eq!(rows.len(), 200000);
        assert_eq!(rows[199999][0].as_deref(), Some("199999"));
        let r = done(h.exec("SELECT 'after'", T));
        assert_eq!(parse_rows(&r.stdout), vec![vec![Some("after".into())]]);
        let _ = h.close(T);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_crash_is_reported_with_its_signal() {
        use std::os::unix::process::ExitStatusExt;
        let Some((mut h, dir)) = host() else { return };
        done(h.exec("SELECT 1", T));
        // .shell runs `sh -c`, whose parent is the CLI
        match h.dot(".shell kill -SEGV $PPID", T) {
            Outcome::Died { status, .. } => assert_eq!(status.and_then(|s| s.signal()), Some(11)),
            other => panic!("{other:?}"),
        }
        assert!(h.is_dead());
        assert!(matches!(h.exec("SELECT 1", T), Outcome::Died { .. }));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn incomplete_statement_times_out_and_is_killed() {
        let Some((mut h, dir)) = host() else { return };
        // an unterminated string literal swallows the markers
        match h.exec("SELECT 'unterminated", Duration::from_millis(1500)) {
            Outcome::TimedOut { .. } => {}
            other => panic!("{other:?}"),
        }
        assert!(h.is_dead());
        let _ = std::fs::remove_dir_all(dir);
    }
}
