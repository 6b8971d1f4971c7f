"""What a run is, known before it trains: its recipe (`RunSpec`), and what a page reads of a run
that has not trained yet (`PlannedTrainer`). One frozen record crosses every border a run crosses:
the line, a child process, a Ray actor and the store."""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ...header import CONFIG_NAME

if TYPE_CHECKING:
    from ...config import GPTConfig, TrainConfig
    from ...tokenizer import CharTokenizer

CHILD_NICE = 19  # the training thread's niceness in a child or an actor; the thread that answers the server keeps the server's
@dataclass(frozen=True)
class RunSpec:
    """Everything a child needs to build its Trainer: plain, picklable values."""

    run_id: str
    model: GPTConfig              # validated, with the tokenizer's vocab_size
    train: TrainConfig            # validated, with the device
    chars: tuple[str, ...]        # the tokenizer's vocabulary
    text: str
    corpus_key: str | None = None  # a task's corpus trains with the task's hooks (minigpt.lab.tasks)
    probe_text: str | None = None
    sample_prompt: str = ""
    sample_chars: int = 80
    log_interval: int = 10
    nice: int = CHILD_NICE
    threads: int = 1  # intra-op threads: the server's CPUs shared among its slots (capacity.threads_per_run)
    resume: dict[str, bytes] | None = field(default=None, repr=False)  # a checkpoint's files to go on from



def resume_spec(spec: RunSpec, files: dict[str, bytes] | None) -> RunSpec:
    """`spec` to go on from a checkpoint's `files` (None: from step 0), with the thread count it was
    saved with: the same losses need the same count."""
    if files is None:
        return replace(spec, resume=None)
    meta = json.loads(files[CONFIG_NAME])["meta"]
    return replace(spec, resume=files, threads=int(meta.get("threads") or spec.threads))


@dataclass(frozen=True)
class RunPlan:
    """What a run will train, known before it is built: validated configs, the tokenizer, the corpus."""

    model: GPTConfig              # with the tokenizer's vocab_size
    train: TrainConfig            # with the device
    tokenizer: CharTokenizer
    text: str
    corpus_key: str | None = None  # a task's corpus measures validation on whole lines (minigpt.lab.tasks)

    @property
    def shape(self) -> tuple:
        """Runs of one shape train at one pace on one server: what the SpeedBook files a pace under."""
        return self.model.num_params(), self.train.batch_size, self.train.block_size, str(self.train.device)

    @property
    def max_steps(self) -> int:
        return self.train.max_steps



def work_per_step(shape: tuple) -> float:
    """A step's work, to scale a pace measured on one shape to another: parameters × tokens."""
    params, batch_size, block_size, _device = shape
    return float(params * batch_size * block_size)



class PlannedTrainer:
    """`run.trainer` for a run that has not trained yet (run.TrainerFacts), from its plan alone."""

    def __init__(self, plan: RunPlan):
        self._plan = plan
        self.cfg, self.model_config, self.tokenizer = plan.train, plan.model, plan.tokenizer
        self.model_params, self.corpus_chars = plan.model.num_params(), len(plan.text)
        self.step, self.elapsed, self.stopped_early = 0, 0.0, False
        self.last_val_loss: float | None = None
        self.best_val: tuple[int, float] | None = None
        self._val_windows = None
        self._lock = threading.Lock()

    @property
    def val_windows(self):
        """The windows the run will measure its validation loss on, drawn as its Trainer will draw them."""
        with self._lock:
            if self._val_windows is None:
                self._val_windows = corpus_val_windows(self._plan)
            return self._val_windows



def corpus_val_windows(plan: RunPlan):
    """minigpt.train.validation_windows for a plan (a task's corpus: whole lines), as the Trainer draws them."""
    import torch

    from ...lab.tasks import task_for_corpus
    from ...train import validation_windows

    task = task_for_corpus(plan.corpus_key)
    ids = torch.tensor(plan.tokenizer.encode(plan.text), dtype=torch.long)
    return validation_windows(ids, plan.train, task.line_length if task else 1)
