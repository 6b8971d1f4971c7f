"""Runs on a Ray cluster: each run is a Ray actor, placed by Ray on a machine with a free CPU (or a
share of a GPU), and steered from the dashboard like a run on a thread or in a child process.

This module is the cluster: `connect` joins it (`ray.init`) after checking it can be reached and
that every machine in it runs the dashboard's Python, Ray, torch and minigpt; `Cluster` places runs
on its actors and takes them back (its pool); `Cluster.size` is what the line's slots come from, and
`watch` says when it changes. `RunActor` is what a machine runs for a run: a `TrainingRun` (the same
code as on the box), built from the same `RunSpec`, reached only through Ray (weights, checkpoints
and snapshots through its object store, never a shared disk).

The run as the dashboard holds it, `RayRun`, is in ray_run.py (and importable from here): a
`RemoteRun` (remote.py) whose channel is the actor's calls. A run whose machine leaves the cluster
goes on from its last checkpoint on another machine (its owner sees a notice); a run whose actor
fails while its machine stays (the out-of-memory killer, a crash) ends with an error, as a child
process that dies does. A run that fails in training (NaN) fails inside its TrainingRun, as anywhere.
Ray is optional (requirements-cluster.txt): nothing here imports it until it is used, nor torch.
"""
from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import platform
import re
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
from .ray_run import NEWS_WAIT, RayRun, first_line  # RayRun: importable from here, as app/ and the tests do
from .remote import WEIGHTS_TIMEOUT
from .run import Resume, RunSnapshot

INSTALL = "pip install -r requirements-cluster.txt"  # what brings Ray, at the version this code is tested with
CONNECT_SECONDS = 5.0     # how long connecting may take before the dashboard trains on its own box
PLACE_SECONDS = 120.0     # how long a run waits for a machine (a new actor: a worker process, torch, the model)
NAMESPACE = "minigpt"     # the Ray namespace the dashboard's actors live in
NODE_GRACE = 10.0         # seconds the cluster has to see a machine gone, once an actor on it has died
IDLE_ACTOR_SECONDS = 600.0  # a warm actor no run has needed this long is ended, and its CPU freed


# where addresses go: the server's log, never a learner's page; under the name it has always had there
LOG = logging.getLogger("minigpt.serve.cluster")


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
    root = Path(__file__).resolve().parents[2]  # minigpt/ (this file is minigpt/serve/runs/cluster.py): all of it
    for path in sorted(root.rglob("*.py")):
        # the path too (a moved file changes what unpickles), and a NUL so that no two files run together
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

        device = "cuda" if self.gpu_per_run > 0 else None  # None: the spec's own device (the dashboard's choice)
        deadline = time.monotonic() + PLACE_SECONDS
        pending = None  # a new actor, and its load, that Ray has not placed yet
        while True:
            # a warm actor first, looked for again at every turn: one may come back while a new one waits
            with self._idle_lock:
                actor = self._idle.pop() if self._idle else None
            if actor is not None:
                if pending is not None:  # not needed after all: its CPU stays free
                    ray.kill(pending[0])
                    pending = None
                try:
                    left = max(deadline - time.monotonic(), 1.0)  # a second at least: a warm load is quick
                    return self._loaded(actor, ray.get(actor.load.remote(spec, device), timeout=left))
                except ray.exceptions.RayError:  # gone with its machine, or stuck: ended; another, or a new one
                    with contextlib.suppress(Exception):
                        ray.kill(actor)
                    if time.monotonic() > deadline:
                        raise ClusterError("No machine of the cluster took run {run} within {seconds:.0f} s: every "
                                           "CPU is busy, or the machines have left.", run=spec.run_id,
                                           seconds=PLACE_SECONDS) from None
                    continue
            if pending is None:  # one new actor at a time: Ray queues it until a CPU (or GPU share) is free
                new = _actor_class().options(num_cpus=1, num_gpus=self.gpu_per_run, namespace=NAMESPACE).remote()
                pending = (new, new.load.remote(spec, device))
            ready, _ = ray.wait([pending[1]], timeout=0.25)  # short: a warm actor handed back meanwhile goes first
            if ready:
                try:
                    return self._loaded(pending[0], ray.get(pending[1]))
                except ray.exceptions.RayError as err:
                    raise ClusterError("The cluster could not start run {run}: {reason}", run=spec.run_id,
                                       reason=first_line(err)) from None
            if time.monotonic() > deadline:
                ray.kill(pending[0])  # its request for a CPU goes too: it would take one later for nothing
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
            ray.get(actor.unload.remote(), timeout=WEIGHTS_TIMEOUT)  # freed first: a warm actor holds no run's memory
            with self._idle_lock:
                if len(self._idle) < self.slots():  # more warm actors than slots would hold CPUs no run can use
                    self._idle.append(actor)
                    self._idle_since[actor] = time.monotonic()
                    return
        except Exception:  # noqa: BLE001 - gone with its machine, or the head does not answer
            pass
        with contextlib.suppress(Exception):  # ended, whatever state it is in: its CPU is free again
            ray.kill(actor)

    def shrink(self, idle_for: float = 0.0) -> None:
        """End the warm actors that have waited between runs `idle_for` seconds or more (all, by
        default), freeing their CPUs for anything else on the cluster."""
        import ray

        now = time.monotonic()
        with self._idle_lock:
            ended = [a for a in self._idle if now - self._idle_since.get(a, now) >= idle_for]
            self._idle = [a for a in self._idle if a not in ended]  # taken out under the lock, killed outside it
            for actor in ended:
                self._idle_since.pop(actor, None)
        for actor in ended:
            with contextlib.suppress(Exception):
                ray.kill(actor)

    def size(self) -> Size:
        """Machines alive now, and their resources (they change as machines join and leave)."""
        import ray

        alive = [node for node in ray.nodes() if node.get("Alive")]  # ray.nodes() keeps machines that left, dead
        return Size(len(alive), sum(n["Resources"].get("CPU", 0.0) for n in alive),
                    sum(n["Resources"].get("GPU", 0.0) for n in alive))

    def slots(self) -> int:
        return self.size().slots(self.gpu_per_run)

    def machine_left(self, node_id: str, err: Exception) -> bool:
        """Whether an actor that died on `node_id` went with its machine (Ray says so, or the machine
        is gone from the cluster within NODE_GRACE seconds), rather than alone (killed, crashed)."""
        # Ray says so in words only; where it does not (the actor died first), the cluster's view decides
        if "its node has died" in str(err):
            return True
        deadline = time.monotonic() + NODE_GRACE
        while (alive := self.node_alive(node_id)) is not False and time.monotonic() < deadline:
            time.sleep(0.5)  # the head notices a machine gone a few heartbeats after its actors
        return alive is False  # None (no answer) is not "left": the run ends rather than moves blindly

    def node_alive(self, node_id: str) -> bool | None:
        """Whether a machine is still in the cluster (None: the cluster did not answer)."""
        import ray

        try:
            return any(n["NodeID"] == node_id and n.get("Alive") for n in ray.nodes())
        except Exception:  # noqa: BLE001 - the head has gone too
            return None

    def run(self, spec, resume: Resume | None = None) -> RayRun:
        """The run `spec` describes, in an actor on the cluster; from `resume`'s checkpoint, with what
        it had logged up to there (as process.build_run does on the box)."""
        if resume is None:
            return RayRun(spec, self)
        return RayRun(resume_spec(spec, resume.files), self, history=resume.history, evals=resume.evals)

    def check_versions(self, ours: dict[str, str] | None = None) -> None:
        """Every machine runs what the dashboard runs (`ours`, by default `versions()`): ClusterError
        naming both where one does not."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ours = ours or versions()
        probe = ray.remote(num_cpus=0)(versions)  # no CPU: it runs even on a cluster whose CPUs all train
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        try:
            # pinned to each machine (soft=False): Ray would otherwise run every probe wherever it likes
            answers = ray.get([probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"],
                                                                                                soft=False))
                               .remote() for n in nodes], timeout=PLACE_SECONDS)
        except Exception as err:  # noqa: BLE001 - minigpt missing there (its answer cannot be read), or no answer
            LOG.warning("a machine of the cluster could not be checked: %s", err)
            raise ClusterError("A machine of the cluster could not be checked: is minigpt installed there, the same "
                               "as here (docs/cluster.md)? The server's log says more.") from None
        for node, theirs in zip(nodes, answers):  # the first difference is said; the log names the machine
            for name, here, there in differences(ours, theirs):
                LOG.warning("the machine %s of the cluster runs %s %s, this dashboard %s",
                            node.get("NodeManagerAddress"), name, there, here)
                raise ClusterError("A machine of the cluster runs {name} {theirs}, and this dashboard {name} {ours}. "
                                   "Install the same versions on both (docs/cluster.md).", name=name, theirs=there,
                                   ours=here)


def _reach(address: str, timeout: float) -> None:
    """ClusterError unless something answers at `address` ("host:port") within `timeout` seconds: asked
    first, since ray.init itself waits for minutes on a head that is not there."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        LOG.warning("the cluster's address %r is not host:port", address)
        raise ClusterError("The cluster's address is not host:port, as `ray start --head` prints it.")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass  # answered: only reaching it was asked
    except OSError as err:
        # the address goes to the log only: a learner's page never shows where the cluster is
        LOG.warning("the Ray cluster at %s cannot be reached: %s", address, err)
        raise ClusterError("The Ray cluster cannot be reached ({reason}).", reason=_why_unreachable(err)) from None


def connect(address: str, gpu_per_run: float = 0.0, timeout: float = CONNECT_SECONDS) -> Cluster:
    """Join the Ray cluster at `address` ("host:port" of its head, or "auto" for one started on this
    machine), checked; ClusterError with a sentence for the teacher where it cannot be used."""
    try:
        import ray
    except ImportError:
        raise ClusterError("Runs are set to train on a Ray cluster, but Ray is not installed here. Install it with "
                           "`{command}`.", command=INSTALL) from None
    if address != "auto":  # "auto": a cluster on this machine, found by Ray itself
        _reach(address, timeout)
    if ray.is_initialized():  # joined already (a settings change, a reload): that cluster, or the new one
        if address in ("auto", ray.get_runtime_context().gcs_address):
            cluster = Cluster(address, gpu_per_run)
            cluster.check_versions()
            return cluster
        ray.shutdown()  # another address: Ray joins one cluster per process
    joined: Future = Future()

    def join() -> None:  # ray.init retries for minutes where something answers that is not a working head
        try:
            ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, configure_logging=False)
            joined.set_result(None)
        except Exception as err:  # noqa: BLE001 - handed to the waiting caller
            joined.set_exception(err)

    # on a thread of its own, so that the page waits timeout * 4 at most; a join that never ends is left
    threading.Thread(target=join, name="minigpt-ray-connect", daemon=True).start()
    try:
        joined.result(timeout * 4)
    except TimeoutError:
        LOG.warning("the Ray cluster at %s did not answer within %.0f s", address, timeout * 4)
        raise ClusterError("The Ray cluster did not answer within {seconds:.0f} s.", seconds=timeout * 4) from None
    except RuntimeError as err:
        LOG.warning("the Ray cluster at %s could not be joined: %s", address, err)
        if "version mismatch" in str(err).lower():  # Ray's own check, made as it joins
            raise _mismatch(str(err)) from None
        raise ClusterError("The Ray cluster could not be joined; the server's log says why.") from None
    cluster = Cluster(address, gpu_per_run)
    try:
        cluster.check_versions()
    except Exception:
        ray.shutdown()  # joined but unusable: left, so that a later try starts clean
        raise
    return cluster


def _mismatch(said: str) -> ClusterError:
    """What to say where Ray refused to join a cluster started with another Ray or Python (`said`)."""
    ours, theirs = versions(), _cluster_versions(said)
    if theirs is not None:  # Ray named the cluster's versions: both sides are said
        return ClusterError("The Ray cluster runs Ray {their_ray} on Python {their_python}, and this dashboard "
                            "Ray {ray} on Python {python}. Install the same versions on both (docs/cluster.md).",
                            their_ray=theirs[0], their_python=theirs[1], ray=ours["Ray"], python=ours["Python"])
    return ClusterError("The Ray cluster runs other versions of Ray or Python than this dashboard (Ray {ray} on "
                        "Python {python}). Install the same versions on both (docs/cluster.md).",
                        ray=ours["Ray"], python=ours["Python"])


# -- the actor, on a machine of the cluster ---------------------------------------------------------
class RunActor:
    """A machine's worker for runs, one run at a time (made a Ray actor by `_actor_class`): `load`
    builds a run in it, `unload` frees it, and the next run reuses the warm process (torch imported,
    its first allocations made). Commands come one at a time, in order, on its default thread;
    `news` waits on a thread of its own."""

    def __init__(self):
        import ray

        self.node = ray.get_runtime_context().get_node_id()  # the machine: a run whose actor dies asks if it left
        self.changed = threading.Condition()  # guards version, done, checkpoints and the stamps' order
        self.version = 0  # bumped at every change: what `news` waits on
        self.stamps = itertools.count(1)  # each status read, in order: the dashboard keeps the newest
        self.run, self.failed = None, None

    def load(self, spec, device: str | None) -> dict:
        """Build `spec`'s run here (on `device` where it takes a share of a GPU); what `ready` says."""
        import torch

        from .trainer_side import build_training_run, portable

        torch.set_num_threads(spec.threads)  # its share of the machine: as on the box, the same losses
        if device is not None:  # the cluster's GPUs, whatever device the dashboard (perhaps without one) chose
            spec = replace(spec, train=replace(spec.train, device=device))
        with self.changed:
            self.done = 0     # the last command done (its number, from the dashboard)
            self.checkpoints: list[tuple[int, int, dict[str, bytes]]] = []  # (number, step, files) until acknowledged
            self.numbers = itertools.count(1)  # each checkpoint's, which the dashboard acknowledges
            self.run, self.failed = None, None  # a warm actor's last run is gone already (unload)
        try:
            self.run = build_training_run(spec)
        except Exception as err:  # noqa: BLE001 - a ConfigError or CorpusError: the dashboard's to show
            self.failed = portable(err)
            return self.ready()
        self.run._on_update = lambda ending: self._changed()  # each logged step wakes a waiting call for news
        return self.ready()

    def unload(self) -> None:
        """Free the run (closed by the dashboard first): the process stays, warm, for the next one."""
        import gc

        if self.run is not None:
            self.run.close(timeout=None)
        self.run = None
        gc.collect()  # the run's cycles (model, optimizer) go now, not when the next run allocates

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
                # the checkpoints wait here for the news call, not on a sink: the dashboard acknowledges them
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
            self.done = number  # numbers come in order, one at a time: the last is the highest
        self._changed()  # the news call says it too, for a dashboard that stopped waiting for this answer
        return answer, self._status()

    def news(self, history_from: int, evals_from: int, acknowledged: int, seen: int) -> dict:
        """What is new since what the dashboard has: held until something is, or NEWS_WAIT seconds."""
        with self.changed:  # the run as it is, and every checkpoint made before: one consistent answer
            self.changed.wait_for(lambda: self.version > seen, NEWS_WAIT)
            version = self.version
            snap = self.run.snapshot()
            status = self._status(snap)
            # sent again until acknowledged: an answer lost on the way (a timeout) loses no checkpoint
            self.checkpoints = [c for c in self.checkpoints if c[0] > acknowledged]
            checkpoints = list(self.checkpoints)
        return {"history": snap.history[history_from:], "evals": snap.evals[evals_from:], "version": version,
                "checkpoints": checkpoints, "status": status}

    def _checkpoint(self, step: int, files: dict[str, bytes]) -> None:
        with self.changed:  # the training thread, between two steps
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

        # a group of its own: a news call held NEWS_WAIT seconds never delays a command
        _ACTOR_CLASS = ray.remote(concurrency_groups={"news": 1})(RunActor)
    return _ACTOR_CLASS


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
    return err.strerror or str(err)  # the system's own words: rarer causes are not in the catalogs


def _cluster_versions(said: str) -> tuple[str, str] | None:
    """(Ray, Python) the cluster was started with, from Ray's version-mismatch error; None if unsaid."""
    found = re.search(r"cluster was started with:\s*Ray:\s*(\S+)\s+Python:\s*(\S+)", said)
    return (found.group(1), found.group(2)) if found else None


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
                if size != last:  # told only of changes: resizing the line wakes its dispatcher
                    resize(size.slots(cluster.gpu_per_run), size)
                    last = size
                cluster.shrink(idle_for=IDLE_ACTOR_SECONDS)  # the same beat ends warm actors left idle too long
            stop.wait(every)

    thread = threading.Thread(target=loop, name="minigpt-ray-watch", daemon=True)  # daemon: gone with the server
    thread.start()
    return thread

