"""Where a run trains, named once: the surface the registry, its line and the pages use of a run.

Two protocols, because not every run trains:
- `RunView` is what a page reads of any run: its id, state, snapshot, a weight copy, the parts of
  a checkpoint, and `trainer` (the configs, the tokenizer, the step: see `TrainerFacts`). A run
  waiting in line (line.WaitingRun) and a finished run kept small (kept.KeptRun) are views.
- `Run` is a view that trains and is steered: start, pause, resume, run_steps, stop, close.
  `TrainingRun` trains on a thread of the server (thread.py), `ProcessRun` in a child process
  (process.py), `RayRun` in an actor on a Ray cluster (ray_run.py); the registry starts whichever
  the server is set to, through a build function.

`RemoteRun` (remote.py) is the server's half of the two that train out of this process (ProcessRun,
RayRun): the same steering and reading, through a channel each backend writes (a pipe, actor calls).

tests/minigpt/serve/test_run_interface.py is the one suite every implementation passes.
"""
from __future__ import annotations

import statistics
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: a run's snapshot is read on Home, before torch has loaded
    import numpy as np

    from ...config import GPTConfig, TrainConfig
    from ...messages import Message
    from ...model import MiniGPT
    from ...tokenizer import CharTokenizer
    from ...train import TrainEvent

ACTIVE_STATES = ("running", "paused")      # a run in one of these holds a training slot
ENDED_STATES = ("finished", "stopped", "error")  # a run in one of these trains no more: it can be kept small
INTERRUPTED = "interrupted"  # a run that was training when its server stopped: its owner may resume it (stored.py)
# set as the interpreter exits, before its runs are stopped: what stopping them does to their state
# (stopped, or an error where a child process went with its server) is not news for the store, so a
# server stopped and started again finds them interrupted, as after a kill
EXITING = threading.Event()

# where a run hands each checkpoint it makes (at every evaluation, and as it ends): its step and files
# (minigpt.checkpoint.checkpoint_files), called on the thread that trains, or the one that hears the child
CheckpointSink = Callable[[int, dict[str, bytes]], None]


@dataclass
class EvalRecord:
    """What the model did at one evaluation: losses, a sample, the probe's attention."""

    step: int
    train_loss: float
    val_loss: float
    sample: str
    attention: np.ndarray | None = None  # (layers, heads, T, T) float32 for the probe text


@dataclass(frozen=True)
class Resume:
    """Where a run goes on from: a checkpoint's files, and what it had logged up to that checkpoint."""

    files: dict[str, bytes] = field(repr=False)
    history: list[TrainEvent] = field(default_factory=list, repr=False)
    evals: list[EvalRecord] = field(default_factory=list, repr=False)


@dataclass
class RunSnapshot:
    """A run as it was at one moment, consistent: what every page draws from."""

    run_id: str
    state: str                      # waiting, idle, running, paused, stopped, finished, error, closed
    step: int
    max_steps: int
    history: list[TrainEvent]
    evals: list[EvalRecord]
    tokens_per_sec: float           # median of the last few logged intervals: steady, not jumpy
    elapsed: float
    error: Exception | Message | None = None   # why the run stopped with an error: a sentence to show
    stopped_early: bool = False     # early_stop_patience ran out before max_steps
    notice: Message | None = None   # what happened to the run that its owner should know (it moved machines)

    @classmethod
    def of(cls, run_id: str, state: str, *, step: int, max_steps: int, history: Iterable[TrainEvent] = (),
           evals: Iterable[EvalRecord] = (), elapsed: float = 0.0, tokens_per_sec: float | None = None,
           error: Exception | Message | None = None, stopped_early: bool = False,
           notice: Message | None = None) -> RunSnapshot:
        """How every kind of run describes itself. The logs are copied, since the run goes on logging
        into its own; the tokens/s shown is the steady median of the history unless the run kept one."""
        history = list(history)  # a copy: the run appends to its own list after this returns
        speed = steady_speed(history) if tokens_per_sec is None else tokens_per_sec
        return cls(run_id, state, step, max_steps, history, list(evals), speed, elapsed, error, stopped_early, notice)

    @property
    def progress(self) -> float:
        return self.step / self.max_steps if self.max_steps else 0.0  # 0 steps planned: nothing done, not 1/0

    @property
    def eta_seconds(self) -> float | None:
        """Remaining time at this run's average pace so far, None before the first step."""
        if self.step == 0 or self.elapsed <= 0:
            return None
        return (self.max_steps - self.step) * self.elapsed / self.step


@runtime_checkable
class TrainerFacts(Protocol):
    """What pages read of `run.trainer`, whatever trains the run (a Trainer answers it itself)."""

    cfg: TrainConfig
    model_config: GPTConfig
    tokenizer: CharTokenizer
    model_params: int
    corpus_chars: int
    step: int
    elapsed: float
    stopped_early: bool
    last_val_loss: float | None
    best_val: tuple[int, float]
    val_windows: Any  # the validation windows the run measures on (minigpt.data.Windows), None once released


@runtime_checkable
class RunView(Protocol):
    """A run as pages read it. Thread-safe: any thread may call any of these at any time."""

    run_id: str
    trainer: TrainerFacts

    @property
    def state(self) -> str: ...  # waiting, idle, running, paused, stopped, finished, error, closed

    def is_alive(self) -> bool: ...  # something is training it, or about to

    def snapshot(self) -> RunSnapshot: ...

    def inference_model(self) -> MiniGPT: ...  # a copy of its weights now, in eval mode

    def checkpoint_parts(self) -> dict: ...  # model, tokenizer, train_config, optimizer_state, trainer_state, val_loss

    def close(self, timeout: float | None = 5.0) -> None: ...  # forgotten: free what it holds


@runtime_checkable
class Run(RunView, Protocol):
    """A run that trains, steered by its owner through the registry. Before start(), a registry with a
    store sets its `on_checkpoint` (a CheckpointSink; TrainingRun and ProcessRun start with None): the
    run then hands it a checkpoint at every evaluation and as its owner stops it, what a restarted
    server resumes it from."""

    def start(self, paused: bool = False) -> None: ...

    def resume(self) -> None: ...

    def pause(self) -> None: ...

    def run_steps(self, n: int) -> None: ...  # exactly n more steps, then paused

    def stop(self, timeout: float | None = 5.0) -> None: ...


SPEED_WINDOW = 7  # logged intervals the shown tokens/s is the median of



def steady_speed(history: list[TrainEvent], window: int = SPEED_WINDOW) -> float:
    """The tokens per second a learner is shown: the median of the last `window` logged intervals,
    which a single slow interval (an evaluation, a busy moment) does not move; 0 before the first."""
    speeds = [e.tokens_per_sec for e in history[-window:] if e.step > 0]  # step 0 is the untrained evaluation
    return statistics.median(speeds) if speeds else 0.0
