"""The trainer's side of a run that trains out of the server's process (a child, process.py, or a
Ray actor, cluster.py): the TrainingRun built from a spec, each command from the server done, its
status and errors in a form that crosses the border, and tensors as numpy arrays on the way."""
from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import safetensors.torch
import torch

from ...checkpoint import load_files
from ...lab.tasks import task_for_corpus, training_hooks
from ...messages import Message
from ...tokenizer import CharTokenizer
from ...train import Trainer, build_model
from .recipe import RunSpec
from .run import EvalRecord, RunSnapshot
from .thread import BEST_WEIGHTS_NAME, TrainingRun



def do_command(run: TrainingRun, op: str, args: list, sender) -> Any:
    """One command from the server, done in the child; what it answers."""
    if op == "start":  # (paused, wants checkpoints)
        # a registry without a store wants none: no checkpoint is made or sent
        run.on_checkpoint = sender.checkpoint if args[1] else None
        run.start(paused=args[0])
    elif op == "steps":
        run.run_steps(args[0])
    elif op == "pause":
        run.pause()
    elif op == "stop":
        run.stop(timeout=None)  # done means stopped: the reply says so once the thread has ended
    elif op == "weights":
        return {"model": to_numpy(_state_dict(run))}  # numpy: pickled by value, no torch shared memory
    elif op == "checkpoint":
        parts = run.checkpoint_parts()
        return {"model": to_numpy(parts["model"].state_dict()), "optimizer_state": to_numpy(parts["optimizer_state"]),
                "trainer_state": parts["trainer_state"], "val_loss": parts["val_loss"]}
    elif op == "close":
        run.close(timeout=None)
    return None


def build_training_run(spec: RunSpec, history: list = (), evals: list[EvalRecord] = ()) -> TrainingRun:
    """The run's TrainingRun: a new model from its seed, or the checkpoint in spec.resume (weights,
    optimizer, step and random state, and the best weights where it stops early)."""
    tokenizer = CharTokenizer(spec.chars)  # the spec's vocabulary, not one drawn from the text again
    if spec.resume is None:
        model = build_model(spec.model, spec.train.seed, spec.train.device)
    else:
        checkpoint = load_files(spec.resume, device=spec.train.device, with_optimizer=True,
                                source=Message("run {run}'s checkpoint", run=spec.run_id))
        model = checkpoint.model.train()  # loaded in eval mode: dropout on again
    trainer = Trainer(model, tokenizer, spec.text, spec.train, log_interval=spec.log_interval,
                      **training_hooks(task_for_corpus(spec.corpus_key)))
    if spec.resume is not None:
        trainer.load_state_dict(checkpoint.meta["trainer_state"], checkpoint.optimizer_state)
        if BEST_WEIGHTS_NAME in spec.resume:
            trainer.best_weights = safetensors.torch.load(spec.resume[BEST_WEIGHTS_NAME])
    return TrainingRun(trainer, probe_text=spec.probe_text, sample_prompt=spec.sample_prompt,
                       sample_chars=spec.sample_chars, run_id=spec.run_id, nice=spec.nice, history=history,
                       evals=evals)


def status_of(run: TrainingRun, snap: RunSnapshot | None = None) -> dict:
    """What the server keeps of the run besides its logs (remote.RemoteRun's `_status`)."""
    snap = snap or run.snapshot()  # the caller's, where it took one: the status agrees with the logs sent
    trainer = run.trainer
    return {"state": snap.state, "step": snap.step, "elapsed": snap.elapsed, "stopped_early": snap.stopped_early,
            "error": portable(snap.error) if snap.error is not None else None, "alive": run.is_alive(),
            "best_val": trainer.best_val, "last_val_loss": trainer.last_val_loss}


def _state_dict(run: TrainingRun) -> dict:
    with run.lock:  # between two optimizer steps: never a half-updated model
        return {k: v.detach().cpu().clone() for k, v in run.trainer.model.state_dict().items()}


def portable(error: Any) -> Any:
    """An error as the server can unpickle it: itself where it can, else its words."""
    try:
        pickle.loads(pickle.dumps(error))  # some errors pickle but do not unpickle (required arguments)
        return error
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")


def to_numpy(value: Any) -> Any:
    """Tensors as numpy arrays, through dicts, lists and tuples: what a pipe carries by value."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, dict):
        return {k: to_numpy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_numpy(v) for v in value)
    return value


def to_torch(value: Any) -> Any:
    """numpy arrays as tensors again, through dicts, lists and tuples (to_numpy's inverse)."""
    if isinstance(value, np.ndarray):  # one read from Ray's object store is read-only: torch gets a copy
        return torch.from_numpy(value if value.flags.writeable else value.copy())
    if isinstance(value, dict):
        return {k: to_torch(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_torch(v) for v in value)
    return value
