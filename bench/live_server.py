"""The app served for real: `streamlit run` on a free loopback port, and a headless chromium.

Shared by the benchmarks that need a browser (abandoned_runs.py, concurrent_sessions.py). The
server only listens on 127.0.0.1; its memory is read from /proc. Chromium is Debian's
(`/usr/bin/chromium`, or $CHROMIUM), driven by the playwright package.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

APP_DIR = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
CONNECTED = '[data-testid="stApp"][data-test-connection-state="CONNECTED"]'
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'


class LiveServer:
    """`with LiveServer(env) as server:` serves the app until the block ends (SIGTERM, then kill)."""

    def __init__(self, env: dict[str, str] | None = None, timeout: float = 60.0, script: str = "streamlit_app.py"):
        self.env = {**os.environ, "PYTHONPATH": str(APP_DIR), **(env or {})}
        self.script = script  # another script serves as a baseline (bench.inside_latency's bare rerun)
        self.timeout = timeout
        self.log = Path(tempfile.mkdtemp(prefix="minigpt-bench-")) / "streamlit.log"
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> "LiveServer":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "streamlit", "run", self.script, "--server.address=127.0.0.1",
                 f"--server.port={port}", "--server.headless=true", "--browser.gatherUsageStats=false",
                 "--server.fileWatcherType=none"],
                cwd=APP_DIR, stdout=log, stderr=subprocess.STDOUT, env=self.env)
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

    def _status(self, field: str) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise KeyError(field)

    def rss_mb(self) -> float:
        return self._status("VmRSS") / 1024

    def threads(self) -> int:
        return self._status("Threads")

    def cpu_seconds(self) -> float:
        """User + system CPU time the server has used so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

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


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a small sample."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]
