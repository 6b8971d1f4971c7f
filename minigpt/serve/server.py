"""The face of the serving wing: `open_server(settings, database)` builds one process's server from
its settings, as `sqlalchemy.create_engine(url)` hides its pools and `ray.init(address)` its workers.

A server is the store (what outlives the process), where its runs train (its own box, in child
processes or on threads, or a Ray cluster), the line of runs and its slots, and the classes. The app
reads its settings (`ServerSettings.from_env`), hands over the database connection Streamlit made, and
asks the `Server` for what it needs; it never wires the rooms below by hand.

Settings (docs/deploying.md, docs/cluster.md) are read once, where the server is built:
- MINIGPT_TRAIN_IN: "process" (a child per run, forked from a preloaded fork server), "thread" (in
  the server's interpreter) or "ray" (actors on the cluster at RAY_ADDRESS). The older
  MINIGPT_RUNS_ON=ray still means "ray".
- MINIGPT_MAX_RUNS, MINIGPT_RUN_IDLE_SECONDS, MINIGPT_WAITING_IDLE_SECONDS, MINIGPT_MAX_WAITING,
  MINIGPT_TRAIN_NICE, MINIGPT_RUN_GPU, MINIGPT_KEEP_RUN_DAYS, MINIGPT_KEEP_CHECKPOINTS, MINIGPT_CLASS_DAYS.
"""
from __future__ import annotations

import math
import multiprocessing
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..messages import Message
from .classes.classes import Classes
from .classes.learners import SEEN_SAVE_SECONDS
from .host.capacity import Capacity, kept_runs_for, read_capacity, slots_for, threads_per_run
from .line.registry import DEFAULT_WAITING_IDLE, RunRegistry
from .runs.cluster import Cluster, ClusterError, Size, connect, unusable
from .runs.recipe import CHILD_NICE
from .store.database import Store
from .store.engine import driver_missing
from .store.faults import StoreError, describe, log_fault
from .store.retention import Retention

if TYPE_CHECKING:
    import sqlalchemy as sa

    from .runs.recipe import RunSpec
    from .runs.run import Resume, Run

TRAIN_IN_ENV = "MINIGPT_TRAIN_IN"
# where runs train. "process": a child at a low priority forked from a preloaded fork server
# (runs/process.py), which never holds the lock the pages need; "thread": in the server's interpreter;
# "ray": actors on a Ray cluster. Processes by default wherever there is a fork server: measured with a
# class on the smallest box (bench/class_load.py, bench/RESULTS.md), learners waited less, the runs
# trained faster, and the out-of-memory killer's first choice is a run, never the server; they cost more
# memory. Without a fork server (Windows) each child would import torch again: threads.
TRAIN_IN_CHOICES = ("thread", "process", "ray")
DEFAULT_TRAIN_IN = "process" if "forkserver" in multiprocessing.get_all_start_methods() else "thread"
RUNS_ON_ENV = "MINIGPT_RUNS_ON"   # the setting before MINIGPT_TRAIN_IN took "ray": MINIGPT_RUNS_ON=ray still works
ADDRESS_ENV = "RAY_ADDRESS"       # Ray's own setting for the head's address
GPU_ENV = "MINIGPT_RUN_GPU"       # the share of a GPU each run takes on the cluster; 0: its CPUs
MAX_RUNS_ENV = "MINIGPT_MAX_RUNS"  # runs that train at once; unset, what this process may really use affords
IDLE_ENV, DEFAULT_IDLE_SECONDS = "MINIGPT_RUN_IDLE_SECONDS", 30 * 60
WAITING_IDLE_ENV = "MINIGPT_WAITING_IDLE_SECONDS"  # an owner's absence that drops their waiting run
MAX_WAITING_ENV = "MINIGPT_MAX_WAITING"            # the line's length; unset, the slots' and classes' (line/limit.py)
RUN_DAYS_ENV = "MINIGPT_KEEP_RUN_DAYS"             # days a run on no board is kept after its owner last opened it
CHECKPOINTS_ENV = "MINIGPT_KEEP_CHECKPOINTS"       # checkpoints kept per run
CLASS_DAYS_ENV = "MINIGPT_CLASS_DAYS"              # days a class lasts from the day it opened: a term
# the CPU priority a run trains at, a niceness from 0 (the server's) to 19 (yields the most). Unset, a
# run out of the server's interpreter trains at CHILD_NICE, so that it yields to the server that shares
# its box. A run on a thread trains at the server's priority: measured with a class (bench/class_load.py),
# a niced thread that holds the interpreter lock is scheduled late, and the learners waiting for that
# lock waited longer (p95), while training went no faster or slower
NICE_ENV, DEFAULT_THREAD_NICE = "MINIGPT_TRAIN_NICE", 0

# what a run's process writes of its own after the fork server's warm-up, with room (bench/RESULTS.md)
RUN_BYTES = 60 * 2**20
SERVER_BYTES = 256 * 2**20  # what the server itself still grows by with a class of 30 (bench/RESULTS.md)
KEPT_RUN_BYTES = 3 * 2**19  # a finished challenge run kept small, rounded up (bench/kept_runs.py)
# a run trains with one torch thread: two runs on two cores trained slower with two threads each
# (python -m bench.run_threads), and so did one run alone on two busy cores (bench/RESULTS.md)
MAX_RUN_THREADS = 1
MIN_KEPT, MAX_KEPT = 40, 400  # finished runs kept: a class of 40 on the smallest box, and a bound on any box
# the learners who each get a place in line: every one who opened their class within the last day. A
# class stamps a visit at most once a day (classes/learners.py), so a stamp may be a day older than the visit
LEARNERS_WINDOW_SECONDS = 2 * SEEN_SAVE_SECONDS


@dataclass(frozen=True)
class ServerSettings:
    """What a server is built from: one record, read once (from_env), never a scattered os.environ."""

    train_in: str = DEFAULT_TRAIN_IN  # "thread", "process" or "ray"
    on_box: str = DEFAULT_TRAIN_IN    # "thread" or "process": where runs train on this box (and where a cluster fails)
    asked_by: str = TRAIN_IN_ENV      # the setting that asked for "ray", which a warning names
    ray_address: str | None = None
    gpu_per_run: float = 0.0
    max_runs: int | None = None       # None: the cluster's slots, or what this box affords
    idle_seconds: int = DEFAULT_IDLE_SECONDS
    waiting_idle_seconds: int = DEFAULT_WAITING_IDLE
    max_waiting: int | None = None    # None: the slots and the classes' learners say (line/limit.py)
    nice: int | None = None           # None: CHILD_NICE out of the server's interpreter, else DEFAULT_THREAD_NICE
    retention: Retention = field(default_factory=Retention)
    board_refresh_seconds: float = 1.0  # how often a board view is checked for runs that moved

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ, *, ray_address: str | None = None,
                 **values: Any) -> ServerSettings:
        """The settings in `environ` (a value that is not a number in range is its default); the head's
        address from RAY_ADDRESS, else `ray_address` (the app's secrets). `values` are the caller's own."""
        train_in = environ.get(TRAIN_IN_ENV, DEFAULT_TRAIN_IN)
        train_in = train_in if train_in in TRAIN_IN_CHOICES else DEFAULT_TRAIN_IN
        on_box = train_in if train_in != "ray" else DEFAULT_TRAIN_IN
        asked_by = TRAIN_IN_ENV
        if environ.get(RUNS_ON_ENV, "").strip().lower() == "ray":  # the older setting, beside MINIGPT_TRAIN_IN
            train_in, asked_by = "ray", RUNS_ON_ENV
        return cls(train_in=train_in, on_box=on_box, asked_by=asked_by,
                   ray_address=environ.get(ADDRESS_ENV) or ray_address,
                   gpu_per_run=_number(environ, GPU_ENV, 0.0, float, low=0, above=True, high=1),
                   max_runs=_number(environ, MAX_RUNS_ENV, None, int, low=0),
                   idle_seconds=_number(environ, IDLE_ENV, DEFAULT_IDLE_SECONDS, int, low=1),
                   waiting_idle_seconds=_number(environ, WAITING_IDLE_ENV, DEFAULT_WAITING_IDLE, int, low=1),
                   max_waiting=_number(environ, MAX_WAITING_ENV, None, int, low=1),
                   nice=min(19, nice) if (nice := _number(environ, NICE_ENV, None, int, low=0)) is not None else None,
                   retention=_retention(environ), **values)


@dataclass(frozen=True)
class Database:
    """How the app's database connection was made: its engine and where checkpoints go beside it, or
    why there is none (a driver not installed, a URL SQLAlchemy refuses, a data folder not writable)."""

    engine: sa.Engine | None = None
    checkpoint_dir: Path | None = None
    problem: Message | StoreError | None = None


def connect_database(make: Callable[[], tuple[sa.Engine, Path | None]], url: str | None = None) -> Database:
    """`make()`, the app's way to an engine (Streamlit's SQL connection), with what can go wrong said
    in the app's words and the driver's own words logged for whoever runs the server."""
    try:
        engine, checkpoint_dir = make()
    except ModuleNotFoundError as err:
        return Database(problem=driver_missing(url or str(err), err))
    except StoreError as err:
        return Database(problem=err)
    except Exception as err:  # noqa: BLE001 - a URL SQLAlchemy refuses: said in our words, the driver's logged
        log_fault(err)
        return Database(problem=describe(err))
    return Database(engine, checkpoint_dir)


def writable_folder(folder: Path, setting: str) -> Path:
    """`folder`, made if need be; StoreError where this server cannot write there (a read-only disk or
    folder, a file in the way), which SQLite would only call a file it cannot open."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(f"the data folder {folder} is not writable by this server's user")
    except OSError as err:
        log_fault(err)  # the path and the system's words: for whoever runs the server, not the page
        raise StoreError("the server cannot write to its data folder. Whoever runs it can make the folder "
                         "writable, or set {setting} to another one, and restart the app.", setting=setting) from None
    return folder


@dataclass
class Placement:
    """The cluster runs train on, or None (this box), why not where one was asked for, and its size
    as last seen (kept up to date while the server watches it)."""

    cluster: Cluster | None
    problem: Message | ClusterError | None = None
    size: Size | None = None
    stop: threading.Event = field(default_factory=threading.Event)


def place(settings: ServerSettings) -> Placement:
    """Connect to the cluster where the settings ask for one. One that cannot be used (Ray not installed,
    unreachable, other versions) never stops the server: runs train on this box, and Train says why."""
    if settings.train_in != "ray":
        return Placement(None)
    if not settings.ray_address:
        return Placement(None, Message("Runs are set to train on a Ray cluster ({setting}=ray), but no address is set: "
                                       "put the head's host:port in {address}, or in the secrets under [cluster].",
                                       setting=settings.asked_by, address=ADDRESS_ENV))
    try:
        cluster = connect(settings.ray_address, settings.gpu_per_run)
        return Placement(cluster, size=cluster.size())
    except ClusterError as err:
        return Placement(None, err)
    except Exception as err:  # noqa: BLE001 - whatever else Ray raises: said, and the box trains
        return Placement(None, unusable(settings.ray_address, err))


class Server:
    """One process's serving wing, built by open_server: `store` (None where it could not open, and
    `store_problem` says why), and, each made on first use, `placement`, `registry` (the line of runs
    and its slots) and `classes`. On first use, as the app's pages did before the face: Home opens the
    store to read a kept comparison, and must not wait for a cluster or load torch for the line."""

    def __init__(self, settings: ServerSettings, store: Store | None, store_problem: Message | StoreError | None,
                 facts: Callable[[RunSpec], Any] = lambda spec: None):
        self.settings, self.store, self._facts = settings, store, facts
        self._store_problem = store_problem
        # each part is made once, whichever session asks first, under a lock of its own: a page that needs
        # only the classes never waits for a cluster to answer or the line to be read back from the store
        self._locks = {part: threading.Lock() for part in ("placement", "registry", "classes")}
        self._placement: Placement | None = None
        self._registry: RunRegistry | None = None
        self._classes: Classes | None = None

    @property
    def placement(self) -> Placement:
        """Where runs train: connected on first use, which may take Ray's connect timeout."""
        with self._locks["placement"]:
            if self._placement is None:
                self._placement = place(self.settings)
            return self._placement

    @property
    def registry(self) -> RunRegistry:
        placement = self.placement
        with self._locks["registry"]:
            if self._registry is None:
                self._registry = self._line(placement)
            return self._registry

    @property
    def classes(self) -> Classes:
        with self._locks["classes"]:
            if self._classes is None:
                self._classes = Classes(refresh_seconds=self.settings.board_refresh_seconds, store=self.store,
                                        class_days=self.settings.retention.class_days)
            return self._classes

    def _line(self, placement: Placement) -> RunRegistry:
        from .runs.thread import stop_orphaned_runs  # torch: the line is first used once a page needs runs

        # a new line (first use, or after a code reload) stops the trainer threads an old one left
        # behind, since nothing can reach them any more
        stop_orphaned_runs()
        cluster = placement.cluster
        slots, kept = server_sizes(read_capacity(), self.settings.max_runs,
                                   cluster.slots() if cluster is not None else None)
        registry = RunRegistry(max_runs=slots, idle_seconds=self.settings.idle_seconds,
                               max_waiting=self.settings.max_waiting,
                               waiting_idle_seconds=self.settings.waiting_idle_seconds,
                               kept_bytes=kept * KEPT_RUN_BYTES, store=self.store, builder=self.build_run,
                               facts=self._facts, class_learners=lambda: learners_seen_lately(self._classes))
        if cluster is not None:  # the slots follow the cluster's machines as they join and leave
            self._watch(cluster, registry)
        return registry

    @property
    def store_problem(self) -> Message | StoreError | None:
        """Why results are not being saved right now, or None."""
        return self.store.problem if self.store is not None else self._store_problem

    @property
    def where(self) -> str:
        """Where this server's runs train now: the cluster's actors where it connected, else this box."""
        return "ray" if self.placement.cluster is not None else self.settings.on_box

    def build_run(self, spec: RunSpec, resume: Resume | None = None) -> Run:
        """The run `spec` describes, where this server trains (an actor on the cluster, a child process or
        a thread), at its priority; from `resume`'s checkpoint where a run goes on after a restart."""
        where = self.where
        default = CHILD_NICE if where != "thread" else DEFAULT_THREAD_NICE
        spec = replace(spec, nice=default if self.settings.nice is None else self.settings.nice)
        if where == "ray":
            return self.placement.cluster.run(spec, resume)
        from .runs.process import build_run  # torch: only once a run is built

        return build_run(spec, resume, in_process=where != "thread")  # any other way trains out of this process

    def run_threads(self) -> int:
        """Intra-op threads for each run: its share of the server's CPUs, never more, and at most
        MAX_RUN_THREADS, what a run here is fastest with; on a cluster, the one CPU its actor takes."""
        if self.placement.cluster is not None:
            return MAX_RUN_THREADS
        return min(threads_per_run(read_capacity(), self.registry.max_runs), MAX_RUN_THREADS)

    def run_device(self) -> str | None:
        """The device a new run trains on where that is the cluster's GPUs ("cuda"), else None."""
        cluster = self.placement.cluster
        return "cuda" if cluster is not None and cluster.gpu_per_run > 0 else None

    def close(self) -> None:
        """Stop every run, the cluster's watch (its idle actors go back) and the store's writer: only
        the parts that were made."""
        if self._registry is not None:
            self._registry.stop_all()
        if self._placement is not None:
            self._placement.stop.set()
            if self._placement.cluster is not None:
                self._placement.cluster.shrink()
        if self.store is not None:
            self.store.close()

    def _watch(self, cluster: Cluster, registry: RunRegistry) -> None:
        from .runs.cluster import watch

        placement = self._placement

        def resized(slots: int, size: Size) -> None:
            placement.size = size
            registry.resize(slots if self.settings.max_runs is None else self.settings.max_runs)

        watch(cluster, resized, stop=placement.stop)


def open_server(settings: ServerSettings, database: Database | None = None,
                facts: Callable[[RunSpec], Any] = lambda spec: None) -> Server:
    """The server `settings` describe, its store on `database` (None: memory only); `facts(spec)` is what
    the caller keeps with each run (RunEntry.facts). The store opens behind: a locked or slow database
    keeps the server's first page no longer than an action."""
    from .store.writer import WAIT_SECONDS

    store, problem = None, database.problem if database is not None else None
    if database is not None and database.engine is not None:
        store = Store(database.engine, checkpoint_dir=database.checkpoint_dir, retention=settings.retention,
                      open_wait=WAIT_SECONDS)
    return Server(settings, store, problem, facts)


def prepare_training(settings: ServerSettings) -> None:
    """Once torch has loaded: where runs train in processes, start the fork server now, so that it
    loads torch once, before the first Start, instead of at it."""
    if settings.on_box == "process":  # on a cluster too: where it cannot be used, runs train here
        from .runs.process import start_fork_server

        start_fork_server()


def learners_seen_lately(classes: Classes | None) -> int:
    """The learners of the open classes seen within LEARNERS_WINDOW_SECONDS: each may hold a place in
    line. 0 before any page has asked for the classes."""
    return 0 if classes is None else classes.seen_within(LEARNERS_WINDOW_SECONDS)


def server_sizes(capacity: Capacity, max_runs: int | None = None, cluster_slots: int | None = None) -> tuple[int, int]:
    """How many runs may train at once (`max_runs`, else the cluster's slots where runs train on one, else
    what the box affords), and how many finished runs it keeps small in the memory the server and its
    slots leave (runs on a cluster take none of this box's)."""
    if cluster_slots is not None:
        slots = cluster_slots if max_runs is None else max_runs
        return slots, kept_runs_for(capacity, KEPT_RUN_BYTES, SERVER_BYTES, MIN_KEPT, MAX_KEPT)
    slots = max_runs if max_runs is not None and max_runs >= 1 else slots_for(capacity, RUN_BYTES, SERVER_BYTES)
    return slots, kept_runs_for(capacity, KEPT_RUN_BYTES, SERVER_BYTES + slots * RUN_BYTES, MIN_KEPT, MAX_KEPT)


def _retention(environ: Mapping[str, str]) -> Retention:
    """How long the store keeps what it keeps: the defaults where either setting is not a number, and
    each one's default where it is not above 0."""
    default = Retention()
    try:
        days = float(environ.get(RUN_DAYS_ENV, default.run_days))
        kept = int(environ.get(CHECKPOINTS_ENV, default.checkpoints))
    except ValueError:
        days, kept = default.run_days, default.checkpoints
    class_days = _number(environ, CLASS_DAYS_ENV, default.class_days, float, low=0, above=True)
    return Retention(class_days, days if days > 0 else default.run_days,  # NaN is not above 0
                     kept if kept > 0 else default.checkpoints)


def _number(environ: Mapping[str, str], name: str, default, kind: type, *, low: float, high: float | None = None,
            above: bool = False):
    """A number setting: `default` when unset, not a finite `kind`, below `low` (or at it where `above`) or
    over `high`."""
    try:
        value = kind(environ[name])
    except (KeyError, ValueError):
        return default
    inside = (value > low if above else value >= low) and (high is None or value <= high)  # False for NaN
    return value if inside and math.isfinite(value) else default
