"""The guided lesson: every step in both languages with its live view and a question that tells a
right answer from a wrong one, the step in the address, the words translated with the same fields,
its one-click training, and the numbers its views show pinned against formulas written out here."""
from __future__ import annotations

import math
import re
import string

import numpy as np
import pytest
import torch

from app import i18n
from app.lesson_text import STEPS
from helpers import assert_chinese, hand_forward, hand_lr, home, page, plotly_spec, tiny_lm, wait_finished
from minigpt import (PRESETS, GPTConfig, MiniGPT, TrainConfig, character_table, load_corpus, lr_figure, surprisal,
                     uniform_loss)

LESSON = "pages/9_Lesson.py"

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
def test_next_walks_every_step_with_its_view_and_a_question_that_tells_right_from_wrong(lang):
    at = page(home(lang, lesson="1"), LESSON)
    for n, step in enumerate(STEPS, start=1):
        assert not at.exception, (n, [e.value for e in at.exception])
        assert at.header[0].value.startswith(f"{n}. "), (n, at.header[0].value)
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
        assert any("steps 1 to 15" in w.value for w in at.warning), bad


def test_the_words_quote_the_loaded_models_own_numbers():
    at = page(home("en", lesson="7"), LESSON)
    shown = " ".join(m.value for m in at.markdown)
    assert "(per layer in your model: 4)" in shown and "d_k = 64 / 4 = 16" in shown  # the shipped course-zh model


def fields(message: str) -> set[str]:
    return {name for _text, name, _spec, _conv in string.Formatter().parse(message) if name}


def test_every_word_of_the_lesson_has_a_chinese_translation_with_the_same_fields():
    chinese = i18n.catalog("zh")
    for n, step in enumerate(STEPS, start=1):
        for message in step.texts():
            translated = chinese.gettext(message)
            assert translated and translated != message, (n, message)
            assert fields(translated) == fields(message), (n, message)
        assert len(step.options) == 3 and 0 <= step.answer < 3
        assert 3 <= len(re.findall(r"[.?!:;](?:\s|$)", " ".join(step.body))) <= 12, n  # a few sentences


NOTATION = {"Attention", "Attn", "Concat", "FFN", "GELU", "LN", "MultiHead", "head", "id", "softmax", "Var", "model",
            "sin", "cos", "ln", "max", "min"}  # the names a formula may spell: the same in every language


def test_the_formulas_spell_only_notation_no_sentences():
    for n, step in enumerate(STEPS, start=1):
        if step.formula:
            words = re.findall(r"\\(?:text|mathrm|operatorname)\{([^}]*)\}", step.formula)
            assert all(w.strip() in NOTATION for w in words), (n, words)


def test_the_lesson_is_reachable_from_home_and_each_tool_page_links_to_its_step():
    at = home("en")
    assert any(l.proto.query_string.startswith("lesson=1&") for l in at.get("page_link")), "Home: start the lesson"
    for script, step in (("pages/1_Train.py", 11), ("pages/2_Generate.py", 13), ("pages/3_Attention.py", 6),
                         ("pages/4_Scaling.py", 5), ("pages/5_Inside.py", 4), ("pages/6_Model.py", 8),
                         ("pages/7_Glossary.py", 1), ("pages/8_Experiments.py", 7)):
        tool = page(home("en"), script)
        links = [l.proto for l in tool.get("page_link") if "lesson=" in l.proto.query_string]
        assert any(f"lesson={step}" in l.query_string and STEPS[step - 1].title in l.label for l in links), script


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
    assert evals[-1].val_loss > 0.9 * math.log(208)
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


# ------------------------------------------------------------- the numbers, against formulas here

def test_the_character_table_shows_each_ids_row_length_and_that_length_times_root_d_model():
    model, tokenizer = tiny_lm()
    text = "tacet"
    ids = tokenizer.encode(text)
    table = character_table(model, ids, list(text))
    weight = model.token_embed.weight.detach().double()
    for row, i in zip(table.itertuples(), ids):
        length = math.sqrt(sum(float(x) ** 2 for x in weight[i]))
        assert row.id == i and row.length == pytest.approx(length)
        assert row.scaled == pytest.approx(length * math.sqrt(model.config.d_model))
    assert table.loc[0, "length"] == table.loc[4, "length"]  # the same character, the same row


def test_surprisal_is_minus_ln_p_of_each_next_character_and_its_mean_the_loss():
    model, tokenizer = tiny_lm()
    ids = tokenizer.encode("the cat sat")
    logits = hand_forward(model, ids)["logits"]
    expected = [-float(torch.log_softmax(logits[t], -1)[ids[t + 1]]) for t in range(len(ids) - 1)]
    nats = surprisal(model, ids)
    assert nats == pytest.approx(expected, abs=1e-6)
    assert float(np.exp(-nats).max()) <= 1.0 and nats.shape == (len(ids) - 1,)
    assert uniform_loss(tokenizer.vocab_size) == pytest.approx(math.log(tokenizer.vocab_size))


def test_the_learning_rate_chart_is_warmup_then_cosine():
    cfg = PRESETS["tiny"].train
    y = lr_figure(cfg).data[0].y
    assert len(y) == cfg.max_steps
    for step in (0, 1, cfg.warmup_steps - 1, cfg.warmup_steps, 150, cfg.max_steps - 1):
        assert y[step] == pytest.approx(hand_lr(step, cfg.lr, cfg.min_lr, cfg.warmup_steps, cfg.max_steps))
    assert y[0] == pytest.approx(cfg.lr / cfg.warmup_steps) and max(y) == pytest.approx(cfg.lr)


def test_the_training_steps_numbers_are_the_tiny_presets_and_the_defaults():
    """Step 11 quotes the preset the lesson trains: the words go stale if the preset changes."""
    tiny = PRESETS["tiny"].train
    words = " ".join(STEPS[10].body)
    for quoted in (f"{tiny.batch_size} windows of {tiny.block_size} characters", f"runs {tiny.max_steps} steps",
                   f"the first {tiny.warmup_steps} of them", f"peak of {tiny.lr:g}", f"to {tiny.min_lr:.4f}",
                   f"betas {tiny.betas[0]:g} and {tiny.betas[1]:g}", f"weight decay {tiny.weight_decay:g}",
                   f"above {tiny.grad_clip:.1f}"):
        assert quoted in words, quoted
    assert STEPS[10].view == "train" and STEPS[11].view == "fit"


def test_the_numbers_other_steps_quote_are_the_codes():
    demo = load_corpus("demo-zh")
    words = " ".join(STEPS[11].body)
    assert f"only {len(demo)} characters, {len(set(demo))} of them different" in words
    assert f"ln {len(set(demo))} ≈ {math.log(len(set(demo))):.2f}" in words
    assert TrainConfig().val_fraction == 0.1 and "the last tenth of the corpus" in words
    assert "four times as many in every preset" in STEPS[7].body[0]
    assert all(p.model.d_ff == 4 * p.model.d_model for p in PRESETS.values())
    assert "spread about 1/√d_model" in STEPS[1].body[1]
    model = MiniGPT(GPTConfig(vocab_size=500, d_model=64), seed=0)
    assert float(model.token_embed.weight.detach().std()) == pytest.approx(64 ** -0.5, rel=0.05)
    assert model.lm_head.weight is model.token_embed.weight and "weight tying" in STEPS[8].body[1]
    assert "the last three quarters" in STEPS[13].body[1]
