"""The README's code blocks, run exactly as written (issue 12, part 5), so the README cannot rot.

Every fenced block of README.md is taken from the file and run from the clone's root: `sh`
blocks with bash (-e: a failing command fails the block), `python` blocks with the virtual
environment an earlier block made, `sql` blocks through the stock CLI (`duckdb -unsigned`).
SQL blocks run last, after the install they rely on; identical blocks run once. The one block
not run is `cargo xtask test`: it is the command that runs this test.

What the blocks write goes under `target/` (and `.moraine-demo`), removed before and after. The
environment stands in for a user's machine without letting anything leave it: `duckdb` on PATH
is the pinned CLI; HOME is a scratch directory whose `~/.duckdb` already holds the pinned
DuckLake extension (what DuckDB would otherwise fetch from its repository the first time an
ATTACH names `ducklake:`); pip reads only the local wheelhouse (PIP_NO_INDEX, PIP_FIND_LINKS);
MORAINE_EXTENSION makes `cargo xtask package` and `wheel` use the extension under test.
"""
# needs: moraine_dist
import fcntl
import os
import re
import shutil
import signal
import subprocess

from _harness import DUCKLAKE, MORAINE, TEST_DIR, check, finish

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
README = open(os.path.join(ROOT, "README.md")).read()
VERSION = "v" + os.environ["MORAINE_VERSION"]
WRITES = ["target/moraine-repo", "target/quickstart", "target/moraine-wheels", "target/moraine-venv",
          "target/quickstart-py", "target/lake"]
NOT_RUN = {"cargo xtask test\n": "it is the command that runs this test"}


def clean():
    for rel in WRITES:
        shutil.rmtree(os.path.join(ROOT, rel), ignore_errors=True)


home = os.path.join(TEST_DIR, "home")
extensions = os.path.join(home, ".duckdb", "extensions", "v1.5.5", "linux_amd64")
os.makedirs(extensions)
shutil.copy(DUCKLAKE, os.path.join(extensions, "ducklake.duckdb_extension"))
bindir = os.path.join(TEST_DIR, "bin")
os.makedirs(bindir)
os.symlink(os.environ["DUCKDB_CLI"], os.path.join(bindir, "duckdb"))
real_home = os.path.expanduser("~")
env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
env.update({
    "HOME": home,
    "PATH": bindir + os.pathsep + env.get("PATH", ""),
    # cargo and the caches stay where they are: only DuckDB's ~/.duckdb moves
    "CARGO_HOME": env.get("CARGO_HOME", os.path.join(real_home, ".cargo")),
    "RUSTUP_HOME": env.get("RUSTUP_HOME", os.path.join(real_home, ".rustup")),
    "CARGO_TARGET_DIR": env.get("CARGO_TARGET_DIR", os.path.join(real_home, ".cache", "moraine", "target")),
    "MORAINE_CACHE": env.get("MORAINE_CACHE", os.path.join(real_home, ".cache", "moraine")),
    "MORAINE_EXTENSION": MORAINE,
    "PIP_NO_INDEX": "1",
    "PIP_FIND_LINKS": os.environ["WHEELHOUSE"],
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
})

blocks = [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```", README, re.M | re.S)]
check("the README has code blocks in the three languages",
      {"sh", "python", "sql"} <= {lang for lang, _ in blocks}, [lang for lang, _ in blocks])
seen, order = set(), []
for lang, text in blocks:
    if text in NOT_RUN or (lang, text) in seen:
        continue
    seen.add((lang, text))
    order.append((lang, text))
order.sort(key=lambda b: b[0] == "sql")  # stable: SQL last, the rest in the README's order

venv_python = os.path.join(ROOT, "target", "moraine-venv", "bin", "python")
installed = os.path.join(extensions, "moraine.duckdb_extension")


def run(lang, text):
    """Runs one block in its own process group (a timeout kills cargo and duckdb under it too)."""
    if lang == "sh":
        argv, stdin = ["bash", "-e", "-c", text], None
    elif lang == "python":
        argv, stdin = [venv_python, "-c", text], None
    else:
        argv, stdin = ["duckdb", "-unsigned", "-no-init"], text
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(stdin, timeout=900)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err += "\n(killed after 900 s)"
    return proc.returncode, out, err


outputs = {}
# one run at a time per clone; a demo lake of the user's own is set aside and put back
lock = open(os.path.join(ROOT, "target", ".readme-test.lock"), "w") if os.path.isdir(
    os.path.join(ROOT, "target")) else None
if lock is None:
    os.makedirs(os.path.join(ROOT, "target"), exist_ok=True)
    lock = open(os.path.join(ROOT, "target", ".readme-test.lock"), "w")
fcntl.flock(lock, fcntl.LOCK_EX)
demo = os.path.join(ROOT, ".moraine-demo")
aside = os.path.join(TEST_DIR, "moraine-demo-aside")
if os.path.exists(demo):
    shutil.move(demo, aside)
try:
    clean()
    for lang, text in order:
        first = text.strip().splitlines()[0]
        if lang not in ("sh", "python", "sql"):
            check(f"a {lang or 'plain'} block is one the test knows how to run", False, text[:200])
            break
        if lang == "sql" and not os.path.isfile(installed):
            # ATTACH would have DuckDB fetch moraine from its own repository: never from here
            check("moraine is installed in ~/.duckdb before the SQL blocks run", False, os.listdir(extensions))
            break
        code, out, err = run(lang, text)
        check(f"the README's {lang} block starting {first!r} runs as written", code == 0,
              (out[-1500:], err[-2500:]))
        if code != 0:
            break  # the blocks after it build on it
        outputs[first] = (lang, out)
finally:
    clean()
    shutil.rmtree(demo, ignore_errors=True)
    if os.path.exists(aside):
        shutil.move(aside, demo)
    fcntl.flock(lock, fcntl.LOCK_UN)

for reason in NOT_RUN.values():
    print(f"(not run: `cargo xtask test`, {reason})")

cli = outputs.get("cargo xtask package --repo target/moraine-repo", ("", ""))[1]
check("the CLI block shows the lake's row with moraine's version",
      any("signup" in l and VERSION in l for l in cli.splitlines()), cli[-1500:])
py = outputs.get("import duckdb, duckdb_extension_moraine", ("", ""))[1]
check("the Python block prints the lake's row and moraine's version",
      py.strip() == f"[('signup', '{VERSION}')]", py)
intro = [out for lang, out in outputs.values() if lang == "sql"]
check("the opening SQL block lists the lake's snapshots",
      len(intro) == 1 and "tables_created=[main.events]" in intro[0], intro)
demo_out = outputs.get("cargo xtask demo", ("", ""))[1]
check("the demo runs its script and shows its rows", "signup" in demo_out and "refund" in demo_out,
      demo_out[-1500:])
check("~/.duckdb holds just the pinned DuckLake and the moraine the blocks installed",
      sorted(os.listdir(extensions)) == ["ducklake.duckdb_extension", "moraine.duckdb_extension",
                                         "moraine.duckdb_extension.info"], os.listdir(extensions))
finish("readme")
