"""The model Generate and Attention use: shipped with the app, uploaded, or this session's run.

Checkpoints load once per process (`st.cache_resource`), so opening a page never reloads
or retrains a model; a run's weights are copied only when it has stepped. Importing this module
loads no torch: Home describes the shipped model from its config.json (`session_facts`) while
torch loads (app.state.warmup); the library's torch-backed names are read from `minigpt` when used.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import streamlit as st

import minigpt
from minigpt import (
    BUILTIN_CORPORA,
    CharTokenizer,
    CheckpointError,
    CorpusError,
    GPTConfig,
    TrainConfig,
    demo_prompts,
    load_pretrained,
    probe_text,
)
from minigpt.lab.tasks import find_task, task_for_corpus
from minigpt.pretrained import shipped_header
from minigpt.serve import NoWeightsError

from app.chrome.i18n import _, error_text, number
from app.chrome.site import HOME
from app.chrome.text import md
from app.state.choices import MODEL_SOURCE, SHIPPED, TRAINED, UPLOADED, current_device, device_label, model_source
from app.state.corpora import Corpus, builtin_corpus, current_corpus
from app.state.run_notes import state_label
from app.state.runs import session_run
from app.state.train_settings import model_shape

if TYPE_CHECKING:
    from minigpt import Checkpoint, MiniGPT, Windows

UPLOADED_CHECKPOINT_KEY = "uploaded_checkpoint"   # session_state key


@st.cache_resource(max_entries=4, show_spinner=False)
def _pretrained_checkpoint(corpus: str, device: str) -> Checkpoint:
    return load_pretrained(corpus, device)


def pretrained_checkpoint(corpus: str, device: str) -> Checkpoint:
    with st.spinner(_("Loading the shipped model…")):
        return _pretrained_checkpoint(corpus, device)


@st.cache_resource(max_entries=4, show_spinner=False)
def _zip_checkpoint(digest: str, device: str, _data: bytes) -> Checkpoint:
    return minigpt.load_zip(_data, device=device)


@dataclass(frozen=True)
class UploadedCheckpoint:
    name: str
    digest: str
    data: bytes = field(repr=False)

    @classmethod
    def of(cls, name: str, data: bytes) -> "UploadedCheckpoint":
        return cls(name, hashlib.sha256(data).hexdigest(), data)

    def load(self, device: str) -> Checkpoint:
        with st.spinner(_("Loading the checkpoint…")):
            return _zip_checkpoint(self.digest, device, self.data)


class ModelUnavailable(LookupError):
    """The chosen model source has nothing to load; the message tells the learner what to do."""


@dataclass
class LoadedModel:
    model: MiniGPT
    tokenizer: CharTokenizer
    source: str          # one of choices.MODEL_SOURCES
    corpus: str          # the corpus the model learned, as shown to the learner
    status: str          # one word: pretrained, uploaded, or the run's state, in the page's language
    steps: str           # training steps done ("1,000"; "120 / 2,000" for a run)
    detail: str          # a phrase on where the model comes from, in the page's language
    sample_text: str     # the default text for the attention view and the first prompt
    block_size: int      # the context it was trained on: positions past it never trained
    identity: str        # the same for the same weights: what a page keys the results it keeps on
    corpus_text: str = field(default="", repr=False)  # the corpus it learned, when known
    train_config: TrainConfig | None = None  # how it was trained, when known: its evaluation's windows come from it

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
        return _("Model: {detail} ({status}, {steps} steps) · corpus {corpus} · {params:,} parameters · {device}",
                 detail=self.detail, status=self.status, steps=self.steps, corpus=md(self.corpus),
                 params=self.num_params, device=self.device)

    def describe(self) -> str:
        return describe(self.model.config, self.tokenizer.vocab_size)

    def facts(self) -> ModelFacts:
        return ModelFacts(self.corpus, self.num_params, self.steps, self.status, self.device, self.detail,
                          self.describe())


@dataclass(frozen=True)
class ModelFacts:
    """What Home says of the session's model: from the loaded model, or for the shipped one from its
    config.json alone, before torch has loaded (session_facts)."""

    corpus: str
    num_params: int
    steps: str
    status: str
    device: str
    detail: str
    description: str


def describe(c: GPTConfig, vocab_size: int) -> str:
    """A model's shape in one line."""
    return _("{shape}, vocabulary {vocab} characters", shape=model_shape(c), vocab=vocab_size)


def session_facts() -> ModelFacts:
    """What Home shows of the session's model. The shipped model's come from its config.json, so
    Home needs neither its weights nor torch; ModelUnavailable as session_model."""
    if model_source() != SHIPPED:
        return session_model().facts()
    corpus = _shipped_corpus()
    try:
        header = shipped_header(corpus.key)
    except (CheckpointError, OSError) as err:
        raise _unloadable(corpus, err) from None
    return ModelFacts(corpus.key, header.model_config.num_params(), _steps(header.meta.get("step")), _("pretrained"),
                      device_label(), _shipped_detail(corpus), describe(header.model_config, header.tokenizer.vocab_size))


def session_model() -> LoadedModel:
    """The session's model; ModelUnavailable when its source has none yet."""
    source = model_source()
    if source == TRAINED:
        return _run_model()
    if source == UPLOADED:
        return _uploaded_model()
    return _pretrained_model()


def loaded_corpus() -> str | None:
    """The corpus the session's model learned, as the learner sees it, without building the model:
    the sidebar's line. None when the source has nothing loaded yet."""
    source = model_source()
    if source == TRAINED:
        entry, _owner = session_run()
        return entry.corpus if entry is not None else None
    if source == UPLOADED:
        upload = st.session_state.get(UPLOADED_CHECKPOINT_KEY)
        try:
            return str(upload.load(current_device()).meta.get("corpus") or _("unknown")) if upload else None
        except CheckpointError:
            return None
    corpus = current_corpus()
    return corpus.key if corpus.key in BUILTIN_CORPORA else None


def use_shipped_model() -> None:
    """Button callback: back to the model shipped for the session's corpus (its run stays as it is)."""
    st.session_state[MODEL_SOURCE] = SHIPPED


def require_model() -> LoadedModel:
    """The loaded model, or an explanation with a link to Home and the end of this page run."""
    try:
        return session_model()
    except ModelUnavailable as reason:
        st.info(str(reason))
        st.page_link(HOME.script, label=_("Choose a model on Home"), icon="🏠")
        st.stop()


def _from_checkpoint(checkpoint: Checkpoint, source: str, corpus: str, status: str, detail: str,
                     text: str, identity: str) -> LoadedModel:
    """text: the corpus the model learned, when known; the default texts come from it, or from the
    probe text the checkpoint carries, never from another corpus."""
    steps = _steps(checkpoint.meta.get("step"))
    tokenizer = checkpoint.tokenizer
    probe = checkpoint.meta.get("probe_text")
    if not (isinstance(probe, str) and probe.strip() and not tokenizer.unknown_chars(probe)):
        probe = probe_text(tokenizer, text)
    return LoadedModel(checkpoint.model, tokenizer, source, corpus, status, steps, detail,
                       probe[: checkpoint.block_size], checkpoint.block_size, identity, text, checkpoint.train_config)


def _steps(step: object) -> str:
    """Training steps done, as a checkpoint's meta says them."""
    return number(step) if isinstance(step, int) else "–"


def _shipped_corpus() -> Corpus:
    """The session's corpus, when a model ships for it; else ModelUnavailable."""
    corpus = current_corpus()
    if corpus.key not in BUILTIN_CORPORA:
        raise ModelUnavailable(_(
            "No model ships with your uploaded corpus ({corpus}): train one on the Train page, upload a checkpoint "
            "on Home, or choose a built-in corpus.", corpus=md(corpus.label)))
    return corpus


def _unloadable(corpus: Corpus, err: Exception) -> ModelUnavailable:
    return ModelUnavailable(_("The shipped model for {corpus} could not be loaded: {error}", corpus=corpus.key,
                              error=md(error_text(err))))


def _shipped_detail(corpus: Corpus) -> str:
    return _("the model shipped with the app for {corpus}", corpus=corpus.key)


def _pretrained_model() -> LoadedModel:
    corpus = _shipped_corpus()
    try:
        checkpoint = pretrained_checkpoint(corpus.key, current_device())
    except (CheckpointError, OSError) as err:
        raise _unloadable(corpus, err) from None
    return _from_checkpoint(checkpoint, SHIPPED, corpus.key, _("pretrained"), _shipped_detail(corpus), corpus.text,
                            f"shipped:{corpus.key}")


def _uploaded_model() -> LoadedModel:
    upload = st.session_state.get(UPLOADED_CHECKPOINT_KEY)
    if upload is None:
        raise ModelUnavailable(_("No checkpoint uploaded yet: upload a .zip on Home (the Train page's download)."))
    try:
        checkpoint = upload.load(current_device())
    except CheckpointError as err:
        raise ModelUnavailable(_("{name} could not be loaded: {error}", name=md(upload.name),
                                 error=md(error_text(err)))) from None
    corpus = str(checkpoint.meta.get("corpus") or _("unknown"))
    text = builtin_corpus(corpus).text if corpus in BUILTIN_CORPORA else ""
    return _from_checkpoint(checkpoint, UPLOADED, corpus, _("uploaded"),
                            _("the checkpoint {name}", name=md(upload.name)), text, f"uploaded:{upload.digest}")


def _run_model() -> LoadedModel:
    entry, _owner = session_run()
    if entry is None:
        raise ModelUnavailable(_("No training run in this session: start one on the Train page."))
    snap = entry.run.snapshot()
    try:
        model = entry.inference_model()
    except NoWeightsError as err:  # a run read back from the store before its first checkpoint
        raise ModelUnavailable(error_text(err)) from None
    return LoadedModel(model, entry.run.trainer.tokenizer, TRAINED, entry.corpus, state_label(snap.state),
                       _("{step:,} / {total:,}", step=snap.step, total=snap.max_steps),
                       _("run `{run}` from the Train page", run=entry.run_id),
                       entry.probe_text, entry.run.trainer.cfg.block_size, f"run:{entry.run_id}:{snap.step}",
                       train_config=entry.run.trainer.cfg)


def first_prompt(model: LoadedModel) -> str:
    """The demo's first prompt when the vocabulary has it, else the start of the model's sample
    text: only characters the model knows."""
    prompts = demo_prompts(model.tokenizer)
    if prompts:
        return prompts[0]
    line = find_task(model.sample_text)
    if line is not None:  # a task's question and separator: the model writes the answer
        return model.sample_text[: line[0].length + 1]
    words = model.sample_text.split()
    if not words:
        return model.sample_text[:4]
    return words[0][:8] + (" " if " " in model.tokenizer.stoi else "")


def validation_windows(loaded: LoadedModel) -> Windows | None:
    """The windows the model's own training measured its validation loss on (minigpt's
    validation_windows: its corpus's held-out split, its settings, a task's line starts), so that
    every page reports the val loss training did; for a checkpoint that does not say how it was
    trained, the default settings' windows; None where its corpus is unknown."""
    if loaded.source == TRAINED:
        entry, _owner = session_run()
        return entry.run.trainer.val_windows if entry is not None else None
    if not loaded.corpus_text or loaded.tokenizer.unknown_chars(loaded.corpus_text):
        return None
    task = task_for_corpus(loaded.corpus)
    import torch  # a page that measures a loss has torch loaded already

    ids = torch.tensor(loaded.tokenizer.encode(loaded.corpus_text), dtype=torch.long)
    settings = loaded.train_config or replace(TrainConfig(), block_size=loaded.block_size)  # a checkpoint that does not say
    try:
        return minigpt.validation_windows(ids, settings, task.line_length if task is not None else 1)
    except CorpusError:  # a held-out split too short for the settings
        return None


def windows_said(loaded: LoadedModel, windows: Windows) -> str:
    """What a loss measured on `windows` (validation_windows) is, in words: which number it matches."""
    size = dict(batches=len(windows), size=len(windows[0][0]))
    if loaded.source == TRAINED:
        return _("Measured on the {batches} batches of {size} held-out windows the run evaluates on, with its "
                 "weights as they are now: at an evaluation step, the val loss the Train page shows.", **size)
    if loaded.train_config is None:
        return _("Measured on {batches} batches of {size} windows of the held-out text, drawn with the default "
                 "settings: the checkpoint does not say how it was trained.", **size)
    return _("Measured on the {batches} batches of {size} held-out windows the model's training measured its "
             "val loss on: the val loss it was saved with.", **size)
