"""The class's own text, on the teacher's controls: the corpus the class trains on, a built-in one
or a text file the teacher uploads (checked as Home's uploads are: corpora.read_corpus_file), set,
shown and cleared. Train, opened in the class, starts from it (train_settings.fit_class). A refused
file is said under the uploader, and the class keeps the text it had."""
from __future__ import annotations

import streamlit as st

from minigpt import BUILTIN_CORPORA, CorpusError
from minigpt.serve import MAX_NAME, BoardError, ClassCorpus

from app.chrome.i18n import _, error_text
from app.chrome.text import file_name, md
from app.state.classroom import NOTICE_KEY, classes
from app.state.corpora import corpus_description, file_refusal, read_corpus_file

BUILTIN_KEY = "class_corpus_builtin"   # the select box of the built-in corpora
UPLOAD_KEY = "class_corpus_upload"     # the uploader of the class's text
REFUSED_KEY = "class_corpus_refused"   # session_state: (file name, the error) of the last file refused


def teacher_form(code: str, key: str) -> None:
    """What the class trains on now, a built-in corpus or a file to set instead, and Clear."""
    st.markdown("#### " + _("The class's text"))
    corpus = classes().class_corpus(code)
    st.caption(current_line(corpus))
    pick_col, set_col = st.columns([3, 1], vertical_alignment="bottom")
    pick = pick_col.selectbox(_("A built-in corpus"), list(BUILTIN_CORPORA), key=BUILTIN_KEY)
    set_col.button(_("Train the class on it"), key="class_corpus_set", on_click=set_corpus,
                   args=(code, key, ClassCorpus(pick, builtin=pick)), width="stretch",
                   disabled=corpus is not None and corpus.builtin == pick)
    st.caption(corpus_description(pick))
    with st.container(key=f"uploader_{UPLOAD_KEY}"):  # keyed for uploaders_css, which paints those TYPES lists
        st.file_uploader(_("…or upload the class's own text (.txt: UTF-8, UTF-16 or GBK)"), type=["txt"],
                         key=UPLOAD_KEY, on_change=upload, args=(code, key))
    if refused := st.session_state.get(REFUSED_KEY):
        st.error(file_refusal(*refused))
    if corpus is not None:
        st.button(_("Clear the class's text"), key="class_corpus_clear", on_click=set_corpus, args=(code, key, None),
                  help=_("Each learner trains on the corpus they choose again. Their runs stay as they are."))


def current_line(corpus: ClassCorpus | None) -> str:
    if corpus is None:
        return _("No text is set: each learner trains on the corpus they choose on Home.")
    if corpus.builtin is not None:
        return _("The class trains on the built-in corpus **{name}**: Train, opened in the class, starts from it.",
                 name=md(corpus.builtin))
    return _("The class trains on **{name}** ({chars:,} characters), which you uploaded: Train, opened in the "
             "class, starts from it.", name=md(corpus.label), chars=len(corpus.text))


def upload(code: str, key: str) -> None:
    """The uploader's callback: its file as the class's text, or why not (the class keeps its text).
    A file taken off the uploader changes nothing: Clear does."""
    st.session_state.pop(REFUSED_KEY, None)
    file = st.session_state.get(UPLOAD_KEY)
    if file is None:
        return
    try:
        text, _encoding = read_corpus_file(file.name, file.getvalue())
        classes().set_corpus(code, key, ClassCorpus(file_name(file.name, "corpus.txt", MAX_NAME), text=text))
    except (CorpusError, BoardError) as err:  # BoardError: over the class's own limit, or the class has ended
        st.session_state[REFUSED_KEY] = (file.name, err)


def set_corpus(code: str, key: str, corpus: ClassCorpus | None) -> None:
    try:
        classes().set_corpus(code, key, corpus)
    except BoardError as err:  # the class has ended meanwhile: the board says so on top
        st.session_state[NOTICE_KEY] = error_text(err)
