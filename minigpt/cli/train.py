"""`python -m minigpt train`: train alone, or as one process of a torchrun job.

The command reads its settings, builds a model (or resumes one), trains it behind a progress bar
on stderr, saves OUT/checkpoint-<step> at every evaluation and at the end, and reports. Under
torchrun every rank runs all of it; rank 0 alone prints and writes checkpoints.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from ..checkpoint import Checkpoint, checkpoint_folder, from_pretrained, latest_checkpoint, save_checkpoint
from ..config import ConfigError, GPTConfig, TrainConfig, check_memory_budget
from ..corpus import DEFAULT_CORPUS, load_corpus, probe_text
from ..device import available_memory_bytes, resolve_device
from ..distributed import DistContext, barrier, gather_ranks, launched_by_torchrun, setup, teardown
from ..lab.diagnosis import unseen_validation_chars
from ..lab.tasks import Task, task_for_corpus, training_hooks
from ..model import MiniGPT
from ..tokenizer import CharTokenizer
from ..train import Trainer, TrainEvent, build_model, estimate_mfu
from .flags import MODEL_FLAGS, TRAIN_FLAGS, overrides


@dataclass
class TrainJob:
    """What the loop, the saves and the report share of one `train` command."""
    args: argparse.Namespace
    corpus: str
    text: str
    device: torch.device
    ctx: DistContext | None  # None without torchrun
    task: Task | None        # the task of a task corpus (task-copy, ...), else None
    trainer: Trainer         # holds the model, the tokenizer and the TrainConfig
    history: list            # [step, train loss, val loss] per event, the resumed run's first

    @property
    def main_process(self) -> bool:
        return self.ctx is None or self.ctx.is_main


def cmd_train(args: argparse.Namespace) -> int:
    """Train alone, or as one process of a torchrun job."""
    try:
        return _train(args)
    finally:
        teardown()


def _train(args: argparse.Namespace) -> int:
    """Check the flags and --out before anything is built; build, train, report."""
    if args.log_interval < 1:
        raise ConfigError("--log-interval must be at least 1.")
    resumed = from_pretrained(args.resume, with_optimizer=True) if args.resume else None
    check_out(args.out, checkpoint_folder(args.resume) if args.resume else None, latest_checkpoint(args.out))
    run = build_run(args, resumed)
    announce(run)
    if not train_loop(run):  # Ctrl-C: the loop has saved where it stopped
        if run.main_process:
            print(f"interrupted at step {run.trainer.step}; checkpoint saved to {args.out} (continue with --resume)",
                  file=sys.stderr)
        return 130
    barrier()  # every rank waits for rank 0's last checkpoint
    if run.main_process:
        report(run)
    return 0


def check_out(out: Path, resumed_from: Path | None, existing: Path | None) -> None:
    """--out is a run folder of checkpoint-<step> folders: never mix two runs in one."""
    if out.exists() and not out.is_dir():
        raise ConfigError("--out {out} is a file; it must be a folder for the run's checkpoints.", out=out)
    if existing is not None and (resumed_from is None or resumed_from.resolve().parent != out.resolve()):
        raise ConfigError("--out {out} already holds another run's {name}: choose a new folder, or continue that "
                          "run with --resume {out}.", out=out, name=existing.name)


def check_memory(model_cfg: GPTConfig, train_cfg: TrainConfig, device) -> None:
    """Refuse, before anything is allocated, a run that would not fit the device's free memory."""
    train_cfg.validate(model_cfg)
    budget = available_memory_bytes(device)
    if budget is not None:
        check_memory_budget(model_cfg, train_cfg, budget)


def settings(args: argparse.Namespace, resumed: Checkpoint | None) -> tuple[str, str, TrainConfig]:
    """The corpus, its text and the TrainConfig: each flag given wins over the resumed run's value,
    which wins over the default."""
    corpus = args.corpus or (resumed.meta.get("corpus") if resumed else None) or DEFAULT_CORPUS
    text = load_corpus(corpus)
    train_cfg = TrainConfig(**{**(resumed.train_config.to_dict() if resumed else {}), **overrides(args, TRAIN_FLAGS)})
    return corpus, text, train_cfg


def build_or_resume(args: argparse.Namespace, resumed: Checkpoint | None, text: str, train_cfg: TrainConfig,
                    device: torch.device) -> tuple[MiniGPT, CharTokenizer]:
    """The resumed checkpoint's model, or a new one from the model flags; refused if it would not fit."""
    if resumed:
        if overrides(args, MODEL_FLAGS):
            print("warning: model flags are ignored when resuming; the checkpoint fixes the model.", file=sys.stderr)
        check_memory(resumed.model.config, train_cfg, device)
        return resumed.model.to(device), resumed.tokenizer
    tokenizer = CharTokenizer.from_text(text)
    model_cfg = GPTConfig(vocab_size=tokenizer.vocab_size, **overrides(args, MODEL_FLAGS)).validate()
    check_memory(model_cfg, train_cfg, device)
    return build_model(model_cfg, train_cfg.seed, device), tokenizer


def build_run(args: argparse.Namespace, resumed: Checkpoint | None) -> TrainJob:
    """Everything checked and built, up to a trainer at the resumed step (or step 0)."""
    corpus, text, train_cfg = settings(args, resumed)
    ctx = setup(train_cfg.device) if launched_by_torchrun() else None
    device = ctx.device if ctx else resolve_device(train_cfg.device)
    model, tokenizer = build_or_resume(args, resumed, text, train_cfg, device)
    task = task_for_corpus(corpus)
    if task is not None:
        task.check_block(train_cfg.block_size)
    trainer = Trainer(model, tokenizer, text, train_cfg, log_interval=args.log_interval, dist=ctx,
                      **training_hooks(task))
    if resumed:
        trainer.load_state_dict(resumed.meta["trainer_state"], resumed.optimizer_state)
    history = list(resumed.meta.get("history", [])) if resumed else []
    return TrainJob(args, corpus, text, device, ctx, task, trainer, history)


def announce(run: TrainJob) -> None:
    """Warn about validation characters training never sees, then say what is about to train."""
    trainer, cfg = run.trainer, run.trainer.cfg
    unseen = unseen_validation_chars(run.text, cfg.val_fraction)
    if unseen.chars and run.main_process:
        kinds = "character" if len(unseen.chars) == 1 else "characters"
        print(f"warning: {len(unseen.chars)} {kinds} of the validation split ({unseen.occurrences} of its "
              f"{unseen.val_length}) never appear in the training split, so the val loss pays for them: "
              f"{''.join(unseen.chars[:12])!r}", file=sys.stderr)
    ranks = gather_ranks(run.ctx) if run.ctx else []  # a collective: every rank joins, not only rank 0
    if not run.main_process:
        return
    world_size = trainer.dist.world_size
    precision = "bf16 autocast" if trainer.autocast_dtype == torch.bfloat16 else "float32"
    print(f"training {trainer.model.num_params():,} parameters on {run.device} in {precision} ({run.corpus}, vocab "
          f"{trainer.tokenizer.vocab_size}) from step {trainer.step}", file=sys.stderr)
    if run.ctx or cfg.grad_accum > 1:
        print(f"global batch {cfg.batch_size} x {cfg.grad_accum} micro-batches x {world_size} "
              f"processes = {trainer.tokens_per_step // cfg.block_size} sequences per step", file=sys.stderr)
    if run.ctx:
        print(f"{world_size} processes ready: rank {', rank '.join(ranks)}", file=sys.stderr)


def train_loop(run: TrainJob) -> bool:
    """Train to max_steps, saving at each evaluation and at the end. False when Ctrl-C stopped it;
    it has saved where it stopped."""
    trainer = run.trainer
    bar = tqdm(total=trainer.cfg.max_steps, initial=trainer.step, unit="step", file=sys.stderr, dynamic_ncols=True,
               disable=not run.main_process)
    try:
        for event in trainer.events():
            bar.update(event.step - bar.n)
            run.history.append([event.step, event.train_loss, event.val_loss])
            postfix = progress(run, event)
            if event.val_loss is not None:
                save(run)
            bar.set_postfix(postfix)
    except KeyboardInterrupt:
        bar.close()
        save(run)
        return False
    bar.close()
    save(run)
    return True


def progress(run: TrainJob, event: TrainEvent) -> dict[str, str]:
    """The progress bar's numbers for one event: loss, speed, MFU if --peak-tflops, and at
    evaluations the val loss and a task's score."""
    postfix = {"loss": f"{event.train_loss:.4f}", "tok/s": f"{event.tokens_per_sec:,.0f}"}
    if run.args.peak_tflops:
        peak = run.args.peak_tflops * 1e12 * run.trainer.dist.world_size  # tokens_per_sec is summed over ranks
        mfu = estimate_mfu(run.trainer.model.config, run.trainer.cfg.block_size, event.tokens_per_sec, peak)
        postfix["mfu"] = f"{mfu:.1%}"
    if event.val_loss is not None:
        postfix["val"] = f"{event.val_loss:.4f}"
        if event.score is not None:
            postfix["acc"] = f"{event.score.chars:.1%}"
            postfix["solved"] = f"{event.score.lines:.1%}"
    return postfix


def save(run: TrainJob) -> None:
    """OUT/checkpoint-<step>, with what --resume needs to continue the same curve."""
    if not run.main_process:
        return  # rank 0 alone writes checkpoints
    trainer, history = run.trainer, run.history
    meta = {"corpus": str(run.corpus), "step": trainer.step, "val_loss": trainer.last_val_loss,
            "precision": "bfloat16" if trainer.autocast_dtype == torch.bfloat16 else "float32",
            "train_loss": history[-1][1] if history else None, "history": history,
            "trainer_state": trainer.state_dict(), "world_size": trainer.dist.world_size,
            "probe_text": run.task.probe(run.text) if run.task else probe_text(trainer.tokenizer, run.text),
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    optimizer = trainer.optimizer if run.args.save_optimizer else None
    save_checkpoint(run.args.out, trainer.step, trainer.model, trainer.tokenizer, train_config=trainer.cfg, meta=meta,
                    optimizer=optimizer)


def report(run: TrainJob) -> None:
    """The last lines: why training stopped, the final losses and a task's held-out score."""
    trainer, cfg = run.trainer, run.trainer.cfg
    last = run.history[-1]
    if trainer.stopped_early:
        best_step, best = trainer.best_val
        print(f"stopped early: val loss has not improved on {best:.4f} (step {best_step}) for "
              f"{cfg.early_stop_patience} evaluations", file=sys.stderr)
    print(f"done: step {trainer.step}, train loss {last[1]:.4f}, val loss {trainer.last_val_loss:.4f}, "
          f"{trainer.elapsed:.1f} s; checkpoint in {run.args.out}", file=sys.stderr)
    if trainer.scorer is not None:
        score = trainer.scorer(trainer)
        print(f"{run.task.name} task, held-out lines: {score.chars:.1%} of answer characters right, "
              f"{score.lines:.1%} answered whole (chance {score.chance:.1%} per character)", file=sys.stderr)
