"""Sampling: temperature, top-k, top-p and a KV cache, streamed one token at a time.

The settings travel as one record, `Sampling`, checked once when it is made: from the page's
sliders (or the command line's flags) to `filter_logits`, whole. `stream()` yields a
`SampledToken` per new token: its text, the probability the model gave it and the model's five
likeliest alternatives (both from the untempered softmax, so a learner sees what the model
believed, not what the filters left).
Temperature 0 means greedy decoding, never a division by zero.

The model sees at most `block_size` tokens, the length it was trained on
(`Checkpoint.block_size`): positions past it were never trained, and a model fed
them degrades into noise. It is capped at max_len, the positions the model has.
The KV cache makes each new token one forward step over one position. Positions
are absolute (sinusoidal), so a full cache cannot simply drop its oldest entry:
every cached key was computed at its old position. When the context is full we
keep the last REFILL_KEPT (3/4) of it and recompute their keys once (a "re-prefill"),
which costs one forward pass per block_size/4 tokens instead of one per token.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .messages import LabError, Message
from .model import DecodeWeights, MiniGPT
from .tokenizer import CharTokenizer

MAX_NEW_TOKENS = 2000
REFILL_KEPT = 0.75  # the share of a full context the KV cache keeps when it refills


def refill_keep(block_size: int) -> int:
    """How many of the last tokens a full context keeps when the KV cache refills."""
    return max(1, block_size - int(block_size * (1 - REFILL_KEPT)))
MAX_TEMPERATURE = 10.0
MAX_PROMPT_CHARS = 100_000


class SamplingError(LabError, ValueError):
    """A sampling setting outside its meaningful range, or a model that cannot be sampled."""


@dataclass(frozen=True)
class Sampling:
    """How each next token is drawn: the temperature, then the top-k and top-p cut-offs.

    Checked when it is made, so a Sampling in hand can be used; frozen and hashable, so it can key
    a cache as a whole. Temperature 0 means greedy decoding (the likeliest token, no division by
    zero). A cut-off at its "off" value (None, top_k 0, top_p 1) leaves every token in."""
    temperature: float = 0.8     # the logits are divided by it before softmax; 0 = greedy
    top_k: int | None = None     # draw among the k likeliest tokens only; None or 0 = off
    top_p: float | None = None   # draw among the likeliest tokens whose probabilities reach p; None or 1 = off

    def __post_init__(self) -> None:
        """Raise SamplingError with a clear sentence for any setting that cannot work."""
        temperature, top_k, top_p = self.temperature, self.top_k, self.top_p
        if not _is_number(temperature) or not math.isfinite(temperature) or temperature < 0:
            raise SamplingError("temperature must be a number >= 0 (0 = greedy), got {temperature!r}.",
                                temperature=temperature)
        if temperature > MAX_TEMPERATURE:
            raise SamplingError("temperature {temperature:g} is above {limit:g}: the output would be noise.",
                                temperature=temperature, limit=MAX_TEMPERATURE)
        if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 0):
            raise SamplingError("top_k must be a whole number >= 0 (0 = off), got {top_k!r}.", top_k=top_k)
        if top_p is not None:
            if not _is_number(top_p) or not math.isfinite(top_p) or not 0 < top_p <= 1:
                raise SamplingError("top_p must lie in (0, 1] (1 = off), got {top_p!r}.", top_p=top_p)

    @property
    def cuts_off(self) -> bool:
        """Whether a cut-off is on, so that it may leave a token out."""
        return bool(self.top_k) or (self.top_p is not None and self.top_p < 1)

    def temperature_only(self) -> Sampling:
        """The same temperature with every cut-off off: what the temperature alone leaves."""
        return type(self)(temperature=self.temperature)


@dataclass
class SampledToken:
    token: int
    text: str
    prob: float                                  # model probability of the chosen token
    top: list[tuple[str, float]] = field(default_factory=list)  # model's top-5 (text, prob)
    context: int = 0                             # the tokens the model read to choose it: the last ones before it


@dataclass
class Prompt:
    ids: list[int]
    notes: list[Message]                         # what was done to the prompt, for the user


def check_max_new_tokens(max_new_tokens: int) -> None:
    """Raise SamplingError with a clear sentence for a number of new tokens that cannot work (the
    other settings are checked when their `Sampling` is made)."""
    if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool) or not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise SamplingError("max_new_tokens must be a whole number from 1 to {limit}, got {max_new_tokens!r}.",
                            limit=MAX_NEW_TOKENS, max_new_tokens=max_new_tokens)


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def prepare_prompt(tokenizer: CharTokenizer, prompt: str, block_size: int) -> Prompt:
    """Encode a prompt, starting from a newline (or the first token) when it is empty,
    and keeping only the last block_size characters of a long one. Unknown characters raise."""
    notes = []
    if len(prompt) > MAX_PROMPT_CHARS:
        raise SamplingError("the prompt has {count:,} characters; the limit is {limit:,}.", count=len(prompt),
                            limit=MAX_PROMPT_CHARS)
    if not prompt:
        start = "\n" if "\n" in tokenizer.stoi else tokenizer.chars[0]
        notes.append(Message("empty prompt: starting from {start!r}.", start=start))
        prompt = start
    ids = tokenizer.encode(prompt)
    if len(ids) > block_size:
        notes.append(Message("the prompt has {length} characters; the model sees only the last {block_size}.",
                             length=len(ids), block_size=block_size))
        ids = ids[-block_size:]
    return Prompt(ids, notes)


def filter_logits(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """Set to -inf every logit outside the top-k and outside the top-p nucleus. logits: (..., V).
    The temperature is not applied here: `next_token_distribution` divides by it first."""
    if sampling.top_k and sampling.top_k < logits.size(-1):
        kth = torch.topk(logits, sampling.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if sampling.top_p is not None and sampling.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = F.softmax(sorted_logits, dim=-1)
        mass_before = probs.cumsum(dim=-1) - probs  # probability of the tokens ranked above
        drop_sorted = mass_before >= sampling.top_p  # the token that crosses top_p is kept
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def next_token_distribution(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """Probabilities to sample from; a one-hot on the argmax when the temperature is 0."""
    if sampling.temperature == 0:
        return F.one_hot(logits.argmax(dim=-1), logits.size(-1)).to(logits.dtype)
    return F.softmax(filter_logits(logits / sampling.temperature, sampling), dim=-1)


def sample_index(probs: torch.Tensor, generator: torch.Generator) -> int:
    """Draw an index of `probs` (V,) with those probabilities: one uniform draw u from [0, total)
    and a binary search for the first cumulative probability above u, so an index of probability
    0 is never drawn. The same distribution as torch.multinomial(probs, 1), for less work per
    call: a cumulative sum and one binary search, where multinomial's general machinery costs more
    per draw, and more as the vocabulary grows (bench/RESULTS.md, "Figures moved out of
    docstrings", has the timings)."""
    cumulative = probs.cumsum(0)
    u = torch.rand(1, generator=generator, device=probs.device).mul_(cumulative[-1])
    index = int(torch.searchsorted(cumulative, u, right=True))
    if index >= probs.numel():  # u rounded up to the total: the last index that can be drawn
        index = int(probs.nonzero()[-1])
    return index


def draw(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator) -> tuple[int, torch.Tensor]:
    """The next token from the logits (V,) under `sampling`, and the model's own probabilities
    (the untempered softmax). Raises SamplingError where the logits are not numbers."""
    if not math.isfinite(logits.sum().item()):  # one NaN or inf makes the sum one
        raise diverged()
    model_probs = F.softmax(logits, dim=-1)
    if sampling.temperature == 0:
        return int(logits.argmax()), model_probs
    untempered = sampling.temperature == 1 and not sampling.cuts_off  # the model's own softmax
    probs = model_probs if untempered else next_token_distribution(logits, sampling)
    return sample_index(probs, generator), model_probs


@torch.inference_mode()  # like no_grad, minus autograd's version and view tracking: faster per token
def stream(
    model: MiniGPT,
    tokenizer: CharTokenizer,
    prompt: str | Prompt,
    max_new_tokens: int = 200,
    sampling: Sampling = Sampling(),
    seed: int | None = None,
    use_cache: bool = True,
    block_size: int | None = None,
) -> Iterator[SampledToken]:
    """Yield one SampledToken per generated token. Settings are checked before anything runs.

    sampling: how each token is drawn, checked when it was made.
    block_size: tokens of context, the length the model was trained on (default and cap: max_len)."""
    if not isinstance(sampling, Sampling):
        raise TypeError(f"sampling must be a Sampling, e.g. Sampling(temperature=0.8), got {sampling!r}")
    check_max_new_tokens(max_new_tokens)
    block_size = min(block_size or model.config.max_len, model.config.max_len)
    if not isinstance(prompt, Prompt):
        prompt = prepare_prompt(tokenizer, prompt, block_size)
    model.eval()
    device = model.token_embed.weight.device
    generator = torch.Generator(device=device)
    if seed is None:
        generator.seed()  # a fresh random seed for this generator alone, never the global one
    else:
        generator.manual_seed(seed)
    next_logits = _cached_logits if use_cache else _rerun_logits
    state = _Context(list(prompt.ids), model.new_kv_cache() if use_cache else None, block_size,
                     weights=model.decode_weights() if use_cache else None)
    for _ in range(max_new_tokens):
        token, model_probs = draw(next_logits(model, state).float(), sampling, generator)
        top_probs, top_ids = torch.topk(model_probs, min(5, model_probs.numel()))
        read = state.cache.length if use_cache else min(len(state.ids), block_size)  # after a refill, fewer
        state.ids.append(token)
        yield SampledToken(
            token=token,
            text=tokenizer.chars[token],
            prob=float(model_probs[token]),
            top=[(tokenizer.chars[i], p) for p, i in zip(top_probs.tolist(), top_ids.tolist())],
            context=read,
        )


def diverged() -> SamplingError:
    """What a model whose outputs are not numbers says when asked to write."""
    return SamplingError("the model's outputs are not numbers (NaN or inf): its training diverged, so it cannot "
                         "write. Train it again with a lower learning rate.")


def generate(model: MiniGPT, tokenizer: CharTokenizer, prompt: str, **kwargs) -> str:
    """The prompt followed by the generated text; `kwargs` are `stream`'s (sampling=Sampling(...))."""
    return prompt + "".join(step.text for step in stream(model, tokenizer, prompt, **kwargs))


@dataclass
class _Context:
    ids: list[int]               # every token so far, prompt included
    cache: object | None
    block_size: int              # most tokens the model sees at once
    fed: int = 0                 # how many of ids the cache has seen
    weights: DecodeWeights | None = None  # MiniGPT.decode_weights(), for the one-token steps


def _rerun_logits(model: MiniGPT, ctx: _Context) -> torch.Tensor:
    """The demo's way: re-run the last `block_size` tokens for every new token."""
    idx = torch.tensor([ctx.ids[-ctx.block_size :]], device=model.token_embed.weight.device)
    return model(idx)[0][0, -1]


def _cached_logits(model: MiniGPT, ctx: _Context) -> torch.Tensor:
    """Feed only the tokens the cache has not seen; re-prefill when the context is full."""
    new = ctx.ids[ctx.fed :]
    if ctx.cache.length + len(new) > ctx.block_size:
        keep = refill_keep(ctx.block_size)
        ctx.cache.length = 0  # rewrite the cache from its start: every kept key moves to a new position
        new = ctx.ids[-keep:]
    ctx.fed = len(ctx.ids)
    if len(new) == 1:
        return model.decode_one(new[0], ctx.cache, ctx.weights)
    idx = torch.tensor([new], device=model.token_embed.weight.device)
    return model(idx, kv_cache=ctx.cache)[0][0, -1]
