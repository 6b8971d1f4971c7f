"""Model and training hyperparameters: the one source of defaults.

`GPTConfig` describes the network, `TrainConfig` the optimisation. Both are plain
dataclasses with a `validate()` that turns a bad combination into a `ConfigError`
with a sentence a learner can act on, and `to_dict`/`from_dict` for checkpoints.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from .messages import N_, LabError


class ConfigError(LabError, ValueError):
    """A hyperparameter (or a combination of them) that cannot work."""


DTYPES = ("auto", "float32", "bfloat16")


@dataclass
class GPTConfig:
    """The MiniGPT network. Defaults are the reference demo's model."""

    vocab_size: int = 0           # set from the tokenizer
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 3
    d_ff: int = 256
    max_len: int = 128
    dropout: float = 0.1
    scale_attention: bool = True  # False drops the 1/sqrt(d_k) factor (for the scaling lesson)

    @property
    def d_k(self) -> int:
        return self.d_model // self.num_heads

    def num_params(self) -> int:
        """Parameter count without building the model (tied head counted once)."""
        d, f, v = self.d_model, self.d_ff, self.vocab_size
        per_layer = 4 * d * d + (d * f + f) + (f * d + d) + 2 * (2 * d)
        return v * d + self.num_layers * per_layer + 2 * d

    def validate(self) -> "GPTConfig":
        _check_int(self, "vocab_size", 1)
        _check_int(self, "d_model", 2)
        _check_int(self, "num_heads", 1)
        _check_int(self, "num_layers", 1)
        _check_int(self, "d_ff", 1)
        _check_int(self, "max_len", 1)
        if self.d_model % self.num_heads:
            raise ConfigError(
                "d_model ({d_model}) must be divisible by num_heads ({num_heads}): "
                "each head gets d_model / num_heads dimensions.", d_model=self.d_model, num_heads=self.num_heads,
            )
        if self.d_model % 2:
            raise ConfigError(
                "d_model ({d_model}) must be even: sinusoidal positions pair a sine and a cosine per frequency.",
                d_model=self.d_model,
            )
        _check_prob(self, "dropout")
        if not isinstance(self.scale_attention, bool):
            raise ConfigError("scale_attention must be true or false.")
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GPTConfig":
        return _from_dict(cls, data).validate()


@dataclass
class TrainConfig:
    """One training run. Defaults follow the demo (batch 16, windows of 30, AdamW 3e-3,
    weight decay 0.01, clip 1.0) with nanoGPT's warmup + cosine schedule on top."""

    batch_size: int = 16
    block_size: int = 30
    lr: float = 3e-3
    min_lr: float = 3e-4
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.99)
    max_steps: int = 2000
    warmup_steps: int = 100
    schedule: str = "cosine"      # "cosine" or "constant"
    eval_interval: int = 200
    eval_iters: int = 20
    grad_clip: float = 1.0        # 0 disables clipping
    val_fraction: float = 0.1
    seed: int = 1337
    device: str = "auto"          # "auto", "cpu", "cuda", "cuda:1", "mps"
    grad_accum: int = 1           # micro-batches per optimizer step (per process under torchrun)
    dtype: str = "auto"           # "auto": bf16 autocast on CUDA and on CPUs with AMX, else float32
    compile: bool = False         # torch.compile the training forward/backward
    early_stop_patience: int = 0  # stop after this many evaluations without a lower val loss (0 = off)

    def validate(self, model: GPTConfig | None = None) -> "TrainConfig":
        _check_int(self, "batch_size", 1)
        _check_int(self, "block_size", 1)
        _check_int(self, "max_steps", 1)
        _check_int(self, "warmup_steps", 0)
        _check_int(self, "eval_interval", 1)
        _check_int(self, "eval_iters", 1)
        _check_int(self, "seed", 0)
        _check_int(self, "grad_accum", 1)
        _check_int(self, "early_stop_patience", 0)
        if self.dtype not in DTYPES:
            raise ConfigError("dtype must be one of {choices}, got {dtype!r}.", choices=", ".join(DTYPES),
                              dtype=self.dtype)
        if not isinstance(self.compile, bool):
            raise ConfigError("compile must be true or false.")
        for name in ("lr", "min_lr"):
            value = getattr(self, name)
            if not _finite(value) or value <= 0:
                raise ConfigError("{name} must be a positive number, got {value!r}.", name=name, value=value)
        if self.min_lr > self.lr:
            raise ConfigError("min_lr ({min_lr}) must not exceed lr ({lr}).", min_lr=self.min_lr, lr=self.lr)
        if not _finite(self.weight_decay) or self.weight_decay < 0:
            raise ConfigError("weight_decay must be >= 0, got {value!r}.", value=self.weight_decay)
        if not _finite(self.grad_clip) or self.grad_clip < 0:
            raise ConfigError("grad_clip must be >= 0 (0 disables it), got {value!r}.", value=self.grad_clip)
        if self.schedule not in ("cosine", "constant"):
            raise ConfigError("schedule must be 'cosine' or 'constant', got {value!r}.", value=self.schedule)
        if not (0.0 < self.val_fraction < 0.5):
            raise ConfigError("val_fraction must lie in (0, 0.5), got {value!r}.", value=self.val_fraction)
        if len(self.betas) != 2 or not all(_finite(b) and 0 <= b < 1 for b in self.betas):
            raise ConfigError("betas must be two numbers in [0, 1), got {value!r}.", value=self.betas)
        if model is not None and self.block_size > model.max_len:
            raise ConfigError(
                "block_size ({block_size}) cannot exceed max_len ({max_len}): "
                "the model has positions for only {max_len} tokens.", block_size=self.block_size,
                max_len=model.max_len,
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainConfig":
        cfg = _from_dict(cls, data)
        cfg.betas = tuple(cfg.betas)
        return cfg.validate()


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_int(cfg: Any, name: str, minimum: int) -> None:
    value = getattr(cfg, name)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError("{name} must be an integer >= {minimum}, got {value!r}.", name=name, minimum=minimum,
                          value=value)


def _check_prob(cfg: Any, name: str) -> None:
    value = getattr(cfg, name)
    if not _finite(value) or not 0.0 <= value < 1.0:
        raise ConfigError("{name} must be a number in [0, 1), got {value!r}.", name=name, value=value)


def _from_dict(cls: type, data: dict[str, Any]) -> Any:
    """Build a config from JSON-like data, refusing unknown keys and wrong types."""
    if not isinstance(data, dict):
        raise ConfigError("{config} must be a JSON object, got {type}.", config=cls.__name__,
                          type=type(data).__name__)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError("unknown {config} keys: {keys}.", config=cls.__name__, keys=", ".join(unknown))
    for key, value in data.items():
        default = fields[key].default
        expected = type(default)
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            continue
        if expected is tuple and isinstance(value, list):
            continue
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise ConfigError(
                "{config}.{key} must be {expected}, got {type}.", config=cls.__name__, key=key,
                expected=expected.__name__, type=type(value).__name__,
            )
    return cls(**data)


def training_memory_bytes(model: GPTConfig, train: TrainConfig) -> int:
    """Rough peak memory to train in float32, known before anything is allocated.

    16 bytes a parameter (weights, gradients and AdamW's two moments) plus the
    activations autograd keeps for backward: per layer and token about 34*d_model +
    5*num_heads*T values in 16-bit (Korthikanti et al., 2022), doubled for float32,
    with d_ff's share scaled from the 4*d_model it assumes, plus the logits.
    """
    tokens = train.batch_size * train.block_size
    d, T = model.d_model, train.block_size
    per_token_layer = 2 * (34 * d + 8 * (model.d_ff - 4 * d) + 5 * model.num_heads * T)
    activations = tokens * model.num_layers * per_token_layer
    logits = 3 * 4 * tokens * model.vocab_size
    return 16 * model.num_params() + activations + logits


def check_memory_budget(model: GPTConfig, train: TrainConfig, budget_bytes: int) -> None:
    """Refuse a run whose estimated training memory exceeds the budget, before allocation."""
    need = training_memory_bytes(model, train)
    if need > budget_bytes:
        raise ConfigError(
            "this run needs about {need:,.0f} MB to train ({params:,} parameters, batch {batch_size} x block "
            "{block_size}); the limit here is {limit:,.0f} MB. Use a smaller d_model, fewer layers or a smaller "
            "batch.", need=need / 2**20, params=model.num_params(), batch_size=train.batch_size,
            block_size=train.block_size, limit=budget_bytes / 2**20,
        )


@dataclass(frozen=True)
class Preset:
    """A named pair of configs that the Train page fills in with one click, with the words its
    button shows (marked for the catalogs; the button's help adds the numbers, from the configs)."""

    name: str
    label: str
    use: str  # what it is for
    model: GPTConfig
    train: TrainConfig


EARLY_STOP_PATIENCE = 3  # evaluations without a lower val loss before a run that stops early stops

# the Train page's presets; python -m bench.presets measures how long each takes on a machine
PRESETS = {preset.name: preset for preset in (
    Preset("tiny", N_("Tiny"), N_("The quickest look at a loss curve."),
           GPTConfig(d_model=32, num_heads=2, num_layers=1, d_ff=128, max_len=64, dropout=0.0),
           TrainConfig(batch_size=16, block_size=32, max_steps=300, warmup_steps=30, eval_interval=50)),
    Preset("small", N_("Small"), N_("The default, and enough to learn the course text's style."),
           GPTConfig(d_model=64, num_heads=4, num_layers=2, d_ff=256, max_len=64, dropout=0.1),
           TrainConfig(batch_size=32, block_size=32, max_steps=600, warmup_steps=50, eval_interval=100,
                       early_stop_patience=EARLY_STOP_PATIENCE)),
    Preset("demo", N_("The demo's model"), N_("The reference demo's model: on the course text it starts to overfit, "
                                              "which the chart shows."), GPTConfig(), TrainConfig()),
    Preset("bigger", N_("Bigger"), N_("It learns fastest, and overfits soonest."),
           GPTConfig(d_model=128, num_heads=4, num_layers=4, d_ff=512, max_len=128, dropout=0.2),
           TrainConfig(batch_size=32, block_size=64, max_steps=1500, warmup_steps=100, eval_interval=250,
                       lr=2e-3, min_lr=2e-4, early_stop_patience=EARLY_STOP_PATIENCE)),
    # for the task-* corpora: whole lines of 13 characters, no dropout (the answers are exact)
    Preset("task", N_("Task"), N_("For the task corpora (reverse, copy, sort): each window is one whole line."),
           GPTConfig(d_model=64, num_heads=4, num_layers=2, d_ff=256, max_len=32, dropout=0.0),
           TrainConfig(batch_size=32, block_size=13, max_steps=1200, warmup_steps=20, eval_interval=100)),
)}
DEFAULT_PRESET = "small"
