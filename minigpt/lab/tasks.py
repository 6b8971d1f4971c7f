"""Algorithmic tasks whose right answer, and the attention that finds it, are known.

Each task is a corpus of generated lines `question + separator + answer + "\\n"`, all the same
length, so that a model can be scored on them and its attention checked against the keys that
hold the answer:

- reverse  `dbahcf<fchabd`: the answer's i-th character is the question's (L-1-i)-th, an
  anti-diagonal;
- copy     `dbahcf=dbahcf`: the i-th is the i-th, a look-back of L characters, the
  induction-style pattern ("find where the current character was, read the one after it");
- sort     `503912:012359`: the i-th is wherever the question holds the i-th smallest digit
  (minGPT's classic demo).

The answer character a[i] is predicted at the position before it, L + i (the separator predicts
a[0]), so that is the query row whose attention should sit on the "right keys". Training windows
start at a line's first character (`Trainer` draws them aligned), and a task is scored on its
held-out lines: `accuracy` is teacher-forced, and a line counts as solved when every answer
character is the model's first choice, which is exactly when greedy decoding writes the answer.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..config import ConfigError
from ..corpus import register_corpus
from ..messages import N_

if TYPE_CHECKING:
    import numpy as np
    import torch

    from ..train import Trainer

TASK_SEED = 2026
TASK_LINES = 3000  # lines in a task corpus: 42,000 characters


@dataclass(frozen=True)
class Task:
    """A task of `length`-character questions over `alphabet`, each line `question + separator +
    answer + "\\n"`. Each task is a subclass: it says what the answer is and where it sits."""

    name: ClassVar[str]
    alphabet: ClassVar[str]
    separator: ClassVar[str]
    description: ClassVar[str]  # marked for the catalogs: what the Home page says of its corpus
    length: int = 6             # characters in a question (and in its answer)

    def answer(self, question: str) -> str:
        raise NotImplementedError

    def right_keys(self, question: str) -> list[list[int]]:
        """For each answer character a[i], the question positions that hold it: what the query at
        position L + i should attend to."""
        raise NotImplementedError

    @property
    def corpus_name(self) -> str:
        return f"task-{self.name}"

    @property
    def line_length(self) -> int:
        """Characters in one line: question, separator, answer, newline."""
        return 2 * self.length + 2

    @property
    def block_size(self) -> int:
        """The shortest training window that holds a whole question and answer (not the newline's successor)."""
        return 2 * self.length + 1

    def loss_floor(self, block_size: int) -> float:
        """The lowest mean loss possible on aligned windows of block_size: the questions' characters
        (and each next line's first) are random, so each costs ln(alphabet) nats; the rest can cost 0."""
        random_targets = sum(1 for j in range(1, block_size + 1) if j % self.line_length < self.length)
        return random_targets * math.log(len(self.alphabet)) / block_size

    def line(self, question: str) -> str:
        return question + self.separator + self.answer(question) + "\n"

    def parse(self, text: str) -> str | None:
        """The question when `text` begins like one of this task's lines, else None."""
        question = text[: self.length]
        if len(text) <= self.length or text[self.length] != self.separator:
            return None
        return question if all(c in self.alphabet for c in question) else None

    def probe(self, corpus_text: str) -> str:
        """The corpus's last line without its newline: held out whenever there is a validation split."""
        return corpus_text.rstrip("\n").rsplit("\n", 1)[-1]

    def check_block(self, block_size: int) -> None:
        if block_size < self.block_size:
            raise ConfigError("the {task} task's lines need block_size at least {need} (a question, its separator "
                              "and its answer), not {block_size}.", task=self.name, need=self.block_size,
                              block_size=block_size)

    def questions(self, count: int, seed: int = TASK_SEED) -> list[str]:
        rng = random.Random(f"{self.name}:{seed}")
        return ["".join(rng.choice(self.alphabet) for _ in range(self.length)) for _ in range(count)]

    def corpus(self, lines: int = TASK_LINES, seed: int = TASK_SEED) -> str:
        return "".join(self.line(q) for q in self.questions(lines, seed))


class Reverse(Task):
    name, alphabet, separator = "reverse", "abcdefgh", "<"
    description = N_("A task: reverse six letters, as in dbahcf<fchabd. The right attention is an anti-diagonal.")

    def answer(self, question: str) -> str:
        return question[::-1]

    def right_keys(self, question: str) -> list[list[int]]:
        L = len(question)
        return [[L - 1 - i] for i in range(L)]


class Copy(Task):
    name, alphabet, separator = "copy", "abcdefgh", "="
    description = N_("A task: copy six letters after “=”, as in dbahcf=dbahcf. The right attention looks back six "
                     "characters, to the one after where the current character was.")

    def answer(self, question: str) -> str:
        return question

    def right_keys(self, question: str) -> list[list[int]]:
        return [[i] for i in range(len(question))]


class Sort(Task):
    name, alphabet, separator = "sort", "0123456789", ":"
    description = N_("A task: sort six digits, as in 503912:012359 (minGPT's classic demo). The right attention "
                     "finds the next-smallest digit.")

    def answer(self, question: str) -> str:
        return "".join(sorted(question))

    def right_keys(self, question: str) -> list[list[int]]:
        return [[j for j, c in enumerate(question) if c == a] for a in self.answer(question)]


TASKS: dict[str, Task] = {task.name: task for task in (Reverse(), Copy(), Sort())}
TASK_CORPORA: dict[str, Task] = {task.corpus_name: task for task in TASKS.values()}
for _task in TASKS.values():  # the data module finds the task corpora by name, as it finds the texts
    register_corpus(_task.corpus_name, _task.corpus, _task.description)


def training_hooks(task: Task | None) -> dict[str, Any]:
    """What a `Trainer` on a task's corpus is given besides the text: windows that start at the
    task's lines, and its scorer. Nothing for any other corpus.

        Trainer(model, tokenizer, text, cfg, **training_hooks(task_for_corpus(name)))"""
    return {} if task is None else {"period": task.line_length, "scorer": TaskScorer(task)}


def task_for_corpus(name: str | None) -> Task | None:
    return TASK_CORPORA.get(str(name)) if name is not None else None


def find_task(text: str) -> tuple[Task, str] | None:
    """The task and question when `text` begins like a task's line (a learner's attention text)."""
    for task in TASKS.values():
        question = task.parse(text)
        if question is not None:
            return task, question
    return None


@dataclass
class TaskScore:
    chars: float   # answer characters that are the model's first choice (teacher-forced)
    lines: float   # lines whose every answer character is: greedy decoding writes the whole answer
    chance: float  # a model guessing uniformly over the alphabet gets this many characters right
    count: int = 0 # held-out lines scored


class TaskScorer:
    """The hook a `Trainer` calls at each evaluation (`Trainer(..., scorer=TaskScorer(task))`): the
    task's score on up to `LINES` of the run's held-out lines, which start at line boundaries
    because the trainer splits and draws with `period=task.line_length`."""

    LINES = 500

    def __init__(self, task: Task):
        self.task = task

    def __call__(self, trainer: "Trainer") -> TaskScore:
        period = self.task.line_length
        count = min(len(trainer.val_data) // period, self.LINES)
        lines = trainer.val_data[: count * period].view(-1, period).to(trainer.device)
        score = accuracy(trainer.model, lines, self.task)
        score.count = count
        return score


def accuracy(model: torch.nn.Module, lines: torch.Tensor, task: Task) -> TaskScore:
    """Score `model` on token lines (N, line_length) of `task`, each fed from position 0."""
    import torch  # here, not at the top: importing the tasks (Home lists their corpora) loads no torch

    from ..model import eval_mode

    with torch.no_grad(), eval_mode(model):
        L = task.length
        logits = model(lines[:, : task.block_size])[0]                       # (N, 2L+1, vocab)
        guesses = logits[:, L: 2 * L].argmax(-1)                              # predictions of a[0..L-1]
        right = guesses == lines[:, L + 1: 2 * L + 1]
    return TaskScore(right.float().mean().item(), right.all(dim=1).float().mean().item(), 1 / len(task.alphabet))


def right_key_mask(task: Task, question: str, length: int) -> np.ndarray:
    """(length, length) 0/1: 1 where a query row of an answer character should attend."""
    import numpy as np  # here, not at import: Home registers the tasks, and a first visit need not wait for numpy

    mask = np.zeros((length, length), dtype=np.float32)
    for i, keys in enumerate(task.right_keys(question)):
        row = task.length + i
        if row < length:
            mask[row, keys] = 1.0
    return mask


def right_key_scores(attention: np.ndarray, task: Task, question: str) -> np.ndarray:
    """For attention (layers, heads, T, T) on a task line: each head's mean weight on the right keys
    over the answer rows, (layers, heads). A head attending uniformly scores `right_key_chance`."""
    T = attention.shape[-1]
    mask = right_key_mask(task, question, T)
    rows = mask.any(axis=1)
    if not rows.any():
        raise ValueError("the text ends before the answer begins: no row has a right key.")
    return (attention[..., rows, :] * mask[rows]).sum(-1).mean(-1)


def right_key_chance(task: Task, question: str, length: int) -> float:
    """What a uniform causal head scores: the right keys' share of the keys each answer row sees."""
    import numpy as np

    mask = right_key_mask(task, question, length)
    rows = np.flatnonzero(mask.any(axis=1))
    return float(np.mean([mask[r].sum() / (r + 1) for r in rows]))
