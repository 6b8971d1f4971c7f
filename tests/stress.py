"""Run test suites again and again on a busy machine, and count how often they pass.

A test that waits on time passing instead of on the condition it needs fails when the machine
is busier than its author's was. This script makes the machine busy on purpose: it starts CPU-bound
processes (by default two, one per core of a 2-core CI box) and runs each chosen suite N times in a
row beside them, every run in a fresh pytest process with CI=true (the browser tests may not skip).

    python tests/stress.py --runs 20                      # the browser tests, the threaded tests, the worker processes
    python tests/stress.py --runs 5 --suite all           # the whole suite, as the README runs it
    python tests/stress.py --runs 3 --command "bash .ci/run"

It prints each run as it ends and then, per suite, "N of N passed"; the output of a failed run is
kept in a log folder it names, with the run's temporary files (the browser tests' screenshots,
a failure's own among them, and the server's log). Exit status 0 only if every run of every suite passed. Not a test
module itself (pytest collects test_*.py only).
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITES = {
    "browser": ["-m", "browser"],     # every test that drives chromium: the browser file, the drawn figures, SIGTERM
    "threads": ["tests/minigpt/serve/test_thread.py", "tests/minigpt/serve/test_registry.py"],  # the runner and registry
    "processes": ["tests/minigpt/serve/test_process.py"],  # runs in child processes: a pipe, a fork server, a killed child
    "trains": ["-m", "trains"],       # every test that starts a training thread, app pages included
    "all": [],                        # the README's test command: everything
}
HOG = "while True: pass"


def start_hogs(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(n)]


def run_once(command: list[str], log: Path) -> tuple[bool, float, str]:
    started = time.monotonic()
    if "pytest" in command:  # the run's temporary files beside its log, where no other pytest cleans them up
        command = [*command, f"--basetemp={log.with_suffix('')}"]
    with log.open("w") as out:
        done = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                              env={**os.environ, "CI": "true", "OMP_NUM_THREADS": "1"})
    text = log.read_text(errors="replace")
    summary = next((line.strip("= ") for line in reversed(text.splitlines()) if re.search(r"\d+ (passed|failed)", line)),
                   f"exit status {done.returncode}")
    failed = sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", text, re.MULTILINE)))
    return done.returncode == 0, time.monotonic() - started, summary + ("; " + ", ".join(failed) if failed else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="runs of each suite (default 20)")
    parser.add_argument("--suite", action="append", choices=sorted(SUITES),
                        help="a suite to run (repeatable; default: browser, threads and processes)")
    parser.add_argument("--command", action="append", default=[], help="a shell command to run as a suite instead")
    parser.add_argument("--hogs", type=int, default=2, help="CPU-bound processes beside the runs (default 2)")
    args = parser.parse_args()
    suites = {name: [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *SUITES[name]]
              for name in (args.suite or ([] if args.command else ["browser", "threads", "processes"]))}
    suites.update({command: shlex.split(command) for command in args.command})
    logs = Path(tempfile.mkdtemp(prefix="minigpt-stress-"))
    print(f"{args.hogs} CPU-bound processes beside {args.runs} runs of each of: {', '.join(suites)}; logs in {logs}",
          flush=True)
    hogs = start_hogs(args.hogs)
    passes = {}
    try:
        for name, command in suites.items():
            passes[name] = 0
            for n in range(1, args.runs + 1):
                log = logs / f"{re.sub(r'[^A-Za-z0-9]+', '_', name)}-{n:02d}.log"
                ok, seconds, summary = run_once(command, log)
                passes[name] += ok
                if ok:
                    log.unlink()
                    shutil.rmtree(log.with_suffix(""), ignore_errors=True)
                print(f"{name} run {n}: {'passed' if ok else 'FAILED'} in {seconds:.0f} s ({summary})", flush=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    print()
    for name, count in passes.items():
        print(f"{name}: {count} of {args.runs} passed")
    return 0 if all(count == args.runs for count in passes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
