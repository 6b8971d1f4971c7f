"""Home's uploads: a corpus (.txt) and a checkpoint (.zip). Each is checked in its widget's
callback, which runs before the page, so a good upload is chosen at once and a bad one is
kept out with a message. A corpus is checked as a class's text is (corpora.read_corpus_file)."""
from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from minigpt import CheckpointError

from app.chrome.streamlit_words import CHECKPOINT_UPLOAD, CORPUS_UPLOAD, TYPES
from app.state.choices import MODEL_SOURCE, UPLOADED, current_device
from app.state.corpora import file_refusal, forget_uploaded_corpus, read_corpus_file, use_uploaded_corpus
from app.state.loaded_model import UPLOADED_CHECKPOINT_KEY, UploadedCheckpoint

UPLOAD_ERRORS_KEY = "upload_errors"
MAX_CHECKPOINT_BYTES = 25 * 2**20     # as server.maxUploadSize in .streamlit/config.toml


def accept_corpus_upload(name: str, data: bytes) -> None:
    """Make uploaded bytes (UTF-8, UTF-16 or GBK) the session's corpus; CorpusError says why they can't be one."""
    use_uploaded_corpus(name, *read_corpus_file(name, data))


def accept_checkpoint_upload(name: str, data: bytes) -> None:
    """Load an uploaded zip and make it the session's model; CheckpointError says why not."""
    if len(data) > MAX_CHECKPOINT_BYTES:
        raise CheckpointError("the file is {size:.1f} MB; the limit is {limit:.0f} MB.", size=len(data) / 2**20,
                              limit=MAX_CHECKPOINT_BYTES / 2**20)
    upload = UploadedCheckpoint.of(name, data)
    upload.load(current_device())
    st.session_state[UPLOADED_CHECKPOINT_KEY] = upload
    st.session_state[MODEL_SOURCE] = UPLOADED


def uploader(label: str, key: str, on_change: Callable[[], None]) -> None:
    """st.file_uploader in a keyed container, which uploaders_css() paints in the page's language."""
    with st.container(key=f"uploader_{key}"):
        st.file_uploader(label, type=TYPES[key], key=key, on_change=on_change)


def on_corpus_upload() -> None:
    if st.session_state.get(CORPUS_UPLOAD) is None:
        forget_uploaded_corpus()
    _accept(CORPUS_UPLOAD, accept_corpus_upload)


def on_checkpoint_upload() -> None:
    _accept(CHECKPOINT_UPLOAD, accept_checkpoint_upload)


def upload_error(widget_key: str) -> str | None:
    """Why the last upload was refused, in the page's language (the error is kept, not its words,
    so that switching language translates it too)."""
    refused = st.session_state.get(UPLOAD_ERRORS_KEY, {}).get(widget_key)
    if refused is None:
        return None
    return file_refusal(*refused)


def _accept(widget_key: str, accept: Callable[[str, bytes], None]) -> None:
    errors = st.session_state.setdefault(UPLOAD_ERRORS_KEY, {})
    errors.pop(widget_key, None)
    file = st.session_state.get(widget_key)
    if file is None:
        return
    try:
        accept(file.name, file.getvalue())
    except ValueError as err:  # CorpusError, CheckpointError, ConfigError
        errors[widget_key] = (file.name, err)
