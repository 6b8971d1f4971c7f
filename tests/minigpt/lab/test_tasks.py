"""minigpt/lab/tasks.py: tasks whose right answer is known: the generated lines, the right keys and their
score on hand-built attention, the accuracy of hand-built models, aligned batches, the loss floor,
and a tiny model that learns to reverse, far above chance in its answers and in where it looks.

    pytest tests/minigpt/lab/test_tasks.py
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from minigpt import CharTokenizer, ConfigError, GPTConfig, TrainConfig, Trainer, build_model, load_corpus
from minigpt.data import get_batch
from minigpt.lab import tasks
from minigpt.lab.tasks import TASKS, accuracy, right_key_chance, right_key_mask, right_key_scores, training_hooks

REVERSE, COPY, SORT = TASKS["reverse"], TASKS["copy"], TASKS["sort"]


def test_task_lines_are_what_the_task_says():
    assert REVERSE.line("dbahcf") == "dbahcf<fchabd\n"
    assert COPY.line("dbahcf") == "dbahcf=dbahcf\n"
    assert SORT.line("503912") == "503912:012359\n"
    assert SORT.line("990110") == "990110:001199\n"
    for name, task in TASKS.items():
        text = load_corpus(f"task-{name}")
        lines = text.split("\n")[:-1]
        assert len(lines) == 3000 and text == load_corpus(f"task-{name}")  # generated, the same every time
        assert len(set(lines)) > 2900  # questions are random, not a few repeated
        for line in lines:
            question, answer = line.split(task.separator)
            assert len(question) == len(answer) == 6 and set(question) <= set(task.alphabet)
            if name == "reverse":
                assert all(answer[i] == question[5 - i] for i in range(6))
            elif name == "copy":
                assert answer == question
            else:
                assert list(answer) == sorted(question) and all(a <= b for a, b in zip(answer, answer[1:]))


def test_right_keys_of_each_task():
    assert REVERSE.right_keys("dbahcf") == [[5], [4], [3], [2], [1], [0]]
    assert COPY.right_keys("dbahcf") == [[0], [1], [2], [3], [4], [5]]
    # 503912 sorted is 012359: 0 sits at position 1, 1 at 4, 2 at 5, 3 at 2, 5 at 0, 9 at 3
    assert SORT.right_keys("503912") == [[1], [4], [5], [2], [0], [3]]
    assert SORT.right_keys("990110") == [[2, 5], [2, 5], [3, 4], [3, 4], [0, 1], [0, 1]]
    mask = right_key_mask(REVERSE, "dbahcf", 13)
    assert mask.sum() == 6 and all(mask[6 + i, 5 - i] == 1 for i in range(6))  # the anti-diagonal
    assert right_key_mask(REVERSE, "dbahcf", 9).sum() == 3  # only the answer rows the text reaches


def test_right_key_score_of_hand_built_heads():
    T = 13
    perfect = np.zeros((1, 1, T, T))
    perfect[0, 0, :, 0] = 1.0                      # rows that are not answer rows do not count
    for i in range(6):
        perfect[0, 0, 6 + i, :] = 0
        perfect[0, 0, 6 + i, 5 - i] = 1.0
    uniform = np.tril(np.ones((T, T)))
    uniform = (uniform / uniform.sum(1, keepdims=True))[None, None]
    half = 0.5 * perfect + 0.5 * uniform
    previous = np.zeros((1, 1, T, T))
    previous[0, 0, 0, 0] = 1.0
    for t in range(1, T):
        previous[0, 0, t, t - 1] = 1.0
    heads = np.concatenate([perfect, uniform, half, previous], axis=1)
    scores = right_key_scores(heads, REVERSE, "dbahcf")
    chance = np.mean([1 / (r + 1) for r in range(6, 12)])  # one right key among the r + 1 a row sees
    # a previous-character head hits the right key only where the anti-diagonal crosses t - 1: in row 6,
    # the separator, whose right key is the question's last letter; one answer row of six
    np.testing.assert_allclose(scores[0], [1.0, chance, 0.5 + 0.5 * chance, 1 / 6], atol=1e-12)
    assert right_key_chance(REVERSE, "dbahcf", T) == pytest.approx(chance)
    # two right keys (a repeated digit) count both
    assert right_key_chance(SORT, "990110", T) == pytest.approx(np.mean([2 / (r + 1) for r in range(6, 12)]))
    with pytest.raises(ValueError, match="before the answer"):
        right_key_scores(heads[..., :6, :6], REVERSE, "dbahcf")


class Oracle(torch.nn.Module):
    """Logits that put the right answer first at every answer row, except at the positions in `wrong`."""

    def __init__(self, tokenizer: CharTokenizer, task, wrong: tuple[int, ...] = ()):
        super().__init__()
        self.tokenizer, self.task, self.wrong = tokenizer, task, wrong

    def forward(self, idx):
        N, T = idx.shape
        logits = torch.zeros(N, T, self.tokenizer.vocab_size)
        for n in range(N):
            question = self.tokenizer.decode(idx[n, :6].tolist())
            for i, c in enumerate(self.task.answer(question)):
                right = self.tokenizer.stoi[c]
                logits[n, 6 + i, (right + 1) % self.tokenizer.vocab_size if i in self.wrong else right] = 1.0
        return logits, None


def test_accuracy_of_hand_built_models():
    text = REVERSE.corpus(lines=50)
    tokenizer = CharTokenizer.from_text(text)
    lines = torch.tensor(tokenizer.encode(text)).view(50, 14)
    score = accuracy(Oracle(tokenizer, REVERSE), lines, REVERSE)
    assert (score.chars, score.lines, score.chance) == (1.0, 1.0, 1 / 8)
    score = accuracy(Oracle(tokenizer, REVERSE, wrong=(5,)), lines, REVERSE)  # the last character always wrong
    assert score.chars == pytest.approx(5 / 6) and score.lines == 0.0


def test_aligned_batches_start_at_a_line_and_the_split_falls_between_lines():
    data = torch.arange(1000)
    gen = torch.Generator().manual_seed(0)
    x, y = get_batch(data, 64, 13, gen, period=14)
    assert (x[:, 0] % 14 == 0).all() and torch.equal(y, x + 1) and x[:, 0].max() + 14 <= 1000
    # without a period, the windows are nanoGPT's: randint(len - block_size) starts
    gen = torch.Generator().manual_seed(0)
    starts = torch.randint(1000 - 13, (64,), generator=torch.Generator().manual_seed(0))
    assert torch.equal(get_batch(data, 64, 13, gen)[0][:, 0], starts)
    text = load_corpus("task-reverse")
    tokenizer = CharTokenizer.from_text(text)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=16)
    trainer = Trainer(build_model(config, 0), tokenizer, text, TrainConfig(block_size=13, val_fraction=0.1),
                      **training_hooks(REVERSE))
    assert len(trainer.train_data) % 14 == 0 and tokenizer.decode(trainer.val_data[:14].tolist()).endswith("\n")
    assert trainer.scorer(trainer).count == 300  # 10% of 3000 lines, whole lines only
    with pytest.raises(ConfigError, match="block_size at least 13"):
        REVERSE.check_block(12)  # the caller checks it, before building a trainer


def test_the_task_is_scored_on_its_held_out_lines_never_on_the_training_lines(monkeypatch):
    text = load_corpus("task-reverse")
    tokenizer = CharTokenizer.from_text(text)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=16)
    trainer = Trainer(build_model(config, 0), tokenizer, text, TrainConfig(block_size=13, val_fraction=0.1),
                      **training_hooks(REVERSE))
    scored = []
    monkeypatch.setattr(tasks, "accuracy", lambda model, lines, task: scored.append(lines) or accuracy(model, lines, task))
    assert trainer.scorer(trainer).count == 300
    held_out = "".join(line + "\n" for line in text.splitlines()[-300:])  # the last tenth of the lines, by hand
    assert tokenizer.decode(scored[0].reshape(-1).tolist()) == held_out


def test_the_loss_floor_counts_the_random_question_characters():
    # a 13-character window predicts 5 question letters (random) and 8 characters that follow from them
    assert REVERSE.loss_floor(13) == pytest.approx(5 * math.log(8) / 13)
    # a 14th target is the next line's first letter, random as well
    assert REVERSE.loss_floor(14) == pytest.approx(6 * math.log(8) / 14)
    assert SORT.loss_floor(13) == pytest.approx(5 * math.log(10) / 13)


@pytest.fixture(scope="module")
def reverse_run():
    torch.manual_seed(0)
    text = load_corpus("task-reverse")
    tokenizer = CharTokenizer.from_text(text)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, d_model=64, num_heads=4, num_layers=1, d_ff=256,
                       max_len=16, dropout=0.0)
    cfg = TrainConfig(batch_size=32, block_size=13, max_steps=400, warmup_steps=20, eval_interval=100,
                      eval_iters=5, lr=1e-2, min_lr=1e-3, device="cpu")
    trainer = Trainer(build_model(config, 0), tokenizer, text, cfg, **training_hooks(REVERSE))
    events = [e for e in trainer.events() if e.val_loss is not None]
    return trainer, events


@pytest.mark.slow
def test_a_tiny_model_learns_to_reverse_far_above_chance(reverse_run):
    trainer, events = reverse_run
    final = events[-1]
    assert final.step == 400
    assert final.score.chars >= 0.9 and final.score.lines >= 0.5            # chance: 1/8 per character
    assert events[0].score.chars < 0.5                                      # it was learnt, not given
    # no lower than the floor: a model beating it would be reading the answer (a leaking causal mask)
    assert final.val_loss > REVERSE.loss_floor(13) - 0.02
    # where it looks: on new questions, some head puts most of its weight on the right keys
    tokenizer, model = trainer.tokenizer, trainer.model.eval()
    scores = []
    for question in REVERSE.questions(20, seed=7):
        ids = torch.tensor([tokenizer.encode(REVERSE.line(question)[:13])])
        scores.append(right_key_scores(model.attention_maps(ids).numpy(), REVERSE, question))
    best = np.mean(scores, axis=0).max()
    assert best >= 0.6 and best > 5 * right_key_chance(REVERSE, "dbahcf", 13)
