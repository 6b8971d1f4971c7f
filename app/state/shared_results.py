"""What a class asks, computed once: the pages' model results, shared by every session.

A class of thirty opens Attention on the shipped model and its default text at the same time:
thirty sessions asking one question. Each function here keys its result on the model's identity
(`LoadedModel.identity`: the same for the same weights) and on the question's own inputs, in
Streamlit's process-wide cache, so that the first session computes it and the others read it.
A session that asks while the first is still computing waits for that computation instead of
starting its own (Streamlit holds a lock per key). A learner's own text, settings, knock-out or
model is another key, and gets its own answer.

Bounded: each function keeps at most KEEP_RESULTS results, each for KEEP_SECONDS after it was
computed. A hit returns a copy, so a page may change what it gets.

Generation is shared too when it is deterministic, and it always is here: the Generate page
draws with a seed. The first learner watches the model write; a learner who asks for the same
text from the same model reads the steps it wrote, streamed the same way (`written`). Learners
who ask the same model for different texts at the same moment share each step's forward pass
(minigpt.batching), and each reads the text it would get alone.

A computation takes its turn: at most DEFAULT_COMPUTE_SLOTS run at once (minigpt.serve.host.turns),
first come, first served, and a learner whose request waits sees how many are ahead of it where
the answer will be, instead of a frozen page. What was computed lately skips the queue: it is read, not
computed.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator

import numpy as np
import streamlit as st
import torch

from minigpt import MiniGPT, Prompt, SampledToken, Sampling, SamplingError, Windows, batcher_for, estimate_loss, generate
from minigpt.lab import embeddings, heads, predictions
from minigpt.lab.knockout import Knockout, head_importance, knocked_out
from minigpt.serve import TurnQueue

from app.chrome.i18n import n_
from app.state.loaded_model import LoadedModel
from app.state.runs import env_int

KEEP_RESULTS = 64      # per function: a class's few models × the texts and settings it tries
KEEP_SECONDS = 20 * 60  # a lesson's length: what the class asked a while ago is asked again less
SAMPLE_SEED, SAMPLE_TOKENS, SAMPLE_TEMPERATURE = 0, 120, 0.8  # a knock-out's sample, the same every time
Measured = tuple[float | None, "str | SamplingError"]  # a model's loss (None without windows) and its sample

# computations at once before a question waits in line. Not 1: one at a time, a quick question (a
# slider's one row) waited behind a slow one (every head knocked out in turn). Measured with a class
# of 30 beside 2 runs on one core (bench.class_load --scenario steady --minutes 3, in turn): with 3,
# opening Attention p95 0.40 s and a page 0.61 s, the runs 5.1 and 4.9 steps/s; with 1, 0.77 s,
# 0.78 s, 4.3 and 4.3 steps/s
COMPUTE_SLOTS_ENV, DEFAULT_COMPUTE_SLOTS = "MINIGPT_COMPUTE_SLOTS", 3


@st.cache_resource(show_spinner=False)
def turns() -> TurnQueue:
    """The process's queue of computations."""
    return TurnQueue(env_int(COMPUTE_SLOTS_ENV, DEFAULT_COMPUTE_SLOTS))


@contextlib.contextmanager
def in_turn() -> Iterator[None]:
    """Run the block in this request's turn; while it waits, say so where its answer will appear.
    A learner who leaves or changes the page meanwhile gives the place up (Streamlit stops the
    script at the next element, here the notice)."""
    notice = None

    def say(ahead: int) -> None:
        nonlocal notice
        if notice is None:
            notice = st.empty()
        notice.info(n_("Queued: {n} request is ahead of yours on this busy server; yours comes next.",
                       "Queued: {n} requests are ahead of yours on this busy server; they are served in turn.",
                       ahead))

    with turns().turn(on_wait=say):
        if notice is not None:
            notice.empty()
        yield


@st.cache_resource(show_spinner=False)
def _recent() -> "_Kept":
    """The questions answered lately, by function: what is read from the cache, not computed."""
    return _Kept(8 * KEEP_RESULTS, KEEP_SECONDS)


def _shared(compute: Callable) -> Callable:
    """Streamlit's process-wide cache around `compute`, whose parameters without a leading
    underscore (the key) come first; a question not answered lately is computed in its turn."""
    cached = st.cache_data(max_entries=KEEP_RESULTS, ttl=KEEP_SECONDS, show_spinner=False)(compute)
    keyed = sum(not name.startswith("_") for name in inspect.signature(compute).parameters)

    @functools.wraps(compute)
    def call(*args):
        question = (compute.__name__, *args[:keyed])
        if _recent().get(question) is not None:
            return cached(*args)
        with in_turn():
            answer = cached(*args)
        _recent().put(question, [])
        return answer

    return call


def _knockout_key(knockout: Knockout) -> tuple:
    """A knock-out as plain values in a fixed order (its set of heads sorted): the cache's key."""
    return (tuple(sorted(knockout.heads)), knockout.positions, knockout.window, knockout.shuffled_head,
            knockout.shuffle_seed)


def _model(loaded: LoadedModel, knockout: Knockout | None) -> MiniGPT:
    return loaded.model if knockout is None or knockout.empty else knocked_out(loaded.model, knockout)


def attention_maps(loaded: LoadedModel, text: str, scaled: bool | None = None,
                   knockout: Knockout | None = None) -> np.ndarray:
    """Attention weights of `text`, shaped (layers, heads, T, T). scaled=None follows the model's
    config; False recomputes the scores without 1/sqrt(d_k). With a knock-out: its copy's."""
    key = _knockout_key(knockout) if knockout is not None else None
    return _attention_maps(loaded.identity, text, scaled, key, loaded, knockout)


@_shared
def _attention_maps(identity: str, text: str, scaled: bool | None, knockout_key: tuple | None,
                    _loaded: LoadedModel, _knockout: Knockout | None) -> np.ndarray:
    model = _model(_loaded, _knockout)
    ids = torch.tensor([_loaded.tokenizer.encode(text)], device=next(model.parameters()).device)
    return model.attention_maps(ids, scale_attention=scaled).cpu().numpy()


def next_logits(loaded: LoadedModel, prompt: str) -> np.ndarray:
    """The model's scores for the character after `prompt` (its last block_size characters)."""
    return _next_logits(loaded.identity, prompt, loaded)


@_shared
def _next_logits(identity: str, prompt: str, _loaded: LoadedModel) -> np.ndarray:
    return predictions.next_logits(_loaded.model, _loaded.tokenizer.encode(prompt), _loaded.block_size)


def last_query_attention(loaded: LoadedModel, window: str) -> np.ndarray:
    """Where the last character of `window` looks, in each layer (mean of the heads)."""
    return _last_query_attention(loaded.identity, window, loaded)


@_shared
def _last_query_attention(identity: str, window: str, _loaded: LoadedModel) -> np.ndarray:
    return heads.last_query_attention(_loaded.model, _loaded.tokenizer.encode(window), _loaded.block_size)


def attention_row(loaded: LoadedModel, text: str, layer: int, head: int, query: int,
                  unscaled: bool) -> heads.AttentionRow:
    """One query's scores, scaled scores and weights in one head: the one-weight view."""
    return _attention_row(loaded.identity, text, layer, head, query, unscaled, loaded)


@_shared
def _attention_row(identity: str, text: str, layer: int, head: int, query: int, unscaled: bool,
                   _loaded: LoadedModel) -> heads.AttentionRow:
    return heads.attention_row(_loaded.model, _loaded.tokenizer.encode(text), layer, head, query,
                                 scale_attention=False if unscaled else None)


def logit_lens(loaded: LoadedModel, text: str) -> np.ndarray:
    """Each layer's reading of `text` through the output head: the logit lens."""
    return _logit_lens(loaded.identity, text, loaded)


@_shared
def _logit_lens(identity: str, text: str, _loaded: LoadedModel) -> np.ndarray:
    return predictions.logit_lens(_loaded.model, _loaded.tokenizer.encode(text))


def positions(loaded: LoadedModel) -> tuple[np.ndarray, np.ndarray]:
    """The position encodings the model was trained on, (block_size, d_model), and how alike each
    pair is, (block_size, block_size)."""
    return _positions(loaded.identity, loaded.block_size, loaded)


@_shared
def _positions(identity: str, block_size: int, _loaded: LoadedModel) -> tuple[np.ndarray, np.ndarray]:
    pe = _loaded.model.pos_encoding[:block_size].cpu().numpy()
    return pe, embeddings.position_similarity(pe)


def embedding_map(loaded: LoadedModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The embedding table (V, d_model), its rows on their two principal axes (V, 2) and each
    axis's share of the variance (2,)."""
    return _embedding_map(loaded.identity, loaded)


@_shared
def _embedding_map(identity: str, _loaded: LoadedModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    table = _loaded.model.token_embed.weight.detach().cpu().numpy()
    coords, share = embeddings.embedding_pca(table)  # an SVD: computed once per model, not per visit
    return table, coords, share


def measured(loaded: LoadedModel, knockout: Knockout, prompt: str, windows: Windows | None) -> Measured:
    """The model's (or its knocked-out copy's) loss on `windows` and its sample from `prompt`.
    The windows are the model's own validation windows: its identity fixes them."""
    return _measured(loaded.identity, _knockout_key(knockout), prompt, windows is not None, loaded, knockout,
                     windows)


@_shared
def _measured(identity: str, knockout_key: tuple, prompt: str, has_windows: bool, _loaded: LoadedModel,
              _knockout: Knockout, _windows: Windows | None) -> Measured:
    model = _model(_loaded, _knockout)
    loss = estimate_loss(model, _windows) if _windows is not None else None
    try:
        sample = generate(model, _loaded.tokenizer, prompt, max_new_tokens=SAMPLE_TOKENS,
                          sampling=Sampling(temperature=SAMPLE_TEMPERATURE), seed=SAMPLE_SEED,
                          block_size=_loaded.block_size)
    except SamplingError as err:  # a model whose training diverged
        sample = err
    return loss, sample


def importance(loaded: LoadedModel, windows: Windows) -> np.ndarray:
    """How much the loss on the model's validation windows rises with each head zeroed alone,
    shaped (layers, heads)."""
    return _importance(loaded.identity, loaded, windows)


@_shared
def _importance(identity: str, _loaded: LoadedModel, _windows: Windows) -> np.ndarray:
    return head_importance(_loaded.model, _windows)


class _Kept:
    """Values by their question, for every session (whole generations; the questions answered
    lately): at most `limit`, each for `seconds`."""

    def __init__(self, limit: int, seconds: float):
        self.limit, self.seconds = limit, seconds
        self._items: OrderedDict[tuple, tuple[float, list]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> list | None:
        with self._lock:
            item = self._items.get(key)
            if item is None or time.monotonic() - item[0] > self.seconds:
                self._items.pop(key, None)
                return None
            self._items.move_to_end(key)
            return item[1]

    def put(self, key: tuple, steps: list) -> None:
        with self._lock:
            self._items[key] = (time.monotonic(), steps)
            self._items.move_to_end(key)
            while len(self._items) > self.limit:
                self._items.popitem(last=False)  # the least recently read


@st.cache_resource(show_spinner=False)
def _generations() -> _Kept:
    return _Kept(KEEP_RESULTS, KEEP_SECONDS)


def written(loaded: LoadedModel, prompt: Prompt, max_new_tokens: int, sampling: Sampling,
            seed: int) -> Iterator[SampledToken]:
    """The model's writing from `prompt`, step by step: as the model draws it, or, when another
    session has asked the same model the same (prompt, settings and seed), the steps it drew then.
    The settings key it as one record: two that differ in any one setting are two questions.
    Only a whole generation is kept."""
    key = (loaded.identity, tuple(prompt.ids), max_new_tokens, sampling, seed)
    steps = _generations().get(key)
    if steps is not None:
        yield from steps
        return
    steps = []
    # learners writing at the same moment from this model share each step (minigpt.batching)
    for step in batcher_for(loaded.model).stream(loaded.tokenizer, prompt, max_new_tokens, sampling, seed,
                                                 block_size=loaded.block_size):
        steps.append(step)
        yield step
    _generations().put(key, steps)
