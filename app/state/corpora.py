"""The corpora a session can train on: the built-in ones, loaded once per process, and its upload."""
from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st

import minigpt.lab.tasks  # noqa: F401  (registers the task corpora: Home lists them with the texts)
from minigpt.lab.diagnosis import UnseenCharacters, unseen_validation_chars
from minigpt.lab.tasks import Task, task_for_corpus
from minigpt import BUILTIN_CORPORA, DEFAULT_CORPUS, corpus_chars, load_corpus

from app.chrome.i18n import _
from app.state.choices import CORPUS

UPLOADED_CORPUS_KEY = "uploaded_corpus"


@dataclass(frozen=True)
class Corpus:
    key: str                                          # a built-in name, or "<file name> (uploaded)"
    label: str                                        # what the learner sees
    text: str = field(repr=False, compare=False)
    encoding: str = "UTF-8"                           # what an upload was read as


@st.cache_resource(show_spinner=False)
def builtin_corpus(name: str) -> Corpus:
    return Corpus(name, name, load_corpus(name))


def corpus_options() -> list[str]:
    uploaded = st.session_state.get(UPLOADED_CORPUS_KEY)
    return list(BUILTIN_CORPORA) + ([uploaded.key] if uploaded else [])


def corpus_description(key: str) -> str:
    if key in BUILTIN_CORPORA:
        return _(BUILTIN_CORPORA[key].description, chars=corpus_chars(key))
    corpus = current_corpus()
    if corpus.encoding != "UTF-8":
        return _("Your upload, {chars:,} characters, read as {encoding}.", chars=len(corpus.text),
                 encoding=corpus.encoding)
    return _("Your upload, {chars:,} characters.", chars=len(corpus.text))


def corpus_option_label(key: str) -> str:
    """How the corpus selectbox names an option: built-in names as they are, an upload by its file."""
    uploaded = st.session_state.get(UPLOADED_CORPUS_KEY)
    if uploaded is not None and key == uploaded.key:
        return _("{name} (uploaded)", name=uploaded.label)
    return key


def current_corpus() -> Corpus:
    key = st.session_state.get(CORPUS, DEFAULT_CORPUS)
    uploaded = st.session_state.get(UPLOADED_CORPUS_KEY)
    if uploaded is not None and key == uploaded.key:
        return uploaded
    return builtin_corpus(key if key in BUILTIN_CORPORA else DEFAULT_CORPUS)


def use_uploaded_corpus(name: str, text: str, encoding: str = "UTF-8") -> Corpus:
    """Make an upload's text the session's corpus."""
    corpus = Corpus(f"{name} (uploaded)", name, text, encoding)
    st.session_state[UPLOADED_CORPUS_KEY] = corpus
    st.session_state[CORPUS] = corpus.key
    return corpus


def forget_uploaded_corpus() -> None:
    """The learner removed the file: back to the default corpus."""
    if st.session_state.pop(UPLOADED_CORPUS_KEY, None) is not None:
        st.session_state[CORPUS] = DEFAULT_CORPUS


@dataclass(frozen=True)
class RunFacts:
    """What the Train page says of a run's corpus, kept with the run (RunEntry.facts): for an owner
    and for anyone who watches it, after its data is released too."""

    task: Task | None            # the corpus is a task's: the run is scored on it
    corpus: str                  # the corpus's key: a built-in name, or "<file> (uploaded)" (a challenge's)
    unseen: UnseenCharacters     # validation characters the training split never shows


def run_facts(spec) -> RunFacts:
    """What the Train page says of a run's corpus (RunFacts), from what rebuilds the run."""
    return RunFacts(task_for_corpus(spec.corpus_key), spec.corpus_key or "",
                    unseen_validation_chars(spec.text, spec.train.val_fraction))
