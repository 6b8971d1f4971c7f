"""app/state/shared_results.py: a class asking one question gets one computation; a learner's own text,
knock-out or model gets its own answer, checked against the forward pass by hand.

    pytest tests/app/test_shared_results.py
"""
from __future__ import annotations

import dataclasses
import types
import threading

import numpy as np
import pytest
import torch

from app.state import shared_results
from app.views.generation import GENERATION_KEY, STREAM_DELAY_KEY
from app.state.choices import MODEL_SOURCE, TRAINED
from app.state.loaded_model import LoadedModel
from app.chrome.site import ATTENTION, EXPERIMENTS, GENERATE, MODEL
from helpers.apptest import home, page, plotly_spec, start_tiny_run, wait_for_step
from helpers.figures import plotly_array
from helpers.maths import hand_forward
from helpers.waiting import wait_until
from minigpt import (DEFAULT_CORPUS, MiniGPT, SampledToken, Sampling, SamplingError, generate, load_corpus,
                     load_pretrained, prepare_prompt)
from minigpt.corpus import DEMO_SENTENCE
from minigpt.lab import embeddings
def counted(monkeypatch, owner, name: str) -> list:
    """Every call of owner.name from now on (it still does its work), as a list that grows."""
    calls, real = [], getattr(owner, name)

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)
    return calls


def heatmaps(at, last: int | None = None) -> list[np.ndarray]:
    """Every heatmap the page draws, in order (or its `last` few)."""
    charts = range(len(at.get("plotly_chart")))
    shown = [plotly_array(t["z"]) for i in charts for t in plotly_spec(at, i)["data"] if t["type"] == "heatmap"]
    return shown[-last:] if last else shown


def assert_means(shown: list[np.ndarray], layers: list[dict]) -> None:
    """Each layer's panel is the mean over its heads of the weights computed by hand (the masked
    future aside)."""
    assert len(shown) == len(layers)
    for z, layer in zip(shown, layers):
        mean = layer["weights"].mean(0).numpy()
        seen = ~np.triu(np.ones_like(mean, dtype=bool), k=1)
        np.testing.assert_allclose(z[seen], mean[seen], atol=2e-5)


def test_learners_opening_attention_on_one_model_share_one_computation_and_own_text_gets_its_own(monkeypatch):
    maps = counted(monkeypatch, MiniGPT, "attention_maps")
    first = page(home(), ATTENTION.script)
    assert len(maps) == 1 and not first.exception  # the default text, on the shipped model
    others = [page(home(), ATTENTION.script) for _ in range(3)]
    assert len(maps) == 1  # three more learners: read, not computed again
    for other in others:
        np.testing.assert_array_equal(heatmaps(first), heatmaps(other))

    own = others[0]
    text = load_corpus(DEFAULT_CORPUS).replace("\n", "")[300:320]
    own.text_input[0].set_value(text).run()
    assert len(maps) == 2  # a text of its own: computed for it
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    assert_means(heatmaps(own), hand_forward(checkpoint.model, checkpoint.tokenizer.encode(text))["layers"])
    np.testing.assert_array_equal(heatmaps(page(home(), ATTENTION.script)), heatmaps(first))  # the class's


@pytest.mark.slow
def test_two_learners_knocking_out_the_same_head_measure_it_once_and_another_head_is_its_own(monkeypatch):
    copies = counted(monkeypatch, shared_results, "knocked_out")  # every knocked-out copy the page makes
    config = load_pretrained(DEFAULT_CORPUS).model.config
    heads = f"knockout_heads:{config.num_layers}x{config.num_heads}"
    sessions = [page(home(), EXPERIMENTS.script) for _ in range(2)]
    sessions[0].multiselect(key=heads).select((0, 1)).run()
    made = len(copies)
    assert made >= 1 and not sessions[0].exception
    sessions[1].multiselect(key=heads).select((0, 1)).run()
    assert len(copies) == made  # the second learner's loss, sample and attention: read, not computed
    first, second = ([m.value for m in at.metric] for at in sessions)
    assert first == second and [c.value for c in sessions[0].code] == [c.value for c in sessions[1].code]
    np.testing.assert_array_equal(heatmaps(sessions[0]), heatmaps(sessions[1]))

    sessions[1].multiselect(key=heads).unselect((0, 1)).select((1, 3)).run()
    assert len(copies) > made and [m.value for m in sessions[1].metric][1] != first[1]
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    ids = checkpoint.tokenizer.encode(DEMO_SENTENCE)
    for at, zeroed in ((sessions[0], (0, 1)), (sessions[1], (1, 3))):  # each its own copy's attention, by hand
        want = hand_forward(checkpoint.model, ids, zero_heads=[zeroed])["layers"]
        assert_means(heatmaps(at, last=len(want)), want)


def test_learners_opening_inside_the_model_share_one_embedding_map_and_it_is_the_tables_own(monkeypatch):
    svds = counted(monkeypatch, embeddings, "embedding_pca")  # an SVD that took 0.35 s on a busy 2-core server
    sessions = [page(home(), MODEL.script) for _ in range(3)]
    assert len(svds) == 1 and not any(at.exception for at in sessions)
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    coords, _share = embeddings.embedding_pca(checkpoint.model.token_embed.weight.detach().numpy())
    pe = checkpoint.model.pos_encoding[: checkpoint.block_size].numpy()  # the positions it was trained on
    for at in sessions:  # the positions, their similarity and every character's dot: the model's own numbers
        positions, similarity = (plotly_array(plotly_spec(at, i)["data"][0]["z"]) for i in (0, 1))
        dots = plotly_spec(at, 2)["data"][0]
        np.testing.assert_allclose(positions, pe, atol=1e-6)
        np.testing.assert_allclose(similarity, embeddings.position_similarity(pe), atol=1e-6)
        np.testing.assert_allclose(np.stack([plotly_array(dots["x"]), plotly_array(dots["y"])], axis=1), coords,
                                   atol=1e-6)


@pytest.mark.trains
def test_a_run_on_the_shipped_models_corpus_gets_its_own_next_character_distribution():
    """Keyed on the weights, never on the corpus or the vocabulary: a learner's run and the shipped
    model, on one corpus and one prompt, each get their own model's distribution."""
    shipped = page(home(), GENERATE.script)
    run = start_tiny_run()
    wait_for_step(run, 5)
    run.session_state[MODEL_SOURCE] = TRAINED
    trained = page(run, GENERATE.script)
    assert not trained.exception and trained.text_input[0].value == shipped.text_input[0].value
    assert plotly_spec(shipped)["data"][0]["y"] != plotly_spec(trained)["data"][0]["y"]


def test_a_learner_asking_for_the_text_another_wrote_reads_it_and_another_seed_is_drawn_anew(monkeypatch):
    draws = counted(monkeypatch, shared_results, "batcher_for")  # once per text drawn
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    sessions = [page(home(), GENERATE.script) for _ in range(2)]
    prompt = sessions[0].text_input[0].value

    def written(at, seed: int) -> str:
        at.session_state[STREAM_DELAY_KEY] = 0
        at.number_input(key="max_new_tokens").set_value(40)
        at.number_input(key="gen_seed").set_value(seed)
        at.button(key="generate").click().run()
        assert not at.exception and not at.error
        return at.session_state[GENERATION_KEY]["text"]

    def by_the_library(seed: int) -> str:
        return generate(checkpoint.model, checkpoint.tokenizer, prompt, max_new_tokens=40,
                        sampling=Sampling(temperature=0.8, top_p=1.0), seed=seed, block_size=checkpoint.block_size)

    assert [written(at, 0) for at in sessions] == [by_the_library(0)] * 2
    assert len(draws) == 1  # the second learner read the steps the first one's model drew
    assert written(sessions[1], 1) == by_the_library(1) != by_the_library(0)
    assert len(draws) == 2


PICKY = {"temperature": 0.0, "top_k": 1, "top_p": 1e-6}  # each alone makes the draw greedy
UNPICKY = Sampling(temperature=1.0)  # the model's own distribution: nothing cut off


CANDIDATES = (0.0, 1e-6, 0.5, 1, 3, None)  # values to try in a field; the record refuses the ones it cannot take


def _changed(sampling: Sampling, name: str) -> Sampling:
    """`sampling` with its field `name` alone changed, to the first candidate the record accepts."""
    for value in CANDIDATES:
        try:
            changed = dataclasses.replace(sampling, **{name: value})
        except SamplingError:
            continue
        if changed != sampling:
            return changed
    raise AssertionError(f"no candidate value changes {name}: add one to CANDIDATES")


def test_the_kept_generations_tell_apart_records_that_differ_in_any_one_setting(monkeypatch):
    """The generations are keyed on the whole Sampling record: for each of its fields, a field added
    later too, a request whose record differs in that field alone is drawn anew, and the first
    request's text is still kept for whoever asks it again. (The model's drawing is replaced by one
    step that names the record it was asked with.)"""
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    loaded = LoadedModel(checkpoint.model, checkpoint.tokenizer, source="test", corpus=DEFAULT_CORPUS, status="",
                         steps="", detail="", sample_text="注意力", block_size=checkpoint.block_size,
                         identity="shipped-for-every-field")
    prompt = prepare_prompt(checkpoint.tokenizer, "注意力", checkpoint.block_size)
    drawn = []

    def one_step_naming_its_record(tokenizer, prompt, max_new_tokens, sampling: Sampling, seed, **kwargs):
        drawn.append(sampling)
        yield SampledToken(token=0, text=repr(sampling), prob=1.0)

    monkeypatch.setattr(shared_results, "batcher_for", lambda model: types.SimpleNamespace(
        stream=one_step_naming_its_record))

    def text(sampling: Sampling) -> str:
        return "".join(step.text for step in shared_results.written(loaded, prompt, 5, sampling, seed=0))

    first = UNPICKY
    assert text(first) == repr(first)
    names = [field.name for field in dataclasses.fields(Sampling)]
    for name in names:
        other = _changed(first, name)
        assert text(other) == repr(other), name  # its own text, not the first request's
    assert text(first) == repr(first)
    assert drawn == [first, *(_changed(first, name) for name in names)]  # the first text was read, not redrawn


@pytest.mark.parametrize("setting", list(PICKY))
def test_a_learner_who_changes_only_one_sampling_setting_gets_their_own_text_not_the_shared_one(setting,
                                                                                                monkeypatch):
    """Two requests to the shipped model, same prompt, length and seed, whose records differ in
    `setting` alone: the second must not read the text the first one drew. Temperature 0, top-k 1 and
    top-p 1e-6 each leave only the most likely character, so the second text is the greedy one,
    written here by a plain argmax over the model's logits; the first is drawn at temperature 1."""
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    model, tokenizer = checkpoint.model, checkpoint.tokenizer
    loaded = LoadedModel(model, tokenizer, source="test", corpus=DEFAULT_CORPUS, status="", steps="", detail="",
                         sample_text="注意力", block_size=checkpoint.block_size, identity=f"shipped-for-{setting}")
    prompt = prepare_prompt(tokenizer, "注意力", checkpoint.block_size)
    ids = list(prompt.ids)
    with torch.no_grad():
        for _ in range(12):  # 3 + 12 characters: within the block, so nothing is cropped
            ids.append(int(model(torch.tensor([ids]))[0][0, -1].argmax()))
    greedy = "".join(tokenizer.chars[i] for i in ids[3:])
    draws = counted(monkeypatch, shared_results, "batcher_for")  # once per text drawn

    def text(sampling: Sampling) -> str:
        return "".join(step.text for step in shared_results.written(loaded, prompt, 12, sampling, seed=0))

    first = text(UNPICKY)
    assert first != greedy  # else the test could not tell a shared text from a fresh one
    picky = dataclasses.replace(UNPICKY, **{setting: PICKY[setting]})
    assert text(picky) == greedy
    assert text(UNPICKY) == first  # the first request's text is still there for whoever asks it again
    assert len(draws) == 2  # ...and read, not drawn again


class Held:
    """The computation slot taken by another request until `free()` (the test gives the server one)."""

    def __init__(self):
        self._taken, self._free = threading.Event(), threading.Event()
        threading.Thread(target=self._hold, daemon=True).start()
        wait_until(self._taken.is_set, "the slot to be taken")

    def _hold(self) -> None:
        with shared_results.turns().turn():
            self._taken.set()
            self._free.wait()

    def free(self) -> None:
        self._free.set()


def in_background(action) -> threading.Thread:
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    return thread


def test_a_question_waits_its_turn_behind_a_computation_and_one_answered_lately_skips_the_queue(monkeypatch):
    monkeypatch.setenv(shared_results.COMPUTE_SLOTS_ENV, "1")
    queue = shared_results.turns()
    assert queue.slots == 1
    held = Held()
    first = home()
    opening = in_background(lambda: page(first, ATTENTION.script))
    wait_until(lambda: queue.size() == (1, 1), "the page's question queued behind the other computation")
    assert opening.is_alive()  # waiting its turn, not computing beside it
    held.free()
    opening.join()
    assert not first.exception and heatmaps(first)
    assert not [i.value for i in first.info if "Queued" in i.value]  # the notice went with the wait

    held = Held()  # busy again: a question answered lately is read, not queued
    other = home()
    reading = in_background(lambda: page(other, ATTENTION.script))
    wait_until(lambda: not reading.is_alive(), "the page to draw while the slot is taken")
    assert queue.size() == (1, 0)
    for mine, theirs in zip(heatmaps(first), heatmaps(other), strict=True):
        np.testing.assert_array_equal(mine, theirs)
    held.free()
