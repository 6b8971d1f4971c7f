"""minigpt/pretrained.py: the shipped models do what the app promises a learner: the default model
generalises where the demo's paragraph can only be recited, temperature visibly reshapes its
distribution, and the task models answer questions they never saw.

    pytest tests/minigpt/test_pretrained.py
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers.maths import hand_forward
from minigpt import (BUILTIN_CORPORA, DEFAULT_CORPUS, Sampling, TrainConfig, generate, load_corpus, load_pretrained,
                     validation_windows)
from minigpt.lab.diagnosis import uniform_loss
from minigpt.lab.tasks import TASKS, task_for_corpus
from minigpt.data import eval_windows, split_tokens
from minigpt.lab.tasks import accuracy
from minigpt import estimate_loss

ROOT = Path(__file__).resolve().parents[2]


def _val_loss(corpus: str) -> tuple[float, float]:
    checkpoint = load_pretrained(corpus)
    ids = torch.tensor(checkpoint.tokenizer.encode(load_corpus(corpus)))
    _, val = split_tokens(ids, TrainConfig.val_fraction, checkpoint.block_size)
    windows = eval_windows(val, batch_size=32, block_size=checkpoint.block_size, batches=20, seed=0)
    return estimate_loss(checkpoint.model, windows), uniform_loss(checkpoint.tokenizer.vocab_size)


def _longest_copied_run(sample: str, corpus: str) -> int:
    longest = 0
    for i in range(len(sample)):
        while i + longest < len(sample) and sample[i : i + longest + 1] in corpus:
            longest += 1
    return longest


def test_the_default_model_generalises_where_the_demo_paragraph_can_only_be_recited():
    """The default was the demo's 448-character paragraph: val loss 7.8-10 nats, above ln 208 = 5.34,
    and samples that recite it. The default corpus must give a val loss well below uniform and new text."""
    assert DEFAULT_CORPUS == "course-zh"
    val, uniform = _val_loss(DEFAULT_CORPUS)
    assert val < 0.7 * uniform, (val, uniform)
    demo_val, demo_uniform = _val_loss("demo-zh")
    assert demo_val > demo_uniform  # the reference demo's corpus stays one click away, and memorises
    text = load_corpus(DEFAULT_CORPUS)
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    samples = {t: generate(checkpoint.model, checkpoint.tokenizer, "注意力", max_new_tokens=80,
                           sampling=Sampling(temperature=t), seed=0, block_size=checkpoint.block_size)[3:]
               for t in (0.5, 1.2)}
    assert all(_longest_copied_run(s, text) < 20 for s in samples.values())  # new text, not a recital
    assert samples[0.5] != samples[1.2]
    demo = load_pretrained("demo-zh")
    recital = generate(demo.model, demo.tokenizer, "深度", max_new_tokens=40, sampling=Sampling(temperature=0.8),
                       seed=0, block_size=demo.block_size)
    assert _longest_copied_run(recital, load_corpus("demo-zh")) >= 30


def test_temperature_visibly_reshapes_the_default_models_next_character_distribution():
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    logits = hand_forward(checkpoint.model, checkpoint.tokenizer.encode("注意力"))["logits"][-1]

    def entropy(t):
        p = torch.softmax(logits / t, -1)
        return float(-(p * p.log()).sum())

    assert entropy(0.5) < 0.5 * entropy(1.5)  # the demo model's "1.00 / 0.00 / 0.00" showed nothing


@pytest.mark.parametrize("name", ["reverse", "copy", "sort"])
def test_the_shipped_task_models_answer_new_questions(name):
    task = TASKS[name]
    checkpoint = load_pretrained(f"task-{name}")
    lines = torch.tensor([checkpoint.tokenizer.encode(task.line(q)) for q in task.questions(300, seed=11)])
    score = accuracy(checkpoint.model, lines, task)
    assert score.chars >= 0.95 and score.lines >= 0.8
    assert checkpoint.meta["probe_text"] == task.probe(load_corpus(f"task-{name}"))


@pytest.mark.parametrize("corpus", sorted(BUILTIN_CORPORA))
@pytest.mark.slow
def test_a_shipped_models_validation_windows_give_the_val_loss_its_training_recorded(corpus):
    """The val loss each checkpoint recorded when it was trained, measured again on the windows any
    page measures it on: the same number, so Train and Experiments cannot disagree."""
    checkpoint = load_pretrained(corpus)
    task = task_for_corpus(corpus)
    ids = torch.tensor(checkpoint.tokenizer.encode(load_corpus(corpus)))
    windows = validation_windows(ids, checkpoint.train_config, task.line_length if task is not None else 1)
    assert estimate_loss(checkpoint.model, windows) == pytest.approx(checkpoint.meta["val_loss"], abs=5e-5)


@pytest.mark.slow
def test_every_shipped_model_loads_in_a_fresh_interpreter_without_the_lab():
    """The task corpora join the corpus registry when minigpt.lab.tasks is imported; the shipped task
    checkpoints must load without it (a library user, or a test file run alone, has not imported it).
    In a fresh interpreter, since this one has long imported the lab."""
    code = ("import sys; from minigpt import load_pretrained\n"
            "for corpus in sys.argv[1:]:\n"
            "    assert load_pretrained(corpus).tokenizer.vocab_size > 0, corpus\n"
            "assert 'minigpt.lab.tasks' not in sys.modules\n")
    shipped = sorted(folder.name for folder in (ROOT / "minigpt" / "pretrained").iterdir() if folder.is_dir())
    assert {"course-zh", "task-copy", "task-reverse", "task-sort"} <= set(shipped)
    done = subprocess.run([sys.executable, "-c", code, *shipped], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
