"""Home's uploads: a corpus (.txt) and a checkpoint (.zip). Each is checked in its widget's
callback, which runs before the page, so a good upload is chosen at once and a bad one is
kept out with a message."""
from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from minigpt import CheckpointError, decode_corpus_as

from .choices import MODEL_SOURCE, UPLOADED, current_device
from .corpora import forget_uploaded_corpus, use_uploaded_corpus
from .models import UPLOADED_CHECKPOINT, UploadedCheckpoint
from .text import md

CORPUS_UPLOAD, CHECKPOINT_UPLOAD = "corpus_upload", "checkpoint_upload"   # the widgets' keys
UPLOAD_ERRORS = "upload_errors"
MAX_CHECKPOINT_BYTES = 25 * 2**20     # as server.maxUploadSize in .streamlit/config.toml


def accept_corpus_upload(name: str, data: bytes) -> None:
    """Make uploaded bytes (UTF-8, UTF-16 or GBK) the session's corpus; CorpusError says why they can't be one."""
    use_uploaded_corpus(name, *decode_corpus_as(data, source=name))


def accept_checkpoint_upload(name: str, data: bytes) -> None:
    """Load an uploaded zip and make it the session's model; CheckpointError says why not."""
    if len(data) > MAX_CHECKPOINT_BYTES:
        raise CheckpointError(
            f"the file is {len(data) / 2**20:.1f} MB; the limit is {MAX_CHECKPOINT_BYTES / 2**20:.0f} MB."
        )
    upload = UploadedCheckpoint.of(name, data)
    upload.load(current_device())
    st.session_state[UPLOADED_CHECKPOINT] = upload
    st.session_state[MODEL_SOURCE] = UPLOADED


def on_corpus_upload() -> None:
    if st.session_state.get(CORPUS_UPLOAD) is None:
        forget_uploaded_corpus()
    _accept(CORPUS_UPLOAD, accept_corpus_upload)


def on_checkpoint_upload() -> None:
    _accept(CHECKPOINT_UPLOAD, accept_checkpoint_upload)


def upload_error(widget_key: str) -> str | None:
    return st.session_state.get(UPLOAD_ERRORS, {}).get(widget_key)


def _accept(widget_key: str, accept: Callable[[str, bytes], None]) -> None:
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
