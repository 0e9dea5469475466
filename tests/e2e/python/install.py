"""Installing moraine the way DuckDB users install extensions (issue 12), each step in a fresh
process with nothing preloaded:

- the stock CLI installs moraine from the extension repository `cargo xtask package --repo`
  writes (INSTALL moraine FROM '<repo>'), loads it by name, and `duckdb_extensions()` shows it
  installed and loaded with moraine's version, which `moraine_version()` also returns;
- in a new CLI process, and in a new Python process, `ATTACH 'ducklake:moraine:...'` loads
  DuckLake and moraine by itself (DuckDB autoloads the extension a database type names);
- the wheel `cargo xtask wheel` writes installs with pip into a new virtual environment beside
  duckdb==1.5.5 (from a local wheelhouse: nothing is fetched), and a few lines of Python attach
  a lake with it;
- every moraine knob is a DuckDB setting with a description, and an ATTACH option moraine does
  not know is refused with the list of known ones.

The CLI and Python share one extension directory in TEST_DIR, so nothing outside it is read or
written. Run by `cargo xtask e2e`.
"""
# needs: moraine_dist
import os
import subprocess
import sys

from _harness import DUCKLAKE, TEST_DIR, check, finish

CLI = os.environ["DUCKDB_CLI"]
REPO = os.environ["MORAINE_REPO"]
WHEEL = os.environ["MORAINE_WHEEL"]
VERSION = "v" + os.environ["MORAINE_VERSION"]
WHEELHOUSE = os.environ["WHEELHOUSE"]
EXTDIR = os.path.join(TEST_DIR, "extensions")
# DuckDB may install a known extension by itself when it is missing: never here
QUIET = f"SET autoinstall_known_extensions = false; SET extension_directory = '{EXTDIR}';"


def python(exe, body, env=None):
    """Runs `body` in a fresh `exe` process, after `import duckdb` and a connection `con` that
    allows unsigned extensions, installs nothing by itself and uses EXTDIR; (rc, stdout, stderr)."""
    code = (
        "import duckdb\n"
        "con = duckdb.connect(config={'allow_unsigned_extensions': 'true', "
        f"'autoinstall_known_extensions': 'false', 'extension_directory': {EXTDIR!r}}})\n" + body
    )
    done = subprocess.run([exe, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    return done.returncode, done.stdout.strip(), done.stderr[-2000:]


def cli(sql):
    done = subprocess.run([CLI, "-unsigned", "-no-init", "-csv", "-noheader", "-c", QUIET + sql],
                          capture_output=True, text=True, timeout=120, cwd=TEST_DIR)
    return done.returncode, done.stdout.strip(), done.stderr.strip()


# ---- INSTALL FROM the repository, LOAD by name -----------------------------------------------
check("the repository has DuckDB's layout",
      os.path.isfile(os.path.join(REPO, "v1.5.5", "linux_amd64", "moraine.duckdb_extension.gz")))
rc, out, err = cli(f"INSTALL moraine FROM '{REPO}'; INSTALL '{DUCKLAKE}'; LOAD moraine; "
                   "SELECT loaded, installed, extension_version, install_mode FROM duckdb_extensions() "
                   "WHERE extension_name = 'moraine'; SELECT moraine_version();")
check("the stock CLI installs moraine from the repository and loads it by name", rc == 0, err)
check("duckdb_extensions() shows it installed and loaded, with moraine's version",
      out.splitlines()[:1] == [f"true,true,{VERSION},REPOSITORY"], out)
check("moraine_version() is that version", out.splitlines()[1:] == [VERSION], out)

# ---- autoload on ATTACH ----------------------------------------------------------------------
lake = os.path.join(TEST_DIR, "cli-lake")
rc, out, err = cli(f"ATTACH 'ducklake:moraine:{lake}/meta' AS lake (DATA_PATH '{lake}/data/'); "
                   "CREATE TABLE lake.t AS SELECT 42 AS answer; SELECT answer FROM lake.t; "
                   "SELECT extension_name FROM duckdb_extensions() WHERE loaded "
                   "AND extension_name IN ('ducklake', 'moraine') ORDER BY 1;")
check("a new CLI process attaches a moraine lake without LOAD: DuckDB loads DuckLake and moraine",
      rc == 0 and out.splitlines() == ["42", "ducklake", "moraine"], (out, err))
rc, out, err = python(sys.executable, f"con.execute(\"ATTACH 'ducklake:moraine:{lake}/meta' AS lake\")\n"
                     "print(con.execute('SELECT answer FROM lake.t').fetchone()[0])\n")
check("a new Python process attaches the same lake without LOAD", rc == 0 and out == "42", (out, err))

# ---- settings and options --------------------------------------------------------------------
rc, out, err = cli("LOAD moraine; SELECT name FROM duckdb_settings() WHERE name LIKE 'moraine%' "
                   "AND length(description) > 20 ORDER BY 1;")
check("every moraine knob is a DuckDB setting with a description",
      out.splitlines() == ["moraine_compression", "moraine_io_timeout", "moraine_log_level",
                           "moraine_max_commit_size",
                           "moraine_reader_poll_interval", "moraine_reclaim_interval"], (out, err))
rc, out, err = cli(f"ATTACH 'moraine:{TEST_DIR}/opt' AS m (POLL_FAST true);")
check("an ATTACH option moraine does not know is refused with the known ones",
      rc != 0 and "poll_fast" in err.lower() and "READ_ONLY / READ_WRITE, and SECRET" in err, err)

# ---- the wheel in a fresh virtual environment -------------------------------------------------
# the virtual environment sees none of the host's packages (PYTHONPATH names the pinned duckdb)
CLEAN = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
venv = os.path.join(TEST_DIR, "venv")
subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=300, env=CLEAN)
pip = subprocess.run(
    [os.path.join(venv, "bin", "pip"), "install", "--quiet", "--disable-pip-version-check",
     "--no-index", "--find-links", WHEELHOUSE, WHEEL],
    capture_output=True, text=True, timeout=600, env=CLEAN)
check("the wheel installs with pip into a new virtual environment, pulling duckdb==1.5.5",
      pip.returncode == 0, pip.stderr[-2000:])
wheel_lake = os.path.join(TEST_DIR, "wheel-lake")
VENV_PYTHON = os.path.join(venv, "bin", "python")
rc, out, err = python(
    VENV_PYTHON,
    "import duckdb_extension_moraine\n"
    "duckdb_extension_moraine.load(con)\n"
    f"con.execute(\"ATTACH 'ducklake:moraine:{wheel_lake}/meta' AS lake (DATA_PATH '{wheel_lake}/data/')\")\n"
    "con.execute('CREATE TABLE lake.t AS SELECT 7 AS n')\n"
    "print(duckdb.__version__, con.execute('SELECT n, moraine_version() FROM lake.t').fetchone())\n",
    env=CLEAN)
check("a few lines of Python in that environment attach a lake with the wheel's moraine",
      rc == 0 and out == f"1.5.5 (7, '{VERSION}')", (out, err))

# install(con): into an extension directory that already holds moraine from the repository (so
# a plain INSTALL would be refused for its other origin); a later process's ATTACH loads it
rc, out, err = python(
    VENV_PYTHON,
    "import duckdb_extension_moraine\n"
    "duckdb_extension_moraine.install(con)\n"
    "print(con.execute(\"SELECT install_mode FROM duckdb_extensions() WHERE extension_name = 'moraine'\").fetchone()[0])\n",
    env=CLEAN)
check("the wheel's install(con) installs its moraine over the one from the repository",
      rc == 0 and out == "CUSTOM_PATH", (out, err))
rc, out, err = cli(f"ATTACH 'ducklake:moraine:{wheel_lake}/meta' AS lake; SELECT n FROM lake.t;")
check("... and a new process's ATTACH loads it by itself", rc == 0 and out == "7", (out, err))

finish("install")
