"""pages/Generate.py: greedy text against the forward pass by hand, the next-character bars,
prompts (default, empty, unknown characters, demo seeds), top-k beyond the vocabulary, and a new
request never showing the last answer.

    pytest tests/app/test_generate_page.py
"""
from __future__ import annotations

import numpy as np
import pytest

from helpers.apptest import POEM, home, page, plotly_spec, unescaped, upload_and_train
from helpers.figures import plotly_array
from helpers.maths import hand_forward
from minigpt import DEFAULT_CORPUS, CharTokenizer, Sampling, load_pretrained
from minigpt.corpus import DEMO_SENTENCE
from minigpt.lab.predictions import beliefs, next_logits
from app.views.generation import STREAM_DELAY_KEY, paced
from app.chrome.site import GENERATE


@pytest.fixture(scope="module")
def shipped():
    checkpoint = load_pretrained("course-zh")
    return checkpoint.model, checkpoint.tokenizer.encode(DEMO_SENTENCE)


def test_the_generate_bars_follow_temperature_and_top_k_without_generating(shipped):
    model, _ids = shipped
    at = page(home(), GENERATE.script)
    prompt = at.text_input[0].value
    tokenizer = load_pretrained("course-zh").tokenizer
    logits = next_logits(model, tokenizer.encode(prompt), 32)
    for temperature, top_k in ((0.8, 0), (1.6, 0), (1.0, 3)):
        at.slider(key="temperature").set_value(temperature)
        at.number_input(key="top_k").set_value(top_k).run()
        bars = plotly_spec(at, 0)["data"][0]
        want = beliefs(logits, Sampling(temperature=temperature, top_k=top_k))
        order = np.argsort(-want.tempered, kind="stable")[:20]
        shown = np.where(want.removed[order], want.tempered[order], want.final[order])
        np.testing.assert_allclose(plotly_array(bars["y"]), shown, atol=1e-9)
        grey = [c == "#BDBDBD" for c in bars["marker"]["color"]]
        assert grey == list(want.removed[order]) and sum(grey) == (17 if top_k == 3 else 0)
    assert "generation" not in at.session_state  # nothing was generated


@pytest.mark.trains
def test_the_default_prompt_of_a_model_without_spaces_uses_only_its_characters():
    at = upload_and_train(POEM, d_model=32, num_heads=2, num_layers=1, d_ff=64, max_len=16, block_size=8,
                           max_steps=60, eval_interval=30, batch_size=8)
    page(at, GENERATE.script)
    prompt = at.text_input[0].value
    assert prompt and " " not in prompt and not CharTokenizer.from_text(POEM).unknown_chars(prompt)
    at.session_state[STREAM_DELAY_KEY] = 0
    at.button(key="generate").click().run()
    assert not at.warning and not at.error and at.session_state["generation"]["text"].startswith(prompt)


def test_a_new_request_never_shows_the_previous_answer():
    at = page(home(), GENERATE.script)
    at.session_state[STREAM_DELAY_KEY] = 0
    at.button(key="generate").click().run()
    assert at.code  # an answer
    at.text_input[0].set_value("注意Zebra")
    at.button(key="generate").click().run()
    assert at.warning and not at.code and not at.dataframe  # the warning alone: no old text under it


def test_top_k_above_the_vocabulary_is_clamped_and_said_and_zero_tokens_is_refused():
    at = page(home(), GENERATE.script)
    at.session_state[STREAM_DELAY_KEY] = 0
    at.number_input(key="top_k").set_value(999)
    at.number_input(key="max_new_tokens").set_value(5).run()
    at.button(key="generate").click().run()
    assert any("top-k 999" in unescaped(c.value) and "every character stays in" in unescaped(c.value)
               for c in at.caption)
    assert len(at.session_state["generation"]["steps"]) == 5
    at.number_input(key="max_new_tokens").set_value(0).run()
    at.button(key="generate").click().run()
    assert any("max_new_tokens must be" in unescaped(e.value) for e in at.error) and "generation" not in at.session_state


def test_a_negative_top_k_is_said_under_the_settings_and_neither_bars_nor_text_are_drawn():
    at = page(home(), GENERATE.script)
    at.session_state[STREAM_DELAY_KEY] = 0
    at.number_input(key="top_k").set_value(-1).run()
    assert [unescaped(e.value) for e in at.error] == ["top_k must be a whole number >= 0 (0 = off), got -1."]
    assert not at.get("plotly_chart") and "three_temperatures" not in [b.key for b in at.button]
    at.button(key="generate").click().run()
    assert not at.exception and "generation" not in at.session_state
    at.number_input(key="top_k").set_value(3).run()
    assert not at.error and at.get("plotly_chart")


def test_generate_with_temperature_zero_is_deterministic():
    at = page(home(), GENERATE.script)
    at.session_state[STREAM_DELAY_KEY] = 0
    at.slider(key="temperature").set_value(0.0)
    at.number_input(key="max_new_tokens").set_value(40).run()
    texts = []
    for seed in (1, 2):
        at.number_input(key="gen_seed").set_value(seed)
        at.button(key="generate").click().run()
        assert not at.exception
        texts.append(at.session_state["generation"]["text"])
    assert texts[0] == texts[1] and len(texts[0]) == len("深度") + 40
    assert at.code[0].value == texts[0]
    table = at.dataframe[0].value
    assert len(table) == 40 and {"chosen", "p(chosen)", "likeliest five"} <= set(table.columns)


def test_a_demo_seed_button_sets_the_prompt():
    at = page(home(), GENERATE.script)
    at.button(key="seed:计算").click().run()
    assert at.text_input[0].value == "计算"


def test_unknown_prompt_characters_are_named_and_nothing_is_generated():
    at = page(home(), GENERATE.script)
    at.text_input[0].set_value("深度Zebra")  # the prompt sits in a form: typed, then submitted
    at.button(key="generate").click().run()
    assert any("'Z'" in w.value and "'e'" not in w.value for w in at.warning)  # only what it lacks
    assert "generation" not in at.session_state


def test_generate_at_temperature_zero_writes_the_hand_computed_greedy_continuation():
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    at = page(home(), GENERATE.script)
    at.session_state[STREAM_DELAY_KEY] = 0
    at.slider(key="temperature").set_value(0.0)
    at.number_input(key="max_new_tokens").set_value(12).run()
    at.button(key="generate").click().run()
    prompt = at.text_input[0].value
    ids = checkpoint.tokenizer.encode(prompt)
    for _ in range(12):
        ids.append(int(hand_forward(checkpoint.model, ids[-checkpoint.block_size:])["logits"][-1].argmax()))
    assert at.session_state["generation"]["text"] == checkpoint.tokenizer.decode(ids)


def test_an_empty_prompt_starts_from_a_newline_and_says_so():
    at = page(home(), GENERATE.script)
    at.session_state[STREAM_DELAY_KEY] = 0
    at.number_input(key="max_new_tokens").set_value(5).run()
    at.text_input[0].set_value("")
    at.button(key="generate").click().run()
    assert any("empty prompt" in c.value for c in at.caption)
    assert len(at.session_state["generation"]["steps"]) == 5


def test_a_generated_characters_attention_is_over_exactly_what_the_model_read_past_the_window():
    """Issue: once the context is full the cache refills from its last three quarters, but the page
    showed each step's attention over the last block_size characters: from step 27 on, 31 of 60 rows
    were not the ones that chose the character. Replayed here by hand: every step's row is over the
    window the model read, and equals the hand-written forward pass's on it."""
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    block = checkpoint.block_size  # 32: a full context keeps its last 24 and grows again
    at = page(home(), GENERATE.script)
    at.session_state[STREAM_DELAY_KEY] = 0
    at.slider(key="temperature").set_value(0.9)
    at.number_input(key="gen_seed").set_value(4242)
    at.number_input(key="max_new_tokens").set_value(60).run()
    at.text_input[0].set_value("我们用注意力看")  # in the form: sent with its submit button
    at.button(key="generate").click().run()
    assert not at.exception
    steps = at.session_state["generation"]["steps"]
    ids, window, read = checkpoint.tokenizer.encode("我们用注意力看"), None, []
    window = list(ids)
    for step in steps:  # the refill rule, by hand
        read.append(list(window))
        ids.append(step.token)
        window = ids[-(block - block // 4):] if len(window) == block else window + [step.token]
    assert any(len(w) < block for w in read[30:])  # the case of the issue is in this generation
    for pick in (5, 40, 53):
        at.select_slider(key=f"picked_step:{len(steps)}").set_value(pick).run()
        figure = plotly_spec(at, next(i for i, c in enumerate(at.get("plotly_chart")) if c.proto.id.endswith("step_attention")))
        shown = plotly_array(figure["data"][0]["z"])
        layers = hand_forward(checkpoint.model, read[pick])["layers"]
        want = np.stack([layer["weights"][:, -1].mean(0).numpy() for layer in layers])
        assert shown.shape == want.shape == (checkpoint.model.config.num_layers, len(read[pick])), pick
        np.testing.assert_allclose(shown, want, atol=1e-5)


def test_the_stream_waits_only_for_what_came_sooner_than_its_pace():
    """Characters reach the learner at most one per pace: a model that writes faster is slowed to it,
    and a busy server's slower characters get no wait added to theirs."""
    now, slept = [0.0], []

    def sleep(seconds):
        slept.append(round(seconds, 6))
        now[0] += seconds

    def written(costs):
        for cost in costs:  # each character takes this long to compute
            now[0] += cost
            yield cost

    assert list(paced(written([0.0, 0.005, 0.03, 0.001]), 0.015, clock=lambda: now[0], sleep=sleep)) == \
        [0.0, 0.005, 0.03, 0.001]
    assert slept == [0.01, 0.014]  # after the 5 ms character and the 1 ms one; none after the 30 ms one
    slept.clear()
    assert len(list(paced(written([0.02] * 5), 0.015, clock=lambda: now[0], sleep=sleep))) == 5
    assert slept == []  # slower than the pace throughout: nothing added
