"""The app served for real: `streamlit run` of this checkout or another (`app_dir`) on a free
loopback port, and two ways to be its learner: a headless chromium, or `Session`, one tab's worth
of Streamlit's own websocket protocol (one process can play a whole class with it).

The one way this project starts a live server: the benches that need one and the tests
(tests/helpers/browser.py) both use `LiveServer`. The server only listens on 127.0.0.1; its
memory is read from /proc. Chromium is Debian's (`/usr/bin/chromium`, or $CHROMIUM), driven by
the playwright package.

`Box` puts the server, and nothing else, in a Linux control group with a hard memory limit
and/or a set of cores: the small box Streamlit Community Cloud gives an app. The kernel kills
the server if it goes over the limit (an OOM kill), as Cloud does. It needs root and cgroup v2
(memory.max, cpuset.cpus) or v1 (memory.limit_in_bytes, cpuset.cpus); where it cannot make
one it says so and stops, rather than measure without a limit.
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


from bench import REPO
from bench.common import cpu_seconds, rss_kb, status_kb

APP_DIR = REPO  # the checkout served unless another is named
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
CONNECTED = '[data-testid="stApp"][data-test-connection-state="CONNECTED"]'
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'


@dataclass
class Box:
    """A hard memory limit in MB (10^6 bytes, as Community Cloud states it) and/or cores, e.g. "0"."""

    memory_mb: int | None = None
    cpus: str | None = None
    paths: list[Path] = field(default_factory=list)  # the groups made, one per v1 controller or one v2 group

    def __enter__(self) -> "Box":
        if not (self.memory_mb or self.cpus):
            return self  # no limits: the server runs as it would anyway
        name = f"minigpt-bench-{os.getpid()}-{secrets.token_hex(3)}"  # unique: two benches may run at once
        root = Path("/sys/fs/cgroup")
        try:
            if (root / "cgroup.controllers").exists():  # v2: one group, its controllers enabled by the parent
                wanted = [c for c, on in (("memory", self.memory_mb), ("cpuset", self.cpus)) if on]
                # else the child lacks the files
                (root / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
                group = root / name
                group.mkdir()
                self.paths = [group]
                if self.memory_mb:
                    (group / "memory.max").write_text(str(self.memory_mb * 10**6))
                    if (group / "memory.swap.max").exists():  # absent where swap is not accounted
                        (group / "memory.swap.max").write_text("0")
                if self.cpus:
                    (group / "cpuset.cpus").write_text(self.cpus)
            else:  # v1: one group per controller
                if self.memory_mb:
                    group = root / "memory" / name
                    self.paths.append(group)
                    group.mkdir()
                    (group / "memory.limit_in_bytes").write_text(str(self.memory_mb * 10**6))
                if self.cpus:
                    group = root / "cpuset" / name
                    self.paths.append(group)
                    group.mkdir()
                    (group / "cpuset.cpus").write_text(self.cpus)
                    # v1 refuses tasks without it
                    (group / "cpuset.mems").write_text((group.parent / "cpuset.mems").read_text().strip())
        except OSError as error:
            self.__exit__()
            sys.exit(f"cannot make a control group for the limits ({error}): this needs root on Linux, with "
                     f"the memory and cpuset controllers")
        return self

    def __exit__(self, *exc) -> None:
        for group in reversed(self.paths):
            try:
                group.rmdir()  # empty once the server has exited; a group still in use stays
            except OSError:
                pass

    def enter_command(self) -> str:
        """Shell words that move the shell into every group before it execs the server."""
        return " && ".join(f"echo $$ > {group / 'cgroup.procs'}" for group in self.paths)  # else no server

    def peak_mb(self) -> float | None:
        """The group's peak memory (RSS and page cache the server caused), in MB."""
        for group in self.paths:
            for name in ("memory.peak", "memory.max_usage_in_bytes"):
                if (group / name).exists():
                    return int((group / name).read_text()) / 10**6
        return None

    def anon_mb(self) -> float | None:
        """The group's anonymous memory now (process memory, not the page cache the kernel can drop
        under the limit), in MB."""
        for group in self.paths:
            if (group / "memory.stat").exists():
                for line in (group / "memory.stat").read_text().splitlines():
                    key, value = line.split()
                    if key in ("anon", "total_rss"):  # v2, v1
                        return int(value) / 10**6
        return None

    def oom_kills(self) -> int:
        for group in self.paths:
            for name in ("memory.events", "memory.oom_control"):
                if (group / name).exists():
                    for line in (group / name).read_text().splitlines():
                        if line.startswith("oom_kill "):
                            return int(line.split()[1])
        return 0


class LiveServer:
    """`with LiveServer(env) as server:` serves the app until the block ends (SIGTERM, then kill)."""

    def __init__(self, env: dict[str, str] | None = None, timeout: float = 120.0, script: str = "streamlit_app.py",
                 box: Box | None = None, app_dir: Path = APP_DIR, log: Path | None = None):
        self.app_dir = app_dir  # another checkout of the app, for a before/after
        self.env = {**os.environ, "PYTHONPATH": str(app_dir), **(env or {})}
        self.box = box  # entered by the caller; the server starts inside it
        self.script = script  # another script serves as a baseline (bench.dashboard_latency's bare rerun)
        self.timeout = timeout  # how long it may take to answer its health check before it counts as broken
        self.log = log or Path(tempfile.mkdtemp(prefix="minigpt-bench-")) / "streamlit.log"
        if "MINIGPT_DATA_DIR" not in (env or {}):  # a database of its own, unless the caller shares one (a restart)
            self.env["MINIGPT_DATA_DIR"] = str(self.log.parent / "data")
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> "LiveServer":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))  # the kernel's free port; closed at once for streamlit to take
            port = s.getsockname()[1]
        command = [sys.executable, "-m", "streamlit", "run", self.script, "--server.address=127.0.0.1",
                   f"--server.port={port}", "--server.headless=true", "--browser.gatherUsageStats=false",
                   "--server.fileWatcherType=none"]  # no watcher threads: their CPU would count as the app's
        if self.box is not None and self.box.paths:  # the shell joins the groups, then becomes the server
            command = ["sh", "-c", f'{self.box.enter_command()} && exec "$@"', "sh", *command]
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(command, cwd=self.app_dir, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        self.url = f"http://127.0.0.1:{port}"
        self._wait_healthy()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {self.proc.returncode}; see {self.log}")
            try:
                with urllib.request.urlopen(self.url + "/_stcore/health", timeout=1) as response:
                    if response.read() == b"ok":
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"streamlit did not answer on {self.url} within {self.timeout} s")

    def rss_mb(self) -> float:
        """The server's resident set now, in MB of 10^6 bytes (0 once it has died)."""
        if self.proc.poll() is not None:
            return 0.0
        return status_kb(self.proc.pid, "VmRSS") * 1024 / 10**6

    def peak_rss_mb(self) -> float:
        """The server's highest resident set so far (the kernel's VmHWM), in MB of 10^6 bytes."""
        if self.proc.poll() is not None:
            return 0.0
        return status_kb(self.proc.pid, "VmHWM") * 1024 / 10**6

    def descendants(self) -> list[int]:
        """The pids of the server's child processes and theirs (a fork server, runs that train in
        processes of their own)."""
        parents = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
        found, frontier = [], [self.proc.pid]
        while frontier:
            children = [pid for pid, parent in parents.items() if parent in frontier]
            found += children
            frontier = children
        return found

    def children_rss_mb(self) -> float:
        """The resident sets of the server's descendants, summed, in MB of 10^6 bytes (pages they share
        are counted in each: the control group's peak is the one figure that counts them once)."""
        return rss_kb(self.descendants()) * 1024 / 10**6

    def threads(self) -> int:
        return status_kb(self.proc.pid, "Threads")

    def cpu_seconds(self) -> float:
        """User + system CPU time the server has used so far."""
        return cpu_seconds([self.proc.pid])

    def tree_cpu_seconds(self) -> float:
        """User + system CPU time of the server and of its descendants alive now."""
        return cpu_seconds([self.proc.pid, *self.descendants()])

    def wait_idle(self, quiet: float = 1.0, limit: float = 30.0) -> float:
        """Until the server and its children have used less than 5% of a core for `quiet` seconds
        (at most `limit`); returns the seconds waited."""
        started = time.monotonic()
        while time.monotonic() - started < limit:
            before = self.tree_cpu_seconds()
            time.sleep(quiet)
            if self.tree_cpu_seconds() - before < 0.05 * quiet:
                break
        return time.monotonic() - started

    def thread_cpu_seconds(self, name: str) -> float:
        """User + system CPU time of the server's threads named `name` in the kernel (training threads
        are, minigpt.serve.runs.thread.name_os_thread), those alive now."""
        named = []
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            try:
                if (task / "comm").read_text().strip() == name:
                    named.append(f"{self.proc.pid}/task/{task.name}")
            except OSError:  # the thread ended meanwhile
                continue
        return cpu_seconds(named)

    def stop(self, timeout: float = 15.0) -> tuple[int | None, float]:
        """SIGTERM the server (by its PID); returns its exit code and the seconds it took."""
        if self.proc is None or self.proc.poll() is not None:
            return (self.proc.returncode if self.proc else None), 0.0
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        return code, time.monotonic() - started


# ---------------------------------------------------------------- a learner's tab, without a browser
