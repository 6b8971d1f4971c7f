"""Runs on a Ray cluster: each run is a Ray actor, placed by Ray on a machine with a free CPU (or a
share of a GPU), and steered from the dashboard like a run on a thread or in a child process.

`RayRun` is a `Run` (run.py) seen from the dashboard, as `ProcessRun` (worker.py) is: the same
start, pause, run_steps, stop, close, snapshot, inference_model and checkpoint_parts, and a
`trainer` that answers what pages ask. Inside its actor a `TrainingRun` trains (the same code as on
the box), built from the same `RunSpec`. Between them only Ray travels:
- news (logged steps, evaluations, state) comes back through one waiting call at a time, which the
  actor answers as soon as something changed, or after `NEWS_WAIT` seconds;
- commands leave one at a time, in order, from a thread of the run's own, so a page never waits on
  the cluster except where it asks for an answer (weights), and then at most `WEIGHTS_TIMEOUT`;
- weights, checkpoints and snapshots come back through Ray's object store, never a shared disk.
A run whose machine leaves the cluster goes on from its last checkpoint on another machine (its
owner sees a notice); a run whose actor fails while its machine stays (the out-of-memory killer, a
crash) ends with an error, as a child process that dies does. A run that fails in training (NaN)
fails inside its TrainingRun, as anywhere.

`connect` joins a cluster (`ray.init`) after checking it can be reached and that every machine in it
runs the dashboard's Python, Ray, torch and minigpt; `Cluster.size` is what the line's slots come
from. Ray is optional (requirements-cluster.txt): nothing here imports it until it is used.
"""
from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import platform
import re
import queue
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...messages import LabError, Message
from .recipe import resume_spec
from .remote import WEIGHTS_TIMEOUT, RemoteRun
from .run import ENDED_STATES, CheckpointSink, EvalRecord, Resume, RunSnapshot

INSTALL = "pip install -r requirements-cluster.txt"  # what brings Ray, at the version this code is tested with
CONNECT_SECONDS = 5.0     # how long connecting may take before the dashboard trains on its own box
PLACE_SECONDS = 120.0     # how long a run waits for a machine (a new actor: a worker process, torch, the model)
NEWS_WAIT = 0.5           # the longest the actor holds a call for news before it answers "nothing new"
NAMESPACE = "minigpt"     # the Ray namespace the dashboard's actors live in
NODE_GRACE = 10.0         # seconds the cluster has to see a machine gone, once an actor on it has died
IDLE_ACTOR_SECONDS = 600.0  # a warm actor no run has needed this long is ended, and its CPU freed


LOG = logging.getLogger(__name__)  # where addresses go: the server's log, never a learner's page


class ClusterError(LabError, RuntimeError):
    """The cluster cannot be used: not installed, unreachable, or running other versions."""


@dataclass(frozen=True)
class Size:
    """What the cluster has now: machines alive, and their CPUs and GPUs."""

    machines: int
    cpus: float
    gpus: float

    def slots(self, gpu_per_run: float = 0.0) -> int:
        """How many runs train at once: one per CPU, or, where runs take a share of a GPU, as many as the
        GPUs hold (each run still takes a CPU)."""
        by_cpu = int(self.cpus + 1e-9)
        if gpu_per_run <= 0:
            return by_cpu
        return min(by_cpu, int(self.gpus / gpu_per_run + 1e-9))


def versions() -> dict[str, str]:
    """What must be the same on the dashboard and on every machine of the cluster."""
    import ray
    import torch

    python = ".".join(platform.python_version_tuple()[:2])  # a patch release apart is fine, as Ray itself allows
    return {"Python": python, "Ray": ray.__version__, "torch": torch.__version__.split("+")[0],
            "minigpt": code_version()}


def code_version() -> str:
    """minigpt's source, as a short digest: a run's spec and news travel as Python objects, so the
    machines must run the same code as the dashboard."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def differences(ours: dict[str, str], theirs: dict[str, str]) -> list[tuple[str, str, str]]:
    """(name, ours, theirs) for each version that differs."""
    return [(name, ours[name], theirs.get(name, "?")) for name in ours if ours[name] != theirs.get(name)]


class Cluster:
    """The cluster this dashboard is connected to (`connect`)."""

    def __init__(self, address: str, gpu_per_run: float = 0.0):
        self.address, self.gpu_per_run = address, gpu_per_run
        self._idle: list = []  # warm actors between runs: a run placed on one starts without a new process
        self._idle_since: dict = {}  # when each went idle: one idle for IDLE_ACTOR_SECONDS is ended (prune)
        self._idle_lock = threading.Lock()

    def place(self, spec) -> tuple[Any, dict]:
        """An actor with `spec`'s run built in it, and its first facts: a warm one between runs where
        there is one (also one handed back while a new one waited for a CPU), else a new one wherever
        Ray finds room, within PLACE_SECONDS. The run's ConfigError or CorpusError is raised here,
        ClusterError where no machine takes it."""
        import ray

        device = "cuda" if self.gpu_per_run > 0 else None
        deadline = time.monotonic() + PLACE_SECONDS
        pending = None  # a new actor, and its load, that Ray has not placed yet
        while True:
            with self._idle_lock:
                actor = self._idle.pop() if self._idle else None
            if actor is not None:
                if pending is not None:  # not needed after all: its CPU stays free
                    ray.kill(pending[0])
                    pending = None
                try:
                    left = max(deadline - time.monotonic(), 1.0)
                    return self._loaded(actor, ray.get(actor.load.remote(spec, device), timeout=left))
                except ray.exceptions.RayError:  # gone with its machine, or stuck: ended; another, or a new one
                    with contextlib.suppress(Exception):
                        ray.kill(actor)
                    if time.monotonic() > deadline:
                        raise ClusterError("No machine of the cluster took run {run} within {seconds:.0f} s: every "
                                           "CPU is busy, or the machines have left.", run=spec.run_id,
                                           seconds=PLACE_SECONDS) from None
                    continue
            if pending is None:
                new = _actor_class().options(num_cpus=1, num_gpus=self.gpu_per_run, namespace=NAMESPACE).remote()
                pending = (new, new.load.remote(spec, device))
            ready, _ = ray.wait([pending[1]], timeout=0.25)
            if ready:
                try:
                    return self._loaded(pending[0], ray.get(pending[1]))
                except ray.exceptions.RayError as err:
                    raise ClusterError("The cluster could not start run {run}: {reason}", run=spec.run_id,
                                       reason=_first_line(err)) from None
            if time.monotonic() > deadline:
                ray.kill(pending[0])
                raise ClusterError("No machine of the cluster took run {run} within {seconds:.0f} s: every CPU is "
                                   "busy, or the machines have left.", run=spec.run_id, seconds=PLACE_SECONDS)

    def _loaded(self, actor, facts: dict) -> tuple[Any, dict]:
        if "failed" in facts:  # the run's own settings: the actor serves the next run
            self.give_back(actor)
            raise facts["failed"]
        return actor, facts

    def give_back(self, actor) -> None:
        """An actor whose run is closed: kept warm for the next run while the cluster has slots for it
        (it holds its CPU meanwhile), else ended, which frees its CPU."""
        import ray

        try:
            ray.get(actor.unload.remote(), timeout=WEIGHTS_TIMEOUT)
            with self._idle_lock:
                if len(self._idle) < self.slots():
                    self._idle.append(actor)
                    self._idle_since[actor] = time.monotonic()
                    return
        except Exception:  # noqa: BLE001 - gone with its machine, or the head does not answer
            pass
        with contextlib.suppress(Exception):
            ray.kill(actor)

    def shrink(self, idle_for: float = 0.0) -> None:
        """End the warm actors that have waited between runs `idle_for` seconds or more (all, by
        default), freeing their CPUs for anything else on the cluster."""
        import ray

        now = time.monotonic()
        with self._idle_lock:
            ended = [a for a in self._idle if now - self._idle_since.get(a, now) >= idle_for]
            self._idle = [a for a in self._idle if a not in ended]
            for actor in ended:
                self._idle_since.pop(actor, None)
        for actor in ended:
            with contextlib.suppress(Exception):
                ray.kill(actor)

    def size(self) -> Size:
        """Machines alive now, and their resources (they change as machines join and leave)."""
        import ray

        alive = [node for node in ray.nodes() if node.get("Alive")]
        return Size(len(alive), sum(n["Resources"].get("CPU", 0.0) for n in alive),
                    sum(n["Resources"].get("GPU", 0.0) for n in alive))

    def slots(self) -> int:
        return self.size().slots(self.gpu_per_run)

    def machine_left(self, node_id: str, err: Exception) -> bool:
        """Whether an actor that died on `node_id` went with its machine (Ray says so, or the machine
        is gone from the cluster within NODE_GRACE seconds), rather than alone (killed, crashed)."""
        if "its node has died" in str(err):
            return True
        deadline = time.monotonic() + NODE_GRACE
        while (alive := self.node_alive(node_id)) is not False and time.monotonic() < deadline:
            time.sleep(0.5)
        return alive is False

    def node_alive(self, node_id: str) -> bool | None:
        """Whether a machine is still in the cluster (None: the cluster did not answer)."""
        import ray

        try:
            return any(n["NodeID"] == node_id and n.get("Alive") for n in ray.nodes())
        except Exception:  # noqa: BLE001 - the head has gone too
            return None

    def run(self, spec, resume: Resume | None = None) -> RayRun:
        """The run `spec` describes, in an actor on the cluster; from `resume`'s checkpoint, with what
        it had logged up to there (as worker.build_run does on the box)."""

        if resume is None:
            return RayRun(spec, self)
        return RayRun(resume_spec(spec, resume.files), self, history=resume.history, evals=resume.evals)

    def check_versions(self, ours: dict[str, str] | None = None) -> None:
        """Every machine runs what the dashboard runs (`ours`, by default `versions()`): ClusterError
        naming both where one does not."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ours = ours or versions()
        probe = ray.remote(num_cpus=0)(versions)
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        try:
            answers = ray.get([probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                               .remote() for n in nodes], timeout=PLACE_SECONDS)
        except Exception as err:  # noqa: BLE001 - minigpt missing there (its answer cannot be read), or no answer
            LOG.warning("a machine of the cluster could not be checked: %s", err)
            raise ClusterError("A machine of the cluster could not be checked: is minigpt installed there, the same "
                               "as here (docs/cluster.md)? The server's log says more.") from None
        for node, theirs in zip(nodes, answers):
            for name, here, there in differences(ours, theirs):
                LOG.warning("the machine %s of the cluster runs %s %s, this dashboard %s", node.get("NodeManagerAddress"),
                            name, there, here)
                raise ClusterError("A machine of the cluster runs {name} {theirs}, and this dashboard {name} {ours}. "
                                   "Install the same versions on both (docs/cluster.md).", name=name, theirs=there,
                                   ours=here)


def connect(address: str, gpu_per_run: float = 0.0, timeout: float = CONNECT_SECONDS) -> Cluster:
    """Join the Ray cluster at `address` ("host:port" of its head, or "auto" for one started on this
    machine), checked; ClusterError with a sentence for the teacher where it cannot be used."""
    try:
        import ray
    except ImportError:
        raise ClusterError("Runs are set to train on a Ray cluster, but Ray is not installed here. Install it with "
                           "`{command}`.", command=INSTALL) from None
    host, _, port = address.rpartition(":")
    if address != "auto":
        if not host or not port.isdigit():
            LOG.warning("the cluster's address %r is not host:port", address)
            raise ClusterError("The cluster's address is not host:port, as `ray start --head` prints it.")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                pass
        except OSError as err:
            LOG.warning("the Ray cluster at %s cannot be reached: %s", address, err)
            raise ClusterError("The Ray cluster cannot be reached ({reason}).", reason=_why_unreachable(err)) from None
    if ray.is_initialized():  # joined already (a settings change, a reload): that cluster, or the new one
        if address in ("auto", ray.get_runtime_context().gcs_address):
            cluster = Cluster(address, gpu_per_run)
            cluster.check_versions()
            return cluster
        ray.shutdown()
    joined: Future = Future()

    def join() -> None:  # ray.init retries for minutes where something answers that is not a working head
        try:
            ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, configure_logging=False)
            joined.set_result(None)
        except Exception as err:  # noqa: BLE001 - handed to the waiting caller
            joined.set_exception(err)

    threading.Thread(target=join, name="minigpt-ray-connect", daemon=True).start()
    try:
        joined.result(timeout * 4)
    except TimeoutError:
        LOG.warning("the Ray cluster at %s did not answer within %.0f s", address, timeout * 4)
        raise ClusterError("The Ray cluster did not answer within {seconds:.0f} s.", seconds=timeout * 4) from None
    except RuntimeError as err:
        LOG.warning("the Ray cluster at %s could not be joined: %s", address, err)
        if "version mismatch" in str(err).lower():
            ours, theirs = versions(), _cluster_versions(str(err))
            if theirs is not None:
                raise ClusterError("The Ray cluster runs Ray {their_ray} on Python {their_python}, and this dashboard "
                                   "Ray {ray} on Python {python}. Install the same versions on both (docs/cluster.md).",
                                   their_ray=theirs[0], their_python=theirs[1], ray=ours["Ray"],
                                   python=ours["Python"]) from None
            raise ClusterError("The Ray cluster runs other versions of Ray or Python than this dashboard (Ray {ray} on "
                               "Python {python}). Install the same versions on both (docs/cluster.md).",
                               ray=ours["Ray"], python=ours["Python"]) from None
        raise ClusterError("The Ray cluster could not be joined; the server's log says why.") from None
    cluster = Cluster(address, gpu_per_run)
    try:
        cluster.check_versions()
    except Exception:
        ray.shutdown()
        raise
    return cluster


# -- the actor, on a machine of the cluster ---------------------------------------------------------
class RunActor:
    """A machine's worker for runs, one run at a time (made a Ray actor by `_actor_class`): `load`
    builds a run in it, `unload` frees it, and the next run reuses the warm process (torch imported,
    its first allocations made). Commands come one at a time, in order, on its default thread;
    `news` waits on a thread of its own."""

    def __init__(self):
        import ray

        self.node = ray.get_runtime_context().get_node_id()
        self.changed = threading.Condition()
        self.version = 0  # bumped at every change: what `news` waits on
        self.stamps = itertools.count(1)  # each status read, in order: the dashboard keeps the newest
        self.run, self.failed = None, None

    def load(self, spec, device: str | None) -> dict:
        """Build `spec`'s run here (on `device` where it takes a share of a GPU); what `ready` says."""
        import torch

        from .trainer_side import build_training_run, portable

        torch.set_num_threads(spec.threads)  # its share of the machine: as on the box, the same losses
        if device is not None:
            spec = replace(spec, train=replace(spec.train, device=device))
        with self.changed:
            self.done = 0     # the last command done (its number, from the dashboard)
            self.checkpoints: list[tuple[int, int, dict[str, bytes]]] = []  # (number, step, files) until acknowledged
            self.numbers = itertools.count(1)
            self.run, self.failed = None, None
        try:
            self.run = build_training_run(spec)
        except Exception as err:  # noqa: BLE001 - a ConfigError or CorpusError: the dashboard's to show
            self.failed = portable(err)
            return self.ready()
        self.run._on_update = lambda ending: self._changed()
        return self.ready()

    def unload(self) -> None:
        """Free the run (closed by the dashboard first): the process stays, warm, for the next one."""
        import gc

        if self.run is not None:
            self.run.close(timeout=None)
        self.run = None
        gc.collect()

    def ready(self) -> dict:
        """What the dashboard keeps of the run, or the error that kept it from being built."""
        if self.failed is not None:
            return {"failed": self.failed}
        trainer = self.run.trainer
        return {"cfg": trainer.cfg, "model_config": trainer.model_config, "model_params": trainer.model_params,
                "device": str(trainer.device), "node": self.node, **self._status()}

    def command(self, op: str, number: int, *args: Any) -> tuple[Any, dict]:
        """One command from the dashboard: its answer, and the run's status once it is done."""
        from .trainer_side import do_command

        try:
            if op == "start":  # (paused, wants checkpoints)
                self.run.on_checkpoint = self._checkpoint if args[1] else None
                self.run.start(paused=args[0])
                answer = None
            else:
                answer = do_command(self.run, op, list(args), None)
                if op == "close":
                    answer = True  # done: the dashboard may give this actor to the next run
        except Exception:  # noqa: BLE001 - a command that fails is answered with nothing, and still done
            answer = None
        with self.changed:
            self.done = number
        self._changed()
        return answer, self._status()

    def news(self, history_from: int, evals_from: int, acknowledged: int, seen: int) -> dict:
        """What is new since what the dashboard has: held until something is, or NEWS_WAIT seconds."""
        with self.changed:  # the run as it is, and every checkpoint made before: one consistent answer
            self.changed.wait_for(lambda: self.version > seen, NEWS_WAIT)
            version = self.version
            snap = self.run.snapshot()
            status = self._status(snap)
            self.checkpoints = [c for c in self.checkpoints if c[0] > acknowledged]
            checkpoints = list(self.checkpoints)
        return {"history": snap.history[history_from:], "evals": snap.evals[evals_from:], "version": version,
                "checkpoints": checkpoints, "status": status}

    def _checkpoint(self, step: int, files: dict[str, bytes]) -> None:
        with self.changed:
            self.checkpoints.append((next(self.numbers), step, files))
        self._changed()

    def _changed(self) -> None:
        with self.changed:
            self.version += 1
            self.changed.notify_all()

    def _status(self, snap: RunSnapshot | None = None) -> dict:
        """The run's status, stamped: a later stamp is a later look (the lock orders the looks)."""
        from .trainer_side import status_of

        with self.changed:
            return dict(status_of(self.run, snap or self.run.snapshot()), done=self.done, stamp=next(self.stamps))


_ACTOR_CLASS = None


def _actor_class():
    """RunActor as a Ray actor class, made once Ray is imported; `news` has a thread of its own."""
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        import ray

        _ACTOR_CLASS = ray.remote(concurrency_groups={"news": 1})(RunActor)
    return _ACTOR_CLASS


# -- the run, as the dashboard holds it -------------------------------------------------------------
_ENDED = ("finished", "error", "closed")
_HAND_BACK = "hand back"  # the command thread's last item: the actor goes back to the cluster


class RayRun(RemoteRun):
    """A TrainingRun in a Ray actor. Thread-safe, like TrainingRun; see the module docstring.

    Building it waits until Ray has placed the actor and the run is built: a moment on a warm actor,
    about 3 s on a new one (bench/RESULTS.md), at most PLACE_SECONDS where no machine has room (the
    registry builds a run on the page that pressed Start when a slot is free, else on its dispatcher
    thread). Starting it is not waited for; pause, run_steps, stop and close return once the actor
    has done them (at most `timeout`)."""

    _where = "actor"  # what its weights could not be read from, in an error

    def __init__(self, spec, cluster: Cluster, *, history: list = (), evals: list[EvalRecord] = ()):
        """`history`, `evals`: what a resumed run had logged up to its checkpoint (run.Resume)."""

        self.run_id, self.spec, self.cluster = spec.run_id, spec, cluster
        self.on_checkpoint: CheckpointSink | None = None
        self._lock = threading.Condition()
        self._history: list = list(history)
        self._evals: list[EvalRecord] = list(evals)
        self._state, self._dead, self._closing = "idle", False, False
        self._final: dict | None = None  # its weights (and optimizer), once it ended and its actor went back
        self._notice: Message | None = None
        self._wants_checkpoints = False
        # what it goes on from if its machine leaves: its newest checkpoint (the one it was resumed from)
        self._last_checkpoint: tuple[int, dict[str, bytes] | None] = (history[-1].step if history else 0, spec.resume)
        self._actor, facts = cluster.place(spec)
        self._handing: Future | None = None  # its actor going back to the cluster (the command thread does it, last)
        self._status = dict(facts, state="idle")
        self._stamp = facts["stamp"]  # the newest status taken: an older one arriving later is dropped
        self._cursor = (0, 0, 0, 0)  # the actor's history and evals received, checkpoints acknowledged, version seen
        self._ids = itertools.count(1)
        self._sent = 0               # the last command's number: the actor's state is news once it has done it
        self._generation = 0         # bumped when the run moves to a new actor: answers from the old one are dropped
        self._commands: queue.SimpleQueue = queue.SimpleQueue()
        from .trainer_side import TrainerView  # torch: a run is being built, so it has loaded

        self.trainer = TrainerView(self, spec)
        threading.Thread(target=self._send_commands, name=f"minigpt-ray-{self.run_id}", daemon=True).start()
        threading.Thread(target=self._listen, name=f"minigpt-ray-news-{self.run_id}", daemon=True).start()
        from .thread import register

        register(self)  # stopped as the server exits, like every run

    # -- steering ----------------------------------------------------------------------------------
    def start(self, paused: bool = False) -> None:
        with self._lock:
            self._wants_checkpoints = self.on_checkpoint is not None
        self._command("start", paused, self._wants_checkpoints,
                      change=lambda state: None if state in (*_ENDED, "running") else "paused" if paused else "running")

    def resume(self) -> None:
        self.start()

    def run_steps(self, n: int, timeout: float | None = 5.0) -> None:
        self._command("steps", n, change=lambda state: None if state in (*_ENDED, "running") else "running",
                      timeout=timeout)

    def pause(self, timeout: float | None = 5.0) -> None:
        self._command("pause", change=lambda state: "paused" if state == "running" else state, timeout=timeout)

    def stop(self, timeout: float | None = 5.0) -> None:
        self._command("stop", change=lambda state: "stopped" if state in ("running", "paused", "idle") else state,
                      timeout=timeout)

    def close(self, timeout: float | None = 5.0) -> None:
        """Stop for good and hand its actor back (to the next run, or ended, which frees its CPU).
        Closing twice is fine."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            training = not self._dead  # not yet handed back as it ended, nor lost
        closed = self._command("close", change=lambda state: "closed", timeout=timeout) if training else True
        with self._lock:
            self._state, self._evals, self._dead, self._final = "closed", [], True, None
            self._status["alive"] = False
            self._lock.notify_all()
        self._hand_back(kill=closed is None, timeout=timeout)  # an actor that did not answer is ended, not reused
        self.trainer.release()

    # -- reading (state, snapshot, checkpoint_parts: RemoteRun) -----------------------------------
    def is_alive(self) -> bool:
        """Its training thread is alive, or a command sent to it is not done yet, or it has ended and
        its weights are on their way to the dashboard (then it is read from there)."""
        with self._lock:
            return not self._dead and (self._status["alive"] or self._status["done"] < self._sent
                                       or self._state in ENDED_STATES)

    def inference_model(self):
        return self._weights("weights")[0].eval()  # on the CPU: the dashboard may have no GPU

    def _answer(self, op: str) -> dict | None:
        """The actor's answer to `op`, or the weights the dashboard kept as the run ended."""
        answer = None
        for _ in range(2):  # the run may end between the two looks: then its weights are here
            with self._lock:
                final = self._final
            if final is not None:
                return final if op == "weights" or "optimizer_state" in final else None
            answer = self._command(op, timeout=WEIGHTS_TIMEOUT)
            if answer is not None:
                break
        return answer

    # -- talking to the actor ----------------------------------------------------------------------
    def _command(self, op: str, *args: Any, change: Callable[[str], str | None] = lambda state: state,
                 timeout: float | None = 0.0) -> Any:
        """Send a command, the state it leads to set in the same step as its number (`change` of the
        current state; None: send nothing). With a timeout, wait (None: as long as it takes) for the
        actor to have done it: its answer, or None where the actor has gone or is too slow."""
        with self._lock:
            new = change(self._state)
            if new is None or self._dead:
                return None
            self._state = new
            self._sent = number = next(self._ids)
            done: Future = Future()
            self._commands.put((op, number, args, done))
        if timeout == 0.0:
            return None
        with contextlib.suppress(Exception):  # too slow, or the actor has gone: the news thread says why
            return done.result(timeout)
        return None

    def _send_commands(self) -> None:
        """The run's command thread: each command in order, one at a time, its status applied; last,
        the actor handed back, once every command before has been done on it."""
        import ray

        while True:
            op, number, args, done = self._commands.get()
            if op == _HAND_BACK:
                self._give_actor_back(kill=args[0])
                done.set_result(True)
                return
            with self._lock:
                actor, generation = self._actor, self._generation
            try:
                answer, status = ray.get(actor.command.remote(op, number, *args), timeout=WEIGHTS_TIMEOUT)
            except Exception as err:  # noqa: BLE001 - the actor has gone, or is too slow
                done.set_exception(err)
                continue
            with self._lock:
                if generation == self._generation:
                    self._take_status(status)
                self._lock.notify_all()
            done.set_result(answer)

    def _listen(self) -> None:
        """The run's news thread: one waiting call at a time until the run is closed. A machine that
        left moves the run; an actor that failed ends it."""
        try:
            self._listen_until_closed()
        except Exception as err:  # noqa: BLE001 - what Ray raised that nothing here expects: the run fails, said
            self._ended(err)

    def _listen_until_closed(self) -> None:
        import ray

        while True:
            with self._lock:
                if self._dead:
                    return
                actor, generation, cursor = self._actor, self._generation, self._cursor
            try:
                news = ray.get(actor.news.options(concurrency_group="news").remote(*cursor), timeout=WEIGHTS_TIMEOUT)
            except (ray.exceptions.GetTimeoutError, ray.exceptions.ActorUnavailableError):
                time.sleep(NEWS_WAIT)  # a machine that is slow or briefly away: asked again
                continue
            except ray.exceptions.RayError as err:
                with self._lock:
                    if self._closing or self._dead or generation != self._generation:
                        continue
                if not self._move_if_machine_left(err):
                    self._ended(err)
                continue
            self._apply(news, generation)

    def _apply(self, news: dict, generation: int) -> None:
        """News, in the order a run in a child process sends it: the steps and evaluations, then the
        checkpoints made at them (to the sink, outside the lock: it may write to disk), then the state."""
        with self._lock:
            if generation != self._generation or self._dead:  # an old actor's, or a closed run's
                return
            history_from, evals_from, acknowledged, _ = self._cursor
            last_step = self._history[-1].step if self._history else -1
            last_eval = self._evals[-1].step if self._evals else -1
            # a run that moved trains the steps since its checkpoint again: the same numbers, kept once
            self._history.extend(e for e in news["history"] if e.step > last_step)
            if self._state != "closed":
                self._evals.extend(r for r in news["evals"] if r.step > last_eval)
            checkpoints = news["checkpoints"]
            self._cursor = (history_from + len(news["history"]), evals_from + len(news["evals"]),
                            checkpoints[-1][0] if checkpoints else acknowledged, news["version"])
            sink = self.on_checkpoint
        for _, step, files in checkpoints:
            self._last_checkpoint = (step, files)
            if sink is not None:
                sink(step, files)
        with self._lock:
            if generation != self._generation or self._dead:
                return
            self._take_status(news["status"])
            self._lock.notify_all()
            ended = (self._state in ENDED_STATES and not self._status["alive"] and self._status["done"] >= self._sent)
        if ended:
            self._let_actor_go()

    def _let_actor_go(self) -> None:
        """The run trains no more: its weights come to the dashboard, and its actor goes back to the
        cluster, so that its CPU trains the next run (a run that ends holds no slot; it may still be
        read: Generate, Attention, the download, the registry's small form)."""
        final = self._command("checkpoint", timeout=WEIGHTS_TIMEOUT)
        if final is None:  # a failed run whose optimizer cannot be had: its weights alone
            final = self._command("weights", timeout=WEIGHTS_TIMEOUT)
        with self._lock:
            if self._dead:
                return
            self._final, self._dead = final, True
            self._lock.notify_all()
        self._hand_back(kill=final is None)

    def _hand_back(self, kill: bool, timeout: float | None = 0.0) -> None:
        """Have the command thread give the run's actor back once the commands before are done (once,
        whoever asks first: the run's end, or close); wait up to `timeout` for it."""
        with self._lock:
            if self._handing is None:
                self._handing = Future()
                self._commands.put((_HAND_BACK, 0, (kill,), self._handing))
            handing = self._handing
        if timeout != 0.0:  # close(): back in the pool (or ended) when it returns, whoever asked first
            with contextlib.suppress(Exception):
                handing.result(timeout)

    def _give_actor_back(self, kill: bool) -> None:
        import ray

        with self._lock:
            actor = self._actor
        if kill:
            with contextlib.suppress(Exception):
                ray.kill(actor)
        else:
            self.cluster.give_back(actor)

    def _take_status(self, status: dict) -> None:
        if status["stamp"] <= self._stamp:  # an older look than one already taken (the other channel's)
            return
        self._stamp = status["stamp"]
        self._status.update(status)
        if status["done"] >= self._sent and self._state != "closed":
            self._state = status["state"]  # the actor has done every command sent: its state is the truth

    def _move_if_machine_left(self, err: Exception) -> bool:
        """Where the run's machine has left the cluster, go on from its last checkpoint on another
        machine, in the state it was in; False where the machine is still there."""

        with self._lock:
            node, state, lost = self._status.get("node"), self._state, self._status["step"]
        if state not in ("running", "paused", "idle") or not self.cluster.machine_left(node, err):
            return False
        resumed_from, files = self._last_checkpoint
        try:
            actor, facts = self.cluster.place(resume_spec(self.spec, files))
        except Exception as err:  # noqa: BLE001 - no machine could take it: the run ends, and says why
            self._ended(err)
            return True
        with self._lock:
            if self._closing:
                self.cluster.give_back(actor)
                return True
            self._actor, self._generation, self._cursor = actor, self._generation + 1, (0, 0, 0, 0)
            self._stamp = facts["stamp"]  # the new actor's looks are numbered afresh
            self._status.update(facts)  # its `done` (0) is behind the commands sent: the state stays ours until it starts
            self._notice = Message("The machine that trained this run left the cluster at step {lost}; the run went on "
                                   "from its checkpoint at step {step} on another machine.", lost=lost,
                                   step=resumed_from)
            # in the state it is in now (its owner may have paused or stopped it meanwhile), in one step
            # with the actor's change, so that nothing pressed in between is undone
            state = self._state
            if state in ("running", "paused"):
                follow = ("start", (state == "paused", self._wants_checkpoints))
            elif state in ENDED_STATES:  # stopped meanwhile: said to the new actor, which then goes back
                follow = ("stop", ())
            else:
                follow = None
            if follow is not None:
                self._sent = number = next(self._ids)
                self._commands.put((follow[0], number, follow[1], Future()))
        return True

    def _ended(self, err: Exception) -> None:
        """The actor has gone while its machine stays, or no machine could take the run: it failed."""
        with self._lock:
            self._dead = True
            self._status["alive"] = False
            if self._state in ("running", "paused", "idle"):
                self._state = "error"
                self._status["error"] = Message(
                    "the cluster lost this run at step {step} ({reason}). The other runs go on; train again, perhaps "
                    "with a smaller model or batch.", step=self._status["step"], reason=_first_line(err))
            self._lock.notify_all()


def unusable(address: str, err: Exception) -> ClusterError:
    """What to say of a cluster that failed in a way nothing here expects: its details (and address) to
    the server's log, a sentence without them to the page."""
    LOG.warning("the Ray cluster at %s could not be used: %s", address, err)
    return ClusterError("The Ray cluster could not be joined; the server's log says why.")


def _why_unreachable(err: OSError) -> Message | str:
    """Why a connection failed, in words the catalogs hold for the usual causes."""
    if isinstance(err, ConnectionRefusedError):
        return Message("nothing answers on that port")
    if isinstance(err, (TimeoutError, socket.timeout)):
        return Message("no answer")
    if isinstance(err, socket.gaierror):
        return Message("the host name is not known")
    return err.strerror or str(err)


def _cluster_versions(said: str) -> tuple[str, str] | None:
    """(Ray, Python) the cluster was started with, from Ray's version-mismatch error; None if unsaid."""
    found = re.search(r"cluster was started with:\s*Ray:\s*(\S+)\s+Python:\s*(\S+)", said)
    return (found.group(1), found.group(2)) if found else None


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def watch(cluster: Cluster, resize: Callable[[int, Size], None], every: float = 5.0,
          stop: threading.Event | None = None) -> threading.Thread:
    """Tell `resize(slots, size)` what the cluster has, now and whenever it changes (checked every
    `every` seconds, on a thread of its own)."""
    stop = stop or threading.Event()

    def loop() -> None:
        last = None
        while not stop.is_set():
            with contextlib.suppress(Exception):  # a head that does not answer: the slots stay as they were
                size = cluster.size()
                if size != last:
                    resize(size.slots(cluster.gpu_per_run), size)
                    last = size
                cluster.shrink(idle_for=IDLE_ACTOR_SECONDS)
            stop.wait(every)

    thread = threading.Thread(target=loop, name="minigpt-ray-watch", daemon=True)
    thread.start()
    return thread
