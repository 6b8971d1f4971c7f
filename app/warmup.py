"""Torch and the library's model code, loaded once per server process on a thread of their own.

Importing torch takes seconds, and a fresh server's first visitor opens Home. Home draws
without torch (it describes the shipped model from its config.json), so it starts the load
here and does not wait for it; every other page waits for it before it draws (`wait`), as it
needs torch anyway. Once loaded, torch runs one intra-op thread, and what the imports made is
frozen out of the garbage collector's walk (`_configure`).
"""
from __future__ import annotations

import gc
import importlib
import threading

import streamlit as st

# what a model page needs at once: torch, then the library's modules built on it
LIBRARY = ("torch", "minigpt.model", "minigpt.train", "minigpt.sample", "minigpt.checkpoint", "minigpt.archive")
POLL_SECONDS = 0.5  # how often a Home drawn before the load finished looks again, until it has

_loaded = threading.Event()
_start = threading.Lock()
_thread: threading.Thread | None = None


def start() -> None:
    """Begin loading the library on a background thread, once per process."""
    global _thread
    with _start:
        if _thread is None:
            _thread = threading.Thread(target=_load, name="minigpt-warmup", daemon=True)
            _thread.start()


def ready() -> bool:
    """The library has loaded and torch is configured."""
    return _loaded.is_set()


def wait() -> None:
    """Load the library if need be, and return once it has."""
    start()
    _loaded.wait()


def _load() -> None:
    try:
        for name in LIBRARY:
            importlib.import_module(name)
        _configure()
    finally:
        _loaded.set()  # a failed import is raised again by the page that imports the module itself


def _configure() -> None:
    """One intra-op torch thread: under CPU contention (server, browser, trainers) more threads made
    training ~100x slower, not faster. gc.freeze(): Streamlit collects garbage after every script run
    (`runner.postScriptGC`), and a full collection walked every object the libraries made at import
    (torch, plotly, pandas, Streamlit: ~250,000), ~240 ms with the GIL held, after every widget move.
    Those live as long as the process; frozen, a collection walks only what was made since, and
    frozen objects are still freed when nothing refers to them."""
    import torch

    torch.set_num_threads(1)
    gc.freeze()


@st.fragment(run_every=POLL_SECONDS)
def rerun_when_ready() -> None:
    """On a page drawn before the library had loaded: draw the whole page again once it has (the
    fragment runs only while that page shows, and no more once the page is drawn again)."""
    if ready():
        st.rerun()
