"""Tasks whose right answer is known: the generated lines, the right keys and their score on
hand-built attention, the accuracy of hand-built models, aligned batches, and a tiny model that
learns to reverse, far above chance in its answers and in where it looks."""
from __future__ import annotations

import json
import math
import subprocess
import sys
import numpy as np
import pytest
import torch

from app import runs
from helpers import PAGES, ROOT, assert_chinese, home, page, plotly_array, plotly_spec, own_run, wait_for_step
from minigpt import (TASKS, CharTokenizer, ConfigError, GPTConfig, TrainConfig, Trainer, build_model,
                     get_batch, load_corpus, load_pretrained, right_key_chance, right_key_mask, right_key_scores)
from minigpt.tasks import accuracy
from minigpt.viz import attention_heatmap, right_key_figure, task_figure

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
                      task=REVERSE)
    assert len(trainer.train_data) % 14 == 0 and tokenizer.decode(trainer.val_data[:14].tolist()).endswith("\n")
    assert trainer.task_lines == 300
    with pytest.raises(ConfigError, match="block_size at least 13"):
        Trainer(build_model(config, 0), tokenizer, text, TrainConfig(block_size=12), task=REVERSE)


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
    trainer = Trainer(build_model(config, 0), tokenizer, text, cfg, task=REVERSE)
    events = [e for e in trainer.events() if e.val_loss is not None]
    return trainer, events


def test_a_tiny_model_learns_to_reverse_far_above_chance(reverse_run):
    trainer, events = reverse_run
    final = events[-1]
    assert final.step == 400
    assert final.task_accuracy >= 0.9 and final.task_solved >= 0.5          # chance: 1/8 per character
    assert events[0].task_accuracy < 0.5                                    # it was learnt, not given
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


@pytest.mark.parametrize("name", ["reverse", "copy", "sort"])
def test_the_shipped_task_models_answer_new_questions(name):
    task = TASKS[name]
    checkpoint = load_pretrained(f"task-{name}")
    lines = torch.tensor([checkpoint.tokenizer.encode(task.line(q)) for q in task.questions(300, seed=11)])
    score = accuracy(checkpoint.model, lines, task)
    assert score.chars >= 0.95 and score.lines >= 0.8
    assert checkpoint.meta["probe_text"] == task.probe(load_corpus(f"task-{name}"))


def test_the_cli_trains_a_task_and_reports_its_accuracy(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "minigpt", "train", "--corpus", "task-copy", "--out", str(tmp_path / "run"),
         "--d-model", "16", "--num-heads", "2", "--num-layers", "1", "--d-ff", "32", "--max-len", "16",
         "--block-size", "13", "--max-steps", "20", "--eval-interval", "10", "--batch-size", "8"],
        capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "copy task, held-out lines:" in out.stderr and "(chance 12.5% per character)" in out.stderr
    refused = subprocess.run(
        [sys.executable, "-m", "minigpt", "train", "--corpus", "task-copy", "--out", str(tmp_path / "short"),
         "--block-size", "8", "--max-steps", "5"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert refused.returncode == 2 and "block_size at least 13" in refused.stderr


def test_the_heatmap_outlines_the_right_keys():
    mask = right_key_mask(REVERSE, "dbahcf", 13)
    fig = attention_heatmap(np.tril(np.ones((13, 13))) / 13, "dbahcf<fchabd", expected=mask)
    marks = fig.data[1]
    assert list(zip(marks.y, marks.x)) == [(f"{6 + i}:{'dbahcf<fchabd'[6 + i]}", f"{5 - i}:{'dbahcf'[5 - i]}")
                                           for i in range(6)]
    page_two = attention_heatmap(np.eye(13), "dbahcf<fchabd", start=8, expected=mask)
    assert list(page_two.data[1].y) == []  # the anti-diagonal's cells of rows 8.. lie in columns before 8


def test_task_and_right_key_figures_plot_the_numbers():
    from minigpt import TrainEvent

    history = [TrainEvent(s, 100, 1.0, 1e-3, 1.0, 1.0, val_loss=1.0, task_accuracy=a, task_solved=w)
               for s, a, w in [(0, 0.1, 0.0), (50, 0.6, 0.2), (100, 1.0, 1.0)]]
    history.insert(1, TrainEvent(10, 100, 1.0, 1e-3, 1.0, 1.0))  # a logged interval, no evaluation
    fig = task_figure(history, 0.125)
    assert list(fig.data[0].x) == [0, 50, 100] and list(fig.data[0].y) == [0.1, 0.6, 1.0]
    assert list(fig.data[1].y) == [0.0, 0.2, 1.0]
    scores = np.array([[[0.1, 0.3], [0.2, 0.1]], [[0.9, 0.4], [0.2, 0.5]]])  # (steps, layers, heads)
    fig = right_key_figure([0, 100], scores, 0.11, chosen=100)
    assert [list(t.y) for t in fig.data] == [[0.3, 0.9], [0.2, 0.5]]  # each layer's best head


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_attention_page_scores_a_task_model(lang):
    at = home(lang)
    at.selectbox(key="corpus").set_value("task-reverse").run()
    at = page(at, "pages/3_Attention.py")
    assert not at.exception and not at.error
    note = next(m.value for m in at.markdown if ("**reverse** task" if lang == "en" else "**反转**任务") in m.value)
    checkpoint = load_pretrained("task-reverse")
    probe = checkpoint.meta["probe_text"]
    if lang == "zh":
        assert_chinese(at, "Attention on a task model", besides=[probe])
    ids = torch.tensor([checkpoint.tokenizer.encode(probe)])
    attention = checkpoint.model(ids, return_attention=True)[2]
    # the right keys written out: answer row 6 + i reads question position 5 - i
    by_hand = np.array([[[a[0, h, 6 + i, 5 - i].item() for i in range(6)] for h in range(a.shape[1])]
                        for a in attention]).mean(-1)
    table = at.dataframe[-1].value
    np.testing.assert_allclose(table.to_numpy(), by_hand, atol=1e-6)
    assert f"**{by_hand.max():.0%}**" in note and by_hand.max() > 0.6
    spec = plotly_spec(at, 0)  # the first layer's heatmap
    assert any(t.get("type") == "scatter" and len(t["x"]) == 6 for t in spec["data"])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_train_page_shows_a_task_runs_accuracy_beside_its_loss(lang):
    at = home(lang)
    at.selectbox(key="corpus").set_value("task-copy").run()
    at = page(at, "pages/1_Train.py")
    at.button(key="preset:task").click().run()
    at.number_input(key="max_steps").set_value(40)
    at.number_input(key="eval_interval").set_value(20)
    at.select_slider(key="d_model").set_value(16).run()
    at.button(key="start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    wait_for_step(at, 40)
    entry = runs.registry().get(*own_run(at))
    entry.run.stop()  # returns once the thread, with step 40's evaluation, is done
    at.run()
    sample = entry.run.snapshot().evals[-1].sample  # one answer to a held-out question, not lines of noise
    assert sample.startswith(entry.probe_text[:7]) and len(sample) == 14
    notes = [m.value for m in at.markdown if ("The copy task" if lang == "en" else "**复制任务**") in m.value]
    assert notes and ("held-out lines" if lang == "en" else "留出行") in notes[0]
    if lang == "zh":
        assert_chinese(at, "Train, a task run")
    fig = plotly_spec(at, 1)  # beside the loss chart
    assert len(fig["data"][0]["x"]) == 3  # steps 0, 20, 40
    loss = plotly_spec(at, 0)
    floor = "lowest possible: 0.80" if lang == "en" else "可能的最低值：0.80"
    assert any(floor in (s.get("text") or "") for s in loss["layout"]["annotations"])
    # the time-lapse scores the run's held-out probe line at each of its evaluations
    at = page(at, "pages/3_Attention.py")
    assert not at.exception
    axis = "weight on the right keys" if lang == "en" else "正确的键上的权重"
    lapse = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                 if axis in json.dumps(json.loads(c.proto.spec)["layout"].get("yaxis", {}), ensure_ascii=False))
    if lang == "zh":  # the probe line's letters are the task's, not words
        assert_chinese(at, "Attention, a task run's time-lapse", besides=[runs.registry().get(*own_run(at)).probe_text])
    outlined = [c for c in at.get("plotly_chart") if any(t.get("type") == "scatter" and len(t.get("x", [])) == 6
                                                       for t in json.loads(c.proto.spec)["data"])]
    assert len(outlined) == 4  # each layer's heatmap, above and in the time-lapse, outlines the six right keys
    y = plotly_array(lapse["data"][0]["y"])
    assert list(plotly_array(lapse["data"][0]["x"])) == [0, 20, 40] and ((0 <= y) & (y <= 1)).all()


@pytest.mark.parametrize("name", ["reverse", "sort"])
def test_every_page_works_on_a_task_model_and_generate_answers_the_question(name):
    at = home()
    at.selectbox(key="corpus").set_value(f"task-{name}").run()
    for path in PAGES:
        at = page(at, path)
        assert not at.exception and not at.error, (path, [e.value for e in at.exception or at.error])
    at = page(at, "pages/2_Generate.py")
    prompt = load_pretrained(f"task-{name}").meta["probe_text"][:7]  # the question and its separator
    box = next(t for t in at.text_input if t.key.startswith("prompt:"))
    assert box.value == prompt
    at.slider(key="temperature").set_value(0.0)
    at.number_input(key="max_new_tokens").set_value(7)
    at.button(key="generate").click().run()
    assert not at.exception and not at.error
    answer = TASKS[name].answer(prompt[:6])
    assert at.session_state["generation"]["text"] == prompt + answer + "\n"  # greedy decoding answers it
