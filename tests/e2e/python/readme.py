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
import os
import re
import shutil
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

demo_existed = os.path.exists(os.path.join(ROOT, ".moraine-demo"))
clean()
venv_python = os.path.join(ROOT, "target", "moraine-venv", "bin", "python")
outputs = []
for lang, text in order:
    if lang == "sh":
        argv, stdin = ["bash", "-e", "-c", text], None
    elif lang == "python":
        argv, stdin = [venv_python, "-c", text], None
    elif lang == "sql":
        argv, stdin = ["duckdb", "-unsigned", "-no-init"], text
    else:
        check(f"a {lang or 'plain'} block is one the test knows how to run", False, text[:200])
        continue
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=900, cwd=ROOT,
                          env=env, stdin=None if stdin is not None else subprocess.DEVNULL)
    first = text.strip().splitlines()[0]
    check(f"the README's {lang} block starting {first!r} runs as written", done.returncode == 0,
          (done.stdout[-1500:], done.stderr[-2500:]))
    outputs.append((lang, first, done.stdout))

for reason in NOT_RUN.values():
    print(f"(not run: `cargo xtask test`, {reason})")

by_first = {first: out for _, first, out in outputs}
cli = by_first.get("cargo xtask package --repo target/moraine-repo", "")
check("the CLI block shows the lake's row and moraine's version",
      "signup" in cli and VERSION in cli, cli[-1500:])
py = by_first.get("import duckdb, duckdb_extension_moraine", "")
check("the Python block prints the lake's row and moraine's version",
      py.strip() == f"[('signup', '{VERSION}')]", py)
intro = [out for lang, _, out in outputs if lang == "sql"]
check("the opening SQL block lists the lake's snapshots", len(intro) == 1 and "tables_created=[main.events]" in intro[0],
      intro)
demo = by_first.get("cargo xtask demo", "")
check("the demo runs its script and shows its rows", "signup" in demo and "refund" in demo, demo[-1500:])
check("the ducklake extension DuckDB autoloaded was the one in ~/.duckdb (nothing was fetched)",
      sorted(os.listdir(extensions)) == ["ducklake.duckdb_extension", "moraine.duckdb_extension",
                                         "moraine.duckdb_extension.info"], os.listdir(extensions))

clean()
if not demo_existed:
    shutil.rmtree(os.path.join(ROOT, ".moraine-demo"), ignore_errors=True)
finish("readme")
