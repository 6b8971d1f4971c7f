"""Batched generation: learners who ask one model at the same time share each step's forward pass.

One new token is a handful of matrix-vector products, so a learner's token costs the time to call
the ops, not to do the arithmetic. A `Batcher` serves every request for its model in one loop,
as the serving engines for large models batch requests continuously: each step feeds every
writing request's newest token at once (`MiniGPT.decode_rows`, one matrix product per weight for
all of them), then draws each request's next token with its own generator and settings. A request
joins at the next step, leaves after its last token (or when its reader goes away), and the rows
of the others close up behind it.

Each learner gets the text `sample.stream` writes alone for the same prompt, seed and settings:
the same draws from the same generator, the same filters (temperature, top-k, top-p), the same
refill of a full context (REFILL_KEPT of it, recomputed from its new positions). Only the
arithmetic is grouped differently, a few units in the last place of a logit, which moves a draw
only where it falls within that distance of a boundary between two tokens.

    batcher = batcher_for(model)          # one per model, made on first use
    for step in batcher.stream(tokenizer, "To be", max_new_tokens=40, sampling=Sampling(0.8), seed=3):
        print(step.text, end="")

There is no thread of its own: a reader who needs its next token takes the next step for the
whole batch (`Batcher`). A model that is training, or whose attention is hooked (a window
knock-out's copy), writes alone: the hooks see one sequence at a time.
"""
from __future__ import annotations

import queue
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
import torch.nn.functional as F

from .model import DecodeWeights, KVCache, MiniGPT
from .sample import (Prompt, SampledToken, Sampling, SamplingError, check_max_new_tokens, diverged, draw,
                     prepare_prompt, refill_keep, stream)
from .tokenizer import CharTokenizer

MAX_ROWS = 512       # requests one step writes at most; the ones after them wait for a row
FIRST_ROWS = 16      # the cache's first size in rows; it doubles as requests come
TOP = 5              # the model's likeliest tokens each SampledToken lists (as sample.stream)
# how long a reader steps for the others before it wakes them: 300 readers woken every step spent
# more time waking than the steps took (bench.generation --learners 300); the Generate page shows
# a character every 15 ms, so a reader woken every 20 ms has its next characters ready
LEAD_SECONDS = 0.02
_END = object()      # a request's last item: its writing is done


class _Drawn(NamedTuple):
    """A drawn token as numbers; the reader makes it a SampledToken."""
    token: int
    prob: float
    top_ids: list[int]
    top_probs: list[float]
    context: int


@dataclass(eq=False)
class _Request:
    """One learner's writing: what it asked, how far it is, and where its tokens go."""
    ids: list[int]                    # every token so far, prompt included
    max_new: int
    sampling: Sampling
    generator: torch.Generator        # its own, seeded as sample.stream seeds its own
    block_size: int
    chars: list[str]                  # the tokenizer's characters, by id
    out: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    length: int = 0                   # positions in its cache row
    made: int = 0                     # tokens written
    cancelled: bool = False           # its reader went away


class Writing:
    """A request in a Batcher: iterate it for its SampledTokens (blocking until each is drawn);
    `cancel()` leaves the batch at the next step."""

    def __init__(self, batcher: Batcher, request: _Request):
        self._batcher, self._request = batcher, request

    def __iter__(self) -> Iterator[SampledToken]:
        try:
            while (item := self._batcher._next(self._request)) is not _END:
                yield self._token(item)
        finally:
            self.cancel()

    def ready(self) -> list[SampledToken]:
        """The tokens drawn so far and not yet read, without waiting (for a loop stepped by hand)."""
        tokens = []
        while True:
            try:
                item = self._request.out.get_nowait()
            except queue.Empty:
                return tokens
            if item is not _END:
                tokens.append(self._token(item))

    def cancel(self) -> None:
        self._request.cancelled = True

    def _token(self, item: _Drawn | BaseException) -> SampledToken:
        """The drawn token in words, made here, in the reader's thread, not in the batch's loop."""
        if isinstance(item, BaseException):
            raise item
        chars = self._request.chars
        return SampledToken(token=item.token, text=chars[item.token], prob=item.prob,
                            top=[(chars[i], p) for i, p in zip(item.top_ids, item.top_probs)], context=item.context)


class Batcher:
    """Every request for one model, written together one step at a time.

    It has no thread of its own: a reader who needs its next token and finds none takes the next
    step, for every request in the batch, while the other readers wait for that step to end. A
    learner alone steps for themself, as sample.stream would; a class steps for each other. Tests
    call `step()` themselves, to place an arrival or a departure between two steps."""

    def __init__(self, model: MiniGPT, max_rows: int = MAX_ROWS):
        if max_rows < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows}")
        self._model = weakref.ref(model)  # a batcher never keeps its model alive
        self.max_rows = max_rows
        self._lock = threading.Lock()        # the lists below
        self._stepping = threading.Lock()    # held by the reader taking a step
        self._stepped = threading.Condition()  # notified when a reader stops stepping
        self._readers_waiting = 0            # readers waiting on it
        self._pending: list[_Request] = []   # submitted, not yet given a row
        self._active: list[_Request] = []    # request i writes in cache row i
        self._cache: KVCache | None = None
        self._weights: DecodeWeights | None = None  # model.decode_weights(), gathered once a loop
        self.steps = 0                       # steps taken, for the record
        self.rows_stepped = 0                # rows written over all steps: rows_stepped / steps = the batch

    def stream(self, tokenizer: CharTokenizer, prompt: str | Prompt, max_new_tokens: int = 200,
               sampling: Sampling = Sampling(), seed: int | None = None,
               block_size: int | None = None) -> Iterator[SampledToken]:
        """`sample.stream`'s tokens for the same arguments, written in this batch. Settings are
        checked before anything runs; a reader that stops iterating leaves the batch."""
        model = self._model()
        if model is None:
            raise RuntimeError("the model of this batcher is gone")
        if model.training or _hooked(model):
            yield from stream(model, tokenizer, prompt, max_new_tokens, sampling, seed, block_size=block_size)
            return
        yield from self.submit(tokenizer, prompt, max_new_tokens, sampling, seed, block_size)

    def submit(self, tokenizer: CharTokenizer, prompt: str | Prompt, max_new_tokens: int = 200,
               sampling: Sampling = Sampling(), seed: int | None = None,
               block_size: int | None = None) -> Writing:
        """Queue a request for the next step and return it to read."""
        if not isinstance(sampling, Sampling):
            raise TypeError(f"sampling must be a Sampling, e.g. Sampling(temperature=0.8), got {sampling!r}")
        check_max_new_tokens(max_new_tokens)
        model = self._model()
        block_size = min(block_size or model.config.max_len, model.config.max_len)
        if not isinstance(prompt, Prompt):
            prompt = prepare_prompt(tokenizer, prompt, block_size)
        request = _Request(list(prompt.ids), max_new_tokens, sampling, _generator(model, seed), block_size,
                           tokenizer.chars)
        with self._lock:
            self._pending.append(request)
        return Writing(self, request)

    @property
    def busy(self) -> int:
        """Requests waiting or writing."""
        with self._lock:
            return len(self._pending) + len(self._active)

    def _next(self, request: _Request) -> object:
        """The request's next item: drawn already, or drawn by the step this reader takes (or
        waits for, when another reader is taking it)."""
        while True:
            try:
                return request.out.get_nowait()
            except queue.Empty:
                pass
            if self._stepping.acquire(blocking=False):
                try:
                    self._lead(request)
                except BaseException as err:  # noqa: BLE001 (no reader may wait on a batch that failed)
                    self._fail(err)
                finally:
                    self._stepping.release()
                    with self._stepped:
                        self._stepped.notify_all()
            else:
                with self._stepped:  # checked under the condition: the step's notify cannot come before the wait
                    if request.out.empty() and self._stepping.locked():
                        self._readers_waiting += 1
                        self._stepped.wait()
                        self._readers_waiting -= 1

    def _lead(self, request: _Request) -> None:
        """Step until this reader has its item; while other readers wait, go on for LEAD_SECONDS so
        that they wake once for several tokens each, not once a step (a wake costs as much as a row)."""
        until = time.monotonic() + LEAD_SECONDS
        while self.step() and (request.out.empty() or self._readers_waiting and time.monotonic() < until):
            pass

    def _fail(self, err: BaseException) -> None:
        with self._lock:
            requests, self._pending, self._active = self._pending + self._active, [], []
            self._cache, self._weights = None, None
        for request in requests:
            request.out.put(err)

    @torch.inference_mode()
    def step(self) -> bool:
        """Admit the waiting requests that fit, write one token for every request in the batch,
        and let the finished and abandoned ones go. False when there was nothing to do."""
        model = self._model()
        with self._lock:
            self._active = self._close_up(self._active)
            room = self.max_rows - len(self._active)
            admitted, self._pending = self._pending[:room], self._pending[room:]
            admitted = [r for r in admitted if not r.cancelled]
            if not admitted and not self._active or model is None:
                self._cache, self._weights = None, None  # an idle batch holds no memory
                return False
        if model.training:  # as sample.stream: a model writes in eval mode
            model.eval()
        if self._weights is None:
            self._weights = model.decode_weights()  # the parameters themselves: a step of training shows through
        self._grow(model, len(self._active) + len(admitted))
        for group in _by_length(admitted):  # prompts of one length: one forward pass for all of them
            self._prefill(model, len(self._active), group, [r.ids[:-1] for r in group])
            self._active += group
        for row, request in enumerate(self._active):
            if request.length + 1 > request.block_size:  # a full context: keep the last part, at new positions
                self._prefill(model, row, [request], [request.ids[-refill_keep(request.block_size):-1]])
        self._write(model)
        with self._lock:
            if all(r.cancelled or r.made >= r.max_new for r in self._active) and not self._pending:
                self._active, self._cache, self._weights = [], None, None  # all done: an idle batch holds no memory
        return True

    def _close_up(self, active: list[_Request]) -> list[_Request]:
        """The requests still writing, in rows 0..n-1: the last row moves into each gap."""
        row = 0
        while row < len(active):
            request = active[row]
            if request.cancelled or request.made >= request.max_new:
                last = active.pop()
                if last is not request:
                    self._cache.move_row(len(active), row, last.length)
                    active[row] = last
                continue
            row += 1
        return active

    def _grow(self, model: MiniGPT, rows: int) -> None:
        """A cache of at least `rows` rows, the rows so far copied over."""
        have = 0 if self._cache is None else self._cache.keys[0].size(0)
        if rows <= have:
            return
        size = max(FIRST_ROWS, have)
        while size < rows:
            size *= 2
        grown = model.new_kv_cache(min(size, self.max_rows))
        for old, new in zip(self._cache.keys + self._cache.values if self._cache else [],
                            grown.keys + grown.values):
            new[:have] = old
        self._cache = grown

    def _prefill(self, model: MiniGPT, row: int, requests: list[_Request], ids: list[list[int]]) -> None:
        """Write the keys and values of each request's `ids` (all of one length) into rows row,
        row + 1, ... from position 0, in one forward pass; each newest token is fed with the batch."""
        for request, part in zip(requests, ids):
            request.length = len(part)
        if ids[0]:
            model(torch.tensor(ids, device=_device(model)), kv_cache=self._cache.view_rows(row, len(requests)))

    def _write(self, model: MiniGPT) -> None:
        """One token for every request in rows 0..B-1."""
        active = self._active
        device = _device(model)
        weights = self._weights
        if len(active) == 1:  # alone: decode_one's path, a dozen kernels a layer
            alone = self._cache.view_rows(0, 1, length=active[0].length)
            logits = model.decode_one(active[0].ids[-1], alone, weights).view(1, -1)
        else:
            tokens = torch.tensor([r.ids[-1] for r in active], device=device)
            positions = torch.tensor([r.length for r in active], device=device)
            logits = model.decode_rows(tokens, positions, self._cache, weights)  # (B, V)
        self.steps += 1
        self.rows_stepped += len(active)
        for request in active:
            request.length += 1
        drawn_rows = _draw_one(logits[0].float(), active[0]) if len(active) == 1 else _draw(logits.float(), active)
        for request, drawn in zip(active, drawn_rows):
            if drawn is None:
                request.made = request.max_new  # it leaves at the next step
                request.out.put(diverged())
                continue
            request.ids.append(drawn.token)
            request.made += 1
            request.out.put(drawn)
            if request.made >= request.max_new:
                request.out.put(_END)


def _by_length(requests: list[_Request]) -> list[list[_Request]]:
    """The requests grouped by prompt length, in the order each length first came."""
    groups: dict[int, list[_Request]] = {}
    for request in requests:
        groups.setdefault(len(request.ids), []).append(request)
    return list(groups.values())


def _draw_one(logits: torch.Tensor, request: _Request) -> list[_Drawn | None]:
    """A lone request's token, drawn by sample.stream's own function (fewer ops than a batch's)."""
    try:
        token, model_probs = draw(logits, request.sampling, request.generator)
    except SamplingError:
        return [None]
    top_probs, top_ids = torch.topk(model_probs, min(TOP, model_probs.numel()))
    return [_Drawn(token, float(model_probs[token]), top_ids.tolist(), top_probs.tolist(), request.length)]


def _draw(logits: torch.Tensor, requests: list[_Request]) -> list[_Drawn | None]:
    """Each row's next token (None where the row is not numbers), drawn as sample.stream draws it:
    greedy rows take the argmax, the others one uniform from their own generator against the
    distribution their own settings leave, all rows' settings applied at once."""
    V = logits.size(-1)
    finite = torch.isfinite(logits.sum(dim=-1)).tolist()  # one NaN or inf makes a row's sum one
    model_probs = F.softmax(logits, dim=-1)  # (B, V): the model's own beliefs, before the settings
    top_probs, top_ids = torch.topk(model_probs, min(TOP, V), dim=-1)
    rows = [row for row, r in enumerate(requests) if r.sampling.temperature != 0 and finite[row]]
    tokens = logits.argmax(dim=-1).tolist() if len(rows) < len(requests) else [0] * len(requests)  # greedy rows'
    if rows:
        settings = [requests[row].sampling for row in rows]
        probs = _distribution(logits if len(rows) == len(requests) else logits[rows], settings)  # (D, V)
        cumulative = probs.cumsum(dim=-1)
        u = torch.cat([torch.rand(1, generator=requests[row].generator, device=logits.device) for row in rows])
        drawn = torch.searchsorted(cumulative, u.view(-1, 1).mul_(cumulative[:, -1:]), right=True).view(-1)
        for j, (row, token) in enumerate(zip(rows, drawn.tolist())):
            # u rounded up to the total: the last index that can be drawn (as sample_index)
            tokens[row] = token if token < V else int(probs[j].nonzero()[-1])
    chosen = model_probs.gather(1, torch.tensor(tokens, device=logits.device).view(-1, 1)).view(-1).tolist()
    top_probs, top_ids = top_probs.tolist(), top_ids.tolist()
    return [_Drawn(tokens[row], chosen[row], top_ids[row], top_probs[row], request.length) if finite[row] else None
            for row, request in enumerate(requests)]


def _distribution(logits: torch.Tensor, settings: list[Sampling]) -> torch.Tensor:
    """sample.next_token_distribution of each row (D, V) under its own settings (temperature > 0):
    the same operations in the same order per row, each setting a column of values."""
    V = logits.size(-1)
    device = logits.device
    logits = logits / torch.tensor([[s.temperature] for s in settings], dtype=logits.dtype, device=device)
    k = [s.top_k if s.top_k and s.top_k < V else 0 for s in settings]  # 0: no cut
    if any(k):
        kth = torch.topk(logits, max(k), dim=-1).values.gather(1, torch.tensor([[max(c, 1) - 1] for c in k],
                                                                             device=device))
        kth[torch.tensor(k, device=device) == 0] = float("-inf")
        logits = logits.masked_fill(logits < kth, float("-inf"))
    cut = [row for row, s in enumerate(settings) if s.top_p is not None and s.top_p < 1.0]
    if cut:
        top_p = torch.tensor([[settings[row].top_p] for row in cut], device=device)
        sorted_logits, order = torch.sort(logits[cut], dim=-1, descending=True)
        probs = F.softmax(sorted_logits, dim=-1)
        drop_sorted = probs.cumsum(dim=-1) - probs >= top_p  # the token that crosses top_p is kept
        logits[cut] = logits[cut].masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))
    return F.softmax(logits, dim=-1)


def _generator(model: MiniGPT, seed: int | None) -> torch.Generator:
    """The request's own generator, seeded as sample.stream seeds its own."""
    generator = torch.Generator(device=_device(model))
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)
    return generator


def _device(model: MiniGPT) -> torch.device:
    return model.token_embed.weight.device


def _hooked(model: MiniGPT) -> bool:
    return any(b.self_attn._forward_pre_hooks or b.self_attn._forward_hooks for b in model.blocks)


_batchers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_batchers_lock = threading.Lock()


def batcher_for(model: MiniGPT) -> Batcher:
    """The process's one Batcher for `model`, made on first use; it goes with the model."""
    with _batchers_lock:
        batcher = _batchers.get(model)
        if batcher is None:
            batcher = _batchers[model] = Batcher(model)
        return batcher
