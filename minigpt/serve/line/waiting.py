"""The line of runs waiting for a training slot: what a waiting run is, and when it may start.

A server trains at most as many runs at once as it has slots; every other Start waits in line,
first in, first out (the registry keeps the order and starts the head when a slot frees). A
waiting run is a `WaitingRun`: the `RunSpec` of what it will train, and the function that builds
the real run when its turn comes. Pages read it like any run (run.RunView): step 0, state
"waiting", the untrained model it will start from.

`start_in` answers "when will mine start?" from what is known now: each busy slot's time left
(a training run's remaining steps at its own measured pace), then each run ahead in line taking
the first slot that frees, for its steps at the pace this server measured for runs of its shape
(`SpeedBook`). No torch here: Home reads the line before torch has loaded.
"""
from __future__ import annotations

import heapq
import math
import statistics
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..runs.recipe import PlannedTrainer, RunSpec, work_per_step
from ..runs.run import RunSnapshot

if TYPE_CHECKING:
    from ...model import MiniGPT
    from ..runs.run import Run

MIN_STEPS_MEASURED = 10  # a training run's own pace counts once it has trained this many steps
WHOLE_RUNS = 5           # whole runs of a shape whose median pace the estimates use


class WaitingRun:
    """A run in line: its spec, and `build`, which makes the real run when a slot is its (run.RunView)."""

    def __init__(self, run_id: str, spec: RunSpec, build: Callable[[str], Run], paused: bool = False):
        self.run_id, self.spec, self.build, self.paused = run_id, spec, build, paused
        self.trainer = PlannedTrainer(spec)  # step 0 of max_steps: pages read it as they read a real trainer
        self._state, self._error = "waiting", None

    @property
    def state(self) -> str:
        """waiting (in line), starting (its slot is its own, the run is being built), error, or closed."""
        return self._state

    def take(self) -> None:
        """Its turn has come: out of the line, being built."""
        self._state = "starting"

    def fail(self, error: Exception) -> None:
        """Building it failed: its owner reads why."""
        self._state, self._error = "error", error

    def is_alive(self) -> bool:
        return False  # no thread nor process yet: it holds no slot (the registry counts "starting" itself)

    def snapshot(self) -> RunSnapshot:
        return RunSnapshot.of(self.run_id, self._state, step=0, max_steps=self.spec.max_steps, error=self._error)

    def inference_model(self) -> MiniGPT:
        """The model the run will start from: its initial weights, from its seed."""
        from ...train import build_model  # torch: only when a page shows the model, never at import

        return build_model(self.spec.model, self.spec.train.seed, self.spec.train.device).eval()

    def checkpoint_parts(self) -> dict:
        return {"model": self.inference_model(), "tokenizer": self.spec.tokenizer, "train_config": self.spec.train,
                "optimizer_state": None, "trainer_state": {"step": 0}, "val_loss": None}  # a checkpoint at step 0

    def close(self, timeout: float | None = 5.0) -> None:
        self._state = "closed"  # nothing to stop; a build under way finds its entry gone and closes what it built


@dataclass(frozen=True)
class Pace:
    """Steps per second for a shape of run, and whether a run of that very shape was measured."""

    steps_per_sec: float
    measured: bool  # False: scaled from another shape's pace by the work per step, a rough figure


class SpeedBook:
    """The pace this server has measured, per shape of run. A whole run's pace (its steps over the
    seconds from its slot to its end: building it, every evaluation, sample and time-lapse frame
    counted) is what an estimate needs: the median of the last WHOLE_RUNS of a shape. Before any
    run has finished, the pace of runs training now stands in, as a rough figure. Thread-safe."""

    def __init__(self) -> None:
        self._whole: dict[tuple, deque[float]] = {}  # shape -> steps per second of its last whole runs
        self._training: dict[tuple, float] = {}      # shape -> the latest training run's own pace
        self._lock = threading.Lock()

    def finished(self, shape: tuple, steps: int, seconds: float) -> None:
        """A run of `shape` trained all its `steps` in `seconds` from its slot to its end."""
        if steps > 0 and seconds > 0:  # a run stopped at step 0 says nothing about a pace
            with self._lock:
                self._whole.setdefault(shape, deque(maxlen=WHOLE_RUNS)).append(steps / seconds)

    def training(self, shape: tuple, step: int, elapsed: float) -> None:
        """A run of `shape` training now has trained `step` steps in `elapsed` seconds of training."""
        if step >= MIN_STEPS_MEASURED and elapsed > 0:  # the first steps are slow (warm-up, compilation)
            with self._lock:
                self._training[shape] = step / elapsed

    def pace(self, shape: tuple) -> Pace | None:
        """This shape's whole-run pace (measured); else the nearest measured shape's scaled by the work per
        step, or a training run's (rough); None before any run has trained."""
        with self._lock:
            if shape in self._whole:
                return Pace(statistics.median(self._whole[shape]), True)
            # another shape's whole runs beat any training run's pace: they count evaluations and building
            paces = {s: statistics.median(p) for s, p in self._whole.items()} or dict(self._training)
        if not paces:
            return None
        want = work_per_step(shape)
        # the nearest in work per step, on a log scale: twice as much work is as far as half as much
        near = min(paces, key=lambda s: abs(math.log(work_per_step(s) / want)))
        return Pace(paces[near] * work_per_step(near) / want, False)


@dataclass(frozen=True)
class Estimate:
    """When a waiting run should start: seconds from now, and whether a figure behind it was a guess."""

    seconds: float
    rough: bool


@dataclass(frozen=True)
class Progress:
    """A busy slot as an estimate reads it: its run's steps done of max_steps in `elapsed` seconds of
    training; `since`, seconds since the slot was granted; `paused`, its owner may hold it for as long
    as they like."""

    step: int
    max_steps: int
    elapsed: float = 0.0
    since: float = 0.0
    paused: bool = False


def start_in(slots: int, busy: list[float], ahead: list[float]) -> float:
    """Seconds until the next run after `ahead` gets a slot. `busy`: each training run's time left;
    `ahead`: each waiting run's training time, in line order. With more runs training than slots
    (the server was given fewer), the first ones to end free nothing."""
    ends = sorted(busy)
    # the slots as they free: only the last `slots` ends free one; an idle slot is free now (0 seconds)
    free = ends[len(ends) - slots:] if len(ends) > slots else ends + [0.0] * (slots - len(ends))
    heapq.heapify(free)
    for seconds in ahead:  # each run ahead takes the first slot to free, and holds it for its training time
        heapq.heappush(free, heapq.heappop(free) + seconds)
    return free[0]


def time_left(busy: Progress, pace: Pace | None) -> tuple[float, bool] | None:
    """A busy slot's time left and whether it is rough. With its shape's whole-run pace: a whole run's
    time less what it has held the slot (a run past that: its own pace's remaining steps). Else its
    own pace once it has one, rough: its evaluations to come are not in it yet. None without either."""
    own = busy.step >= MIN_STEPS_MEASURED and busy.elapsed > 0  # its own pace counts by now
    remaining = max(busy.max_steps - busy.step, 0)  # a run given fewer steps meanwhile may be past them
    if pace is not None and pace.measured:
        left = busy.max_steps / pace.steps_per_sec - busy.since
        if left <= 0 and own:  # slower than its shape's runs: its own pace says how long it still needs
            left = remaining * busy.elapsed / busy.step
        return max(left, 0.0), busy.paused  # a paused run may resume any time: its figure is a guess
    if own:  # rough: its evaluations to come are not in its pace yet
        return remaining * busy.elapsed / busy.step, True
    if pace is None:
        return None  # nothing measured at all: no figure beats a wrong one
    return max(remaining / pace.steps_per_sec - busy.since, 0.0), True


def estimate(slots: int, busy: list[tuple[Progress, Pace | None]], ahead: list[tuple[int, Pace | None, bool]]
             ) -> Estimate | None:
    """`start_in` from what the registry knows: each busy slot's progress and its shape's pace, and each
    waiting run's steps, its shape's pace and whether it will start paused (then its time is anyone's
    guess). None while a figure cannot be had at all."""
    lefts: list[float] = []
    rough = False
    for progress, pace in busy:
        left = time_left(progress, pace)
        if left is None:
            return None  # one slot without a figure makes every figure after it unknown
        lefts.append(left[0])
        rough |= left[1]
    durations: list[float] = []
    for steps, pace, paused in ahead:
        if pace is None:
            return None
        durations.append(steps / pace.steps_per_sec)
        rough |= paused or not pace.measured  # a run that starts paused holds its slot as long as its owner likes
    return Estimate(start_in(slots, lefts, durations), rough)
