"""A training run in a worker process of its own, by default at the lowest CPU priority.

`ProcessRun` is a `TrainingRun` (runner.py) seen from the server: the same start, pause,
run_steps, stop, close, snapshot, inference_model and checkpoint_parts, and a `trainer` that
answers what pages ask of one (its configs, tokenizer, step). It trains in a child process:
- the child has its own interpreter lock, so a training step never holds the lock that a
  learner's page is waiting for;
- the child's training thread runs at niceness `CHILD_NICE` (19) unless its spec says otherwise
  (the app's MINIGPT_TRAIN_NICE), so the kernel gives the server's threads the CPU first and
  training the rest; the child's thread that answers the server (pause, weights) keeps the
  server's priority;
- children are forked from a fork server that imported torch and the model once
  (multiprocessing's forkserver, `set_forkserver_preload`), which also takes a tiny run through
  every step a run takes once (`warm_up`), so that what torch allocates on first use is shared,
  not made again in each child; children freeze what they inherit out of the garbage collector's
  walk, so a run costs its own tensors, not a second copy of torch;
- a child that dies (a kernel that crashes, the out-of-memory killer, whose first choice it is)
  ends its own run with a sentence for its owner, never the server or another run.
Inside the child a TrainingRun trains, so pausing, single steps, evaluations, the probe's
attention maps and per-run determinism are the same code as in one process. The child sends
each event and each change of state as it happens; `snapshot()` reads the server's copy and
never waits for the child. Weights come back on request, as numpy arrays.

Which one a server uses is a setting (app/state/runs.py, `MINIGPT_TRAIN_IN`).
"""
from __future__ import annotations

import contextlib
import gc
import importlib.machinery
import itertools
import multiprocessing
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ...config import GPTConfig, TrainConfig
from ...messages import Message
from ...model import MiniGPT
from ...tokenizer import CharTokenizer
from .recipe import RunSpec, resume_spec
from .remote import WEIGHTS_TIMEOUT, RemoteRun
from .trainer_side import TrainerView, build_training_run, do_command, portable, status_of
from .run import CheckpointSink, Resume
from .thread import (
    EvalRecord,
    TrainingRun,
    register,
    keep_freed_memory,
    name_os_thread,
)

CHILD_THREAD_NAME = "minigpt-run"  # the child's main thread, as ps -L and py-spy show it (training: minigpt-trainer)
OOM_SCORE_ADJ = 1000     # the out-of-memory killer's first choice is a training child, not the server
PRELOAD = ["minigpt.serve.runs.preload"]  # what the fork server imports once: this module, torch, and a warm-up
_CONTEXT: multiprocessing.context.BaseContext | None = None
_CONTEXT_LOCK = threading.Lock()


def build_run(spec: RunSpec, resume: Resume | None = None, *, in_process: bool = True) -> ProcessRun | TrainingRun:
    """The run `spec` describes, in a child process or on a thread of this one; from `resume`'s
    checkpoint, with the thread count it was saved with (the same losses need the same count), and
    what it had logged up to there."""
    if resume is not None:
        spec = resume_spec(spec, resume.files)
    history, evals = (resume.history, resume.evals) if resume is not None else ((), ())
    if in_process:
        return ProcessRun(spec, history=history, evals=evals)
    return build_training_run(spec, history, evals)


def context() -> multiprocessing.context.BaseContext:
    """The fork server (Linux, macOS) that children are forked from, preloaded with torch; where
    there is none (Windows), spawn."""
    global _CONTEXT
    with _CONTEXT_LOCK:
        if _CONTEXT is None:
            if "forkserver" in multiprocessing.get_all_start_methods():
                _CONTEXT = multiprocessing.get_context("forkserver")
                _CONTEXT.set_forkserver_preload(PRELOAD)
            else:
                _CONTEXT = multiprocessing.get_context("spawn")
        return _CONTEXT


def start_fork_server() -> None:
    """Start the fork server now (it imports torch and the model once), so that the first run
    does not wait for it."""
    ctx = context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        with _main_not_imported():
            forkserver.ensure_running()


@contextlib.contextmanager
def _main_not_imported() -> Iterator[None]:
    """A child started from the fork server runs the server's `__main__` file again before its target
    (multiprocessing's spawn preparation), unless `__main__` names itself as a module. The child needs
    nothing from it (Streamlit's launcher, a user's script), so while a child starts, it does."""
    with _CONTEXT_LOCK:
        main = sys.modules.get("__main__")
        if main is None or getattr(main, "__spec__", None) is not None:
            yield
            return
        main.__spec__ = importlib.machinery.ModuleSpec("__main__", None)
        try:
            yield
        finally:
            main.__spec__ = None


class ProcessRun(RemoteRun):
    """A TrainingRun in a child process. Thread-safe, like TrainingRun; see the module docstring.

    Starting a run is not waited for (the registry starts it under its lock); pause, run_steps,
    stop and close return once the child has done them (at most `timeout` seconds), so that, as in
    one process, no step lands after pause() returns. Only the receiving thread reaps the child."""

    def __init__(self, spec: RunSpec, *, ctx: multiprocessing.context.BaseContext | None = None,
                 history: list = (), evals: list[EvalRecord] = ()):
        """`history`, `evals`: what a resumed run had logged up to its checkpoint (run.Resume)."""
        self.run_id, self.nice, self.spec = spec.run_id, spec.nice, spec
        self.on_checkpoint: CheckpointSink | None = None
        ctx = ctx or context()
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_child_main, args=(spec, child), name=f"minigpt-run-{spec.run_id}",
                                    daemon=True)
        with _main_not_imported():
            self._process.start()
        child.close()
        try:
            kind, payload = self._conn.recv()
        except EOFError:
            self._process.join(5)
            raise RuntimeError(f"the training process ended before its run was built (exit code "
                               f"{self._process.exitcode})") from None
        if kind == "failed":  # a ConfigError or CorpusError the Trainer raised: the caller's to show
            self._process.join(5)
            raise payload
        self._lock = threading.Condition()   # the server's copy of the run, and the answers
        self._send_lock = threading.Lock()   # commands leave in the order of their numbers
        self._ids = itertools.count(1)
        self._sent = 0                       # the last command's number: the child's state is news once it has done it
        self._replies: dict[int, Any] = {}
        self._abandoned: set[int] = set()    # commands whose caller stopped waiting: their answers are dropped
        self._history: list = list(history)
        self._evals: list[EvalRecord] = list(evals)
        self._status = dict(payload, state="idle", done=0)
        self._state, self._dead = "idle", False
        self.trainer = TrainerView(self, spec)
        # the receiving thread holds the run weakly, so that a run nobody keeps is collected, and its child ended
        self._receiver = threading.Thread(target=_receive, args=(weakref.ref(self), self._conn, self._process),
                                          name=f"minigpt-run-{spec.run_id}", daemon=True)
        self._receiver.start()
        self._finalizer = weakref.finalize(self, _shut_down, self._process, self._conn)
        register(self)

    # -- control -----------------------------------------------------------------
    def start(self, paused: bool = False) -> None:
        self._command("start", paused, self.on_checkpoint is not None,
                      change=lambda state: None if state in ("finished", "error", "closed", "running")
                      else "paused" if paused else "running")

    def resume(self) -> None:
        self.start()

    def run_steps(self, n: int, timeout: float | None = 5.0) -> None:
        self._command("steps", n, change=lambda state: None if state in ("finished", "error", "closed", "running")
                      else "running", timeout=timeout)

    def pause(self, timeout: float | None = 5.0) -> None:
        self._command("pause", change=lambda state: "paused" if state == "running" else state, timeout=timeout)

    def stop(self, timeout: float | None = 5.0) -> None:
        self._command("stop", change=lambda state: "stopped" if state in ("running", "paused", "idle") else state,
                      timeout=timeout)

    def close(self, timeout: float | None = 5.0) -> None:
        """Stop for good, free the child's memory and end it (killed after `timeout` if it hangs).
        Closing twice, or a run whose child has died, is fine."""
        with self._lock:
            self._state, self._evals = "closed", []
        self._command("close", timeout=timeout)
        self._receiver.join(timeout)  # it reaps the child once the child has gone
        self._finalizer()
        self.trainer.release()

    def is_alive(self) -> bool:
        """The child's training thread is alive, or a command sent to it is not done yet (a run just
        started counts against the cap before the child has read its start)."""
        with self._lock:
            return not self._dead and (self._status["alive"] or self._status["done"] < self._sent)

    # -- reading (state, snapshot, checkpoint_parts: RemoteRun) -------------------------
    def inference_model(self) -> MiniGPT:
        model, _ = self._weights("weights")
        return model.to(self.trainer.device).eval()

    def _answer(self, op: str) -> dict | None:
        """The child's answer to `op` ("weights", "checkpoint")."""
        return self._command(op, timeout=WEIGHTS_TIMEOUT)

    # -- talking to the child ------------------------------------------------------
    def _command(self, op: str, *args: Any, change: Callable[[str], str | None] = lambda state: state,
                 timeout: float | None = 0.0) -> Any:
        """Send a command, the state it leads to set in the same step as its number (`change` of the
        current state; None: send nothing). With a timeout, wait (None: for as long as it takes) for the
        child to have done it: its answer, or None where the child has gone or is too slow."""
        with self._send_lock:
            with self._lock:
                new = change(self._state)
                if new is None or self._dead:
                    return None
                self._state = new
                self._sent = number = next(self._ids)
            try:
                self._conn.send((op, number, *args))
            except (OSError, ValueError):  # the child has gone: the receiving thread says why
                return None
        if timeout == 0.0:
            return None
        with self._lock:
            self._lock.wait_for(lambda: number in self._replies or self._dead, timeout)
            if number not in self._replies:
                self._abandoned.add(number)
            return self._replies.pop(number, None)

    def _take(self, message: tuple) -> None:
        """A message from the child (the receiving thread)."""
        kind, *rest = message
        if kind == "checkpoint":  # (step, files), handed on outside the lock: the sink may write to disk
            sink = self.on_checkpoint
            if sink is not None:
                sink(*rest)
            return
        with self._lock:
            if kind == "update":
                self._apply(*rest)
            elif rest[0] in self._abandoned:  # ("reply", number, answer) that nobody waits for any more
                self._abandoned.discard(rest[0])
            else:
                self._replies[rest[0]] = rest[1]
            self._lock.notify_all()

    def _apply(self, history: list, evals: list, status: dict) -> None:
        self._history.extend(history)
        if self._state != "closed":
            self._evals.extend(evals)
        self._status.update(status)
        if status["done"] >= self._sent and self._state != "closed":
            self._state = status["state"]  # the child has done every command sent: its state is the truth

    def _ended(self, exit_code: int | None) -> None:
        """The child has gone (the receiving thread): a run it leaves running or paused failed."""
        with self._lock:
            self._dead = True
            self._status["alive"] = False
            if self._state in ("running", "paused", "idle"):
                self._state = "error"
                self._status["error"] = Message(
                    "the training process ended unexpectedly (exit code {code}) at step {step}. The server and "
                    "other runs go on; train again, perhaps with a smaller model or batch.",
                    code=exit_code, step=self._status["step"])
            self._lock.notify_all()


def _receive(ref: "weakref.ref[ProcessRun]", conn, process: multiprocessing.process.BaseProcess) -> None:
    """The server's end of the pipe, on a thread of its own: the child's news and answers until the
    child ends (then it reaps it and tells the run), or until nobody keeps the run any more."""
    readable = True
    try:
        while True:
            message = conn.recv()
            run = ref()
            if run is None:  # collected: its finalizer ends the child
                return
            run._take(message)
            del run
    except (EOFError, OSError):
        pass
    except Exception:  # a message this server cannot read: the child is cut off, not left to wedge
        readable = False
    if not readable and process.is_alive():
        process.kill()
    process.join(5)
    run = ref()
    if run is not None:
        run._ended(process.exitcode)


def _shut_down(process: multiprocessing.process.BaseProcess, conn) -> None:
    """End a child whose ProcessRun is closed or collected: asked to close, killed if it does not."""
    if process.exitcode is None:
        with contextlib.suppress(OSError, ValueError):
            conn.send(("close", 0))
        process.join(2)
        if process.exitcode is None:
            process.kill()
            process.join(2)
    conn.close()


# -- the child ---------------------------------------------------------------------
def _child_main(spec: RunSpec, conn) -> None:
    gc.freeze()  # what the fork server loaded stays shared: no collection in the child walks (and so copies) it
    name_os_thread(CHILD_THREAD_NAME)
    with contextlib.suppress(OSError):  # under memory pressure, the kernel ends a training child before the server
        with open("/proc/self/oom_score_adj", "w") as adj:
            adj.write(str(OOM_SCORE_ADJ))
    torch.set_num_threads(spec.threads)  # its share of the CPUs: runs in every slot never oversubscribe the cores
    keep_freed_memory()  # it trains and does little else: each step reuses what the last one freed
    try:
        run = build_training_run(spec)
    except Exception as err:
        conn.send(("failed", portable(err)))
        return
    sender = _Sender(conn, run)
    run._on_update = sender.update
    trainer = run.trainer
    conn.send(("ready", {"cfg": trainer.cfg, "model_config": trainer.model_config, "model_params": trainer.model_params,
                         "device": str(trainer.device), **status_of(run)}))
    try:
        while True:
            try:
                op, number, *args = conn.recv()
            except (EOFError, OSError):  # the server has gone
                break
            try:
                answer = do_command(run, op, args, sender)
            except Exception:  # a command that fails (weights asked of a closed run) is answered with nothing
                answer = None
            sender.update(done=number)
            sender.send(("reply", number, answer))
            if op == "close":
                break
    finally:
        run.stop(timeout=None)
        conn.close()


def warm_up() -> None:
    """Take a tiny run through what every run does (build, the first evaluation with the probe's
    sample and attention, a training step, an evaluation), and end it: the fork server does this
    once, so that what torch allocates on its first use lies in the pages every child shares.
    Without it each child made those again, in memory of its own (bench/RESULTS.md, "runs in
    worker processes against runs on threads"). No thread outlives it: the fork server must fork
    with one thread."""
    torch.set_num_threads(1)  # no OpenMP pool in a process that forks; the children train on one thread too
    text = "a tiny text for the fork server's warm-up run. " * 8
    tokenizer = CharTokenizer.from_text(text)
    model = GPTConfig(vocab_size=tokenizer.vocab_size, max_len=32).validate()
    train = TrainConfig(max_steps=1, batch_size=2, block_size=16, eval_interval=1, eval_iters=1,
                        device="cpu").validate(model)
    # nice=0: the fork server forks no child until this returns, so the first run waits on it; at 19
    # beside a busy server it would get almost no CPU
    run = build_training_run(RunSpec("warm-up", model, train, tuple(tokenizer.chars), text, probe_text=text[:16],
                         sample_prompt=text[:1], sample_chars=4, nice=0))
    ended = threading.Event()
    run._on_update = lambda ending: ending and ended.set()
    try:
        run.start()
        ended.wait()
        failed = run.state != "finished"
        error = run.snapshot().error
    finally:
        run.close(timeout=None)  # joins the training thread, whatever happened
    if failed:
        raise RuntimeError(f"the fork server's warm-up run did not finish: {error}")
    gc.collect()  # the warm-up run's cycles go now: each child's gc.freeze() would keep them for good


class _Sender:
    """The child's end: sends what is new since the last message, in the order it happened."""

    def __init__(self, conn, run: TrainingRun):
        self.conn, self.run = conn, run
        self.lock = threading.Lock()
        self.history = self.evals = 0
        self.done = 0  # the last command done

    def update(self, ending: bool = False, done: int | None = None) -> None:
        """`ending`: the training thread's last word, sent while it is still alive, as not alive."""
        with self.lock:  # the snapshot is taken and sent under one lock: messages leave in the order they say
            if done is not None:
                self.done = done
            snap = self.run.snapshot()
            history, evals = snap.history[self.history:], snap.evals[self.evals:]
            self.history, self.evals = len(snap.history), len(snap.evals)
            status = status_of(self.run, snap)
            status.update(done=self.done, alive=status["alive"] and not ending)
            self._send(("update", history, evals, status))

    def send(self, message: tuple) -> None:
        with self.lock:
            self._send(message)

    def checkpoint(self, step: int, files: dict[str, bytes]) -> None:
        """The run's checkpoint, to the server (it reaches it in order with the run's news)."""
        self.send(("checkpoint", step, files))

    def _send(self, message: tuple) -> None:
        try:
            self.conn.send(message)
        except (OSError, ValueError):
            pass  # the server has gone; the command loop ends on its own


