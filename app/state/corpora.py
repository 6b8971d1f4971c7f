"""The corpora a session can train on: the built-in ones, loaded once per process, its upload, and
the text of the class it is in (the teacher's upload, which takes the upload's place); the checks
an uploaded file passes to be a corpus, on Home and on the board alike, and how a refused file is said."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import streamlit as st

import minigpt.lab.tasks  # noqa: F401  (registers the task corpora: Home lists them with the texts)
from minigpt.lab.diagnosis import UnseenCharacters, unseen_validation_chars
from minigpt.lab.tasks import Task, task_for_corpus
from minigpt import BUILTIN_CORPORA, DEFAULT_CORPUS, corpus_chars, decode_corpus_as, load_corpus

from app.chrome.i18n import _, error_text
from app.chrome.text import md
from app.state.choices import CORPUS

if TYPE_CHECKING:  # Home lists the corpora before the serving wing (and torch) has loaded
    from minigpt.serve import ClassCorpus

UPLOADED_CORPUS_KEY = "uploaded_corpus"


@dataclass(frozen=True)
class Corpus:
    key: str                                          # a built-in name, "<file name> (uploaded)" or ClassCorpus.key
    label: str                                        # what the learner sees
    text: str = field(repr=False, compare=False)
    encoding: str = "UTF-8"                           # what an upload was read as
    of_class: str = ""                                # the code of the class whose text it is ("": the learner's)


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
    if corpus.of_class:
        return _("The text of class {code}, {chars:,} characters.", code=corpus.of_class, chars=len(corpus.text))
    if corpus.encoding != "UTF-8":
        return _("Your upload, {chars:,} characters, read as {encoding}.", chars=len(corpus.text),
                 encoding=corpus.encoding)
    return _("Your upload, {chars:,} characters.", chars=len(corpus.text))


def corpus_option_label(key: str) -> str:
    """How the corpus selectbox names an option: built-in names as they are, an upload by its file."""
    uploaded = st.session_state.get(UPLOADED_CORPUS_KEY)
    if uploaded is not None and key == uploaded.key:
        if uploaded.of_class:
            return _("{name} (class {code})", name=uploaded.label, code=uploaded.of_class)
        return _("{name} (uploaded)", name=uploaded.label)
    return key


def current_corpus() -> Corpus:
    key = st.session_state.get(CORPUS, DEFAULT_CORPUS)
    uploaded = st.session_state.get(UPLOADED_CORPUS_KEY)
    if uploaded is not None and key == uploaded.key:
        return uploaded
    return builtin_corpus(key if key in BUILTIN_CORPORA else DEFAULT_CORPUS)


def read_corpus_file(name: str, data: bytes) -> tuple[str, str]:
    """An uploaded file's bytes (UTF-8, UTF-16 or GBK) as a corpus's text, and the encoding they
    were read in; CorpusError, naming the file, says why they can't be one (empty, binary, not
    text in those encodings, too large)."""
    return decode_corpus_as(data, source=name)


def file_refusal(name: str, err: Exception) -> str:
    """Why an uploaded file was refused (`err`, a LabError), in the page's language, naming the file once."""
    # shown literally: the message may quote the file's name or a zip entry's, which markdown would mangle
    message = error_text(err)
    return md(message) if name in message else f"{md(name)}: {md(message)}"


def use_uploaded_corpus(name: str, text: str, encoding: str = "UTF-8") -> Corpus:
    """Make an upload's text the session's corpus."""
    corpus = Corpus(f"{name} (uploaded)", name, text, encoding)
    st.session_state[UPLOADED_CORPUS_KEY] = corpus
    st.session_state[CORPUS] = corpus.key
    return corpus


def use_class_corpus(code: str, corpus: ClassCorpus) -> bool:
    """Make class `code`'s corpus the session's: its built-in one, or its text in the upload's
    place; False when it already is (or names a built-in corpus this server does not have)."""
    ss = st.session_state
    key = corpus.key
    if ss.get(CORPUS) == key or (corpus.builtin is not None and key not in BUILTIN_CORPORA):
        return False
    if corpus.builtin is None:
        ss[UPLOADED_CORPUS_KEY] = Corpus(key, corpus.label, corpus.text, of_class=code)
    ss[CORPUS] = key
    return True


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
