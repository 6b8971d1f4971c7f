"""Streamlit glue for MiniGPT Lab: what every page shares.

- Cached resources: the built-in corpora and the shipped or uploaded checkpoints, loaded
  once per process, so opening a page never reloads or retrains a model.
- The run registry: every training run on this server, the secret that lets its owner
  steer it, the cap on how many train at once, and the release of runs whose owner
  stopped looking at them.
- Session helpers: the learner's choices (corpus, model, device), which run is theirs or
  watched, and the run id in the URL so that a page refresh reattaches.
`minigpt` never imports Streamlit; this module is the only bridge between the two.
"""
from __future__ import annotations

import gc
import hashlib
import inspect
import os
import re
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st
import torch

from minigpt import (
    BUILTIN_CORPORA,
    DEFAULT_CORPUS,
    Checkpoint,
    CheckpointError,
    CharTokenizer,
    ConfigError,
    GPTConfig,
    MiniGPT,
    TrainConfig,
    Trainer,
    TrainingRun,
    available_devices,
    build_model,
    checkpoint_to_zip,
    check_corpus_fits,
    check_memory_budget,
    context_window,
    decode_corpus,
    load_corpus,
    load_pretrained,
    load_zip,
    save_pretrained,
    scaling_experiment,
    stop_orphaned_runs,
)

HOME = "streamlit_app.py"
# (script, label, icon, what it offers): the sidebar and Home's links
PAGES = (
    (HOME, "Home", "🏠", "The loaded model; corpus, model and device"),
    ("pages/1_Train.py", "Train", "🏋️", "Train a model and watch it learn"),
    ("pages/2_Generate.py", "Generate", "✍️", "Write text, one character at a time"),
    ("pages/3_Attention.py", "Attention", "🔍", "See where each character looks"),
    ("pages/4_Scaling.py", "√d_k scaling", "📐", "Why attention divides by √d_k"),
)
DEMO_SENTENCE = "深度学习是人工智能的重要领域"   # the reference demo's attention example
DEMO_SEEDS = ("深度", "自然", "注意", "计算")      # the reference demo's generation prompts

MAX_PARAMS = 5_000_000                # a model a small shared CPU trains in minutes
MEMORY_ENV, DEFAULT_MEMORY_MB = "MINIGPT_MEMORY_BUDGET_MB", 1024  # per run; Community Cloud has 0.7-2.7 GB
MAX_CHECKPOINT_BYTES = 25 * 2**20     # as server.maxUploadSize in .streamlit/config.toml
MAX_RUNS_ENV, DEFAULT_MAX_RUNS = "MINIGPT_MAX_RUNS", 2
IDLE_ENV, DEFAULT_IDLE_SECONDS = "MINIGPT_RUN_IDLE_SECONDS", 30 * 60
MAX_KEPT_RUNS = 8                     # stopped runs kept for generating and downloading
ACTIVE_STATES = ("running", "paused")

# session_state keys; the three choices are Home's widgets, kept across pages
CORPUS, MODEL_SOURCE, DEVICE = "corpus", "model_source", "device"
UPLOADED_CORPUS, UPLOADED_CHECKPOINT = "uploaded_corpus", "uploaded_checkpoint"
CORPUS_UPLOAD, CHECKPOINT_UPLOAD = "corpus_upload", "checkpoint_upload"
UPLOAD_ERRORS = "upload_errors"
OWN_RUN, WATCHED_RUN = "own_run", "watched_run"
URL_READ, NOTICE = "url_read", "notice"

# the model sources, worded as Home's radio shows them
SHIPPED, UPLOADED, TRAINED = "Shipped with the app", "A checkpoint I upload", "The run on the Train page"
MODEL_SOURCES = (SHIPPED, UPLOADED, TRAINED)


# ------------------------------------------------------------------ page setup

def setup_page(script: str) -> None:
    """First call of every page, passing its __file__: page config, torch threads, the run in
    the URL, the sidebar."""
    _, title, icon, _ = next(p for p in PAGES if Path(p[0]).name == Path(script).name)
    st.set_page_config(page_title=f"{title} · MiniGPT Lab", page_icon=icon, layout="wide")
    configure_torch()
    read_run_from_url()
    entry, owner = session_run()  # first, so that a vanished run's notice shows now
    notice = st.session_state.pop(NOTICE, None)
    if notice:
        st.warning(notice)
    _sidebar(entry, owner)


_torch_configured = False


def configure_torch() -> None:
    """One intra-op thread: under CPU contention (server, browser, trainers) more threads
    made training ~100x slower, not faster."""
    global _torch_configured
    if not _torch_configured:
        torch.set_num_threads(1)
        _torch_configured = True


def _sidebar(entry: RunEntry | None, owner: bool) -> None:
    """Our own navigation (the pages/ convention would label Home "streamlit app"), then the choices."""
    with st.sidebar:
        for script, label, icon, _ in PAGES:
            st.page_link(script, label=label, icon=icon)
        st.divider()
        source = st.session_state.get(MODEL_SOURCE, SHIPPED)
        st.caption(f"**Corpus** {md(current_corpus().label)}  \n**Model** {source}  \n**Device** {current_device()}")
        if entry is not None:
            st.caption(f"**Run** `{entry.run_id}` ({'yours' if owner else 'watching'})")


def scaling_defaults() -> dict:
    """scaling_experiment's own defaults (the demo's settings), for the page's widgets."""
    params = inspect.signature(scaling_experiment).parameters
    return {name: params[name].default for name in ("d_ks", "seq_len", "seed", "num_samples")}


@st.cache_data(show_spinner=False, max_entries=64)
def scaling_table(d_ks: tuple[int, ...], seq_len: int, seed: int, num_samples: int) -> pd.DataFrame:
    return scaling_experiment(d_ks, seq_len=seq_len, seed=seed, num_samples=num_samples)


# ------------------------------------------------------------------ corpora

@dataclass(frozen=True)
class Corpus:
    key: str                                          # a built-in name, or "<file name> (uploaded)"
    label: str                                        # what the learner sees
    text: str = field(repr=False, compare=False)


@st.cache_resource(show_spinner=False)
def builtin_corpus(name: str) -> Corpus:
    return Corpus(name, name, load_corpus(name))


def corpus_options() -> list[str]:
    uploaded = st.session_state.get(UPLOADED_CORPUS)
    return list(BUILTIN_CORPORA) + ([uploaded.key] if uploaded else [])


def corpus_description(key: str) -> str:
    if key in BUILTIN_CORPORA:
        return BUILTIN_CORPORA[key]
    corpus = current_corpus()
    return f"Your upload, {len(corpus.text):,} characters."


def current_corpus() -> Corpus:
    key = st.session_state.get(CORPUS, DEFAULT_CORPUS)
    uploaded = st.session_state.get(UPLOADED_CORPUS)
    if uploaded is not None and key == uploaded.key:
        return uploaded
    return builtin_corpus(key if key in BUILTIN_CORPORA else DEFAULT_CORPUS)


def accept_corpus_upload(name: str, data: bytes) -> Corpus:
    """Make uploaded bytes the session's corpus; CorpusError says why they can't be one."""
    text = decode_corpus(data, source=name)
    corpus = Corpus(f"{name} (uploaded)", name, text)
    st.session_state[UPLOADED_CORPUS] = corpus
    st.session_state[CORPUS] = corpus.key
    return corpus


def on_corpus_upload() -> None:
    """file_uploader callback: runs before the page, so it may set the corpus selectbox."""
    _accept_upload(CORPUS_UPLOAD, accept_corpus_upload)


def upload_error(widget_key: str) -> str | None:
    return st.session_state.get(UPLOAD_ERRORS, {}).get(widget_key)


def _accept_upload(widget_key: str, accept: Callable[[str, bytes], object]) -> None:
    errors = st.session_state.setdefault(UPLOAD_ERRORS, {})
    errors.pop(widget_key, None)
    file = st.session_state.get(widget_key)
    if file is None:
        return
    try:
        accept(file.name, file.getvalue())
    except ValueError as err:  # CorpusError, CheckpointError, ConfigError
        # shown literally: the message may quote the file's name or a zip entry's, which markdown would mangle
        errors[widget_key] = md(str(err)) if file.name in str(err) else f"{md(file.name)}: {md(str(err))}"


# ------------------------------------------------------------------ checkpoints and the loaded model

@st.cache_resource(max_entries=4, show_spinner="Loading the shipped model…")
def pretrained_checkpoint(corpus: str, device: str) -> Checkpoint:
    return load_pretrained(corpus, device)


@st.cache_resource(max_entries=4, show_spinner="Loading the checkpoint…")
def _zip_checkpoint(digest: str, device: str, _data: bytes) -> Checkpoint:
    return load_zip(_data, device=device)


@dataclass(frozen=True)
class UploadedCheckpoint:
    name: str
    digest: str
    data: bytes = field(repr=False)

    def load(self, device: str) -> Checkpoint:
        return _zip_checkpoint(self.digest, device, self.data)


def accept_checkpoint_upload(name: str, data: bytes) -> Checkpoint:
    """Load an uploaded zip and make it the session's model; CheckpointError says why not."""
    if len(data) > MAX_CHECKPOINT_BYTES:
        raise CheckpointError(
            f"the file is {len(data) / 2**20:.1f} MB; the limit is {MAX_CHECKPOINT_BYTES / 2**20:.0f} MB."
        )
    upload = UploadedCheckpoint(name, hashlib.sha256(data).hexdigest(), data)
    checkpoint = upload.load(current_device())
    st.session_state[UPLOADED_CHECKPOINT] = upload
    st.session_state[MODEL_SOURCE] = UPLOADED
    return checkpoint


def on_checkpoint_upload() -> None:
    _accept_upload(CHECKPOINT_UPLOAD, accept_checkpoint_upload)


def current_device() -> str:
    device = st.session_state.get(DEVICE)
    devices = available_devices()
    return device if device in devices else devices[0]


class ModelUnavailable(LookupError):
    """The chosen model source has nothing to load; the message tells the learner what to do."""


@dataclass
class LoadedModel:
    model: MiniGPT
    tokenizer: CharTokenizer
    source: str          # one of MODEL_SOURCES
    corpus: str          # the corpus the model learned, as shown to the learner
    status: str          # one word: pretrained, uploaded, or the run's state
    steps: str           # training steps done ("1,000"; "120 / 2,000" for a run)
    detail: str          # a sentence on where the model comes from
    sample_text: str     # the default text for the attention view and the first prompt
    window: int          # tokens of context: the training block_size (positions past it never trained)

    @property
    def device(self) -> str:
        return str(next(self.model.parameters()).device)

    @property
    def num_params(self) -> int:
        return self.model.num_params()

    @property
    def vocab_id(self) -> str:
        """Short fingerprint of the vocabulary: widgets holding text are kept per vocabulary."""
        return hashlib.sha256("".join(self.tokenizer.chars).encode()).hexdigest()[:8]

    def summary(self) -> str:
        """One line for the top of Generate and Attention."""
        return (f"Model: {self.detail} ({self.status}, {self.steps} steps) · corpus {md(self.corpus)} · "
                f"{self.num_params:,} parameters · {self.device}")

    def describe(self) -> str:
        c = self.model.config
        return (f"{c.num_layers} layers × {c.num_heads} heads, d_model {c.d_model} (d_k {c.d_k}), "
                f"d_ff {c.d_ff}, max_len {c.max_len}, vocabulary {self.tokenizer.vocab_size} characters")


def loaded_model() -> LoadedModel:
    """The session's model; ModelUnavailable when its source has none yet."""
    source = st.session_state.get(MODEL_SOURCE, SHIPPED)
    if source == TRAINED:
        return _run_model()
    if source == UPLOADED:
        return _uploaded_model()
    return _pretrained_model()


def require_model() -> LoadedModel:
    """The loaded model, or an explanation with a link to Home and the end of this page run."""
    try:
        return loaded_model()
    except ModelUnavailable as reason:
        st.info(str(reason))
        st.page_link(HOME, label="Choose a model on Home", icon="🏠")
        st.stop()


def _pretrained_model() -> LoadedModel:
    corpus = current_corpus()
    if corpus.key not in BUILTIN_CORPORA:
        raise ModelUnavailable(
            f"No model ships with your uploaded corpus ({md(corpus.label)}): train one on the Train page, "
            f"upload a checkpoint on Home, or choose a built-in corpus."
        )
    try:
        checkpoint = pretrained_checkpoint(corpus.key, current_device())
    except (CheckpointError, OSError) as err:
        raise ModelUnavailable(f"The shipped model for {corpus.key} could not be loaded: {err}") from None
    return LoadedModel(checkpoint.model, checkpoint.tokenizer, SHIPPED, corpus.key, "pretrained",
                       _steps(checkpoint), f"the model shipped with the app for {corpus.key}",
                       probe_text(checkpoint.tokenizer, corpus.text), _window(checkpoint))


def _uploaded_model() -> LoadedModel:
    upload = st.session_state.get(UPLOADED_CHECKPOINT)
    if upload is None:
        raise ModelUnavailable("No checkpoint uploaded yet: upload a .zip on Home (the Train page's download).")
    try:
        checkpoint = upload.load(current_device())
    except CheckpointError as err:
        raise ModelUnavailable(f"{md(upload.name)} could not be loaded: {err}") from None
    corpus = str(checkpoint.meta.get("corpus") or "unknown")
    text = builtin_corpus(corpus).text if corpus in BUILTIN_CORPORA else current_corpus().text
    return LoadedModel(checkpoint.model, checkpoint.tokenizer, UPLOADED, corpus, "uploaded", _steps(checkpoint),
                       f"the checkpoint {md(upload.name)}", probe_text(checkpoint.tokenizer, text),
                       _window(checkpoint))


def _window(checkpoint: Checkpoint) -> int:
    trained = checkpoint.train_config.block_size if checkpoint.train_config else None
    return context_window(checkpoint.model, trained)


def _steps(checkpoint: Checkpoint) -> str:
    step = checkpoint.meta.get("step")
    return f"{step:,}" if isinstance(step, int) else "–"


def _run_model() -> LoadedModel:
    entry, _ = session_run()
    if entry is None:
        raise ModelUnavailable("No training run in this session: start one on the Train page.")
    snap = entry.run.snapshot()
    model = entry.inference_model()
    return LoadedModel(model, entry.run.trainer.tokenizer, TRAINED, entry.corpus, snap.state,
                       f"{snap.step:,} / {snap.max_steps:,}", f"run {entry.run_id} from the Train page",
                       entry.probe_text, context_window(model, entry.run.trainer.cfg.block_size))


def probe_text(tokenizer: CharTokenizer, corpus_text: str, limit: int = 40) -> str:
    """The demo's sentence when the vocabulary has it, else the first full line of the corpus."""
    if not tokenizer.unknown_chars(DEMO_SENTENCE):
        return DEMO_SENTENCE
    for line in corpus_text.splitlines():
        line = line.strip()
        if len(line) >= 8 and not tokenizer.unknown_chars(line):
            return line[:limit]
    return "".join(c for c in corpus_text[:limit] if c in tokenizer.stoi)


def first_prompt(model: LoadedModel) -> str:
    seeds = seed_prompts(model.tokenizer)
    if seeds:
        return seeds[0]
    words = model.sample_text.split()
    return words[0] + " " if words else ""


def seed_prompts(tokenizer: CharTokenizer) -> list[str]:
    """The demo's four prompts, when this vocabulary can spell all of them."""
    return list(DEMO_SEEDS) if not tokenizer.unknown_chars("".join(DEMO_SEEDS)) else []


def attention_maps(model: MiniGPT, tokenizer: CharTokenizer, text: str, scaled: bool | None = None) -> np.ndarray:
    """Attention weights of `text`, shaped (layers, heads, T, T).

    scaled=None follows the model's config; False recomputes the scores without 1/sqrt(d_k).
    """
    ids = torch.tensor([tokenizer.encode(text)], device=next(model.parameters()).device)
    return model.attention_maps(ids, scale_attention=scaled).cpu().numpy()


# ------------------------------------------------------------------ the run registry

class RunLimitError(RuntimeError):
    """The server already trains as many runs as it allows."""


class NotOwnerError(PermissionError):
    """Only the session that started a run (holding its key) may steer it."""


def max_runs() -> int:
    return _env_int(MAX_RUNS_ENV, DEFAULT_MAX_RUNS)


def idle_seconds() -> int:
    return _env_int(IDLE_ENV, DEFAULT_IDLE_SECONDS)


def _env_int(name: str, default: int) -> int:
    try:
        value = int(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value >= 1 else default


@dataclass(eq=False)
class RunEntry:
    """A run in the registry: the run, its owner's secret and what the pages show about it."""

    run: TrainingRun
    key: str = field(repr=False)          # the owner's secret; watchers only know run_id
    corpus: str
    probe_text: str
    last_seen: float = field(default_factory=time.monotonic)
    _model: tuple[int, MiniGPT] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def is_owner(self, key: str | None) -> bool:
        return isinstance(key, str) and secrets.compare_digest(key.encode(), self.key.encode())

    def is_active(self) -> bool:
        return self.run.state in ACTIVE_STATES and self.run.is_alive()

    def release(self) -> None:
        """The registry forgot this run: stop it and free its memory, whoever still holds the entry."""
        self.run.close(timeout=2.0)
        with self._lock:
            self._model = None

    def inference_model(self) -> MiniGPT:
        """A weight copy, taken again only when the run has stepped since the last one."""
        step = self.run.trainer.step
        with self._lock:
            if self._model is None or self._model[0] != step:
                self._model = (step, self.run.inference_model())
            return self._model[1]


class RunRegistry:
    """Every run on this server. Thread-safe: all sessions share one registry.

    The cap is checked and a slot reserved under one lock, so simultaneous Start clicks
    never train more than max_runs() at once or spawn a thread they must then stop.
    Runs whose owner has not looked for idle_seconds() are dropped on the next access, and
    at most MAX_KEPT_RUNS are kept in all; a dropped (or replaced) run is closed, which frees
    its model, optimizer and data at once, so memory stays bounded.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, RunEntry] = {}
        self._reserved = 0

    def get(self, run_id: str | None, key: str | None = None) -> RunEntry | None:
        """The run, or None; its owner's key also marks it as seen."""
        self._release_idle()
        with self._lock:
            entry = self._entries.get(run_id) if run_id else None
            if entry is not None and entry.is_owner(key):
                entry.last_seen = time.monotonic()
            return entry

    def active_count(self) -> int:
        self._release_idle()
        with self._lock:
            return self._active_locked()

    def start(self, build: Callable[[], TrainingRun], *, corpus: str, probe: str,
              replace: tuple[str, str] | None = None) -> RunEntry:
        """Build and start a run. It replaces the caller's own previous run (`replace`: its id and
        key), which frees that run's slot; if building fails, the previous run goes on untouched."""
        self._release_idle()
        with self._lock:
            old = self._entries.get(replace[0]) if replace else None
            if old is not None and not old.is_owner(replace[1]):
                old = None
            limit = max_runs()
            busy = self._active_locked() - (old is not None and old.is_active()) + self._reserved
            if busy >= limit:
                raise RunLimitError(
                    f"This server already trains {limit} run{'s' if limit > 1 else ''}, its limit. "
                    f"Wait until one finishes (or is stopped) and press Start again; meanwhile "
                    f"Generate and Attention work with the loaded model."
                )
            self._reserved += 1
        try:
            run = build()
        except BaseException:
            with self._lock:
                self._reserved -= 1
            raise
        if old is not None:
            old.release()
        entry = RunEntry(run, secrets.token_urlsafe(16), corpus, probe)
        with self._lock:
            self._reserved -= 1
            if old is not None:
                self._entries.pop(old.run_id, None)
            self._entries[entry.run_id] = entry
            run.start()
            dropped = self._trim_locked()
        for stale in dropped:
            stale.release()
        return entry

    def control(self, run_id: str, key: str | None, action: str) -> None:
        """pause, resume or stop, for the owner only."""
        entry = self.get(run_id, key)
        if entry is None:
            raise KeyError(run_id)
        if not entry.is_owner(key):
            raise NotOwnerError("Only the browser session that started this run can pause or stop it.")
        if action == "pause":
            entry.run.pause()
        elif action == "resume":
            if entry.run.state == "paused":  # a stopped run would otherwise restart outside the cap
                entry.run.resume()
        elif action == "stop":
            entry.run.stop()
        else:
            raise ValueError(f"unknown action {action!r}")

    def stop_all(self) -> None:
        with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            entry.run.stop(timeout=2.0)

    def _active_locked(self) -> int:
        return sum(entry.is_active() for entry in self._entries.values())

    def _release_idle(self) -> None:
        cutoff = time.monotonic() - idle_seconds()
        with self._lock:
            idle = [e for e in self._entries.values() if e.last_seen < cutoff]
            for entry in idle:
                del self._entries[entry.run_id]
        for entry in idle:
            entry.release()
        if idle:
            # what the released runs leave (their threads' frames, the pages of sessions that have
            # gone) sits in reference cycles: collect them now, not at some later full collection
            del entry, idle
            gc.collect()

    def _trim_locked(self) -> list[RunEntry]:
        extra = len(self._entries) - MAX_KEPT_RUNS
        if extra <= 0:
            return []
        idle = sorted((e for e in self._entries.values() if not e.is_active()), key=lambda e: e.last_seen)
        dropped = idle[:extra]
        for entry in dropped:
            del self._entries[entry.run_id]
        return dropped


@st.cache_resource(show_spinner=False, on_release=lambda registry: registry.stop_all())
def registry() -> RunRegistry:
    """The process-wide registry. A new one (first use, or after a code reload) stops the
    trainer threads an old one left behind, since nothing can reach them any more."""
    stop_orphaned_runs()
    return RunRegistry()


# ------------------------------------------------------------------ this session's run

def session_run() -> tuple[RunEntry | None, bool]:
    """The run this session shows, and whether it owns it (else it only watches)."""
    ss = st.session_state
    own = ss.get(OWN_RUN)
    if own is not None:
        entry = registry().get(*own)
        if entry is not None:
            return entry, True
        del ss[OWN_RUN]
        ss[NOTICE] = (f"Your run `{own[0]}` is no longer on this server: runs are released "
                      f"{idle_seconds() // 60} minutes after their page was last open, and when the server restarts.")
    watched = ss.get(WATCHED_RUN)
    if watched is not None:
        entry = registry().get(watched)
        if entry is not None:
            return entry, False
        del ss[WATCHED_RUN]
        ss[NOTICE] = f"Run `{watched}` is no longer on this server."
    return None, False


_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")


def read_run_from_url() -> None:
    """On a session's first page run, adopt ?run=<id> (and &key=<secret> for its owner)."""
    ss = st.session_state
    if not ss.get(URL_READ):
        ss[URL_READ] = True
        run_id, key = st.query_params.get("run"), st.query_params.get("key")
        if run_id:
            entry = registry().get(run_id, key)
            if entry is None:
                shown = f" `{run_id}`" if _RUN_ID.fullmatch(run_id) else ""  # never echo markup from a link
                ss[NOTICE] = (f"The run{shown} in this address is no longer on this server "
                              f"(runs are released when idle and when the server restarts).")
            else:
                if entry.is_owner(key):
                    ss[OWN_RUN] = (run_id, key)
                else:
                    ss[WATCHED_RUN] = run_id
                ss[MODEL_SOURCE] = TRAINED  # the address names a run: Generate and Attention use it
    sync_url()


def sync_url() -> None:
    """Keep ?run= (and the owner's &key=) in the address bar, so a refresh reattaches."""
    ss = st.session_state
    own, watched = ss.get(OWN_RUN), ss.get(WATCHED_RUN)
    want = {"run": own[0], "key": own[1]} if own else {"run": watched} if watched else {}
    for name in ("run", "key"):
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
        raise ConfigError(
            f"This model has {model.num_params():,} parameters; this server trains at most {MAX_PARAMS:,}. "
            f"Use a smaller d_model or d_ff, or fewer layers."
        )
    check_memory_budget(model, train, _env_int(MEMORY_ENV, DEFAULT_MEMORY_MB) * 2**20)
    check_corpus_fits(len(corpus.text), train.val_fraction, train.block_size, train.batch_size)
    return tokenizer, model, train


def start_run(corpus: Corpus, model: GPTConfig, train: TrainConfig) -> RunEntry:
    """Start this session's run (replacing its previous one) and make it the loaded model.

    Raises ConfigError or CorpusError for settings that can't train, RunLimitError at the cap.
    """
    tokenizer, model, train = run_configs(corpus, model, train)
    probe = probe_text(tokenizer, corpus.text)
    prompt = next(iter(seed_prompts(tokenizer)), "")

    def build() -> TrainingRun:
        trainer = Trainer(build_model(model, train.seed, train.device), tokenizer, corpus.text, train)
        return TrainingRun(trainer, probe_text=probe, sample_prompt=prompt, run_id=secrets.token_urlsafe(9))

    ss = st.session_state
    entry = registry().start(build, corpus=corpus.label, probe=probe, replace=ss.get(OWN_RUN))
    ss[OWN_RUN] = (entry.run_id, entry.key)
    ss.pop(WATCHED_RUN, None)
    ss[MODEL_SOURCE] = TRAINED
    sync_url()
    return entry


def control_run(action: str) -> None:
    """Pause, resume or stop this session's own run."""
    own = st.session_state.get(OWN_RUN)
    if own is None:
        raise NotOwnerError("This session has no run of its own.")
    registry().control(own[0], own[1], action)


def run_checkpoint_zip(entry: RunEntry) -> bytes:
    """The run's current weights as a checkpoint zip, loadable again on Home."""
    parts = entry.run.checkpoint_parts()
    history = entry.run.snapshot().history
    meta = {
        "corpus": entry.corpus, "step": parts["trainer_state"]["step"], "val_loss": parts["val_loss"],
        "history": [[e.step, e.train_loss, e.val_loss] for e in history],
        "run_id": entry.run_id, "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    with tempfile.TemporaryDirectory(prefix="minigpt-download-") as tmp:
        folder = save_pretrained(Path(tmp) / "checkpoint", parts["model"], parts["tokenizer"],
                                 train_config=parts["train_config"], meta=meta)
        return checkpoint_to_zip(folder)


def format_duration(seconds: float | None) -> str:
    """'1 h 02 min', '3 min 05 s', '42 s'; an en dash when unknown."""
    if seconds is None:
        return "–"
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds} s"


_MARKDOWN_SPECIALS = frozenset("\\`*_{}[]()#+-.!|<>~$:")


def md(text: str) -> str:
    """Text from a learner (a file name, a corpus line) that markdown shows as typed."""
    return "".join(markdown_stream([text]))


def markdown_stream(pieces: Iterable[str]) -> Iterator[str]:
    """Text pieces made safe for st.write_stream's markdown: specials escaped, line breaks
    kept, and spaces that start a line made non-breaking (four would open a code block)."""
    line_start = True
    for piece in pieces:
        out = []
        for c in piece:
            if c == "\n":
                out.append("  \n")
            elif c == " " and line_start:
                out.append("\u00a0")
                continue
            else:
                out.append("\\" + c if c in _MARKDOWN_SPECIALS else c)
            line_start = c == "\n"
        yield "".join(out)
