"""Command line: `python -m minigpt train | sample | scaling`.

Model and training flags are generated from GPTConfig and TrainConfig (one source
of defaults): `--d-model`, `--num-heads`, ..., `--batch-size`, `--max-steps`,
`--lr`, `--seed`, `--device`. Progress and warnings go to stderr, samples and
tables to stdout, so `sample` can be piped. Bad input exits with status 2 and
one line saying what is wrong, never a traceback.
Under torchrun (`torchrun --nproc_per_node=N -m minigpt train ...`) the same `train`
command trains one model with DistributedDataParallel; rank 0 alone logs and writes the
checkpoint (see distributed.py).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch

from .config import ConfigError, GPTConfig, TrainConfig, check_memory_budget
from .corpus import BUILTIN_CORPORA, DEFAULT_CORPUS, CorpusError, load_corpus, probe_text
from .device import DeviceError, available_memory_bytes, resolve_device
from .distributed import barrier, gather_ranks, launched_by_torchrun, setup, teardown
from .sample import SamplingError, check_sampling, prepare_prompt, stream
from .tokenizer import CharTokenizer, UnknownCharactersError
from .train import Trainer, TrainingDiverged, build_model, estimate_mfu
from .lab.diagnosis import unseen_validation_chars
from .lab.scaling import DEMO_D_KS, DEMO_SEED, DEMO_SEQ_LEN, scaling_experiment
from .lab.tasks import task_for_corpus, training_hooks

USER_ERRORS = (ConfigError, CorpusError, DeviceError, SamplingError, UnknownCharactersError, TrainingDiverged)
MODEL_FLAGS = [f for f in dataclasses.fields(GPTConfig) if f.name != "vocab_size"]
TRAIN_FLAGS = [f for f in dataclasses.fields(TrainConfig) if f.name != "betas"]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _add_config_flags(parser: argparse.ArgumentParser, fields: list, title: str) -> None:
    """One flag per config field; default None means 'the config's default' (or the checkpoint's)."""
    group = parser.add_argument_group(title)
    for field in fields:
        if isinstance(field.default, bool):
            group.add_argument(_flag(field.name), type=_parse_bool, default=None, metavar="true|false",
                               nargs="?", const=True, help=f"default {field.default}; the flag alone means true")
        else:
            group.add_argument(_flag(field.name), type=type(field.default), default=None,
                               help=f"default {field.default}")


def _parse_bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _overrides(args: argparse.Namespace, fields: list) -> dict:
    return {f.name: getattr(args, f.name) for f in fields if getattr(args, f.name) is not None}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m minigpt", description="Train, sample and explain a tiny character-level GPT.")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train a model and write a checkpoint folder")
    train.add_argument("--corpus", default=None,
                       help=f"built-in corpus ({', '.join(BUILTIN_CORPORA)}) or a path to a UTF-8 text file "
                            f"(default {DEFAULT_CORPUS}, or the resumed checkpoint's)")
    train.add_argument("--out", type=Path, required=True,
                       help="run folder: each save is OUT/checkpoint-<step>, and only the newest is kept")
    train.add_argument("--resume", type=Path, default=None, help="checkpoint folder to continue from")
    train.add_argument("--log-interval", type=int, default=10, help="steps between progress updates")
    train.add_argument("--peak-tflops", type=float, default=None,
                       help="peak TFLOP/s of one device in the training dtype (e.g. 989 for an H100 in bf16): "
                            "adds model FLOPs utilisation (MFU) to the progress line")
    train.add_argument("--save-optimizer", type=_parse_bool, default=True, metavar="true|false",
                       help="keep optimizer state in the checkpoint so --resume continues exactly (default true)")
    _add_config_flags(train, MODEL_FLAGS, "model (GPTConfig)")
    _add_config_flags(train, TRAIN_FLAGS, "training (TrainConfig)")

    sample = sub.add_parser("sample", help="generate text from a checkpoint")
    sample.add_argument("--checkpoint", type=Path, required=True)
    sample.add_argument("--prompt", default="")
    sample.add_argument("--temperature", type=float, default=0.8, help="0 = greedy")
    sample.add_argument("--top-k", type=int, default=None, help="keep the k likeliest tokens (0 = off)")
    sample.add_argument("--top-p", type=float, default=None, help="keep the smallest set with this much mass")
    sample.add_argument("--seed", type=int, default=None)
    sample.add_argument("--max-new-tokens", type=int, default=200)
    sample.add_argument("--device", default="auto")

    scaling = sub.add_parser("scaling", help="print the sqrt(d_k) scaling experiment")
    scaling.add_argument("--d-k", type=int, nargs="+", default=list(DEMO_D_KS))
    scaling.add_argument("--seq-len", type=int, default=DEMO_SEQ_LEN)
    scaling.add_argument("--seed", type=int, default=DEMO_SEED)
    scaling.add_argument("--num-samples", type=int, default=1)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .header import CheckpointError

    args = build_parser().parse_args(argv)
    commands = {"train": cmd_train, "sample": cmd_sample, "scaling": cmd_scaling}
    try:
        return commands[args.command](args)
    except (*USER_ERRORS, CheckpointError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def cmd_train(args: argparse.Namespace) -> int:
    """Train alone, or as one process of a torchrun job."""
    try:
        return _train(args)
    finally:
        teardown()


def _train(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from .checkpoint import checkpoint_folder, from_pretrained, latest_checkpoint, save_checkpoint

    if args.log_interval < 1:
        raise ConfigError("--log-interval must be at least 1.")
    resumed = from_pretrained(args.resume, with_optimizer=True) if args.resume else None
    _check_out(args.out, checkpoint_folder(args.resume) if args.resume else None, latest_checkpoint(args.out))
    corpus = args.corpus or (resumed.meta.get("corpus") if resumed else None) or DEFAULT_CORPUS
    text = load_corpus(corpus)
    train_cfg = TrainConfig(**{**(resumed.train_config.to_dict() if resumed else {}), **_overrides(args, TRAIN_FLAGS)})
    ctx = setup(train_cfg.device) if launched_by_torchrun() else None
    device = ctx.device if ctx else resolve_device(train_cfg.device)
    main_process = ctx is None or ctx.is_main
    if resumed:
        if _overrides(args, MODEL_FLAGS):
            print("warning: model flags are ignored when resuming; the checkpoint fixes the model.", file=sys.stderr)
        _check_memory(resumed.model.config, train_cfg, device)
        model, tokenizer = resumed.model.to(device), resumed.tokenizer
    else:
        tokenizer = CharTokenizer.from_text(text)
        model_cfg = GPTConfig(vocab_size=tokenizer.vocab_size, **_overrides(args, MODEL_FLAGS)).validate()
        _check_memory(model_cfg, train_cfg, device)
        model = build_model(model_cfg, train_cfg.seed, device)
    task = task_for_corpus(corpus)
    if task is not None:
        task.check_block(train_cfg.block_size)
    trainer = Trainer(model, tokenizer, text, train_cfg, log_interval=args.log_interval, dist=ctx,
                      **training_hooks(task))
    if resumed:
        trainer.load_state_dict(resumed.meta["trainer_state"], resumed.optimizer_state)
    unseen = unseen_validation_chars(text, train_cfg.val_fraction)
    if unseen.chars and main_process:
        kinds = "character" if len(unseen.chars) == 1 else "characters"
        print(f"warning: {len(unseen.chars)} {kinds} of the validation split ({unseen.occurrences} of its "
              f"{unseen.val_length}) never appear in the training split, so the val loss pays for them: "
              f"{''.join(unseen.chars[:12])!r}", file=sys.stderr)
    ranks = gather_ranks(ctx) if ctx else []
    world_size = trainer.dist.world_size
    if main_process:
        precision = "bf16 autocast" if trainer.autocast_dtype == torch.bfloat16 else "float32"
        print(f"training {model.num_params():,} parameters on {device} in {precision} ({corpus}, vocab "
              f"{tokenizer.vocab_size}) from step {trainer.step}", file=sys.stderr)
        if ctx or train_cfg.grad_accum > 1:
            print(f"global batch {train_cfg.batch_size} x {train_cfg.grad_accum} micro-batches x {world_size} "
                  f"processes = {trainer.tokens_per_step // train_cfg.block_size} sequences per step", file=sys.stderr)
        if ctx:
            print(f"{world_size} processes ready: rank {', rank '.join(ranks)}", file=sys.stderr)

    history = list(resumed.meta.get("history", [])) if resumed else []

    def save() -> None:
        if not main_process:
            return  # rank 0 alone writes checkpoints
        meta = {"corpus": str(corpus), "step": trainer.step, "val_loss": trainer.last_val_loss,
                "precision": "bfloat16" if trainer.autocast_dtype == torch.bfloat16 else "float32",
                "train_loss": history[-1][1] if history else None, "history": history,
                "trainer_state": trainer.state_dict(), "world_size": world_size,
                "probe_text": task.probe(text) if task else probe_text(tokenizer, text),
                "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
        optimizer = trainer.optimizer if args.save_optimizer else None
        save_checkpoint(args.out, trainer.step, model, tokenizer, train_config=train_cfg, meta=meta,
                        optimizer=optimizer)

    bar = tqdm(total=train_cfg.max_steps, initial=trainer.step, unit="step", file=sys.stderr, dynamic_ncols=True,
               disable=not main_process)
    try:
        for event in trainer.events():
            bar.update(event.step - bar.n)
            history.append([event.step, event.train_loss, event.val_loss])
            postfix = {"loss": f"{event.train_loss:.4f}", "tok/s": f"{event.tokens_per_sec:,.0f}"}
            if args.peak_tflops:
                peak = args.peak_tflops * 1e12 * world_size
                postfix["mfu"] = f"{estimate_mfu(model.config, train_cfg.block_size, event.tokens_per_sec, peak):.1%}"
            if event.val_loss is not None:
                postfix["val"] = f"{event.val_loss:.4f}"
                if event.score is not None:
                    postfix["acc"] = f"{event.score.chars:.1%}"
                    postfix["solved"] = f"{event.score.lines:.1%}"
                save()
            bar.set_postfix(postfix)
    except KeyboardInterrupt:
        bar.close()
        save()
        if main_process:
            print(f"interrupted at step {trainer.step}; checkpoint saved to {args.out} (continue with --resume)",
                  file=sys.stderr)
        return 130
    bar.close()
    save()
    barrier()  # every rank waits for rank 0's last checkpoint
    if not main_process:
        return 0
    last = history[-1]
    if trainer.stopped_early:
        best_step, best = trainer.best_val
        print(f"stopped early: val loss has not improved on {best:.4f} (step {best_step}) for "
              f"{train_cfg.early_stop_patience} evaluations", file=sys.stderr)
    print(f"done: step {trainer.step}, train loss {last[1]:.4f}, val loss {trainer.last_val_loss:.4f}, "
          f"{trainer.elapsed:.1f} s; checkpoint in {args.out}", file=sys.stderr)
    if trainer.scorer is not None:
        score = trainer.scorer(trainer)
        print(f"{task.name} task, held-out lines: {score.chars:.1%} of answer characters right, {score.lines:.1%} "
              f"answered whole (chance {score.chance:.1%} per character)", file=sys.stderr)
    return 0


def _check_out(out: Path, resumed_from: Path | None, existing: Path | None) -> None:
    """--out is a run folder of checkpoint-<step> folders: never mix two runs in one."""
    if out.exists() and not out.is_dir():
        raise ConfigError("--out {out} is a file; it must be a folder for the run's checkpoints.", out=out)
    if existing is not None and (resumed_from is None or resumed_from.resolve().parent != out.resolve()):
        raise ConfigError("--out {out} already holds another run's {name}: choose a new folder, or continue that "
                          "run with --resume {out}.", out=out, name=existing.name)


def _check_memory(model_cfg: GPTConfig, train_cfg: TrainConfig, device) -> None:
    """Refuse, before anything is allocated, a run that would not fit the device's free memory."""
    train_cfg.validate(model_cfg)
    budget = available_memory_bytes(device)
    if budget is not None:
        check_memory_budget(model_cfg, train_cfg, budget)


def cmd_sample(args: argparse.Namespace) -> int:
    from .checkpoint import from_pretrained

    check_sampling(args.temperature, args.top_k, args.top_p, args.max_new_tokens)
    checkpoint = from_pretrained(args.checkpoint, device=str(resolve_device(args.device)))
    prompt = prepare_prompt(checkpoint.tokenizer, args.prompt, checkpoint.block_size)
    for note in prompt.notes:
        print(f"note: {note}", file=sys.stderr)
    steps = stream(checkpoint.model, checkpoint.tokenizer, prompt, max_new_tokens=args.max_new_tokens,
                   temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                   block_size=checkpoint.block_size)
    sys.stdout.write(args.prompt)
    for step in steps:
        sys.stdout.write(step.text)
        sys.stdout.flush()
    sys.stdout.write("\n")
    return 0


def cmd_scaling(args: argparse.Namespace) -> int:
    table = scaling_experiment(args.d_k, args.seq_len, args.seed, args.num_samples)  # ConfigError for bad values
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    return 0
