"""Training: AdamW with warmup + cosine decay and gradient clipping, reported as events.

`Trainer` owns one model, its optimizer, the token splits and the random state.
`Trainer.events()` drives it to max_steps and yields a `TrainEvent` every
`log_interval` steps and at each evaluation: the caller decides whether that
becomes a tqdm bar, a log line or a chart. The loop never prints.
Runs are deterministic for a given seed on CPU, and resumable: `state_dict()`
holds the step, the optimizer and the batch generator. A trainer's randomness is its own
(batches, dropout masks, initial weights), never torch's global generator, so a run gives the
same curve alone or beside another run in the same process.
Under torchrun, a `DistContext` (distributed.py) makes it one of several processes: it
trains through DistributedDataParallel, draws its own batches from seed + rank, and
leaves evaluation to rank 0. Each optimizer step takes grad_accum micro-batches.
"""
from __future__ import annotations

import base64
import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch.nn.parallel import DistributedDataParallel

from .header import CheckpointError
from .config import ConfigError, GPTConfig, TrainConfig
from .data import Windows, check_batch_fits, eval_windows, get_batch, split_tokens
from .device import cpu_has_amx, resolve_device
from .distributed import DistContext, all_reduce_mean
from .messages import LabError
from .model import MiniGPT, eval_mode
from .tokenizer import CharTokenizer


class Gate(Protocol):
    """Lets another thread pause or stop `Trainer.events` between steps."""

    lock: "threading.Lock"

    def wait_until_running(self) -> bool: ...  # blocks while paused; False once stopped
    def is_running(self) -> bool: ...
    def pause_if_due(self, step: int) -> bool: ...  # under the lock, after a step: pause now (N steps asked)?


class TrainingDiverged(LabError, RuntimeError):
    """The loss became NaN or infinite."""


@dataclass
class TrainEvent:
    step: int                    # optimizer steps done
    max_steps: int
    train_loss: float            # mean training-batch loss since the previous event
    lr: float
    tokens_per_sec: float        # over the steps since the previous event, summed over processes
    elapsed: float               # seconds spent training and evaluating (pauses excluded)
    val_loss: float | None = None        # at evaluation steps only
    train_eval_loss: float | None = None # same batches-of-train estimate, at evaluation steps
    score: Any = None                    # what the trainer's scorer returned, at evaluations (a task's score)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup to cfg.lr, then cosine decay to cfg.min_lr at max_steps (or constant)."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return cfg.lr
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps))
    return cfg.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (cfg.lr - cfg.min_lr)


def lr_schedule(cfg: TrainConfig) -> list[float]:
    """The learning rate of every step of a run with `cfg`: what its chart draws."""
    return [lr_at(step, cfg) for step in range(cfg.max_steps)]


def autocast_dtype(dtype: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype that TrainConfig.dtype means on `device`; None means plain float32."""
    if dtype == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else None
        return torch.bfloat16 if device.type == "cpu" and cpu_has_amx() else None
    if dtype == "bfloat16":
        if device.type not in ("cuda", "cpu"):
            raise ConfigError("bfloat16 autocast runs on CUDA or CPU, not {device}; use dtype float32.",
                              device=device.type)
        return torch.bfloat16
    return None


def flops_per_token(config: GPTConfig, block_size: int) -> int:
    """Training FLOPs per token, nanoGPT's estimate: 6N for the weight matmuls (forward and
    backward) plus 12 * num_layers * d_model * block_size for the attention scores and sums."""
    return 6 * config.num_params() + 12 * config.num_layers * config.d_model * block_size


def estimate_mfu(config: GPTConfig, block_size: int, tokens_per_sec: float, peak_flops: float) -> float:
    """Model FLOPs utilisation: achieved FLOP/s over peak FLOP/s, both summed over processes."""
    return flops_per_token(config, block_size) * tokens_per_sec / peak_flops


def build_optimizer(model: MiniGPT, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not biases, LayerNorms), as in nanoGPT."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    device_type = next(model.parameters()).device.type
    fused = device_type in ("cpu", "cuda")
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=tuple(cfg.betas), fused=fused)


TRAIN_EVAL_SEED, VAL_EVAL_SEED = 1, 2  # added to the run's seed: the windows its two losses are measured on


@torch.inference_mode()  # like no_grad, minus autograd's version and view tracking
def estimate_loss(model: MiniGPT, windows: Windows) -> float:
    """The mean cross-entropy (nats) of `model`, in eval mode, over the batches `windows`."""
    with eval_mode(model):
        device = next(model.parameters()).device
        losses = [model(x.to(device), y.to(device))[1].float().item() for x, y in windows]
    return sum(losses) / len(losses)


def validation_windows(ids: torch.Tensor, cfg: TrainConfig, period: int = 1) -> Windows:
    """The windows a run with `cfg` on the corpus tokens `ids` measures its validation loss on: the
    held-out split, drawn as the Trainer draws them. Whatever measures a model's loss (the Train
    page, Experiments, a knock-out) measures it here, so that it is the number training reported.
    `period`: a task's line length, so that every window starts at a line, as in training."""
    _, val = split_tokens(ids, cfg.val_fraction, cfg.block_size, period)
    return eval_windows(val, cfg.batch_size, cfg.block_size, cfg.eval_iters, cfg.seed + VAL_EVAL_SEED, period)


class Trainer:
    """One model, its optimizer and data, stepped one optimizer update at a time."""

    def __init__(
        self,
        model: MiniGPT,
        tokenizer: CharTokenizer,
        text: str,
        cfg: TrainConfig,
        *,
        log_interval: int = 10,
        dist: DistContext | None = None,
        period: int = 1,
        scorer: "Callable[[Trainer], Any] | None" = None,
    ):
        """`period`: splits and windows start at multiples of it (a task's line length, so that every
        window starts at a line). `scorer(trainer)`: the caller's hook, called at each evaluation on
        the main process; what it returns is the event's `score` (minigpt.lab.tasks.TaskScorer scores
        a task on its held-out lines)."""
        self.cfg = cfg.validate(model.config)
        self.period = period
        self.scorer = scorer
        self.device = next(model.parameters()).device
        self.dist = dist or DistContext(device=self.device)
        self.model = model.train()  # the plain module: evaluation, saving and sampling use it
        self.train_model = self._training_module()
        self.autocast_dtype = autocast_dtype(cfg.dtype, self.device)
        self.tokenizer = tokenizer
        ids = torch.tensor(tokenizer.encode(text), dtype=torch.long)
        self.train_data, self.val_data = split_tokens(ids, cfg.val_fraction, cfg.block_size, self.period)
        # the fixed windows both losses are measured on at every evaluation (validation_windows' own)
        self.train_windows = eval_windows(self.train_data, cfg.batch_size, cfg.block_size, cfg.eval_iters,
                                          cfg.seed + TRAIN_EVAL_SEED, self.period)
        self.val_windows = eval_windows(self.val_data, cfg.batch_size, cfg.block_size, cfg.eval_iters,
                                        cfg.seed + VAL_EVAL_SEED, self.period)
        # kept after release(): what a page says about a finished run
        self.model_config, self.model_params, self.corpus_chars = model.config, model.num_params(), len(text)
        check_batch_fits(self.train_data, cfg.batch_size, cfg.block_size)
        self.optimizer = build_optimizer(model, cfg)
        self.log_interval = log_interval
        self.step = 0
        self.batch_rng = torch.Generator().manual_seed(cfg.seed + self.dist.rank)
        self.dropout_rng = torch.Generator(device=self.device)
        model.use_generator(self.dropout_rng)
        self.elapsed = 0.0
        self.last_val_loss: float | None = None
        self.best_val: tuple[int, float] | None = None  # (step, val loss) of the lowest so far
        self.best_weights: dict[str, torch.Tensor] | None = None  # kept for early stopping only
        self.stopped_early = False
        if cfg.early_stop_patience and self.dist.world_size > 1:
            raise ConfigError("early stopping needs every process to see the val loss; under torchrun, "
                              "leave early_stop_patience at 0.")

    def _training_module(self) -> torch.nn.Module:
        """What forward and backward run through: the model, compiled and/or wrapped in DDP."""
        module = torch.compile(self.model) if self.cfg.compile else self.model
        if self.dist.world_size > 1:
            device_ids = [self.device.index] if self.device.type == "cuda" else None
            module = DistributedDataParallel(module, device_ids=device_ids)
        return module

    @property
    def tokens_per_step(self) -> int:
        """Tokens per optimizer step over all processes: the global batch times block_size."""
        return self.cfg.batch_size * self.cfg.grad_accum * self.dist.world_size * self.cfg.block_size

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """This process's next micro-batch: inputs and targets, (batch_size, block_size) each."""
        return get_batch(self.train_data, self.cfg.batch_size, self.cfg.block_size, self.batch_rng, self.device,
                         self.period)

    def compute_gradients(self) -> torch.Tensor:
        """Forward and backward on grad_accum fresh micro-batches; returns their mean (detached) loss.

        The gradients are those of that mean loss; under DDP they are also averaged over
        processes, once per step: all but the last micro-batch run under no_sync().
        """
        self.dropout_rng.manual_seed(((self.cfg.seed + self.dist.rank) << 32) + self.step)  # masks: (seed + rank, step)
        self.optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), device=self.device)
        for micro in range(self.cfg.grad_accum):
            x, y = self.next_batch()
            with self._gradient_sync(micro == self.cfg.grad_accum - 1):
                with self._autocast():
                    _, loss = self.train_model(x, y)
                self._check_finite(loss)
                (loss / self.cfg.grad_accum).backward()
            total += loss.detach()
        return total / self.cfg.grad_accum

    def _gradient_sync(self, last_micro_batch: bool) -> contextlib.AbstractContextManager:
        if last_micro_batch or not isinstance(self.train_model, DistributedDataParallel):
            return contextlib.nullcontext()
        return self.train_model.no_sync()

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def _check_finite(self, loss: torch.Tensor) -> None:
        if not torch.isfinite(loss):
            raise TrainingDiverged(
                "the loss became {loss} at step {step}: training stopped instead of learning from garbage. "
                "Try a lower learning rate (now {lr:g}).", loss=loss.item(), step=self.step + 1, lr=self.cfg.lr,
            )

    def apply_update(self) -> float:
        """Clip, set this step's learning rate, step the optimizer. Returns the lr used."""
        if self.cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        lr = lr_at(self.step, self.cfg)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.step += 1
        return lr

    def evaluate(self) -> tuple[float, float]:
        """(train, val) loss estimates on fixed batches."""
        train = estimate_loss(self.model, self.train_windows)
        val = estimate_loss(self.model, self.val_windows)
        self.last_val_loss = val
        if self.best_val is None or val < self.best_val[1]:
            self.best_val = (self.step, val)
            if self.cfg.early_stop_patience:
                self.best_weights = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        return train, val

    def patience_ran_out(self) -> bool:
        """early_stop_patience evaluations in a row have not lowered the val loss."""
        patience = self.cfg.early_stop_patience
        if not patience or self.best_val is None:
            return False
        return self.step - self.best_val[0] >= patience * self.cfg.eval_interval

    def is_eval_step(self) -> bool:
        return self.step % self.cfg.eval_interval == 0 or self.step == self.cfg.max_steps

    def events(self, gate: "Gate | None" = None) -> Iterator[TrainEvent]:
        """Train until max_steps, yielding an event every log_interval steps and at evaluations.

        A `gate` (see serve/runs/thread.py) lets other threads pause or stop the loop: the optimizer
        step happens under gate.lock and only while gate.is_running(). Under DDP every
        process must step together, so there is no gate, and only rank 0 evaluates.
        """
        if gate is not None and self.dist.world_size > 1:
            raise ValueError("a gate pauses one process; under torchrun all processes step together.")
        loss_sum, n, busy = torch.zeros((), device=self.device), 0, 0.0
        while self.step < self.cfg.max_steps:
            if gate is not None and not gate.wait_until_running():
                return
            t0 = time.perf_counter()
            loss = self.compute_gradients()
            with gate.lock if gate is not None else contextlib.nullcontext():
                if gate is not None and not gate.is_running():
                    continue  # paused or stopped during forward/backward: drop this step
                lr = self.apply_update()
                paused = gate is not None and gate.pause_if_due(self.step)
            loss_sum += loss
            n += 1
            busy += time.perf_counter() - t0
            evaluating = self.is_eval_step()
            if n == self.log_interval or evaluating or paused or self.step == self.cfg.max_steps:
                if self.dist.world_size > 1:
                    all_reduce_mean(loss_sum)  # the loss of the global batch
                event = TrainEvent(
                    step=self.step, max_steps=self.cfg.max_steps, train_loss=loss_sum.item() / n, lr=lr,
                    tokens_per_sec=n * self.tokens_per_step / max(busy, 1e-9), elapsed=self.elapsed + busy,
                )
                if evaluating and self.dist.is_main:
                    t0 = time.perf_counter()
                    event.train_eval_loss, event.val_loss = self.evaluate()
                    if self.scorer is not None:
                        event.score = self.scorer(self)
                    busy += time.perf_counter() - t0
                self.elapsed += busy
                event.elapsed = self.elapsed
                yield event
                loss_sum, n, busy = torch.zeros((), device=self.device), 0, 0.0
                if evaluating and self.step < self.cfg.max_steps and self.patience_ran_out():
                    with gate.lock if gate is not None else contextlib.nullcontext():
                        if self.best_weights is not None:  # end on the best model, not the overfitted one
                            self.model.load_state_dict(self.best_weights)
                        self.stopped_early = True
                    return

    def release(self) -> None:
        """Let go of the model, its optimizer and the data; step, config and elapsed time stay readable."""
        if self.model is not None:
            self.model.use_generator(None)
        self.model = self.train_model = self.optimizer = None
        self.train_data = self.val_data = self.train_windows = self.val_windows = None

    def state_dict(self) -> dict:
        """What resuming needs besides the weights: step, optimizer and random state."""
        return {
            "step": self.step,
            "elapsed": self.elapsed,
            "best_val": list(self.best_val) if self.best_val else None,
            "batch_rng": base64.b64encode(self.batch_rng.get_state().numpy().tobytes()).decode(),
        }

    def load_state_dict(self, state: dict, optimizer_state: dict | None) -> None:
        self.step = int(state["step"])
        self.elapsed = float(state.get("elapsed", 0.0))
        best = state.get("best_val")
        self.best_val = (int(best[0]), float(best[1])) if best else None
        if self.dist.rank == 0:
            rng = torch.frombuffer(bytearray(base64.b64decode(state["batch_rng"])), dtype=torch.uint8)
            self.batch_rng.set_state(rng)
        else:  # only rank 0's generator is saved: the others restart theirs from (seed + rank, step)
            self.batch_rng.manual_seed(((self.cfg.seed + self.dist.rank) << 32) + self.step)
        if optimizer_state is not None:
            check_optimizer_state(optimizer_state, self.optimizer)
            self.optimizer.load_state_dict(optimizer_state)


def check_optimizer_state(state: dict, optimizer: torch.optim.Optimizer) -> None:
    """Refuse saved optimizer state that does not fit this optimizer's parameters, before torch's
    load_state_dict, which trusts the shapes (a doctored file could make a step write out of bounds)."""
    own = optimizer.param_groups
    saved = state["param_groups"]
    if len(saved) != len(own) or any(len(g["params"]) != len(o["params"]) for g, o in zip(saved, own)):
        raise CheckpointError("the checkpoint's optimizer state was made for other parameters than this model's.")
    indices = {i for g in saved for i in g["params"]}
    if set(state["state"]) - indices:
        raise CheckpointError("the checkpoint's optimizer state names parameters its param groups do not have.")
    for group, own_group in zip(saved, own):
        for index, param in zip(group["params"], own_group["params"]):
            for name, value in state["state"].get(index, {}).items():
                if not torch.is_tensor(value):
                    continue
                if not value.dtype.is_floating_point or (value.dim() > 0 and value.shape != param.shape):
                    raise CheckpointError(
                        "the checkpoint's optimizer state {name} of parameter {index} is {dtype} {shape}, but the "
                        "parameter is {expected}: refusing it.", name=name, index=index, dtype=value.dtype,
                        shape=tuple(value.shape), expected=tuple(param.shape),
                    )


def build_model(config: GPTConfig, seed: int, device: str | torch.device = "cpu") -> MiniGPT:
    """A freshly initialised MiniGPT; the same seed gives the same weights, whatever else runs."""
    return MiniGPT(config, seed=seed).to(resolve_device(str(device)) if isinstance(device, str) else device)
