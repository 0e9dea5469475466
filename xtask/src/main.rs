//! moraine's task runner: `cargo xtask <command>`.
//!
//! All cargo builds it starts use one target directory outside the clone,
//! `$CARGO_TARGET_DIR` or by default `$HOME/.cache/moraine/target`, so the
//! bundled DuckDB (about 20 minutes cold on two cores) is compiled once per
//! machine, not once per clone. Third-party binaries are cached in
//! `$MORAINE_CACHE/pypi` (default `$HOME/.cache/moraine/pypi`).

mod bench;
mod cli_host;
mod conformance;
mod demo;
mod deps;
mod dist;
mod e2e;
mod ext;
mod footer;
mod header;
mod json;
mod paths;
mod python_host;
mod scenario;
mod slt;

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  build                 cargo build --release -p moraine, then write
                        <target>/release/moraine.duckdb_extension (.so + DuckDB footer);
                        prints that path last
  package --repo DIR    build, then write DIR/v1.5.5/linux_amd64/moraine.duckdb_extension.gz
                        (a DuckDB extension repository: INSTALL moraine FROM 'DIR')
  package DIR           wrap an existing DIR/libmoraine_extension.so as DIR/moraine.duckdb_extension
  wheel --out DIR       build, then write DIR/duckdb_extension_moraine-<version>-
                        py3-none-manylinux_2_28_x86_64.whl (pip install it next to duckdb==1.5.5)
  deps                  install the pinned DuckDB CLI, DuckLake and sqlite_scanner
                        extensions and duckdb Python package from PyPI into
                        $MORAINE_CACHE/pypi (default ~/.cache/moraine/pypi); prints paths
  e2e [FILTER]          build, install deps, run tests/e2e/*.test through the stock CLI
      --selftest        run tests/e2e/selftest/*.test instead (DuckLake's own catalog;
                        does not build or load moraine)
  demo [--dir DIR]      build, install deps, open a stock DuckDB CLI on a moraine lake
                        in DIR (default ./.moraine-demo); without a terminal on stdin,
                        run the demo script and exit
      --without-moraine same demo on DuckLake's own DuckDB-file catalog
  test                  deps, DuckLake's suite (fetched if not found, see conformance),
                        cargo test --release --workspace, conformance --selftest,
                        e2e --selftest, e2e, conformance --slow (moraine), and
                        conformance --slow --store s3
  conformance [--catalog moraine|duckdb|sqlite|all] [--store s3] [PATH_OR_GLOB ...]
                        DuckLake's sqllogictest suite on moraine and/or DuckLake's own
                        catalogs (--store s3: moraine's lakes on a moto_server started on
                        127.0.0.1); builds moraine unless MORAINE_EXTENSION is set;
                        `conformance --help` for the rest. The suite (--suite DIR) is by
                        default $MORAINE_DUCKLAKE_TESTS, else shared/ducklake-tests beside
                        the clone (or an ancestor, or the clone's origin), else DuckLake's
                        repository at the pinned commit d8a1881e, fetched with git once into
                        $MORAINE_CACHE/ducklake-tests/<commit> and reused
      --selftest        check the runner itself on small files (no moraine, no suite)
  header [--check]      write extension/include/moraine_ffi.h with the pinned cbindgen from
                        extension/src/ffi.rs; --check (run by `test`) fails when the
                        committed header differs
  torture [--rounds N] [--seed S]
                        writer processes killed with SIGKILL at random moments (in their
                        loop, while attaching, while detaching, while a second writer
                        fences them), each round checked from a fresh attach; default 200
                        rounds (the test command runs 12); docs/reliability.md has a run
  fuzz [--cases N] [--seed S]
                        the decoders' fuzz targets (keys, row records, inline chunks, the
                        head, table definitions, snapshot records, image checkpoints and
                        logs) with N cases each (default 1,000,000; the test command runs
                        3,000); docs/reliability.md has a long run
  bench [--quick] [--store s3] [--postgres CONNSTR] [--only NAME,...] [--out FILE]
                        the same DuckLake workloads on moraine, the DuckDB-file and SQLite
                        catalogs (and Postgres); prints a markdown table with moraine's ratio
                        to the DuckDB-file catalog; asserts nothing about timing; --store s3:
                        commit and history with the data (and moraine's catalog) on a
                        moto_server, plus the server's requests per commit and per attach;
                        builds moraine unless MORAINE_EXTENSION is set; `bench --help`

environment:
  CARGO_TARGET_DIR      cargo target dir (default ~/.cache/moraine/target)
  MORAINE_CACHE         cache root (default ~/.cache/moraine)
  MORAINE_EXTENSION     e2e, conformance, bench: use this moraine.duckdb_extension instead of building one
  MORAINE_E2E_TIMEOUT   per-statement timeout in seconds for e2e (default 120)
  MORAINE_DUCKLAKE_TESTS  conformance: the DuckLake test suite (holding test/sql, data/)
  MORAINE_DUCKLAKE_GIT  conformance: where to fetch DuckLake from when no suite is found
                        (default https://github.com/duckdb/ducklake; a mirror's URL or path)
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("build") => cmd_build(&args[1..]),
        Some("package") => cmd_package(&args[1..]),
        Some("wheel") => cmd_wheel(&args[1..]),
        Some("deps") => cmd_deps(&args[1..]),
        Some("e2e") => cmd_e2e(&args[1..]),
        Some("demo") => cmd_demo(&args[1..]),
        Some("test") => cmd_test(&args[1..]),
        Some("header") => header::run(&args[1..]),
        Some("conformance") => conformance::run(&args[1..]),
        Some("bench") => bench::run(&args[1..]),
        Some("fuzz") => cmd_fuzz(&args[1..]),
        Some("torture") => cmd_torture(&args[1..]),
        Some("help") | Some("-h") | Some("--help") => {
            print!("{USAGE}");
            Ok(true)
        }
        other => {
            eprint!("{USAGE}");
            if let Some(o) = other {
                eprintln!("\nunknown command {o:?}");
            }
            Ok(false)
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn no_args(cmd: &str, args: &[String]) -> Result<(), String> {
    match args.first() {
        None => Ok(()),
        Some(a) => Err(format!("{cmd}: unexpected argument {a:?}")),
    }
}

fn cmd_build(args: &[String]) -> Result<bool, String> {
    no_args("build", args)?;
    let ext = ext::build()?;
    println!("{}", ext.display());
    Ok(true)
}

fn ensure_deps() -> Result<deps::Deps, String> {
    let d = deps::ensure()?;
    deps::check(&d)?;
    Ok(d)
}

/// `--repo DIR`: build and write DuckDB's extension repository layout into DIR. `DIR`: wrap an
/// already built `DIR/libmoraine_extension.so` (e.g. a development build) as an extension.
fn cmd_package(args: &[String]) -> Result<bool, String> {
    if let [flag, repo] = args {
        if flag == "--repo" {
            let out = dist::repository(&extension_for_dist()?, std::path::Path::new(repo))?;
            println!("{}", out.display());
            return Ok(true);
        }
    }
    let [dir] = args else {
        return Err(
            "usage: cargo xtask package --repo <DIR> | cargo xtask package <dir holding libmoraine_extension.so>"
                .into(),
        );
    };
    let version = ext::crate_version(&ext::extension_manifest())?;
    println!(
        "{}",
        ext::package(std::path::Path::new(dir), &version)?.display()
    );
    Ok(true)
}

/// The extension to distribute or demo: `MORAINE_EXTENSION` when set (already built), else a
/// build.
fn extension_for_dist() -> Result<PathBuf, String> {
    match std::env::var_os("MORAINE_EXTENSION") {
        Some(p) => Ok(PathBuf::from(p)),
        None => ext::build(),
    }
}

fn cmd_wheel(args: &[String]) -> Result<bool, String> {
    let [flag, out] = args else {
        return Err("usage: cargo xtask wheel --out <DIR>".into());
    };
    if flag != "--out" {
        return Err("usage: cargo xtask wheel --out <DIR>".into());
    }
    let wheel = dist::wheel(&extension_for_dist()?, std::path::Path::new(out))?;
    println!("{}", wheel.display());
    Ok(true)
}

fn cmd_deps(args: &[String]) -> Result<bool, String> {
    no_args("deps", args)?;
    let d = ensure_deps()?;
    println!("duckdb_cli      {}", d.cli.display());
    println!("ducklake_ext    {}", d.ducklake_ext.display());
    println!("sqlite_ext      {}", d.sqlite_ext.display());
    println!("python_path     {}", d.python_path.display());
    println!("moto_server     {}", crate::deps::ensure_moto()?.display());
    println!(
        "wheelhouse      {}",
        crate::deps::ensure_wheelhouse()?.display()
    );
    Ok(true)
}

fn cmd_e2e(args: &[String]) -> Result<bool, String> {
    let mut selftest = false;
    let mut filter = None;
    for a in args {
        match a.as_str() {
            "--selftest" => selftest = true,
            s if s.starts_with('-') => return Err(format!("e2e: unknown flag {s:?}")),
            s if filter.is_none() => filter = Some(s.to_string()),
            s => return Err(format!("e2e: unexpected argument {s:?}")),
        }
    }
    let t = run_e2e(selftest, filter.as_deref(), "e2e")?;
    Ok(t.failed == 0)
}

fn run_e2e(selftest: bool, filter: Option<&str>, label: &str) -> Result<e2e::Tally, String> {
    let root = paths::workspace_root();
    let dir = if selftest {
        root.join("tests/e2e/selftest")
    } else {
        root.join("tests/e2e")
    };
    let moraine_ext = if selftest {
        None
    } else if let Some(prebuilt) = std::env::var_os("MORAINE_EXTENSION") {
        // an extension file built elsewhere, used as it is
        Some(PathBuf::from(prebuilt))
    } else {
        Some(ext::build()?)
    };
    let d = ensure_deps()?;
    let files = e2e::scenario_files(&dir, filter)?;
    let env = e2e::Env {
        deps: d,
        moraine_ext,
        timeout: e2e::Env::timeout_from_env(),
    };
    Ok(e2e::run_all(&files, &env, label))
}

fn cmd_demo(args: &[String]) -> Result<bool, String> {
    let mut dir = PathBuf::from(".moraine-demo");
    let mut with_moraine = true;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--dir" => dir = PathBuf::from(it.next().ok_or("demo: --dir needs a value")?),
            s if s.starts_with("--dir=") => dir = PathBuf::from(&s[6..]),
            "--without-moraine" => with_moraine = false,
            s => return Err(format!("demo: unexpected argument {s:?}")),
        }
    }
    let dir = if dir.is_absolute() {
        dir
    } else {
        std::env::current_dir()
            .map_err(|e| e.to_string())?
            .join(dir)
    };
    let moraine_ext = if with_moraine {
        Some(extension_for_dist()?)
    } else {
        None
    };
    let d = ensure_deps()?;
    demo::run(&d, &demo::DemoOptions { dir, moraine_ext })?;
    Ok(true)
}

/// The crash torture scenario (tests/e2e/python/torture.py) with more rounds than the test
/// command's.
fn cmd_torture(args: &[String]) -> Result<bool, String> {
    let mut rounds = 200u64;
    let mut seed = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut number = |what: &str| -> Result<u64, String> {
            let v = it.next().ok_or(format!("torture: {what} needs a number"))?;
            v.parse()
                .map_err(|_| format!("torture: {what} wants a number, not {v:?}"))
        };
        match a.as_str() {
            "--rounds" => rounds = number("--rounds")?,
            "--seed" => seed = Some(number("--seed")?),
            other => return Err(format!("torture: unexpected argument {other:?}")),
        }
    }
    // the scenario reads these; its time limit grows with the rounds (a round takes a second
    // or two)
    std::env::set_var("MORAINE_TORTURE_ROUNDS", rounds.to_string());
    if let Some(seed) = seed {
        std::env::set_var("MORAINE_TORTURE_SEED", seed.to_string());
    }
    if std::env::var_os("MORAINE_E2E_TIMEOUT").is_none() {
        std::env::set_var("MORAINE_E2E_TIMEOUT", (120 + 10 * rounds).to_string());
    }
    let t = run_e2e(false, Some("torture"), "torture")?;
    Ok(t.failed == 0 && t.passed > 0)
}

/// The decoders' fuzz targets (src/fuzz_tests.rs) with more cases than the test command's.
fn cmd_fuzz(args: &[String]) -> Result<bool, String> {
    let mut cases = "1000000".to_string();
    let mut seed = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--cases" => cases = it.next().ok_or("fuzz: --cases needs a number")?.clone(),
            "--seed" => seed = Some(it.next().ok_or("fuzz: --seed needs a number")?.clone()),
            other => return Err(format!("fuzz: unexpected argument {other:?}")),
        }
    }
    for (what, v) in [("--cases", Some(&cases)), ("--seed", seed.as_ref())] {
        if let Some(v) = v {
            v.parse::<u64>()
                .map_err(|_| format!("fuzz: {what} wants a number, not {v:?}"))?;
        }
    }
    eprintln!(
        "xtask fuzz: {cases} cases per target, seed {}",
        seed.as_deref().unwrap_or("default")
    );
    let mut cmd = paths::cargo_command();
    cmd.args([
        "test",
        "--release",
        "-p",
        "moraine-core",
        "--lib",
        "fuzz_tests",
    ])
    .env("CARGO_TARGET_DIR", paths::target_dir())
    .env("MORAINE_FUZZ_CASES", &cases)
    .current_dir(paths::workspace_root());
    if let Some(seed) = &seed {
        cmd.env("MORAINE_FUZZ_SEED", seed);
    }
    let status = cmd.status().map_err(|e| format!("running cargo: {e}"))?;
    Ok(status.success())
}

fn cmd_test(args: &[String]) -> Result<bool, String> {
    no_args("test", args)?;
    // the C surface's header first: the C++ layer compiles against it
    if !header::run(&["--check".to_string()])? {
        return Ok(false);
    }
    // deps first, so the tests that exercise the stock CLI run instead of skipping
    ensure_deps()?;
    // and DuckLake's suite (fetched if need be), so a missing one stops us before the long build
    let suite = conformance::default_suite()?;
    eprintln!("xtask test: DuckLake's suite is {}", suite.display());
    let target = paths::target_dir();
    eprintln!(
        "xtask test: cargo test --release --workspace (CARGO_TARGET_DIR={})",
        target.display()
    );
    let status = paths::cargo_command()
        .args(["test", "--release", "--workspace"])
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(paths::workspace_root())
        .status()
        .map_err(|e| format!("running cargo: {e}"))?;
    if !status.success() {
        eprintln!("xtask test: cargo test failed ({status})");
        return Ok(false);
    }
    if !conformance::selftest()? {
        eprintln!("xtask test: the conformance runner's selftest failed");
        return Ok(false);
    }
    let a = run_e2e(true, None, "selftest")?;
    let b = run_e2e(false, None, "scenarios")?;
    let (passed, failed) = (a.passed + b.passed, a.failed + b.failed);
    println!("e2e: {passed} passed, {failed} failed");
    // DuckLake's own suite on moraine, *.test_slow included: passing it is the bar (issue 4)
    eprintln!("xtask test: DuckLake's suite with moraine as the catalog (conformance --slow)");
    let conformant = conformance::run(&["--slow".to_string()])?;
    if !conformant {
        eprintln!("xtask test: moraine failed DuckLake's suite (see docs/conformance.md)");
    }
    // and again with every lake on the S3 test server (issue 10)
    eprintln!("xtask test: DuckLake's suite with moraine's lakes on S3 (conformance --store s3)");
    let out = paths::workspace_root().join("target/conformance-s3");
    let on_s3 = conformance::run(&[
        "--slow".to_string(),
        "--store".to_string(),
        "s3".to_string(),
        "--out".to_string(),
        out.display().to_string(),
    ])?;
    if !on_s3 {
        eprintln!("xtask test: moraine on S3 failed DuckLake's suite (see docs/conformance.md)");
    }
    let verdict = |ok: bool| if ok { "passed" } else { "FAILED" };
    println!(
        "xtask test: e2e {passed} passed, {failed} failed; DuckLake's suite on moraine {}, \
         on moraine with S3 lakes {}",
        verdict(conformant),
        verdict(on_s3)
    );
    Ok(failed == 0 && conformant && on_s3)
}
