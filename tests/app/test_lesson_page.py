"""pages/Lesson.py, app/views/lesson.py and the built-in lesson's files (app/lessons): every step in both
languages with its live view and a question that tells a right answer from a wrong one, the step in
the address, its one-click training, a step's Train settings, and the numbers its words quote, filled
in from the code that owns them. Reading the files themselves: test_lesson_file.py.

    pytest tests/app/test_lesson_page.py
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from app.chrome import i18n
from app.state.lesson_file import builtin_lesson
from helpers.apptest import home, page, plotly_spec, unescaped, wait_finished
from helpers.language import assert_chinese
from helpers.maths import hand_forward
from minigpt import (DEFAULT_CORPUS, DEFAULT_PRESET, PRESETS, GPTConfig, MiniGPT, TrainConfig, load_corpus,
                     load_pretrained)
from minigpt.data import split_tokens
from minigpt.sample import refill_keep
from minigpt.serve import server as face
from app.chrome.site import ATTENTION, EXPERIMENTS, GENERATE, GLOSSARY, INSIDE, LESSON, MODEL, SCALING, TRAIN

LESSON = LESSON.script
STEPS = builtin_lesson("en").steps

# what each step's live view draws: a chart (its key), a widget (its key), a table (its number of columns)
VIEW_ELEMENTS = {
    "next": ("plotly_chart", "beliefs"), "embed": ("dataframe", 4),
    "positions": ("plotly_chart", "lesson_pe_similarity"), "qkv": ("plotly_chart", "lesson_weight"),
    "scaling": ("plotly_chart", "lesson_scaling_max"), "mask": ("plotly_chart", "lesson_mask:0"),
    "heads": ("plotly_chart", "lesson_heads:3"), "ffn": ("plotly_chart", "lesson_lens"),
    "head": ("dataframe", 3), "loss": ("dataframe", 4),
    "train": ("button", "lesson_train"), "fit": ("button", "lesson_overfit"), "sampling": ("slider", "lesson_temperature"),
    "kv": ("button", "lesson_kv"), "pages": ("page_link", None),
}


def drew(at, kind: str, key) -> bool:
    if kind == "plotly_chart":
        return any(c.proto.id.endswith(f"-{key}") for c in at.get("plotly_chart"))
    if kind == "dataframe":
        return any(d.value.shape[1] == key and len(d.value) > 0 for d in at.dataframe)
    if kind == "page_link":
        return len(at.get("page_link")) >= 8
    return any(w.key == key for w in at.get(kind))


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.slow
def test_next_walks_every_step_with_its_view_and_a_question_that_tells_right_from_wrong(lang):
    at = page(home(lang, lesson="1"), LESSON)
    for n, step in enumerate(builtin_lesson(lang).steps, start=1):
        assert not at.exception, (n, [e.value for e in at.exception])
        assert at.header[0].value == f"{n}. {step.title}", (n, at.header[0].value)
        assert at.query_params["lesson"] in (str(n), [str(n)])
        kind, key = VIEW_ELEMENTS[step.view]
        assert drew(at, kind, key), (n, step.view, kind, key)
        if lang == "zh":
            assert_chinese(at, f"lesson step {n}")
        options = at.radio(key=f"lesson_answer:{n}").options
        wrong = next(o for i, o in enumerate(options) if i != step.answer)
        at.radio(key=f"lesson_answer:{n}").set_value(wrong).run()
        assert at.error and not at.success, n
        at.radio(key=f"lesson_answer:{n}").set_value(options[step.answer]).run()
        assert at.success and not at.error, n
        assert at.button(key="lesson_back:top").disabled == (n == 1)
        if n < len(STEPS):
            at.button(key="lesson_next:bottom" if n % 2 else "lesson_next:top").click().run()
    assert at.button(key="lesson_next:top").disabled  # the last step
    at.button(key="lesson_back:top").click().run()
    assert at.header[0].value.startswith(f"{len(STEPS) - 1}. ")


def test_a_teachers_link_opens_its_step_and_a_step_that_does_not_exist_says_so():
    at = page(home("en", lesson="5"), LESSON)
    assert at.header[0].value == "5. Why divide by √d_k" and not at.warning
    at.selectbox(key="lesson_list").select_index(11).run()  # the step list: step 12
    assert at.header[0].value.startswith("12. ") and at.query_params["lesson"] in ("12", ["12"])
    for bad, shown in (("99", len(STEPS)), ("abc", 1), ("0", 1)):
        at = page(home("en", lesson=bad), LESSON)
        assert not at.exception and at.header[0].value.startswith(f"{shown}. ")
        assert any(f"steps 1 to {len(STEPS)}" in w.value for w in at.warning), bad


def test_the_words_quote_the_loaded_models_own_numbers():
    at = page(home("en", lesson="7"), LESSON)
    shown = " ".join(m.value for m in at.markdown)
    assert "(per layer in your model: 4)" in shown and "d_k = 64 / 4 = 16" in shown  # the shipped course-zh model


def test_every_step_has_three_options_and_a_few_sentences():
    for n, step in enumerate(STEPS, start=1):
        assert len(step.options) == 3 and 0 <= step.answer < 3
        assert 3 <= len(re.findall(r"[.?!:;](?:\s|$)", " ".join(step.body))) <= 12, n  # a few sentences


NOTATION = {"Attention", "Attn", "Concat", "FFN", "GELU", "LN", "MultiHead", "head", "id", "softmax", "Var", "model",
            "sin", "cos", "ln", "max", "min"}  # the names a formula may spell: the same in every language


def test_the_formulas_spell_only_notation_no_sentences():
    for n, step in enumerate(STEPS, start=1):
        if step.formula:
            words = re.findall(r"\\(?:text|mathrm|operatorname)\{([^}]*)\}", step.formula)
            assert all(w.strip() in NOTATION for w in words), (n, words)


@pytest.mark.slow
def test_the_lesson_is_reachable_from_home_and_each_tool_page_links_to_its_step():
    at = home("en")
    assert any(l.proto.query_string.startswith("lesson=1&") for l in at.get("page_link")), "Home: start the lesson"
    for script, step in ((TRAIN.script, 11), (GENERATE.script, 13), (ATTENTION.script, 6),
                         (SCALING.script, 5), (INSIDE.script, 4), (MODEL.script, 8),
                         (GLOSSARY.script, 1), (EXPERIMENTS.script, 7)):
        tool = page(home("en"), script)
        links = [l.proto for l in tool.get("page_link") if "lesson=" in l.proto.query_string]
        assert any(f"lesson={step}" in l.query_string and STEPS[step - 1].title in l.label for l in links), script


@pytest.mark.trains
@pytest.mark.slow
def test_the_lesson_trains_the_tiny_preset_then_watches_the_demos_448_characters_overfit():
    at = page(home("en", lesson="11"), LESSON)
    at.button(key="lesson_train").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    entry = wait_finished(at)
    assert entry.run.trainer.cfg.max_steps == PRESETS["tiny"].train.max_steps and entry.corpus.startswith("course")
    at.run()
    curves = plotly_spec(at, next(i for i, c in enumerate(at.get("plotly_chart")) if "lesson_train_curves" in c.proto.id))
    assert [t["name"] for t in curves["data"]][:2] == ["train loss", "val loss"]
    assert entry.run_id in at.caption[0].value, at.caption[0].value  # the lesson's model is now the run

    at.button(key="lesson_next:top").click().run()  # step 12, on the same session
    at.button(key="lesson_overfit").click().run()
    demo = wait_finished(at)
    assert demo.corpus.startswith("demo") and demo.run_id != entry.run_id
    evals = demo.run.snapshot().evals
    best = min(e.val_loss for e in evals)
    # the step's words: the training loss sinks far down while the validation loss climbs back up
    assert evals[-1].train_loss < 1.0 and evals[-1].val_loss > best + 0.3, [(e.step, e.val_loss) for e in evals]
    assert evals[-1].val_loss > 0.9 * math.log(len(set(load_corpus("demo-zh"))))  # near a uniform guess
    at.run()
    curves = plotly_spec(at, next(i for i, c in enumerate(at.get("plotly_chart")) if "lesson_fit_curves" in c.proto.id))
    assert any("overfitting" in a["text"] for a in curves["layout"]["annotations"])  # marked where it began
    at.button(key="lesson_next:top").click().run()  # the next steps use the model just trained
    assert demo.run_id in at.caption[0].value and "demo" in at.caption[0].value, at.caption[0].value


def test_the_kv_cache_step_times_both_ways_and_agrees_while_the_text_fits():
    at = page(home("en", lesson="14"), LESSON)
    at.button(key="lesson_kv").click().run()
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert labels[:3] == ["With the KV cache", "Without: the whole context again for each character",
                          "Faster with the cache"]
    agree = next(c.value for c in at.caption if "both ways" in c.value)
    if "the two texts are the same" not in agree:
        same = int(re.search(r"first (\d+) characters", agree).group(1))
        block = int(re.search(r"in the (\d+) positions", agree).group(1))
        assert same >= block  # the cache changes no probability while the whole text fits in the context
    seconds = [float(m.value.split()[0]) for m in at.metric[:2]]
    assert all(s > 0 for s in seconds)


def shown_words(n: int) -> str:
    """Step n's words as an English learner reads them, every field filled in."""
    at = page(home("en", lesson=str(n)), LESSON)
    assert not at.exception and at.header[0].value.startswith(f"{n}. ")
    return " ".join([m.value for m in at.markdown] + [i.value for i in at.info] + [at.radio[0].label])


def test_the_training_step_quotes_the_preset_the_lesson_trains():
    """The words are filled in from the preset itself; the lesson's run trains that preset (below)."""
    tiny = PRESETS["tiny"].train
    words = shown_words(11)
    for quoted in (f"{tiny.batch_size} windows of {tiny.block_size} characters", f"runs {tiny.max_steps} steps",
                   f"the first {tiny.warmup_steps} of them", f"peak of {tiny.lr:g},", f"to {tiny.min_lr:g} at",
                   f"betas {tiny.betas[0]:g} and {tiny.betas[1]:g}", f"weight decay {tiny.weight_decay:g}",
                   f"above {tiny.grad_clip:.1f},"):
        assert quoted in words, quoted
    assert STEPS[10].view == "train" and STEPS[11].view == "fit"


def test_the_overfitting_step_quotes_the_demo_corpus_and_the_validation_share():
    demo = load_corpus("demo-zh")  # counted here, from the shipped file
    words = shown_words(12)
    assert f"only {len(demo)} characters, {len(set(demo))} of them different" in words
    assert f"ln {len(set(demo))} ≈ {math.log(len(set(demo))):.2f} nats" in words
    assert f"the last {TrainConfig().val_fraction:.0%} of the corpus" in words
    ids = torch.arange(1000)  # and the validation split is that share, taken from the end
    train, val = split_tokens(ids, TrainConfig().val_fraction, block_size=8)
    assert torch.equal(val, ids[-len(val):]) and len(val) == round(TrainConfig().val_fraction * len(ids))


def test_the_feed_forward_step_quotes_the_width_every_preset_has():
    ratio = {p.model.d_ff / p.model.d_model for p in PRESETS.values()}
    assert len(ratio) == 1, "the words say every preset widens d_model by one factor"
    assert f"({ratio.pop():g} times as many in every preset)" in shown_words(8)


def test_the_kv_step_quotes_the_share_a_full_context_keeps():
    """The cache keeps 3 of every 4 positions: 12 of a 16-position context, as the sampling tests
    replay token by token."""
    assert refill_keep(16) == 12 and refill_keep(32) == 24
    assert "keeps the last 75% of it" in shown_words(14)


def test_the_mask_step_counts_the_rows_and_the_weight_above_the_diagonal():
    """Step 6's caption: each row's sum and the weight above the diagonal of layer 1, head 1, on the
    shipped model, against the forward pass written out by hand."""
    at = page(home("en", lesson="6"), LESSON)
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    text = at.text_input[0].value
    weights = hand_forward(checkpoint.model, checkpoint.tokenizer.encode(text))["layers"][0]["weights"][0].numpy()
    caption = next(c.value for c in at.caption if "above the diagonal" in c.value)
    low, high, above = re.search(r"adds up to ([\d.]+)–([\d.]+);.*together: (.+)\.$", caption).groups()
    sums = weights.sum(axis=-1)
    assert float(low) == pytest.approx(sums.min(), abs=1e-4) and float(high) == pytest.approx(sums.max(), abs=1e-4)
    assert np.triu(weights, k=1).sum() == 0 and above == "0"  # as a textbook writes it, not 0.0e+00
    assert weights.shape[0] == len(text) > 1


def test_the_model_facts_the_words_state_hold_in_the_code():
    """Step 2: the embedding table starts with a spread of about 1/√d_model; step 9: the head is the
    embedding (weight tying)."""
    model = MiniGPT(GPTConfig(vocab_size=500, d_model=64), seed=0)
    assert "spread about 1/√d_model" in STEPS[1].body[1]
    assert float(model.token_embed.weight.detach().std()) == pytest.approx(64 ** -0.5, rel=0.05)
    assert model.lm_head.weight is model.token_embed.weight and "weight tying" in STEPS[8].body[1]


@pytest.mark.trains
@pytest.mark.slow
def test_the_lesson_says_its_run_replaces_the_model_before_the_click_and_leaves_the_train_form_alone():
    """Issue: one click in steps 11 and 12 silently made a Tiny run the model everywhere, left the
    Train form on Tiny though Home promises the Small default, and the sidebar still said course-zh.
    Now the step says so before the click, the form stays as the learner left it, the sidebar names
    the corpus the loaded model learned, and one click brings back the shipped model."""
    at = page(home("en", lesson="12"), LESSON)
    assert any("makes it the model every page uses" in c.value for c in at.caption)  # before any click
    assert "run" not in at.query_params
    at.button(key="lesson_overfit").click().run()
    wait_finished(at)
    at.run()
    sidebar = unescaped(" ".join(c.value for c in at.sidebar.caption))
    assert "trained on demo-zh" in sidebar and "Corpus for new runs** course-zh" in sidebar, sidebar
    at = page(at, TRAIN.script)  # the form as the learner left it: never touched, the default preset
    small = PRESETS[DEFAULT_PRESET]
    assert at.session_state["d_model"] == small.model.d_model and at.session_state["max_steps"] == small.train.max_steps
    assert any("Small preset's settings" in c.value for c in at.caption)
    at.sidebar.button(key="use_shipped").click().run()  # one click back
    at = page(at, "streamlit_app.py")
    values = {m.label: m.value for m in at.metric}
    assert values["Corpus"] == DEFAULT_CORPUS and values["Status"] == "pretrained"
    assert not any(b.key == "use_shipped" for b in at.sidebar.button)


def test_the_chinese_lesson_names_its_columns_and_puts_full_width_colons_in_its_links():
    """Step 2's "try this" names the table's own columns; step 15's links read **page**：offer."""
    chinese = i18n.catalog("zh")
    at = page(home("zh", lesson="2"), LESSON)
    hint = " ".join(i.value for i in at.info)
    for column in ("length × √d_model", "length of its embedding row"):
        assert f"“{chinese.gettext(column)}”" in hint, column
    at = page(home("zh", lesson="15"), LESSON)
    labels = [link.proto.label for link in at.get("page_link") if link.proto.label.startswith("**")]  # the step's
    assert labels and all("：" in label and ": " not in label for label in labels), labels


@pytest.mark.trains
def test_the_kv_step_labels_both_texts_when_they_part():
    at = page(home("en", lesson="14"), LESSON)
    at.button(key="lesson_kv").click().run()
    assert not at.exception
    cached, rerun = at.session_state["lesson_kv_shown"][2]
    if cached[1] != rerun[1]:
        assert [c.value for c in at.code][-2:] == [cached[1], rerun[1]]
        assert {"**With the KV cache**", "**Without the cache**"} <= {m.value for m in at.markdown}
    else:
        assert at.code[-1].value == cached[1]


@pytest.mark.trains
@pytest.mark.slow
def test_the_lessons_training_step_waits_in_the_same_line_as_the_train_page(monkeypatch):
    """Issue 48: nothing jumps the line. On a one-slot server where a learner trains on the Train
    page, the lesson's button puts its run in line behind it, says where it stands, and its run
    trains once the slot frees."""
    from app.state import runs
    from helpers.apptest import own_run, start_tiny_run
    from helpers.waiting import wait_until

    monkeypatch.setenv(face.MAX_RUNS_ENV, "1")
    ahead = start_tiny_run()
    at = page(home("en", lesson="11"), LESSON)
    at.button(key="lesson_train").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    mine = runs.registry().get(*own_run(at))
    assert mine.is_waiting() and runs.registry().place(mine) == 1
    assert any(i.value.startswith("**1st in line**") for i in at.info), [i.value for i in at.info]
    runs.registry().control(*own_run(ahead), "stop")
    wait_until(lambda: mine.is_active() or mine.run.state == "finished", "the lesson's run to take the slot")
    at.run()
    assert not any("in line" in i.value for i in at.info)


@pytest.mark.slow
def test_the_lessons_training_in_a_class_gives_each_learner_a_seed_of_their_own():
    """Issue 58: the preset's one seed would give a class identical runs (one line on the board);
    alone, the lesson trains the preset as it is."""
    from app.state import classroom, runs
    from helpers.apptest import own_run

    code = classroom.classes().open().code
    seeds = []
    for lesson_page in (page(home("en", lesson="11", **{"class": code}), LESSON) for _learner in range(2)):
        lesson_page.button(key="lesson_train").click().run()
        assert not lesson_page.exception and not lesson_page.error, [e.value for e in lesson_page.error]
        entry = runs.registry().get(*own_run(lesson_page))
        seeds.append(entry.run.trainer.cfg.seed)
        runs.registry().control(*own_run(lesson_page), "stop")
    assert seeds[0] != seeds[1] and PRESETS["tiny"].train.seed not in seeds, seeds
    alone = page(home("en", lesson="11"), LESSON)
    alone.button(key="lesson_train").click().run()
    assert runs.registry().get(*own_run(alone)).run.trainer.cfg.seed == PRESETS["tiny"].train.seed
    runs.registry().control(*own_run(alone), "stop")


# ------------------------------------------------------------------ a teacher's lesson

TRAIN_STEP = """\
## Train it on the demo

view: train
page: Train
train: preset=tiny, corpus=demo-zh, steps=120

A run of your own, on the demo's paragraph.
"""


@pytest.mark.slow
def test_a_steps_train_settings_open_train_with_the_form_holding_them():
    """A class's lesson says `train: preset=tiny, corpus=demo-zh, steps=120`: its button opens Train
    with the Tiny preset's model, 120 steps and the demo's corpus, and a seed of the learner's own."""
    from app.state import classroom
    from minigpt.serve import ClassLesson

    opened = classroom.classes().open()
    classroom.classes().set_lesson(opened.code, opened.teacher_key, ClassLesson("train.md", TRAIN_STEP))
    at = page(home("en", **{"class": opened.code}), LESSON)
    assert at.header[0].value == "1. Train it on the demo"
    button = at.button(key="lesson_train_start")
    assert button.label == "Open Train with this step's settings: the Tiny preset, the corpus demo-zh, 120 steps"
    button.click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Train"
    tiny = PRESETS["tiny"]
    assert (at.session_state["d_model"], at.session_state["num_layers"]) == (tiny.model.d_model, tiny.model.num_layers)
    assert at.session_state["max_steps"] == 120 and at.session_state["corpus"] == "demo-zh"
    assert at.session_state["train_seed"] != tiny.train.seed
