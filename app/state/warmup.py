"""Torch and the library's model code, loaded once per server process on a thread of their own.

Importing torch takes seconds, and a fresh server's first visitor opens Home. Home draws
without torch (it describes the shipped model from its config.json, and a CPU build of torch
offers the CPU alone: `devices_without_torch`), and starts the load once it has drawn; every
other page waits for it before it draws (`wait`), as it needs torch anyway. Once loaded, torch
runs one intra-op thread, and what the imports made is frozen out of the garbage collector's
walk (`_configure`).
"""
from __future__ import annotations

import ast
import gc
import importlib
import importlib.util
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import streamlit as st

# what a model page needs at once: torch, then the library's modules built on it
LIBRARY = ("torch", "minigpt.model", "minigpt.train", "minigpt.sample", "minigpt.checkpoint", "minigpt.archive")
POLL_SECONDS = 0.5  # how often a Home drawn before the load finished looks again, until it has

_loaded = threading.Event()
_start = threading.Lock()
_thread: threading.Thread | None = None


def start(after: float = 0.0, then: Callable[[], None] | None = None) -> None:
    """Begin loading the library on a background thread, once per process; `after` seconds from
    now (a page whose browser is still drawing keeps the CPU meanwhile), or at once. `then` runs on
    that thread once torch has loaded (the first caller's: the load happens once)."""
    global _thread
    if after > 0 and not ready():
        later = threading.Timer(after, start, kwargs={"then": then})
        later.daemon = True  # a server that stops meanwhile does not wait for it
        later.start()
        return
    with _start:
        if _thread is None:
            _thread = threading.Thread(target=_load, args=(then,), name="minigpt-warmup", daemon=True)
            _thread.start()


def ready() -> bool:
    """The library has loaded and torch is configured."""
    return _loaded.is_set()


def wait(then: Callable[[], None] | None = None) -> None:
    """Load the library if need be (then `then`, as in start), and return once it has."""
    start(then=then)
    _loaded.wait()


def devices_without_torch() -> list[str] | None:
    """["cpu"] where torch can offer no other device, as its build says (torch/version.py, read
    without importing torch: no CUDA or ROCm) on a platform without Apple's GPUs; None where only
    torch itself can tell. Community Cloud installs the CPU build: there Home lists the device at once."""
    if sys.platform == "darwin":
        return None
    try:
        spec = importlib.util.find_spec("torch")
        tree = ast.parse((Path(spec.origin).parent / "version.py").read_text(encoding="utf-8"))
    except (AttributeError, TypeError, OSError, SyntaxError, ValueError):
        return None
    built = {}  # version.py's constants: `cuda: Optional[str] = None`, `hip = None`, ...
    for node in tree.body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and isinstance(node.value, ast.Constant):
            built[targets[0].id] = node.value.value
    if "cuda" not in built or built.get("cuda") is not None or built.get("hip") is not None:
        return None
    return ["cpu"]


def _load(then: Callable[[], None] | None) -> None:
    # at the server's own priority: a lower one (niceness 19) made Home's first load faster on an
    # idle core, but a page that needs torch waits for this thread (or for its import lock), and
    # beside two CPU-bound processes the Train page then waited over a minute (tests/stress.py)
    try:
        for name in LIBRARY:
            importlib.import_module(name)
        _configure()
    finally:
        _loaded.set()  # a failed import is raised again by the page that imports the module itself
    if then is not None:
        then()


def _configure() -> None:
    """One intra-op torch thread: under CPU contention (server, browser, trainers) more threads made
    training far slower, not faster. gc.freeze(): Streamlit collects garbage after every script run
    (`runner.postScriptGC`), and a full collection walked every object the libraries made at import
    (torch, plotly, pandas, Streamlit), with the GIL held, after every widget move (bench/RESULTS.md).
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
