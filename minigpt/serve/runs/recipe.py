"""What a run is, known before it trains: its recipe (`RunSpec`), and what a page reads of a run
that has not trained yet (`PlannedTrainer`). One frozen record crosses every border a run crosses:
the line, a child process, a Ray actor and the store, which keeps it as JSON written from its fields."""
from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property
from typing import Any

from ...config import GPTConfig, TrainConfig
from ...header import CONFIG_NAME
from ...tokenizer import CharTokenizer

# the training thread's niceness in a child or an actor (19: the lowest priority, so a busy server's pages
# come first); the thread that answers the server keeps the server's
CHILD_NICE = 19
SAMPLE_TEMPERATURE = 0.8  # the sample a run writes at each evaluation: torch-free here, the Train page labels it
# the store keeps these beside the recipe: the id is the row's, the corpus once per text
NOT_IN_RECIPE = ("run_id", "text", "resume")


@dataclass(frozen=True)
class RunSpec:
    """What a run trains and how: validated configs, the vocabulary, the corpus, and what it writes
    as it goes. Plain, picklable values: a child process, a Ray actor and the store all get this."""

    run_id: str                   # "" until the line gives it one
    model: GPTConfig              # validated, with the tokenizer's vocab_size
    train: TrainConfig            # validated, with the device
    chars: tuple[str, ...]        # the tokenizer's vocabulary
    text: str
    corpus_key: str | None = None  # a task's corpus trains with the task's hooks and is scored on whole lines
    probe_text: str | None = None
    sample_prompt: str = ""
    sample_chars: int = 80
    log_interval: int = 10
    nice: int = CHILD_NICE
    threads: int = 1  # intra-op threads: the server's CPUs shared among its slots (capacity.threads_per_run)
    resume: dict[str, bytes] | None = field(default=None, repr=False)  # a checkpoint's files to go on from

    @cached_property
    def tokenizer(self) -> CharTokenizer:
        return CharTokenizer(self.chars)

    @property
    def shape(self) -> tuple:
        """Runs of one shape train at one pace on one server: what the SpeedBook files a pace under."""
        return self.model.num_params(), self.train.batch_size, self.train.block_size, str(self.train.device)

    @property
    def max_steps(self) -> int:
        return self.train.max_steps

    def recipe(self) -> dict[str, Any]:
        """What the store keeps to rebuild the run, as JSON: every field but those NOT_IN_RECIPE."""
        data = asdict(replace(self, resume=None))  # the checkpoint's bytes stay out: asdict copies
        for name in NOT_IN_RECIPE:
            del data[name]
        return data

    @classmethod
    def from_recipe(cls, run_id: str, recipe: dict[str, Any], text: str) -> RunSpec:
        """The spec a stored recipe describes; a field the recipe lacks (an older row) takes its default."""
        known = {f.name for f in fields(cls)} - set(NOT_IN_RECIPE)  # a field a newer server wrote is left out
        values = {name: value for name, value in recipe.items() if name in known}
        values.update(model=GPTConfig.from_dict(recipe["model"]), train=TrainConfig.from_dict(recipe["train"]),
                      chars=tuple(recipe["chars"]))
        return cls(run_id=run_id, text=text, **values)


def resume_spec(spec: RunSpec, files: dict[str, bytes] | None) -> RunSpec:
    """`spec` to go on from a checkpoint's `files` (None: from step 0), with the thread count it was
    saved with: the same losses need the same count."""
    if files is None:
        return replace(spec, resume=None)
    meta = json.loads(files[CONFIG_NAME])["meta"]  # the checkpoint's config.json, where TrainingRun wrote it
    # an older checkpoint without the count keeps the spec's
    return replace(spec, resume=files, threads=int(meta.get("threads") or spec.threads))


def work_per_step(shape: tuple) -> float:
    """A step's work, to scale a pace measured on one shape to another: parameters × tokens."""
    params, batch_size, block_size, _device = shape
    return float(params * batch_size * block_size)


class PlannedTrainer:
    """`run.trainer` for a run that has not trained yet (run.TrainerFacts), from its spec alone."""

    def __init__(self, spec: RunSpec):
        self._spec = spec
        self.cfg, self.model_config, self.tokenizer = spec.train, spec.model, spec.tokenizer
        self.model_params, self.corpus_chars = spec.model.num_params(), len(spec.text)
        self.step, self.elapsed, self.stopped_early = 0, 0.0, False
        self.last_val_loss: float | None = None
        self.best_val: tuple[int, float] | None = None
        self._val_windows = None
        self._lock = threading.Lock()  # two pages asking at once draw the windows once

    @property
    def val_windows(self):
        """The windows the run will measure its validation loss on, drawn as its Trainer will draw them."""
        with self._lock:
            if self._val_windows is None:
                self._val_windows = corpus_val_windows(self._spec)
            return self._val_windows


def corpus_val_windows(spec: RunSpec):
    """minigpt.train.validation_windows for a spec (a task's corpus: whole lines), as the Trainer draws them."""
    import torch

    from ...lab.tasks import task_for_corpus
    from ...train import validation_windows

    task = task_for_corpus(spec.corpus_key)
    ids = torch.tensor(spec.tokenizer.encode(spec.text), dtype=torch.long)  # the whole corpus; split as Trainer does
    return validation_windows(ids, spec.train, task.line_length if task else 1)
