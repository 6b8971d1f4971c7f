"""This session's training run: the process-wide registry, the run this session owns or
watches, the run in the URL (so a refresh reattaches), and starting or steering a run.

Looking a run up loads no torch (Home does it before torch has loaded, app.state.warmup): the
library's torch-backed names are read from `minigpt` where a run is built or saved, and the
training threads' module is imported where a run is started."""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import time
from dataclasses import dataclass, replace

import streamlit as st

import minigpt
from minigpt import (
    CharTokenizer,
    ConfigError,
    GPTConfig,
    TrainConfig,
    check_corpus_fits,
    check_memory_budget,
    demo_prompts,
    probe_text,
)
from minigpt.lab.diagnosis import UnseenCharacters, unseen_validation_chars
from minigpt.lab.tasks import Task, task_for_corpus
from minigpt.serve.line import registry as registry_module
from minigpt.serve.host.capacity import Capacity, kept_runs_for, read_capacity, slots_for, threads_per_run
from minigpt.serve.line.registry import NotOwnerError, RunEntry, RunRegistry

from app.chrome import url
from app.chrome.i18n import _
from app.chrome.text import format_duration
from app.state import database, placement
from app.state.choices import MODEL_SOURCE, TRAINED, current_device
from app.state.corpora import Corpus

MAX_PARAMS = 5_000_000                # a model a small shared CPU trains in minutes
MEMORY_ENV, DEFAULT_MEMORY_MB = "MINIGPT_MEMORY_BUDGET_MB", 1024  # per run; Community Cloud has 0.7-2.7 GB
# how many runs train at once: unset, what this process may really use affords (minigpt.serve.host.capacity):
# one per CPU of its affinity mask and control group quota, as many as its memory holds beside the server
MAX_RUNS_ENV = "MINIGPT_MAX_RUNS"
RUN_BYTES = 60 * 2**20      # what a run's process writes of its own after the fork server's warm-up, with room (bench/RESULTS.md)
SERVER_BYTES = 256 * 2**20  # what the server itself still grows by with a class of 30 (bench/RESULTS.md)
KEPT_RUN_BYTES = 3 * 2**19  # a finished challenge run kept small, rounded up (bench/kept_runs.py)
# a run's process trains with one torch thread: two runs on two cores trained slower with two threads each
# (python -m bench.run_threads), and so did one run alone on two busy cores (bench/RESULTS.md)
MAX_RUN_THREADS = 1
MIN_KEPT, MAX_KEPT = 40, 400  # finished runs kept: a class of 40 on the smallest box, and a bound on any box
IDLE_ENV, DEFAULT_IDLE_SECONDS = "MINIGPT_RUN_IDLE_SECONDS", 30 * 60
WAITING_IDLE_ENV = "MINIGPT_WAITING_IDLE_SECONDS"  # an owner's absence that drops their waiting run (registry's default)
MAX_WAITING_ENV = "MINIGPT_MAX_WAITING"            # the line's length (registry's default)
# the CPU priority a run trains at, a niceness from 0 (the server's) to 19 (yields the most). Unset,
# a run in a child process trains at minigpt.serve.runs.recipe.CHILD_NICE, so that it yields to the server
# that shares its box. A run on a thread trains at the server's priority by default: measured with a
# class (bench/class_load.py), a niced thread that holds the interpreter lock is scheduled late, and
# the learners waiting for that lock waited longer (p95), while training went no faster or slower
NICE_ENV, DEFAULT_THREAD_NICE = "MINIGPT_TRAIN_NICE", 0
# where a run trains: "process", a child at a low priority forked from a preloaded fork server
# (minigpt/serve/runs/process.py), which never holds the lock the pages need, or "thread", in the server's
# interpreter. Processes by default wherever there is a fork server: measured with a class on the
# smallest box (bench/class_load.py, bench/RESULTS.md), learners waited less, the runs trained faster,
# and the out-of-memory killer's first choice is a run, never the server; they cost more memory. Without a fork server (Windows) each child would import torch again: threads.
TRAIN_IN_ENV, TRAIN_IN_CHOICES = "MINIGPT_TRAIN_IN", ("thread", "process")
DEFAULT_TRAIN_IN = "process" if "forkserver" in multiprocessing.get_all_start_methods() else "thread"

# session_state keys
OWN_RUN_KEY, WATCHED_RUN_KEY = "own_run", "watched_run"   # (run id, key) / run id
URL_READ_KEY, NOTICE_KEY = "url_read", "notice"

_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")


@dataclass(frozen=True)
class RunFacts:
    """What the Train page says of a run's corpus, kept with the run (RunEntry.facts): for an owner
    and for anyone who watches it, after its data is released too."""

    task: Task | None            # the corpus is a task's: the run is scored on it
    corpus: str                  # the corpus's key: a built-in name, or "<file> (uploaded)" (the class board's challenge)
    unseen: UnseenCharacters     # validation characters the training split never shows


def env_int(name: str, default: int, low: int = 1) -> int:
    """A server setting from the environment (docs/deploying.md): `default` when unset or not a whole
    number from `low`."""
    try:
        value = int(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value >= low else default


def train_nice(default: int) -> int:
    """The niceness this server's runs train at (docs/deploying.md), 0 to 19; `default` when unset."""
    return min(19, env_int(NICE_ENV, default, low=0))


def train_in() -> str:
    """Where this server trains its runs (docs/deploying.md): "thread" or "process"."""
    value = os.environ.get(TRAIN_IN_ENV, DEFAULT_TRAIN_IN)
    return value if value in TRAIN_IN_CHOICES else DEFAULT_TRAIN_IN


def prepare_training() -> None:
    """Once torch has loaded (warmup's `then`): where runs train in processes, start the fork server
    now, so that it loads torch once, before the first Start, instead of at it."""
    if train_in() == "process":
        from minigpt.serve.runs.process import start_fork_server

        start_fork_server()


@st.cache_resource(show_spinner=False, on_release=lambda registry: registry.stop_all())
def registry() -> RunRegistry:
    """The process-wide registry, sized from what this process may use. A new one (first use, or
    after a code reload) stops the trainer threads an old one left behind, since nothing can reach
    them any more."""
    from minigpt.serve.runs.thread import stop_orphaned_runs

    stop_orphaned_runs()
    cluster = placement.on_cluster()
    slots, kept = server_sizes(read_capacity(), cluster.slots() if cluster is not None else None)
    made = RunRegistry(max_runs=slots,
                       idle_seconds=env_int(IDLE_ENV, DEFAULT_IDLE_SECONDS),
                       max_waiting=env_int(MAX_WAITING_ENV, registry_module.DEFAULT_MAX_WAITING),
                       waiting_idle_seconds=env_int(WAITING_IDLE_ENV, registry_module.DEFAULT_WAITING_IDLE),
                       kept_bytes=kept * KEPT_RUN_BYTES, store=database.store(), builder=build_run, facts=run_facts)
    placement.watch(lambda slots: made.resize(env_int(MAX_RUNS_ENV, slots, low=0)))  # the slots follow its machines
    return made


def build_run(spec, resume=None):
    """The run `spec` describes, where this server trains (an actor on the cluster, a child process or
    a thread), at its priority; from `resume`'s checkpoint where a run goes on after a restart."""
    from minigpt.serve.runs.recipe import CHILD_NICE
    from minigpt.serve.runs.process import build_run as build

    cluster = placement.on_cluster()
    in_process = train_in() == "process" or cluster is not None  # out of the server's interpreter: a child's priority
    nice = train_nice(CHILD_NICE if in_process else DEFAULT_THREAD_NICE)
    if cluster is not None:
        return cluster.run(replace(spec, nice=nice), resume)
    return build(replace(spec, nice=nice), resume, in_process=in_process)


def run_facts(spec) -> RunFacts:
    """What the Train page says of a run's corpus (RunFacts), from what rebuilds the run."""
    return RunFacts(task_for_corpus(spec.corpus_key), spec.corpus_key or "",
                    unseen_validation_chars(spec.text, spec.train.val_fraction))


def server_sizes(capacity: Capacity, cluster_slots: int | None = None) -> tuple[int, int]:
    """How many runs may train at once (MINIGPT_MAX_RUNS, else the cluster's slots where runs train on
    one, else what the box affords), and how many finished runs it keeps small in the memory the server
    and its slots leave (runs on a cluster take none of this box's)."""
    if cluster_slots is not None:
        return env_int(MAX_RUNS_ENV, cluster_slots, low=0), kept_runs_for(capacity, KEPT_RUN_BYTES, SERVER_BYTES,
                                                                          MIN_KEPT, MAX_KEPT)
    slots = env_int(MAX_RUNS_ENV, slots_for(capacity, RUN_BYTES, SERVER_BYTES))
    return slots, kept_runs_for(capacity, KEPT_RUN_BYTES, SERVER_BYTES + slots * RUN_BYTES, MIN_KEPT, MAX_KEPT)


def run_threads() -> int:
    """Intra-op threads for each run: its share of the server's CPUs, never more, and at most
    MAX_RUN_THREADS, what a run here is fastest with; on a cluster, the one CPU its actor takes."""
    if placement.on_cluster() is not None:
        return MAX_RUN_THREADS
    return min(threads_per_run(read_capacity(), registry().max_runs), MAX_RUN_THREADS)


def session_run() -> tuple[RunEntry | None, bool]:
    """The run this session shows, and whether it owns it (else it only watches)."""
    ss = st.session_state
    own = ss.get(OWN_RUN_KEY)
    if own is not None:
        entry = registry().get(*own)
        if entry is not None:
            return entry, True
        del ss[OWN_RUN_KEY]
        ss[NOTICE_KEY] = gone_notice(own[0])
    watched = ss.get(WATCHED_RUN_KEY)
    if watched is not None:
        entry = registry().get(watched)
        if entry is not None:
            return entry, False
        newer = registry().successor(watched)
        if newer is not None:
            ss[WATCHED_RUN_KEY] = newer.run_id
            ss[NOTICE_KEY] = _("The owner of run `{old}` started a new run, `{new}`: you are now watching that one.",
                           old=watched, new=newer.run_id)
            sync_url()
            return newer, False
        del ss[WATCHED_RUN_KEY]
        ss[NOTICE_KEY] = erased_notice(watched) or _(
            "Run `{run}` is no longer on this server: its owner stopped using it, or the server restarted. Ask for a "
            "new link, or train a run of your own on the Train page.", run=watched)
    return None, False


def gone_notice(run_id: str) -> str:
    """Why the session's own run is no longer on this server, in a sentence."""
    reason = registry().gone_reason(run_id)
    if reason == "dropped":
        return _("Your run `{run}` left the line for a training slot: no page of the app was open for {wait}, so "
                 "its place went to the next learner. Press Start to join the line again.", run=run_id,
                 wait=format_duration(registry().waiting_idle_seconds))
    if reason == "erased":
        return _("Your run `{run}` was posted to a class whose teacher erased the class's data, this run with it.",
                 run=run_id)
    if reason == "trimmed":
        return _("Your run `{run}` finished long ago and made room for newer runs: a server keeps as many "
                 "finished runs as its memory holds. Download a checkpoint to keep a run for good.", run=run_id)
    return _("Your run `{run}` is no longer on this server: a run is released when its owner has not used it for "
             "{minutes} minutes (a page that shows it training counts as use), and when the server restarts.",
             run=run_id, minutes=registry().idle_seconds // 60)


def erased_notice(run_id: str) -> str | None:
    """For someone else's run that is gone: that a teacher erased it with their class's data, if so."""
    if registry().gone_reason(run_id) != "erased":
        return None
    return _("Run `{run}` was posted to a class whose teacher erased the class's data, this run with it.", run=run_id)


def cancel_own_run() -> None:
    """Take this session's waiting run out of the line; the page then offers Start again."""
    own = st.session_state.pop(OWN_RUN_KEY, None)
    if own is None:
        return
    with contextlib.suppress(NotOwnerError):  # it may have gone meanwhile: out of the line all the same
        registry().control(*own, "cancel")
    st.session_state[NOTICE_KEY] = _("You left the line: your run `{run}` will not train. Press Start to join "
                                     "again.", run=own[0])
    sync_url()


def read_run_from_url() -> None:
    """On a session's first page run, adopt ?run=<id> (and &key=<secret> for its owner)."""
    ss = st.session_state
    if not ss.get(URL_READ_KEY):
        ss[URL_READ_KEY] = True
        run_id, key = st.query_params.get(url.RUN), st.query_params.get(url.KEY)
        if run_id:
            entry = registry().get(run_id, key) or registry().successor(run_id)
            if entry is None:
                if _RUN_ID.fullmatch(run_id):  # never echo markup from a link
                    ss[NOTICE_KEY] = erased_notice(run_id) or _(
                        "The run `{run}` in this address is no longer on this server (runs are released when idle and "
                        "when the server restarts).", run=run_id)
                else:
                    ss[NOTICE_KEY] = _("The run in this address is no longer on this server (runs are released when "
                                   "idle and when the server restarts).")
            else:
                if entry.run_id == run_id and entry.is_owner(key):
                    ss[OWN_RUN_KEY] = (run_id, key)
                else:
                    ss[WATCHED_RUN_KEY] = entry.run_id
                    if entry.run_id != run_id:
                        ss[NOTICE_KEY] = _("Run `{old}` was replaced by its owner's new run, `{new}`: showing that.",
                                       old=run_id, new=entry.run_id)
                ss[MODEL_SOURCE] = TRAINED  # the address names a run: Generate and Attention use it
    sync_url()


def sync_url() -> None:
    """Keep ?run= (and the owner's &key=) in the address bar, so a refresh reattaches."""
    ss = st.session_state
    own, watched = ss.get(OWN_RUN_KEY), ss.get(WATCHED_RUN_KEY)
    want = {url.RUN: own[0], url.KEY: own[1]} if own else {url.RUN: watched} if watched else {}
    for name in (url.RUN, url.KEY):
        if name in st.query_params and name not in want:
            del st.query_params[name]
    if any(st.query_params.get(name) != value for name, value in want.items()):
        st.query_params.update(want)


def run_configs(corpus: Corpus, model: GPTConfig, train: TrainConfig) -> tuple[CharTokenizer, GPTConfig, TrainConfig]:
    """Validate a run's settings for this corpus before anything is allocated; ConfigError, or
    CorpusError when the corpus is too short for them."""
    tokenizer = CharTokenizer.from_text(corpus.text)
    model = replace(model, vocab_size=tokenizer.vocab_size).validate()
    train = replace(train, device=current_device()).validate(model)
    if model.num_params() > MAX_PARAMS:
        raise ConfigError("This model has {params:,} parameters; this server trains at most {limit:,}. "
                          "Use a smaller d_model or d_ff, or fewer layers.", params=model.num_params(), limit=MAX_PARAMS)
    check_memory_budget(model, train, env_int(MEMORY_ENV, DEFAULT_MEMORY_MB) * 2**20)
    check_corpus_fits(len(corpus.text), train.val_fraction, train.block_size, train.batch_size)
    task = task_for_corpus(corpus.key)
    if task is not None:
        task.check_block(train.block_size)
    return tokenizer, model, train


def start_run(corpus: Corpus, model: GPTConfig, train: TrainConfig, paused: bool = False) -> RunEntry:
    """Put this session's run in line for a training slot (it replaces the session's previous run,
    and starts at once when a slot is free) and make it the loaded model; paused=True leaves it at
    step 0, to be stepped through.

    Raises ConfigError or CorpusError for settings that can't train, RunLimitError when the line is full.
    """
    tokenizer, model, train = run_configs(corpus, model, train)
    task = task_for_corpus(corpus.key)
    if task is not None:  # a held-out line, its question as the prompt: the sample is the model's answer
        probe = task.probe(corpus.text)
        prompt, sample_chars = probe[: task.length + 1], task.length + 1
    else:
        probe = probe_text(tokenizer, corpus.text)[: train.block_size]  # only positions the run trains
        prompt, sample_chars = next(iter(demo_prompts(tokenizer)), ""), 80

    from minigpt.serve.runs.recipe import RunSpec

    spec = RunSpec("", model, train, tuple(tokenizer.chars), corpus.text, corpus.key, probe, prompt, sample_chars,
                   threads=run_threads())
    ss = st.session_state
    entry = registry().submit(spec, corpus=corpus.label, replace=ss.get(OWN_RUN_KEY), paused=paused)
    ss[OWN_RUN_KEY] = (entry.run_id, entry.key)
    ss.pop(WATCHED_RUN_KEY, None)
    ss[MODEL_SOURCE] = TRAINED
    sync_url()
    return entry


def control_run(action: str) -> None:
    """Pause, resume, stop or cancel (a waiting run) this session's own run."""
    own = st.session_state.get(OWN_RUN_KEY)
    if own is None:
        raise NotOwnerError("This session has no run of its own.")
    registry().control(own[0], own[1], action)


def run_settings(entry: RunEntry) -> tuple[GPTConfig, TrainConfig]:
    """The configs the run trains with (not what the form shows now)."""
    return entry.run.trainer.model_config, entry.run.trainer.cfg


def readonly_link(entry: RunEntry) -> str:
    """This page's address with only ?run=<id>: it lets others watch, never steer. No language: it is
    for someone else, whose browser (or choice) decides theirs."""
    return url.link(**{url.RUN: entry.run_id})


def run_checkpoint_zip(entry: RunEntry) -> bytes:
    """The run's current weights as a checkpoint zip, made in memory, loadable again on Home."""
    parts = entry.run.checkpoint_parts()
    history = entry.run.snapshot().history
    meta = {
        "corpus": entry.corpus, "step": parts["trainer_state"]["step"], "val_loss": parts["val_loss"],
        "history": [[e.step, e.train_loss, e.val_loss] for e in history],
        "run_id": entry.run_id, "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "probe_text": entry.probe_text,
    }
    return minigpt.checkpoint_zip(parts["model"], parts["tokenizer"], train_config=parts["train_config"], meta=meta)
