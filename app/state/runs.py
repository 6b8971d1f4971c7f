"""This session's training run: the process-wide registry, the run this session owns or
watches, the run in the URL (so a refresh reattaches), and starting or steering a run.

Looking a run up loads no torch (Home does it before torch has loaded, app.state.warmup): the
library's torch-backed names are read from `minigpt` where a run is built or saved, and the
training threads' module is imported where a run is started."""
from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import replace

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
from minigpt.lab.tasks import task_for_corpus
from minigpt.serve import NotOwnerError, RunEntry, RunRegistry, RunSpec, prepare_training as prepare_server

from app.chrome import url
from app.chrome.i18n import _
from app.chrome.text import format_duration
from app.state import serving
from app.state.choices import MODEL_SOURCE, TRAINED, current_device
from app.state.corpora import Corpus

MAX_PARAMS = 5_000_000                # a model a small shared CPU trains in minutes
MEMORY_ENV, DEFAULT_MEMORY_MB = "MINIGPT_MEMORY_BUDGET_MB", 1024  # per run; Community Cloud has 0.7-2.7 GB

# session_state keys
OWN_RUN_KEY, WATCHED_RUN_KEY = "own_run", "watched_run"   # (run id, key) / run id
URL_READ_KEY, NOTICE_KEY = "url_read", "notice"

_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")


def env_int(name: str, default: int, low: int = 1) -> int:
    """A server setting from the environment (docs/deploying.md): `default` when unset or not a whole
    number from `low`."""
    try:
        value = int(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value >= low else default


def prepare_training() -> None:
    """Once torch has loaded (warmup's `then`): where runs train in processes, the fork server starts
    now, so that it loads torch once, before the first Start, instead of at it."""
    prepare_server(serving.settings())


def registry() -> RunRegistry:
    """The process-wide registry of runs (the server's: state.serving)."""
    return serving.server().registry


def run_threads() -> int:
    """Intra-op threads for each run: its share of the server's CPUs (minigpt.serve.Server.run_threads)."""
    return serving.server().run_threads()


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


def start_run(corpus: Corpus, model: GPTConfig, train: TrainConfig, paused: bool = False,
              key: str | None = None) -> RunEntry:
    """Put this session's run in line for a training slot (it replaces the session's previous run,
    and starts at once when a slot is free) and make it the loaded model; paused=True leaves it at
    step 0, to be stepped through. `key`: the run's owner key (a learner's in a class is derived
    from who they are there, state.classroom), else a random one.

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

    spec = RunSpec("", model, train, tuple(tokenizer.chars), corpus.text, corpus.key, probe, prompt, sample_chars,
                   threads=run_threads())
    ss = st.session_state
    entry = registry().submit(spec, corpus=corpus.label, replace=ss.get(OWN_RUN_KEY), paused=paused, key=key)
    own(entry.run_id, entry.key)
    return entry


def own(run_id: str, key: str) -> None:
    """Make the run this session's own (its owner key checked by the caller) and the loaded model."""
    ss = st.session_state
    ss[OWN_RUN_KEY] = (run_id, key)
    ss.pop(WATCHED_RUN_KEY, None)
    ss[MODEL_SOURCE] = TRAINED
    sync_url()


def open_own_run(run_id: str, key: str) -> bool:
    """Make a run of this learner's (their run in a class, its key derived from who they are there)
    the session's own again, as its owner's address would: False when it is no longer on this server."""
    entry = registry().get(run_id, key)
    if entry is None or entry.run_id != run_id or not entry.is_owner(key):
        return False
    own(run_id, key)
    return True


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
