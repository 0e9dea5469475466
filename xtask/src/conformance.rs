//! `cargo xtask conformance`: DuckLake's own sqllogictest suite against moraine and, for
//! comparison, against DuckLake's DuckDB-file and SQLite catalogs.
//!
//! The runner is `tests/conformance/runner.py`, hosted by the pinned `duckdb==1.5.5` Python
//! package (one process per test file, so several connections, threads and crash isolation
//! come for free). This command installs the pinned pieces, finds or builds the moraine
//! extension when moraine is among the catalogs, and hands the runner their paths; every other
//! argument goes to the runner unchanged (`--help` lists them).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{deps, ext, paths};

/// The catalogs named by `--catalog` flags (default moraine), to know what to prepare.
fn catalogs(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = if a == "--catalog" {
            it.next().cloned().unwrap_or_default()
        } else if let Some(v) = a.strip_prefix("--catalog=") {
            v.to_string()
        } else {
            continue;
        };
        for c in v.split(',') {
            let c = c.trim();
            if c == "all" {
                out.extend(["moraine", "duckdb", "sqlite"].map(String::from));
            } else {
                out.push(c.to_string());
            }
        }
    }
    if out.is_empty() {
        out.push("moraine".into());
    }
    out
}

/// Whether the run puts moraine's lakes on S3 (`--store s3` or `--store=s3`).
fn store_is_s3(args: &[String]) -> bool {
    args.windows(2).any(|w| w[0] == "--store" && w[1] == "s3")
        || args.iter().any(|a| a == "--store=s3")
}

fn has_flag(args: &[String], flag: &str) -> bool {
    args.iter()
        .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
}

/// DuckLake's repository, which the suite is fetched from when none is found on this machine.
pub const DUCKLAKE_GIT: &str = "https://github.com/duckdb/ducklake";

/// The pinned DuckLake commit (`d8a1881e`, the one DuckLake 1.5.5 was built from): its `test/`
/// and `data/` are the suite moraine's skip lists and docs are written against.
pub const DUCKLAKE_COMMIT: &str = "d8a1881e22516ea3d186d73e83c65fe5bd1a1dc4";

/// Everything the suite lookup reads, gathered once by [`SuiteLookup::from_env`], so tests can
/// hand in their own without touching the process environment.
struct SuiteLookup {
    /// `$MORAINE_DUCKLAKE_TESTS` (unset or empty: `None`).
    tests_env: Option<PathBuf>,
    /// Where to fetch DuckLake from: `$MORAINE_DUCKLAKE_GIT`, else [`DUCKLAKE_GIT`].
    git_url: String,
    /// The moraine clone.
    root: PathBuf,
    /// `$MORAINE_CACHE`; a fetched suite goes to `<cache>/ducklake-tests/<commit>`.
    cache: PathBuf,
    /// The commit to fetch: always [`DUCKLAKE_COMMIT`] outside tests. Deliberately not an
    /// environment variable: a user-set commit would quietly run a suite the skip lists were not
    /// written for (a mirror named by `MORAINE_DUCKLAKE_GIT` holds the same commit). Tests need
    /// another one because a local repository cannot hold a commit with the pinned hash.
    commit: String,
}

impl SuiteLookup {
    fn from_env() -> Self {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        SuiteLookup {
            tests_env: var("MORAINE_DUCKLAKE_TESTS").map(PathBuf::from),
            git_url: var("MORAINE_DUCKLAKE_GIT")
                .map(|v| v.to_string_lossy().into_owned())
                .unwrap_or_else(|| DUCKLAKE_GIT.to_string()),
            root: paths::workspace_root(),
            cache: paths::cache_root(),
            commit: DUCKLAKE_COMMIT.to_string(),
        }
    }
}

/// A suite found or fetched: where it is, and how it was found (for the runner's summary; the
/// runner adds the commit the directory is checked out at).
#[derive(Debug)]
struct Suite {
    dir: PathBuf,
    from: String,
}

/// DuckLake's suite when `--suite` is not given: `$MORAINE_DUCKLAKE_TESTS`; else
/// `shared/ducklake-tests` beside the workspace or beside one of its ancestors; else beside the
/// repository this clone was made from (a CI clone elsewhere still finds the suite next to its
/// origin); else DuckLake's repository at the pinned commit, fetched with git into the cache
/// once and reused after that.
fn find_suite(l: &SuiteLookup) -> Result<Suite, String> {
    if let Some(dir) = &l.tests_env {
        // used as given: the runner reports one without test/sql
        return Ok(Suite {
            dir: dir.clone(),
            from: "$MORAINE_DUCKLAKE_TESTS".into(),
        });
    }
    if let Some(found) = local_suite(&l.root) {
        return Ok(found);
    }
    cached_suite(l)
}

/// The suite found from `root` without the network (beside the clone, beside its origin).
fn local_suite(root: &Path) -> Option<Suite> {
    let beside = |dir: &Path| dir.join("shared").join("ducklake-tests");
    let found = |p: &PathBuf| p.join("test").join("sql").is_dir();
    if let Some(dir) = root.ancestors().skip(1).map(beside).find(found) {
        return Some(Suite {
            dir,
            from: "shared/ducklake-tests beside the clone".into(),
        });
    }
    let origin = Command::new("git")
        .args(["config", "--get", "remote.origin.url"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())?;
    let origin_dir = PathBuf::from(origin.strip_prefix("file://").unwrap_or(&origin));
    let dir = origin_dir.ancestors().skip(1).map(beside).find(found)?;
    Some(Suite {
        dir,
        from: format!("shared/ducklake-tests beside the clone's origin {origin}"),
    })
}

/// `<cache>/ducklake-tests/<commit>`, fetched first if it is not there yet. The fetch goes to a
/// fresh directory beside it that is renamed into place only once it holds exactly that commit,
/// so an interrupted fetch never leaves a checkout that a later run would trust.
fn cached_suite(l: &SuiteLookup) -> Result<Suite, String> {
    let parent = l.cache.join("ducklake-tests");
    let dir = parent.join(&l.commit);
    if dir.exists() {
        match check_checkout(&dir, &l.commit) {
            Ok(()) => {
                return Ok(Suite {
                    dir,
                    from:
                        "DuckLake's repository at the pinned commit, fetched earlier into the cache"
                            .into(),
                })
            }
            Err(e) => {
                eprintln!("xtask: {e}; fetching it again");
                std::fs::remove_dir_all(&dir)
                    .map_err(|e| format!("removing {}: {e}", dir.display()))?;
            }
        }
    }
    std::fs::create_dir_all(&parent).map_err(|e| format!("creating {}: {e}", parent.display()))?;
    remove_stale_partial_fetches(&parent);
    let short = &l.commit[..l.commit.len().min(8)];
    let tmp = paths::fresh_dir_in(&parent, &format!(".partial-{short}"))
        .map_err(|e| format!("creating a directory in {}: {e}", parent.display()))?;
    eprintln!(
        "xtask: DuckLake's test suite is not on this machine; fetching {} at {short} into {}",
        l.git_url,
        dir.display()
    );
    let fetched =
        fetch_commit(&tmp, &l.git_url, &l.commit).and_then(|()| check_checkout(&tmp, &l.commit));
    if let Err(e) = fetched {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(no_suite_error(l, &e));
    }
    if let Err(e) = std::fs::rename(&tmp, &dir) {
        let _ = std::fs::remove_dir_all(&tmp);
        // another run may have put its own fetch there first; that one is as good
        check_checkout(&dir, &l.commit)
            .map_err(|_| format!("moving the fetched suite to {}: {e}", dir.display()))?;
    }
    Ok(Suite {
        dir,
        from: format!("fetched from {}", l.git_url),
    })
}

/// The error when no suite is found and none can be fetched: the three ways to provide one.
fn no_suite_error(l: &SuiteLookup, fetch_error: &str) -> String {
    format!(
        "DuckLake's test suite was not found, and fetching it failed: {fetch_error}\n\
         Provide the suite (a DuckLake checkout holding test/sql and data/) in one of three ways:\n\
         \x20 - set MORAINE_DUCKLAKE_TESTS to its directory;\n\
         \x20 - put it at shared/ducklake-tests beside the moraine clone (or beside one of the \
         clone's parent directories, or beside the repository it was cloned from);\n\
         \x20 - let cargo xtask fetch it with git: that needs {url} to be reachable once (set \
         MORAINE_DUCKLAKE_GIT to a mirror's URL otherwise); commit {commit} is then kept in {cache} \
         and reused.",
        url = l.git_url,
        commit = l.commit,
        cache = l.cache.join("ducklake-tests").join(&l.commit).display(),
    )
}

/// Leftovers of fetches interrupted more than a day ago (a running fetch is never that old).
fn remove_stale_partial_fetches(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let day = std::time::Duration::from_secs(24 * 60 * 60);
    for e in entries.flatten() {
        let stale = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > day);
        if stale && e.file_name().to_string_lossy().starts_with(".partial-") {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Checks out `commit` of the repository at `url` in the empty directory `dir`: a shallow fetch
/// of that one commit (GitHub serves a commit by its hash), else, if the server refuses that, a
/// full fetch of its branches and tags.
fn fetch_commit(dir: &Path, url: &str, commit: &str) -> Result<(), String> {
    git(dir, &["init", "-q"])?;
    let shallow = git(dir, &["fetch", "-q", "--depth", "1", url, commit])
        .and_then(|_| git(dir, &["checkout", "-q", "--detach", "FETCH_HEAD"]));
    let Err(shallow) = shallow else {
        return Ok(());
    };
    eprintln!("xtask: {shallow}; trying a full fetch");
    std::fs::remove_dir_all(dir.join(".git")).map_err(|e| format!("{}: {e}", dir.display()))?;
    git(dir, &["init", "-q"])?;
    git(
        dir,
        &[
            "fetch",
            "-q",
            url,
            "+refs/heads/*:refs/remotes/origin/*",
            "+refs/tags/*:refs/tags/*",
        ],
    )?;
    git(dir, &["checkout", "-q", "--detach", commit])?;
    Ok(())
}

/// Ok if `dir` is a git checkout whose HEAD is exactly `commit` and that holds `test/sql`.
fn check_checkout(dir: &Path, commit: &str) -> Result<(), String> {
    let head = git(dir, &["rev-parse", "HEAD"])
        .map_err(|e| format!("{} is not a checkout of {commit} ({e})", dir.display()))?;
    if head != commit {
        return Err(format!(
            "{} is at commit {head}, not {commit}",
            dir.display()
        ));
    }
    if !dir.join("test").join("sql").is_dir() {
        return Err(format!(
            "{} (commit {commit}) has no test/sql directory",
            dir.display()
        ));
    }
    Ok(())
}

/// Runs `git <args>` in the repository `dir` (its own `.git`, never an enclosing one) without
/// prompting and with a stall limit on HTTP; its trimmed stdout, or its stderr as the error.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args([
            "-c",
            "http.lowSpeedLimit=1000",
            "-c",
            "http.lowSpeedTime=60",
        ])
        .args(["-c", "advice.detachedHead=false"])
        .args(args)
        .current_dir(dir)
        .env("GIT_DIR", dir.join(".git"))
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .env_remove("GIT_COMMON_DIR")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("running git: {e}"))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    Err(format!(
        "git {} failed ({}): {said}",
        args.join(" "),
        out.status
    ))
}

/// The suite `cargo xtask conformance` uses without `--suite`, fetched if need be (so
/// `cargo xtask test` can report a missing one before its long build).
pub fn default_suite() -> Result<PathBuf, String> {
    find_suite(&SuiteLookup::from_env()).map(|s| s.dir)
}

/// `cargo xtask conformance --selftest`: the runner's own checks (no moraine, no suite).
pub fn selftest() -> Result<bool, String> {
    run(&["--selftest".to_string()])
}

pub fn run(args: &[String]) -> Result<bool, String> {
    let root = paths::workspace_root();
    let runner = root.join("tests/conformance/runner.py");
    let help = args.iter().any(|a| a == "-h" || a == "--help");
    let selftest = args.iter().any(|a| a == "--selftest");
    // first, so a missing suite is reported before anything is installed or built
    let suite = if has_flag(args, "--suite") || selftest || help {
        None
    } else {
        Some(find_suite(&SuiteLookup::from_env())?)
    };
    let d = deps::ensure()?;
    deps::check(&d)?;
    let mut cmd = Command::new(deps::python());
    cmd.arg(&runner)
        .env("PYTHONPATH", &d.python_path)
        .arg("--ducklake-ext")
        .arg(&d.ducklake_ext)
        .arg("--sqlite-ext")
        .arg(&d.sqlite_ext);
    if !help && !selftest {
        match deps::ensure_extras() {
            Ok(extras) => {
                for (name, path) in extras {
                    cmd.arg("--ext").arg(format!("{name}={}", path.display()));
                }
            }
            Err(e) => eprintln!(
                "xtask conformance: warning: {e}; tests that require httpfs, tpch or spatial will skip"
            ),
        }
        if store_is_s3(args) {
            // MOTO_PYTHONPATH, HTTPFS_EXT: the runner starts the server and loads httpfs
            cmd.envs(deps::s3_test_env()?);
        }
        if catalogs(args).iter().any(|c| c == "moraine") {
            let moraine = match std::env::var_os("MORAINE_EXTENSION") {
                Some(p) => PathBuf::from(p),
                None => ext::build()?,
            };
            cmd.arg("--moraine-ext").arg(moraine);
        }
    }
    if let Some(suite) = suite {
        cmd.arg("--suite").arg(&suite.dir);
        cmd.arg("--suite-from").arg(&suite.from);
    }
    if !has_flag(args, "--out") {
        cmd.arg("--out").arg(root.join("target/conformance"));
    }
    cmd.args(args);
    let status = cmd
        .status()
        .map_err(|e| format!("running {}: {e}", runner.display()))?;
    Ok(status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    /// `git <args>` in `dir` for building test repositories, independent of the user's config.
    fn git_in(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args([
                "-c",
                "commit.gpgsign=false",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// A lookup from `<base>/clones/moraine` with nothing beside it, caching in `<base>/cache`.
    fn lookup(base: &Path, git_url: &Path, commit: &str) -> SuiteLookup {
        let root = base.join("clones/moraine");
        std::fs::create_dir_all(&root).unwrap();
        assert!(
            local_suite(&root).is_none(),
            "a suite is beside {}",
            root.display()
        );
        SuiteLookup {
            tests_env: None,
            git_url: git_url.to_string_lossy().into_owned(),
            root,
            cache: base.join("cache"),
            commit: commit.to_string(),
        }
    }

    /// Names in `<cache>/ducklake-tests`.
    fn cached(l: &SuiteLookup) -> Vec<String> {
        let mut names: Vec<_> = std::fs::read_dir(l.cache.join("ducklake-tests"))
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    #[test]
    fn the_suite_is_found_beside_an_ancestor_of_the_workspace() {
        let base = paths::fresh_temp_dir("moraine-suite").unwrap();
        let suite = base.join("shared/ducklake-tests");
        std::fs::create_dir_all(suite.join("test/sql")).unwrap();
        let workspace = base.join("ci/clones/moraine");
        std::fs::create_dir_all(&workspace).unwrap();
        assert_eq!(local_suite(&workspace).unwrap().dir, suite);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn the_lookup_order_is_environment_then_beside_the_clone_then_beside_the_origin() {
        let base = paths::fresh_temp_dir("moraine-suite-order").unwrap();
        // the origin, with a suite beside it, and a clone of it elsewhere
        let origin = base.join("home/moraine");
        write(&origin.join("README.md"), "moraine\n");
        git_in(&origin, &["init", "-q"]);
        git_in(&origin, &["add", "."]);
        git_in(&origin, &["commit", "-q", "-m", "one"]);
        std::fs::create_dir_all(base.join("home/shared/ducklake-tests/test/sql")).unwrap();
        let clones = base.join("ci/clones");
        std::fs::create_dir_all(&clones).unwrap();
        git_in(
            &clones,
            &["clone", "-q", origin.to_str().unwrap(), "moraine"],
        );
        // nothing fetchable: every answer below comes from the lookup before the fetch
        let unreachable = base.join("no-such-repository");
        let mut l = lookup(&base, &unreachable, DUCKLAKE_COMMIT);
        l.root = clones.join("moraine");
        let s = find_suite(&l).unwrap();
        assert_eq!(s.dir, base.join("home/shared/ducklake-tests"));
        assert!(s.from.contains("origin"), "{s:?}");

        let beside = base.join("ci/shared/ducklake-tests");
        std::fs::create_dir_all(beside.join("test/sql")).unwrap();
        let s = find_suite(&l).unwrap();
        assert_eq!(s.dir, beside);
        assert_eq!(s.from, "shared/ducklake-tests beside the clone");

        l.tests_env = Some(base.join("elsewhere"));
        let s = find_suite(&l).unwrap();
        assert_eq!(s.dir, base.join("elsewhere"));
        assert_eq!(s.from, "$MORAINE_DUCKLAKE_TESTS");
        assert!(!l.cache.exists(), "nothing was fetched");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn with_no_suite_around_it_is_fetched_into_the_cache_at_the_commit_and_reused() {
        let base = paths::fresh_temp_dir("moraine-suite-fetch").unwrap();
        // a DuckLake stand-in: the suite at one commit, and a later commit on top of it
        let repo = base.join("ducklake");
        write(
            &repo.join("test/sql/general/one.test"),
            "statement ok\nSELECT 1\n",
        );
        write(&repo.join("data/one.csv"), "a\n1\n");
        git_in(&repo, &["init", "-q"]);
        git_in(&repo, &["add", "."]);
        git_in(&repo, &["commit", "-q", "-m", "the suite"]);
        let commit = git_in(&repo, &["rev-parse", "HEAD"]);
        write(&repo.join("test/sql/general/later.test"), "statement ok\n");
        git_in(&repo, &["add", "."]);
        git_in(&repo, &["commit", "-q", "-m", "later"]);

        let l = lookup(&base, &repo, &commit);
        let s = find_suite(&l).unwrap();
        let dir = l.cache.join("ducklake-tests").join(&commit);
        assert_eq!(s.dir, dir);
        assert_eq!(s.from, format!("fetched from {}", repo.display()));
        assert_eq!(git(&dir, &["rev-parse", "HEAD"]).unwrap(), commit);
        assert!(dir.join("test/sql/general/one.test").is_file());
        assert!(dir.join("data/one.csv").is_file());
        assert!(!dir.join("test/sql/general/later.test").exists());
        assert_eq!(cached(&l), vec![commit.clone()], "no partial fetch is left");

        // the second run reuses it, without the repository it came from
        std::fs::rename(&repo, base.join("gone")).unwrap();
        write(&dir.join("marker"), "kept\n");
        let s = find_suite(&l).unwrap();
        assert_eq!(s.dir, dir);
        assert!(s.from.contains("fetched earlier"), "{s:?}");
        assert!(dir.join("marker").is_file(), "not fetched again");

        // a directory there that is not a checkout of the commit is not trusted
        std::fs::rename(base.join("gone"), &repo).unwrap();
        std::fs::remove_dir_all(dir.join(".git")).unwrap();
        let s = find_suite(&l).unwrap();
        assert_eq!(s.dir, dir);
        assert!(s.from.starts_with("fetched from"), "{s:?}");
        assert_eq!(git(&dir, &["rev-parse", "HEAD"]).unwrap(), commit);
        assert!(!dir.join("marker").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn offline_with_no_suite_the_error_names_the_three_ways_to_provide_it() {
        let base = paths::fresh_temp_dir("moraine-suite-offline").unwrap();
        // an unreachable source, simulated locally
        let l = lookup(&base, &base.join("no-such-repository"), DUCKLAKE_COMMIT);
        let e = find_suite(&l).unwrap_err();
        for says in [
            "DuckLake's test suite was not found",
            "MORAINE_DUCKLAKE_TESTS",
            "shared/ducklake-tests beside the moraine clone",
            "fetch it with git",
            "MORAINE_DUCKLAKE_GIT",
            DUCKLAKE_COMMIT,
            "no-such-repository",
        ] {
            assert!(e.contains(says), "{says:?} not in:\n{e}");
        }
        assert_eq!(
            cached(&l),
            Vec::<String>::new(),
            "nothing is left in the cache"
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn catalogs_default_to_moraine_and_expand_all() {
        assert_eq!(catalogs(&v(&["general"])), v(&["moraine"]));
        assert_eq!(
            catalogs(&v(&["--catalog", "duckdb", "--catalog=sqlite,moraine"])),
            v(&["duckdb", "sqlite", "moraine"])
        );
        assert_eq!(
            catalogs(&v(&["--catalog", "all"])),
            v(&["moraine", "duckdb", "sqlite"])
        );
    }
}
