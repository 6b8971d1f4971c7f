"""What every benchmark shares: the settings of a run (the common flags), the machine header, the
shapes they train, repeated timing, interleaved A/B rounds, medians and percentiles, what /proc
says of a process, and the one table printer. Serving a checkout and driving a browser are the
other half of the harness, bench.live_server.

Speeds are compared as ratios measured side by side in one process: each round runs
every case once, in a rotated order, so a noisy neighbour or a clock change hits all
cases alike. Every figure is printed as median (min-max) over the rounds.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from minigpt import DEFAULT_PRESET, PRESETS, CharTokenizer, GPTConfig, TrainConfig, load_corpus  # all torch-free

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}  # --clock's choices
# what torch's CPU kernels dispatch on
FLAGS_OF_INTEREST = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "asimd", "sve")


@dataclass
class Stats:
    values: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def min(self) -> float:
        return min(self.values)

    @property
    def max(self) -> float:
        return max(self.values)

    def map(self, f: Callable[[float], float]) -> "Stats":
        return Stats([f(v) for v in self.values])

    def fmt(self, digits: int = 0, unit: str = "") -> str:
        """'median (min-max)' with the given number of decimals."""
        return f"{self.median:,.{digits}f}{unit} ({self.min:,.{digits}f}-{self.max:,.{digits}f})"


# ---------------------------------------------------------------- the shapes the benches train
@dataclass(frozen=True)
class Shape:
    """A model (GPTConfig's words), the batches it trains on, and the built-in corpus a bench uses by default."""

    d_model: int
    num_heads: int
    num_layers: int
    d_ff: int
    block_size: int
    batch_size: int
    dropout: float
    corpus: str

    def model(self, vocab_size: int, max_len: int | None = None) -> GPTConfig:
        """The project's model of this shape; its max_len the block unless given."""
        return GPTConfig(vocab_size=vocab_size, d_model=self.d_model, num_heads=self.num_heads,
                         num_layers=self.num_layers, d_ff=self.d_ff, max_len=max_len or self.block_size,
                         dropout=self.dropout)


# nanoGPT's "baby" GPT for a CPU (its README's Shakespeare run, 4x FFN), the shape most benches time
BABY = Shape(128, 4, 4, 512, block_size=64, batch_size=12, dropout=0.0, corpus="pydoc-en")
# the reference demo's model and batches (bench/baselines.py's DemoGPT and DemoStep)
DEMO = Shape(64, 4, 3, 256, block_size=30, batch_size=16, dropout=0.1, corpus="demo-zh")


def run_settings(corpus: str, steps: int) -> tuple[str, CharTokenizer, GPTConfig, TrainConfig]:
    """The run a learner starts on the Train page: the default preset on `corpus`, `steps` steps,
    early stopping off (so every run trains all its steps: the class challenge's), on the CPU."""
    preset = PRESETS[DEFAULT_PRESET]
    text = load_corpus(corpus)
    tokenizer = CharTokenizer.from_text(text)
    model = replace(preset.model, vocab_size=tokenizer.vocab_size).validate()
    train = replace(preset.train, max_steps=steps, early_stop_patience=0, device="cpu").validate(model)
    return text, tokenizer, model, train


# ---------------------------------------------------------------- the machine
def cpu_model() -> str:
    for line in _cpuinfo_lines():
        if line.lower().startswith(("model name", "hardware")):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    """The instruction-set flags that matter for torch's CPU kernels, as /proc/cpuinfo lists them."""
    for line in _cpuinfo_lines():
        if line.lower().startswith(("flags", "features")):
            present = set(line.split(":", 1)[1].split())
            return [f for f in FLAGS_OF_INTEREST if f in present]
    return []


def _cpuinfo_lines() -> list[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return f.read().splitlines()
    except OSError:
        return []


def has_bf16_matmul() -> bool:
    """Native bf16 dot products (AVX512-BF16 or AMX) make bf16 autocast pay on a CPU."""
    flags = set(cpu_flags())
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def lscpu_model() -> str:
    """lscpu's model name: on a VM it can differ from /proc/cpuinfo's, and the results quote it."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return "lscpu not available"
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "?")


def environment_lines() -> list[str]:
    import torch  # here, not at the top: a bench that only serves the app never loads it

    load = " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    return [
        f"torch {torch.__version__}, python {platform.python_version()}, "
        f"threads {torch.get_num_threads()} (interop {torch.get_num_interop_threads()}), "
        f"{os.cpu_count()} logical CPUs",
        f"CPU {cpu_model()}; flags: {' '.join(cpu_flags()) or 'none listed'}; "
        f"torch kernels: {torch.backends.cpu.get_cpu_capability()}",
        f"load average at start: {load}",
    ]


def print_header(title: str) -> None:
    print(title)
    print("=" * len(title))
    for line in environment_lines():
        print(line)
    print()


def add_common_args(parser: argparse.ArgumentParser, repeats: int = 5) -> argparse.ArgumentParser:
    parser.add_argument("--repeats", type=int, default=repeats, help="timed rounds per case (median reported)")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    parser.add_argument(
        "--clock", choices=CLOCKS, default="wall",
        help="wall: elapsed time (the default); cpu: this process's CPU time, steadier on a shared "
        "machine but only meaningful with --threads 1",
    )
    return parser


def clock_from(name: str) -> Callable[[], float]:
    return CLOCKS[name]


def apply_threads(threads: int) -> None:
    import torch

    if threads > 0:
        torch.set_num_threads(threads)


# ---------------------------------------------------------------- timing
def measure(fn: Callable[[], object], repeats: int = 5, warmup: int = 1, clock: Callable[[], float] = time.perf_counter) -> Stats:
    """Seconds (wall by default) of `repeats` calls of fn, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return Stats(times)


def interleave(
    cases: dict[str, Callable[[], object]], repeats: int = 5, warmup: int = 1, clock: Callable[[], float] = time.perf_counter
) -> dict[str, Stats]:
    """Seconds per call of each case, the cases run round-robin in a rotated order each round."""
    names = list(cases)
    for _ in range(warmup):
        for name in names:
            cases[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        shift = r % len(names)  # rotated each round: no case always runs first, on a cold cache
        for name in names[shift:] + names[:shift]:
            t0 = clock()
            cases[name]()
            times[name].append(clock() - t0)
    return {name: Stats(ts) for name, ts in times.items()}


def paired_ratio(slow: Stats, fast: Stats) -> Stats:
    """Per-round speed-up slow/fast of two cases timed in the same rounds (> 1: `fast` is faster)."""
    return Stats([s / f for s, f in zip(slow.values, fast.values)])  # round by round: a noisy round moves both


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a small sample: always one of the values seen."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n q / 100), at least the first
    return ordered[int(rank) - 1]


WAIT_HEADERS = ["n", "p50 s", "p95 s", "max s"]


def wait_row(label: str, seconds: Sequence[float]) -> list[object]:
    """A table row of waits, as the class benches print them: how many, p50, p95 and the worst."""
    return [label, len(seconds), f"{percentile(seconds, 50):.2f}", f"{percentile(seconds, 95):.2f}",
            f"{max(seconds):.2f}"]


# ---------------------------------------------------------------- processes, as /proc says
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc/*/stat counts in these


def status_kb(pid: int | str = "self", field: str = "VmRSS") -> int:
    """A number of /proc/PID/status (VmRSS, VmHWM in KiB; Threads); KeyError if it lacks it."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def rss_kb(pids: Iterable[int | str]) -> int:
    """Resident sets summed, in KiB (shared pages counted in each); a process gone meanwhile counts 0."""
    total = 0
    for pid in pids:
        try:
            total += status_kb(pid, "VmRSS")
        except (OSError, KeyError):  # ended, or a zombie without a memory map
            continue
    return total


def cpu_seconds(pids: Iterable[int | str], children: bool = False) -> float:
    """User + system CPU seconds of the processes (or threads, as "PID/task/TID") so far; with
    children, also their waited-for children's (a run's process counts in its fork server's)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()  # the name may hold spaces
        except OSError:  # ended meanwhile
            continue
        total += sum(int(f) for f in fields[11:15 if children else 13])  # utime stime [cutime cstime]
    return total / CLOCK_TICKS


# ---------------------------------------------------------------- output
EMPTY = "–"  # a cell (or a figure in a sentence) with nothing to show
COLUMN_GAP = "  "


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Every bench's tables: plain-text columns under a rule, the first left-aligned, the rest
    right-aligned, then a blank line; a cell of None prints as EMPTY."""
    cells = [[str(h) for h in headers]] + [[EMPTY if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]  # each column as wide as its widest cell

    def line(row: list[str]) -> str:
        return COLUMN_GAP.join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))

    print(line(cells[0]))
    print(COLUMN_GAP.join("-" * w for w in widths))
    for row in cells[1:]:
        print(line(row))
    print()


def print_row(headers: Sequence[str], row: Sequence[object]) -> None:
    """One row of a table still being measured, as a progress line ('header value, ...'), flushed at once."""
    print("  " + ", ".join(f"{h} {EMPTY if c is None else c}" for h, c in zip(headers, row)), flush=True)
