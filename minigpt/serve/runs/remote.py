"""A run that trains out of the server's process, in a child (process.ProcessRun) or a Ray actor
(ray_run.RayRun): the server's half, `RemoteRun`, which steers its trainer through a `Channel` and
answers pages from its copy of the trainer's news. A backend writes its channel (a pipe, actor
calls) and the pool its trainers live in (a fork server, the cluster's actors); the steering, the
numbering of commands and the reading are here, once. What the trainer does on its side is
trainer_side.py. No torch here until weights are read: Home looks runs up before torch has loaded."""
from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from .recipe import corpus_val_windows
from .run import RunSnapshot

if TYPE_CHECKING:
    from ...messages import Message
    from ...model import MiniGPT
    from .recipe import RunSpec
    from .run import CheckpointSink, EvalRecord

WEIGHTS_TIMEOUT = 60.0  # seconds a page waits for the weights of a run that trains out of this process
NOT_STARTABLE = ("finished", "error", "closed", "running")  # start and run_steps send nothing to a run in these
LIVE = ("running", "paused", "idle")  # a run in one of these that loses its trainer has failed; stop() stops it


class Channel(Protocol):
    """The server's end of the line to one run's trainer: process.PipeChannel (a pipe to a child),
    ray_run.ActorChannel (calls to a Ray actor). What comes back it hands to its run, on a thread of
    its own: `_news` (steps, evaluations, status), `_checkpoint_made`, and `_ended` once the trainer
    has gone."""

    where: str  # what the run's weights could not be read from, in an error

    def send(self, op: str, number: int, args: tuple) -> Future:
        """Command `number` to the trainer, after every lower number (the run sends them so); the future
        gives its answer, or raises where none will come (the trainer has gone)."""

    def let_go(self, kill: bool, timeout: float | None) -> None:
        """Free what holds the trainer (its process, its actor) once the commands sent are done; `kill`:
        it did not answer, so it is ended rather than reused. Waits up to `timeout` (0: not at all)."""

    def lost(self, cause: Any, step: int) -> Message:
        """The sentence the owner of a run reads whose trainer went mid-run (`cause`: an exit code, an error)."""


class RemoteRun:
    """A run whose trainer is out of this process, as the server holds it (run.Run): steered through
    its `channel`, read from the server's copy of what its trainer sent. Thread-safe.

    A backend builds its channel and its trainer, then calls `_open` with the trainer's first facts
    (configs, parameters, device, status), and answers `_answer(op)`: the trainer's answer to "weights"
    or "checkpoint" (numpy arrays), None where it has gone or did not answer in WEIGHTS_TIMEOUT.

    Each command is numbered as it leaves, and the state it leads to is set here in the same step:
    a page sees "paused" as soon as it pressed Pause. The trainer says which number it has done last
    (`done` in its status); until it has done the last one sent, its own state is older than ours,
    so ours stands; from then on, its state is the truth (it finished, it failed)."""

    _notice: Message | None = None  # what happened to the run that its owner should know (it moved machines)
    _final: dict | None = None  # its weights, kept as it ended, where its trainer was let go then (ray_run)

    def _open(self, spec: RunSpec, channel: Channel, facts: dict, history: list = (),
              evals: list[EvalRecord] = ()) -> None:
        """The server's copy of `spec`'s run, its trainer reached through `channel` and built already
        (`facts`: its first status); `history`, `evals`: what a resumed run had logged (run.Resume)."""
        self.run_id, self.spec, self.channel = spec.run_id, spec, channel
        self.on_checkpoint: CheckpointSink | None = None
        self._lock = threading.Condition()  # the server's copy of the run; notified at every news and answer
        self._send_lock = threading.Lock()  # commands leave in the order of their numbers (taken before _lock)
        self._ids = itertools.count(1)
        self._sent = 0  # the last command's number: the trainer's state is news once it has done it
        self._history: list = list(history)
        self._evals: list[EvalRecord] = list(evals)
        self._status = dict(facts, state="idle")
        self._state, self._dead, self._closing = "idle", False, False  # dead: the trainer is gone (or let go)
        self._wants_checkpoints = False  # said with each start: a trainer that replaces a lost one is told again
        self.trainer = TrainerView(self, spec)

    # -- steering ----------------------------------------------------------------------------------
    def start(self, paused: bool = False) -> None:
        with self._lock:
            self._wants_checkpoints = self.on_checkpoint is not None
        self._command("start", paused, self._wants_checkpoints,
                      change=lambda state: None if state in NOT_STARTABLE else "paused" if paused else "running")

    def resume(self) -> None:
        self.start()

    def run_steps(self, n: int, timeout: float | None = 5.0) -> None:
        self._command("steps", n, change=lambda state: None if state in NOT_STARTABLE else "running",
                      timeout=timeout)

    def pause(self, timeout: float | None = 5.0) -> None:
        # waited for: as in one process, no step lands after pause() returns
        self._command("pause", change=lambda state: "paused" if state == "running" else state, timeout=timeout)

    def stop(self, timeout: float | None = 5.0) -> None:
        self._command("stop", change=lambda state: "stopped" if state in LIVE else state, timeout=timeout)

    def close(self, timeout: float | None = 5.0) -> None:
        """Stop for good, free what it holds and let its trainer go (ended where it does not answer within
        `timeout`). Closing twice, or a run whose trainer has gone, is fine."""
        with self._lock:
            if self._closing:  # a second close (the registry, a page's session going) finds it done
                return
            self._closing = True
            training = not self._dead  # not yet let go as it ended, nor lost
        closed = self._command("close", change=lambda state: "closed", timeout=timeout) if training else True
        with self._lock:
            self._state, self._evals, self._dead, self._final = "closed", [], True, None
            self._status["alive"] = False
            self._lock.notify_all()
        self._let_go(kill=closed is None, timeout=timeout)  # a trainer that did not answer is ended, not reused
        self.trainer.release()

    def is_alive(self) -> bool:
        """Its trainer's training thread is alive, or a command sent to it is not done yet (a run just
        started counts against the cap before its trainer has read its start)."""
        with self._lock:
            return not self._dead and (self._status["alive"] or self._status["done"] < self._sent)

    def _command(self, op: str, *args: Any, change: Callable[[str], str | None] = lambda state: state,
                 timeout: float | None = 0.0) -> Any:
        """Send a command, the state it leads to set in the same step as its number (`change` of the
        current state; None: send nothing). With a timeout, wait (None: for as long as it takes) for the
        trainer to have done it: its answer, or None where the trainer has gone or is too slow."""
        with self._send_lock:  # numbered and sent in one step: the trainer gets them in order
            with self._lock:
                new = change(self._state)
                if new is None or self._dead:
                    return None
                self._state = new
                self._sent = number = next(self._ids)
            # sent outside _lock: a full pipe waits for the trainer, whose news needs _lock to be read
            answer = self.channel.send(op, number, args)
        if timeout == 0.0:  # start: not waited for (the registry starts runs under its own lock)
            return None
        with contextlib.suppress(Exception):  # too slow, or the trainer has gone: the channel says why
            return answer.result(timeout)
        return None

    def _let_go(self, kill: bool, timeout: float | None = 0.0) -> None:
        # every command numbered before this has left once the send lock is free, and none leaves after
        # (`_dead` is set): the channel is let go, waiting outside the lock, so that a page asking for
        # weights meanwhile is answered None at once instead of waiting for the trainer to end
        with self._send_lock:
            pass
        self.channel.let_go(kill, timeout)

    # -- what the channel hands back (its own thread) -----------------------------------------------
    def _news(self, history: list, evals: list, status: dict) -> None:
        """New steps and evaluations, and the status after them, in the order the trainer logged them."""
        with self._lock:
            self._history.extend(history)
            if self._state != "closed":  # a closed run let its evaluations (attention maps) go
                self._evals.extend(evals)
            self._take_status(status)
            self._lock.notify_all()

    def _take_status(self, status: dict) -> None:
        """The trainer's status (with `_lock` held)."""
        self._status.update(status)
        if status["done"] >= self._sent and self._state != "closed":
            self._state = status["state"]  # the trainer has done every command sent: its state is the truth

    def _checkpoint_made(self, step: int, files: dict[str, bytes]) -> None:
        sink = self.on_checkpoint  # None: the registry has no store, so nothing is kept
        if sink is not None:  # outside the lock: the sink may write to disk
            sink(step, files)

    def _ended(self, cause: Any) -> None:
        """The trainer has gone (`cause`: what the channel knows of why): a run it leaves live failed."""
        with self._lock:
            self._dead = True
            self._status["alive"] = False
            if self._state in ("running", "paused", "idle"):
                self._state = "error"
                self._status["error"] = self.channel.lost(cause, self._status["step"])
            self._lock.notify_all()  # a command waiting on the trainer gets nothing

    # -- reading ---------------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        with self._lock:
            return self._state

    def snapshot(self) -> RunSnapshot:
        with self._lock:
            status = self._status
            return RunSnapshot.of(self.run_id, self._state, step=status["step"], max_steps=self.spec.train.max_steps,
                                  history=self._history, evals=self._evals, elapsed=status["elapsed"],
                                  error=status["error"], stopped_early=status["stopped_early"], notice=self._notice)

    def checkpoint_parts(self) -> dict:
        from .trainer_side import to_torch  # torch: only once weights are read

        model, parts = self._weights("checkpoint")
        return {"model": model.eval(), "tokenizer": self.trainer.tokenizer, "train_config": self.trainer.cfg,
                "optimizer_state": to_torch(parts["optimizer_state"]), "trainer_state": parts["trainer_state"],
                "val_loss": parts["val_loss"]}

    def _answer(self, op: str) -> dict | None:
        """The trainer's answer to `op` ("weights", "checkpoint")."""
        return self._command(op, timeout=WEIGHTS_TIMEOUT)

    def _weights(self, op: str) -> tuple[MiniGPT, dict]:
        """The trainer's answer to `op`, its weights loaded into a model here."""
        from ...model import MiniGPT
        from .trainer_side import to_torch
        answer = self._answer(op)
        if answer is None:
            raise RuntimeError(f"run {self.run_id}'s {self.channel.where} has ended or did not answer in "
                               f"{WEIGHTS_TIMEOUT} s, so its weights cannot be read")
        model = MiniGPT(self.trainer.model_config)
        model.load_state_dict(to_torch(answer["model"]))  # numpy arrays: what crosses a pipe or Ray by value
        return model, answer

    def _facts(self) -> dict:  # what TrainerView reads: step, elapsed, best_val...
        with self._lock:
            return self._status


class TrainerView:
    """What a page reads from `run.trainer` (the configs, the tokenizer, step, best validation loss),
    answered in the server; the validation windows are drawn here the way the Trainer draws them."""

    def __init__(self, run: RemoteRun, spec: RunSpec):
        import torch  # a run is being built: torch has loaded

        self._run, self._spec = run, spec
        self.tokenizer = spec.tokenizer
        facts = run._status  # the trainer's first facts: the configs as it validated them (its device)
        self.cfg, self.model_config = facts["cfg"], facts["model_config"]
        self.model_params, self.corpus_chars = facts["model_params"], len(spec.text)
        self.device = torch.device(facts["device"])  # the trainer's: a run on a cluster's GPU says "cuda"
        self._val_windows, self._released = None, False

    def __getattr__(self, name: str) -> Any:  # step, elapsed, stopped_early, best_val, last_val_loss
        if name in ("step", "elapsed", "stopped_early", "best_val", "last_val_loss"):
            return self._run._facts()[name]  # read at each use: they change as the run trains
        raise AttributeError(name)

    @property
    def val_windows(self):
        if self._released:  # a closed run: a page that still holds it reads nothing, rather than a fresh copy
            return None
        if self._val_windows is None:  # drawn on first use: Home never needs them
            self._val_windows = corpus_val_windows(replace(self._spec, train=self.cfg))
        return self._val_windows

    def release(self) -> None:
        self._val_windows, self._released = None, True
