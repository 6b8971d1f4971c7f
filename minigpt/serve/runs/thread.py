"""A training run in a background thread that other threads can steer and watch.

`TrainingRun` owns a `Trainer` and runs it on a daemon thread. Any thread may
`start()`, `pause()`, `resume()` and `stop()` it and read a consistent `snapshot()`.
Lessons this design encodes (each was a real bug in a prototype):
- only the optimizer step and the metrics are under the lock; forward and backward
  run unlocked (only this thread writes the parameters), so a snapshot never waits
  for a training step;
- the pause/stop flags are re-checked inside the lock before the step, so no step
  lands after pause() returns;
- readers never touch the live model: `inference_model()` clones the weights under
  the lock;
- a daemon thread inside a torch op at interpreter exit aborts the process, so an
  atexit hook stops every run, and `stop_orphaned_runs()` stops threads left behind
  by a hot reload (the stop Event is stored on the Thread object itself).
At each evaluation the run also keeps a short sample and the attention maps of a
probe text, so a learner can replay how both changed during training. Where someone set
`on_checkpoint`, it also hands over a checkpoint there, and as it ends: weights, optimizer, the
trainer's step and random state and the thread count, made on the training thread between two
steps, so that a run resumed from it goes on exactly as it would have.

A run may train at a lower CPU priority (`nice`, Linux: per thread): on a server that also
answers learners, their page runs then come first, and training takes the CPU they leave.
"""
from __future__ import annotations

import atexit
import contextlib
import copy
import ctypes
import os
import sys
import threading
import uuid
import weakref
from collections.abc import Callable

import numpy as np
import safetensors.torch
import torch

from ...checkpoint import checkpoint_files
from ...messages import Message
from ...model import MiniGPT
from ...sample import Sampling, generate
from ...train import Trainer, TrainEvent
from .recipe import SAMPLE_TEMPERATURE
from .run import EXITING, CheckpointSink, EvalRecord, RunSnapshot

THREAD_NAME = "minigpt-trainer"
PR_SET_NAME = 15  # <linux/prctl.h>
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # <malloc.h>
HEAP_BLOCK_LIMIT = 32 * 2**20  # glibc's largest M_MMAP_THRESHOLD on 64 bits: larger blocks are mapped one by one
HEAP_KEPT_BYTES = 2**30  # free memory a training process keeps between steps: more than any step of a run here frees
BEST_WEIGHTS_NAME = "best.safetensors"  # in a run's checkpoint: the best weights so far, where it stops early
_ALL_RUNS: "weakref.WeakSet[TrainingRun]" = weakref.WeakSet()
_ATEXIT_REGISTERED = False


class TrainingRun:
    """A Trainer on a background thread. Thread-safe; see the module docstring."""

    def __init__(self, trainer: Trainer, *, probe_text: str | None = None, sample_prompt: str = "",
                 sample_chars: int = 80, run_id: str | None = None, nice: int = 0,
                 on_update: "Callable[[bool], None] | None" = None, history: list[TrainEvent] = (),
                 evals: list[EvalRecord] = ()):
        """`on_update(ending)`: called on the training thread, outside the lock, after each event it records,
        and with ending=True as the thread ends (a run in a worker process sends its news to the server so).
        `history`, `evals`: what a resumed run had logged up to its checkpoint (run.Resume)."""
        self.trainer = trainer
        self._on_update = on_update
        self.on_checkpoint: CheckpointSink | None = None
        self._checkpointed = -1  # the step of the last checkpoint handed over
        self._closing = False  # close() began: the run's end makes no checkpoint
        self.nice = nice  # the training thread's niceness: 0 as the server, up to 19 (yields the most)
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.probe_ids = None
        if probe_text:
            ids = [i for i in (trainer.tokenizer.stoi.get(c) for c in probe_text) if i is not None]  # unknown: skipped
            self.probe_ids = torch.tensor([ids[: trainer.model.config.max_len]]) if ids else None  # (1, T)
        self.sample_prompt, self.sample_chars = sample_prompt, sample_chars
        self._lock = threading.Lock()  # the optimizer step, the metrics and the state: never forward/backward
        self._run, self._stop = threading.Event(), threading.Event()  # set: train; set: end the thread
        self._thread: threading.Thread | None = None  # one per start after a stop; paused, it waits alive
        self._state, self._error = "idle", None
        self._pause_at: int | None = None  # run_steps' target step
        self._history: list[TrainEvent] = list(history)
        self._evals: list[EvalRecord] = list(evals)
        self._release_on_exit = False  # closed while a step was in flight: the thread frees the trainer
        register(self)

    # -- control -----------------------------------------------------------------
    def start(self, paused: bool = False) -> None:
        """Start, or resume after pause(). A finished or failed run stays as it is. paused=True
        starts the thread at step 0 and waits there (reset: then step through it)."""
        with self._lock:
            if self._state in ("finished", "error", "closed") or self._state == "running":
                return
            if paused:
                self._run.clear()
                self._state = "paused"
            else:
                self._run.set()
                self._state = "running"
            if self._thread is not None and self._thread.is_alive():
                return  # a paused thread wakes on _run: no second thread
            self._stop.clear()
            thread = threading.Thread(target=self._loop, name=THREAD_NAME, daemon=True)
            thread.minigpt_stop = self._stop  # lets stop_orphaned_runs() reach it after a reload
            thread.minigpt_run = self._run
            self._thread = thread
            thread.start()

    def resume(self) -> None:
        self.start()

    def run_steps(self, n: int) -> None:
        """Train exactly n more steps (fewer if max_steps comes first), then pause: step through
        training and watch, like TensorFlow Playground's step button."""
        with self._lock:
            if self._state in ("finished", "error", "closed", "running"):
                return
            self._pause_at = min(self.trainer.step + n, self.trainer.cfg.max_steps)  # pause_if_due stops there
        self.start()

    def pause(self) -> None:
        with self._lock:  # a step finishing now re-checks is_running under this lock: none lands after
            self._pause_at = None
            if self._state == "running":
                self._run.clear()
                self._state = "paused"

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop the thread and wait for it (at most `timeout` seconds; None: until it has ended);
        the model keeps its weights and can start again."""
        self._stop.set()
        self._run.set()  # wake a paused loop so it can exit
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():  # the thread may stop itself
            thread.join(timeout)
        with self._lock:
            if self._state in ("running", "paused", "idle"):  # a finished or failed run says so still
                self._state = "stopped"
            self._run.clear()  # start() after a stop begins again from here

    def close(self, timeout: float | None = 5.0) -> None:
        """Stop for good and free the model, optimizer state, data and recorded attention: for a
        run that is forgotten while something may still hold the object (a page of a browser
        session that has gone keeps its last script's variables until Streamlit drops it).
        The run is closed at once; a step still in flight after `timeout` keeps the trainer until
        it ends, then the thread frees it on its way out."""
        self._closing = True  # no checkpoint as it ends: a run let go resumes from its last evaluation's
        self.stop(timeout)
        with self._lock:
            self._state = "closed"
            self._evals = []  # the attention maps: the most memory a run holds besides the model
            self.probe_ids = None
            if self.is_alive():
                self._release_on_exit = True
                return
        self.trainer.release()  # the model, optimizer and data go now; the history stays readable

    @property
    def state(self) -> str:
        with self._lock:
            return self._state

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- reading -----------------------------------------------------------------
    def snapshot(self) -> RunSnapshot:
        with self._lock:
            return RunSnapshot.of(self.run_id, self._state, step=self.trainer.step,
                                  max_steps=self.trainer.cfg.max_steps, history=self._history, evals=self._evals,
                                  elapsed=self.trainer.elapsed, error=self._error,
                                  stopped_early=self.trainer.stopped_early)

    def inference_model(self) -> MiniGPT:
        """A copy of the current weights in eval mode, safe to use while training goes on."""
        with self._lock:
            state = {k: v.detach().clone() for k, v in self.trainer.model.state_dict().items()}  # no half-step
        model = MiniGPT(copy.deepcopy(self.trainer.model.config)).to(self.trainer.device)
        model.load_state_dict(state)
        return model.eval()

    def checkpoint_parts(self) -> dict:
        """Consistent copies of what save_pretrained needs, taken under the lock."""
        with self._lock:
            model = MiniGPT(copy.deepcopy(self.trainer.model.config))
            model.load_state_dict({k: v.detach().cpu().clone() for k, v in self.trainer.model.state_dict().items()})
            optimizer_state = copy.deepcopy(self.trainer.optimizer.state_dict())  # its tensors change in place
            trainer_state = self.trainer.state_dict()
            val = self.trainer.last_val_loss
        return {"model": model.eval(), "tokenizer": self.trainer.tokenizer, "train_config": self.trainer.cfg,
                "optimizer_state": optimizer_state, "trainer_state": trainer_state, "val_loss": val}

    # -- the thread --------------------------------------------------------------
    def _loop(self) -> None:
        name_os_thread(THREAD_NAME)
        lower_priority(self.nice)
        try:
            if self.trainer.step == 0 and not self._evals:  # a resumed or restarted run has its step 0 already
                self._record_start()
            for event in self.trainer.events(gate=self):
                record = None
                if event.val_loss is not None:
                    record = EvalRecord(event.step, event.train_eval_loss, event.val_loss, *_probe(self))  # unlocked
                with self._lock:
                    self._history.append(event)
                    if record is not None:
                        self._evals.append(record)
                self._notify()  # the step and its evaluation reach the server before the checkpoint that holds them
                if record is not None and not self._stops_early_now():
                    self._checkpoint()
            with self._lock:
                if self._state != "closed" and (self.trainer.step >= self.trainer.cfg.max_steps
                                                or self.trainer.stopped_early):
                    self._state = "finished"
            self._checkpoint(ending=True)  # stopped by its owner, or ended on its best weights
        except Exception as err:  # the run reports it; the app keeps serving
            with self._lock:
                if self._state != "closed":  # a closed run's trainer was released under it: no news
                    self._state, self._error = "error", _describe_failure(err, self.trainer.step)
        finally:
            with self._lock:  # close() gave up waiting for this step: the trainer is freed here, last
                if self._release_on_exit:
                    self.trainer.release()
            return_freed_memory()  # what keep_freed_memory() kept for the next step: there is none
            self._notify(ending=True)

    def _stops_early_now(self) -> bool:
        """This evaluation ends the run on its best weights: its checkpoint waits for those."""
        trainer = self.trainer
        return trainer.step < trainer.cfg.max_steps and trainer.patience_ran_out()

    def _checkpoint(self, ending: bool = False) -> None:
        """Hand on_checkpoint the run as it is now (the training thread, between two steps): at an
        evaluation, and as the run ends where it moved since (stopped by its owner, or ended on its best
        weights). A run being closed (let go, or its server going) keeps its last evaluation's: resumed
        from there, it logs the same steps as a run that never stopped."""
        sink = self.on_checkpoint  # read once: the registry may set it to None while this runs
        if sink is None or self._state == "closed" or (ending and self._closing):
            return
        trainer = self.trainer
        with self._lock:
            step = trainer.step
            if step == 0 or (ending and step == self._checkpointed and not trainer.stopped_early):  # nothing new
                return
            last = ending or step >= trainer.cfg.max_steps  # the weights it ends on: nothing resumes from them
            files = checkpoint_files(trainer.model, trainer.tokenizer, train_config=trainer.cfg,
                                     optimizer=None if last else trainer.optimizer.state_dict(),
                                     meta={"trainer_state": trainer.state_dict(), "threads": torch.get_num_threads(),
                                           "val_loss": trainer.last_val_loss, "run_id": self.run_id,
                                           "stopped_early": trainer.stopped_early})
            if trainer.best_weights is not None and not last:  # early stopping ends on these: a resumed run too
                files[BEST_WEIGHTS_NAME] = safetensors.torch.save({k: v.contiguous() for k, v in
                                                                   trainer.best_weights.items()})
            self._checkpointed = step
        sink(step, files)  # outside the lock: the sink writes to disk, or the pipe

    def _notify(self, ending: bool = False) -> None:
        if self._on_update is not None:  # a child's or an actor's: tells the server something changed
            self._on_update(ending)

    def _record_start(self) -> None:
        """Evaluate the untrained model, so curves and the time-lapse begin at uniform attention."""
        train_loss, val_loss = self.trainer.evaluate()
        event = TrainEvent(step=0, max_steps=self.trainer.cfg.max_steps, train_loss=train_loss, lr=0.0,
                           tokens_per_sec=0.0, elapsed=0.0, val_loss=val_loss, train_eval_loss=train_loss)
        if self.trainer.scorer is not None:
            event.score = self.trainer.scorer(self.trainer)
        record = EvalRecord(0, train_loss, val_loss, *_probe(self))
        with self._lock:
            self._history.append(event)
            self._evals.append(record)
        self._notify()

    # -- the Gate that Trainer.events consults -------------------------------------
    @property
    def lock(self) -> threading.Lock:
        return self._lock

    def wait_until_running(self) -> bool:
        while not self._stop.is_set():
            if self._run.wait(timeout=0.2):  # a stop() that sets _run too wakes it; the timeout is a backstop
                return not self._stop.is_set()
        return False

    def is_running(self) -> bool:
        return self._run.is_set() and not self._stop.is_set()

    def pause_if_due(self, step: int) -> bool:
        """Called by the trainer with the lock held, after each step: pause at run_steps' target."""
        if self._pause_at is None or step < self._pause_at:
            return False
        self._pause_at = None
        self._run.clear()  # under the lock: the next step waits in wait_until_running
        self._state = "paused"
        return True



@torch.no_grad()
def _probe(run: TrainingRun) -> tuple[str, np.ndarray | None]:
    """A short sample and the probe text's attention maps, from the live model (its training thread,
    between two steps: nothing else writes the weights meanwhile)."""
    trainer = run.trainer
    model = trainer.model
    try:
        text = generate(model, trainer.tokenizer, run.sample_prompt, max_new_tokens=run.sample_chars,
                        sampling=Sampling(temperature=SAMPLE_TEMPERATURE),
                        seed=0,  # one seed at every evaluation: the samples differ only by the weights
                        block_size=trainer.cfg.block_size)
        attention = None
        if run.probe_ids is not None:
            attention = model.attention_maps(run.probe_ids.to(trainer.device)).cpu().numpy()  # (layers, heads, T, T)
    finally:
        model.train()  # generate() left it in eval mode: dropout on again for the next step
    return text, attention


def _describe_failure(err: Exception, step: int) -> Exception | Message:
    """What a learner reads when the training thread fails: the error, and what to try for
    running out of memory (a TrainingDiverged message already carries its advice)."""
    if isinstance(err, MemoryError) or "out of memory" in str(err).lower():
        text = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
        # step + 1: the step that failed, not the last one done
        return Message("out of memory at step {step} ({error}). Use a smaller batch_size, block_size or model, or "
                       "train on a device with more memory.", step=step + 1, error=text)
    return err  # its own words (a TrainingDiverged carries its advice)


def register(run: "TrainingRun") -> None:
    """Stop `run` as the interpreter exits, whatever kind of run it is (held weakly: a run let go is not kept)."""
    global _ATEXIT_REGISTERED
    if not _ATEXIT_REGISTERED:
        atexit.register(_exit)  # once, on the first run: a daemon thread inside a torch op at exit aborts
        _ATEXIT_REGISTERED = True
    _ALL_RUNS.add(run)


def _exit() -> None:
    """The interpreter exits: its runs stop, and the store is told nothing of it (run.EXITING)."""
    EXITING.set()  # first: stopping them is not news for the store
    stop_all_runs()


def stop_all_runs(timeout: float = 2.0) -> None:
    """Stop every run in this process (registered with atexit)."""
    for run in list(_ALL_RUNS):  # a copy: a run collected meanwhile leaves the WeakSet under the loop
        run.stop(timeout)


def stop_orphaned_runs(keep: "set[TrainingRun] | None" = None) -> int:
    """Stop trainer threads no live registry knows about (e.g. left by a module reload)."""
    kept = {run._thread for run in (keep or set())}  # the live registry's own threads go on
    stopped = 0
    for thread in threading.enumerate():
        # the Events ride on the Thread: a reloaded module's runs are unreachable any other way
        if thread.name == THREAD_NAME and thread not in kept and hasattr(thread, "minigpt_stop"):
            thread.minigpt_stop.set()
            thread.minigpt_run.set()  # a paused loop wakes, sees the stop, and ends
            stopped += 1
    return stopped


def name_os_thread(name: str) -> None:
    """Give the calling thread `name` in the kernel too (its first 15 bytes: ps -L, top -H, py-spy and
    /proc/<pid>/task/*/comm show it), so that a profile of the server tells training from serving.
    prctl(PR_SET_NAME) names the calling thread; elsewhere than Linux, nothing changes."""
    if sys.platform == "linux":
        with contextlib.suppress(OSError, AttributeError):
            # the kernel keeps 15 bytes and a NUL (TASK_COMM_LEN): cut here, so the start of the name is what shows
            ctypes.CDLL(None).prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def keep_freed_memory() -> bool:
    """Make this process's allocator (glibc) keep the memory a training step frees for the next step.
    By default glibc hands the top of its heap back to the kernel whenever a few MB lie free there, so
    every step faults its activations in again, page by page; a process that trains and does little else
    (a run's worker, not the server) keeps them instead, until return_freed_memory(). Elsewhere than
    glibc, nothing changes: False."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return False
    # a fixed mmap threshold stops glibc raising it (and the trim threshold with it) as it sees big frees
    return bool(mallopt(M_MMAP_THRESHOLD, HEAP_BLOCK_LIMIT)) and bool(mallopt(M_TRIM_THRESHOLD, HEAP_KEPT_BYTES))


def return_freed_memory() -> bool:
    """Hand the free memory the allocator holds back to the kernel (glibc's malloc_trim): a run that has
    ended keeps only what it still uses. Elsewhere than glibc, nothing changes: False."""
    malloc_trim = getattr(_libc(), "malloc_trim", None)
    return malloc_trim is not None and bool(malloc_trim(0))  # 0: keep no slack at the top of the heap


def _libc() -> ctypes.CDLL | None:
    if sys.platform != "linux":
        return None
    try:
        return ctypes.CDLL(None)  # the process's own symbols: glibc's, where it is glibc
    except OSError:
        return None


def lower_priority(nice: int) -> bool:
    """Lower the calling thread's CPU priority to niceness `nice` (never raise it). Linux keeps a
    niceness per thread; elsewhere, or where the kernel refuses, nothing changes: False."""
    if nice <= 0 or sys.platform != "linux":
        return False
    thread = threading.get_native_id()  # on Linux PRIO_PROCESS with a thread id sets that thread alone
    try:
        # max: never below what it has; raising a priority needs privileges the server should not use
        os.setpriority(os.PRIO_PROCESS, thread, max(nice, os.getpriority(os.PRIO_PROCESS, thread)))
    except OSError:  # refused (a sandbox): the run trains at the server's priority
        return False
    return True
