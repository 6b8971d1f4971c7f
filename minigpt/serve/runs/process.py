"""A training run in a worker process of its own, by default at the lowest CPU priority.

`ProcessRun` is a `TrainingRun` (thread.py) seen from the server: the same start, pause,
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

Which one a server uses is a setting (`MINIGPT_TRAIN_IN`, read by server.ServerSettings).
"""
from __future__ import annotations

import contextlib
import gc
import importlib.machinery
import multiprocessing
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import torch

from ...config import GPTConfig, TrainConfig
from ...messages import Message
from ...model import MiniGPT
from ...tokenizer import CharTokenizer
from .recipe import RunSpec, resume_spec
from .remote import RemoteRun
from .trainer_side import build_training_run, do_command, portable, status_of
from .run import Resume
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
_CONTEXT: multiprocessing.context.BaseContext | None = None  # made on first use: nothing runs at import
_CONTEXT_LOCK = threading.Lock()
Connect = Callable[[RunSpec], "PipeChannel"]  # starts a run's trainer process; back once it has built its run


def build_run(spec: RunSpec, resume: Resume | None = None, *, in_process: bool = True,
              connect: Connect | None = None) -> ProcessRun | TrainingRun:
    """The run `spec` describes, in a child process or on a thread of this one; from `resume`'s
    checkpoint, with the thread count it was saved with (the same losses need the same count), and
    what it had logged up to there. `connect`: how its trainer process is started (None: forked)."""
    if resume is not None:
        spec = resume_spec(spec, resume.files)
    history, evals = (resume.history, resume.evals) if resume is not None else ((), ())
    if in_process:  # the server's setting (MINIGPT_TRAIN_IN): a child, or a thread of this process
        return ProcessRun(spec, history=history, evals=evals, connect=connect)
    return build_training_run(spec, history, evals)


def context() -> multiprocessing.context.BaseContext:
    """The fork server (Linux, macOS) that children are forked from, preloaded with torch; where
    there is none (Windows), spawn."""
    global _CONTEXT
    with _CONTEXT_LOCK:
        if _CONTEXT is None:
            if "forkserver" in multiprocessing.get_all_start_methods():
                # not fork: the server has threads (Streamlit's, the runs'), and forking a threaded process
                # copies locks held by threads that do not exist in the child
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
                 history: list = (), evals: list[EvalRecord] = (), connect: Connect | None = None):
        """`history`, `evals`: what a resumed run had logged up to its checkpoint (run.Resume); `connect`:
        how its trainer process starts where a backend starts it apart, else forked from the fork server."""
        self.nice = spec.nice
        # either way the trainer process has built its run when the channel is back
        channel = connect(spec) if connect is not None else fork(spec, ctx or context())
        self._open(spec, channel, channel.facts, history, evals)
        channel.listen(self)
        register(self)  # stopped as the server exits, like every run

    @property
    def _process(self) -> multiprocessing.process.BaseProcess:
        return self.channel._process

    def inference_model(self) -> MiniGPT:
        model, _ = self._weights("weights")
        return model.to(self.trainer.device).eval()


def fork(spec: RunSpec, ctx: multiprocessing.context.BaseContext) -> PipeChannel:
    """A pipe to a child forked from the fork server, once it has built `spec`'s run."""
    conn, child = ctx.Pipe()
    process = ctx.Process(target=child_main, args=(spec, child), name=f"minigpt-run-{spec.run_id}", daemon=True)
    with _main_not_imported():
        process.start()
    child.close()  # the child's end lives in the child: EOF here once it has gone
    return PipeChannel(process, conn)


class PipeChannel:
    """The server's end of a connection to a run's trainer process (remote.Channel): commands out; its
    news, checkpoints and answers in, on a receiving thread that hands them to the run and, once the
    process has gone, reaps it and ends the run. The connection is a pipe to a forked child, or a socket
    to a process started apart: multiprocessing.connection's, either way."""

    where = "training process"  # what the run's weights could not be read from, in an error

    def __init__(self, process: multiprocessing.process.BaseProcess, conn):
        """Wait until `process`, at the other end of `conn` and running child_main, has built its run:
        `facts` is what it said; the run's own ConfigError or CorpusError is raised here, for the caller
        to show. `process` needs only is_alive, kill, join and exitcode."""
        self._conn, self._process = conn, process
        try:
            kind, payload = self._conn.recv()
        except EOFError:
            self._process.join(5)
            raise RuntimeError(f"the training process ended before its run was built (exit code "
                               f"{self._process.exitcode})") from None
        if kind == "failed":  # a ConfigError or CorpusError the Trainer raised: the caller's to show
            self._process.join(5)
            raise payload
        self.facts = dict(payload, done=0)  # no command done yet
        self._answers: dict[int, Future] = {}  # command number -> its answer, while the child has not given it
        self._answers_lock = threading.Lock()

    def listen(self, run: RemoteRun) -> None:
        """Hand `run` what the child says from now on. The channel holds its run; the receiving thread
        holds the channel weakly, so that a run nobody keeps is collected, and its child ended."""
        self.run = run
        self._receiver = threading.Thread(target=_receive, args=(weakref.ref(self), self._conn, self._process),
                                          name=f"minigpt-run-{run.run_id}", daemon=True)
        self._receiver.start()
        self._finalizer = weakref.finalize(self, _shut_down, self._process, self._conn)

    def send(self, op: str, number: int, args: tuple) -> Future:
        answer: Future = Future()
        with self._answers_lock:  # filed before it leaves: the answer may come back at once
            self._answers[number] = answer
        try:
            self._conn.send((op, number, *args))
        except (OSError, ValueError):  # the child has gone: the receiving thread says why
            self._answered(number, None)
        return answer

    def let_go(self, kill: bool, timeout: float | None) -> None:
        """The run is closed: the child has been asked to close; wait for it to end, then end it for sure."""
        self._receiver.join(timeout)  # it reaps the child once the child has gone
        self._finalizer()

    def lost(self, cause: Any, step: int) -> Message:
        return Message("the training process ended unexpectedly (exit code {code}) at step {step}. The server and "
                       "other runs go on; train again, perhaps with a smaller model or batch.", code=cause, step=step)

    def _take(self, message: tuple) -> None:
        """A message from the child (the receiving thread), in the order the child sent it."""
        kind, *rest = message
        if kind == "checkpoint":  # (step, files)
            self.run._checkpoint_made(*rest)
        elif kind == "update":  # (history, evals, status)
            self.run._news(*rest)
        else:  # ("reply", number, answer): after the update that says it is done
            self._answered(*rest)

    def _answered(self, number: int, answer: Any) -> None:
        with self._answers_lock:
            waiting = self._answers.pop(number, None)  # nobody waits for one sent with no timeout: dropped here
        if waiting is not None:
            waiting.set_result(answer)

    def _ended(self, exit_code: int | None) -> None:
        """The child has gone (the receiving thread): a run it leaves running or paused failed, and no
        command waits any more."""
        self.run._ended(exit_code)
        with self._answers_lock:
            waiting, self._answers = list(self._answers.values()), {}
        for answer in waiting:
            answer.set_result(None)


def _receive(ref: "weakref.ref[PipeChannel]", conn, process: multiprocessing.process.BaseProcess) -> None:
    """The server's end of the pipe, on a thread of its own: the child's news and answers until the
    child ends (then it reaps it and tells the run), or until nobody keeps the run any more."""
    readable = True
    try:
        while True:
            message = conn.recv()
            channel = ref()
            if channel is None:  # collected with its run: its finalizer ends the child
                return
            channel._take(message)
            del channel  # held only while a message is handed on
    except (EOFError, OSError):
        pass
    except Exception:  # a message this server cannot read: the child is cut off, not left to wedge
        readable = False
    if not readable and process.is_alive():
        process.kill()
    process.join(5)
    channel = ref()
    if channel is not None:
        channel._ended(process.exitcode)


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
def child_main(spec: RunSpec, conn) -> None:
    """Build `spec`'s run and do what the server at the other end of `conn` says, until it closes it."""
    gc.freeze()  # what the fork server loaded stays shared: no collection in the child walks (and so copies) it
    name_os_thread(CHILD_THREAD_NAME)
    with contextlib.suppress(OSError):  # under memory pressure, the kernel ends a training child before the server
        with open("/proc/self/oom_score_adj", "w") as adj:
            adj.write(str(OOM_SCORE_ADJ))
    torch.set_num_threads(spec.threads)  # its share of the CPUs: runs in every slot never oversubscribe the cores
    keep_freed_memory()  # it trains and does little else: each step reuses what the last one freed
    try:
        run = build_training_run(spec)
    except Exception as err:  # a ConfigError or CorpusError: raised in the server, where Start was pressed
        conn.send(("failed", portable(err)))
        return
    sender = _Sender(conn, run)
    run._on_update = sender.update  # each logged step goes to the server as it happens: no polling
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
            sender.update(done=number)  # the status that says it is done, before the answer the server waits for
            sender.send(("reply", number, answer))
            if op == "close":
                break
    finally:
        run.stop(timeout=None)  # the training thread ends before the child does: torch is never cut mid-op
        conn.close()


def warm_up() -> None:
    """Take a tiny run through what every run does (build, the first evaluation with the probe's
    sample and attention, a training step, an evaluation), and end it: the fork server does this
    once, so that what torch allocates on its first use lies in the pages every child shares.
    Without it each child made those again, in memory of its own (bench/RESULTS.md, "runs in
    worker processes against runs on threads"). No thread outlives it: the fork server must fork
    with one thread."""
    torch.set_num_threads(1)  # no OpenMP pool in a process that forks; the children train on one thread too
    text = "a tiny text for the fork server's warm-up run. " * 8  # long enough for a block and a validation split
    tokenizer = CharTokenizer.from_text(text)
    model = GPTConfig(vocab_size=tokenizer.vocab_size, max_len=32).validate()
    train = TrainConfig(max_steps=1, batch_size=2, block_size=16, eval_interval=1, eval_iters=1,
                        device="cpu").validate(model)
    # nice=0: the fork server forks no child until this returns, so the first run waits on it; at 19
    # beside a busy server it would get almost no CPU
    run = build_training_run(RunSpec("warm-up", model, train, tuple(tokenizer.chars), text, probe_text=text[:16],
                         sample_prompt=text[:1], sample_chars=4, nice=0))
    ended = threading.Event()
    run._on_update = lambda ending: ending and ended.set()  # the thread's last word: it has trained and evaluated
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
        self.lock = threading.Lock()  # the training thread and the command loop both send
        self.history = self.evals = 0  # how many of each the server has: only what is new is sent
        self.done = 0  # the last command done

    def update(self, ending: bool = False, done: int | None = None) -> None:
        """`ending`: the training thread's last word, sent while it is still alive, as not alive."""
        with self.lock:  # the snapshot is taken and sent under one lock: messages leave in the order they say
            if done is not None:  # the command loop's; the training thread's updates repeat the last
                self.done = done
            snap = self.run.snapshot()
            history, evals = snap.history[self.history:], snap.evals[self.evals:]
            self.history, self.evals = len(snap.history), len(snap.evals)
            status = status_of(self.run, snap)
            status.update(done=self.done, alive=status["alive"] and not ending)  # is_alive() is still True here
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


