"""minigpt/sample.py: the Sampling record, top-k, top-p, greedy decoding, the KV cache, block_size, seeds
and bad settings.

    pytest tests/minigpt/test_sample.py
"""
import dataclasses
import math

import pytest
import torch

from helpers.tiny import tiny_lm, tiny_tokenizer
from minigpt import Sampling, SamplingError, check_max_new_tokens, generate, prepare_prompt
from minigpt.sample import stream
from minigpt.tokenizer import UnknownCharactersError
from minigpt.sample import filter_logits, next_token_distribution, sample_index


GREEDY, PLAIN = Sampling(temperature=0.0), Sampling(temperature=1.0)


def _logits(probs):
    return torch.log(torch.tensor(probs))


def test_top_k_keeps_exactly_the_k_likeliest_tokens():
    logits = _logits([0.1, 0.4, 0.05, 0.3, 0.15])
    kept = torch.isfinite(filter_logits(logits, Sampling(top_k=2)))
    assert kept.tolist() == [False, True, False, True, False]
    assert torch.isfinite(filter_logits(logits, Sampling(top_k=99))).all()  # above vocab size: nothing removed
    assert torch.isfinite(filter_logits(logits, Sampling(top_k=0))).all()   # 0 = off


@pytest.mark.parametrize("top_p, expected", [(0.5, [0]), (0.8, [0, 1]), (0.81, [0, 1, 2]), (1.0, [0, 1, 2, 3])])
def test_top_p_keeps_the_smallest_set_reaching_p(top_p, expected):
    logits = _logits([0.5, 0.3, 0.15, 0.05])
    kept = torch.isfinite(filter_logits(logits, Sampling(top_p=top_p))).nonzero().flatten().tolist()
    assert kept == expected


def test_top_p_works_on_unsorted_logits():
    logits = _logits([0.05, 0.3, 0.5, 0.15])
    kept = torch.isfinite(filter_logits(logits, Sampling(top_p=0.8))).nonzero().flatten().tolist()
    assert kept == [1, 2]


def test_temperature_zero_is_greedy_without_division():
    logits = torch.tensor([1.0, 3.0, 2.0])
    probs = next_token_distribution(logits, GREEDY)
    assert probs.tolist() == [0.0, 1.0, 0.0]
    model, tok = tiny_lm()
    text = generate(model, tok, "the ", max_new_tokens=10, sampling=GREEDY)
    full = tok.encode("the ")
    for _ in range(10):  # greedy by hand: argmax of a full forward each step
        full.append(int(model(torch.tensor([full[-16:]]))[0][0, -1].argmax()))
    assert text == tok.decode(full)


def test_sample_index_draws_each_token_as_often_as_its_probability():
    """20,000 draws against the probabilities: Pearson's chi-square with 5 degrees of freedom stays
    under 20.5 (p = 0.001) unless the draw is biased; the zero-probability tokens are never drawn."""
    probs = torch.tensor([0.0, 0.05, 0.4, 0.0, 0.25, 0.1, 0.15, 0.05])
    generator = torch.Generator().manual_seed(0)
    counts = torch.bincount(torch.tensor([sample_index(probs, generator) for _ in range(20_000)]), minlength=8)
    assert counts[0] == counts[3] == 0
    expected = probs[probs > 0] * 20_000
    chi_square = float(((counts[probs > 0] - expected) ** 2 / expected).sum())
    assert chi_square < 20.5, (counts.tolist(), chi_square)
    unnormalised = torch.tensor([2.0, 0.0, 6.0])  # a filtered softmax need not sum to exactly 1
    draws = [sample_index(unnormalised, generator) for _ in range(4000)]
    assert 1 not in draws and abs(draws.count(2) / 4000 - 0.75) < 0.03


@pytest.mark.parametrize("u, probs, expected", [
    (1.0, [0.3, 0.7, 0.0, 0.0], 1),  # a draw rounded up to the total: the last token that can be drawn
    (0.0, [0.0, 0.0, 0.4, 0.6], 2),  # a draw of exactly 0: not a token of probability 0
], ids=["top", "bottom"])
def test_sample_index_never_draws_a_token_of_probability_zero_at_the_ends(monkeypatch, u, probs, expected):
    monkeypatch.setattr(torch, "rand", lambda *args, **kwargs: torch.full((1,), u))
    assert sample_index(torch.tensor(probs), torch.Generator()) == expected


def test_kv_cached_greedy_generation_equals_full_rerun():
    model, tok = tiny_lm()
    cached = generate(model, tok, "the cat", max_new_tokens=9, sampling=GREEDY, use_cache=True)
    rerun = generate(model, tok, "the cat", max_new_tokens=9, sampling=GREEDY, use_cache=False)
    assert cached == rerun


def test_kv_cache_refills_its_window_when_the_context_passes_max_len():
    model, tok = tiny_lm()  # max_len 16: a full cache keeps its last 12 tokens and re-encodes them
    steps = list(stream(model, tok, "the cat sat", max_new_tokens=40, sampling=GREEDY))
    assert len(steps) == 40
    ids, window = tok.encode("the cat sat"), tok.encode("the cat sat")
    for step in steps:  # reference: a full forward over exactly the window the cache holds
        expected = int(model(torch.tensor([window]))[0][0, -1].argmax())
        assert step.token == expected
        ids.append(expected)
        window = ids[-12:] if len(window) == 16 else window + [expected]


@pytest.mark.parametrize("use_cache", [True, False], ids=["cached", "rerun"])
def test_each_step_says_how_many_characters_the_model_read_to_choose_it(use_cache):
    """Past a full context the cache keeps its last 12 of 16 tokens and grows again, while a rerun
    always reads the last 16: each step's `context` is that window, replayed here by hand, and the
    probability the step reports is the model's on exactly that window."""
    model, tok = tiny_lm()  # max_len 16
    steps = list(stream(model, tok, "the cat", max_new_tokens=40, sampling=PLAIN, seed=5, use_cache=use_cache))
    ids = tok.encode("the cat")
    window = list(ids)
    for step in steps:
        assert step.context == len(window), (len(ids), step.context, len(window))
        probs = torch.softmax(model(torch.tensor([window]))[0][0, -1].double(), -1)
        assert step.prob == pytest.approx(probs[step.token].item(), abs=1e-5)
        ids.append(step.token)
        if use_cache:
            window = ids[-12:] if len(window) == 16 else window + [step.token]
        else:
            window = ids[-16:]
    assert min(s.context for s in steps) < 16 if use_cache else all(s.context == 16 for s in steps[9:])


def test_a_shorter_block_size_keeps_the_model_inside_its_trained_positions():
    model, tok = tiny_lm()  # max_len 16, but pretend it was trained on blocks of 8
    steps = list(stream(model, tok, "the cat", max_new_tokens=20, sampling=GREEDY, block_size=8))
    ids, window = tok.encode("the cat"), tok.encode("the cat")
    for step in steps:
        assert len(window) <= 8
        expected = int(model(torch.tensor([window]))[0][0, -1].argmax())
        assert step.token == expected
        ids.append(expected)
        window = ids[-6:] if len(window) == 8 else window + [expected]
    beyond = list(stream(model, tok, "the cat", max_new_tokens=20, sampling=GREEDY, block_size=99))
    assert beyond == list(stream(model, tok, "the cat", max_new_tokens=20, sampling=GREEDY))  # capped at max_len


def test_same_seed_gives_the_same_sample_and_different_seeds_differ():
    model, tok = tiny_lm()
    a = generate(model, tok, "the", max_new_tokens=30, sampling=PLAIN, seed=7)
    b = generate(model, tok, "the", max_new_tokens=30, sampling=PLAIN, seed=7)
    c = generate(model, tok, "the", max_new_tokens=30, sampling=PLAIN, seed=8)
    assert a == b and a != c


def test_each_step_reports_its_probability_and_top_five():
    model, tok = tiny_lm()
    steps = list(stream(model, tok, "the", max_new_tokens=3, sampling=GREEDY))
    for step in steps:
        assert len(step.top) == 5
        probs = [p for _, p in step.top]
        assert probs == sorted(probs, reverse=True)
        assert step.top[0] == (step.text, pytest.approx(step.prob))  # greedy picks the top choice
        assert 0 < step.prob <= 1


def test_empty_prompt_starts_from_a_newline_or_first_token_and_says_so():
    tok = tiny_tokenizer()
    prompt = prepare_prompt(tok, "", 16)
    assert prompt.ids == [tok.chars.index(" ")] or tok.decode(prompt.ids) in ("\n", tok.chars[0])
    assert prompt.notes and "empty prompt" in str(prompt.notes[0])


def test_long_prompt_keeps_the_last_max_len_characters():
    tok = tiny_tokenizer()
    prompt = prepare_prompt(tok, "the cat sat on the mat", 16)
    assert tok.decode(prompt.ids) == "the cat sat on the mat"[-16:]
    assert "last 16" in str(prompt.notes[0])


def test_unknown_prompt_characters_raise_with_their_names():
    model, tok = tiny_lm()
    with pytest.raises(UnknownCharactersError, match="'Z'"):
        list(stream(model, tok, "the Zoo", max_new_tokens=2))


# each bad setting, and the sentence that says what is wrong with it
BAD_SETTINGS = [
    (dict(temperature=-1.0), r"^temperature must be a number >= 0 \(0 = greedy\), got -1\.0\.$"),
    (dict(temperature=math.nan), r"^temperature must be a number >= 0 \(0 = greedy\), got nan\.$"),
    (dict(temperature=math.inf), r"^temperature must be a number >= 0 \(0 = greedy\), got inf\.$"),
    (dict(temperature="0.8"), r"^temperature must be a number >= 0 \(0 = greedy\), got '0\.8'\.$"),
    (dict(temperature=True), r"^temperature must be a number >= 0 \(0 = greedy\), got True\.$"),
    (dict(temperature=1e6), r"^temperature 1e\+06 is above 10: the output would be noise\.$"),
    (dict(top_k=-1), r"^top_k must be a whole number >= 0 \(0 = off\), got -1\.$"),
    (dict(top_k=2.5), r"^top_k must be a whole number >= 0 \(0 = off\), got 2\.5\.$"),
    (dict(top_k=True), r"^top_k must be a whole number >= 0 \(0 = off\), got True\.$"),
    (dict(top_p=0.0), r"^top_p must lie in \(0, 1\] \(1 = off\), got 0\.0\.$"),
    (dict(top_p=1.5), r"^top_p must lie in \(0, 1\] \(1 = off\), got 1\.5\.$"),
    (dict(top_p=math.nan), r"^top_p must lie in \(0, 1\] \(1 = off\), got nan\.$"),
    (dict(top_p=-0.5), r"^top_p must lie in \(0, 1\] \(1 = off\), got -0\.5\.$"),
]


@pytest.mark.parametrize("settings, message", BAD_SETTINGS, ids=[str(s) for s, _ in BAD_SETTINGS])
def test_a_sampling_record_with_a_bad_setting_cannot_be_made_and_says_why(settings, message):
    """The record checks itself once, when it is made: a Sampling in hand is always usable, and a
    bad setting is refused with the sentence the command line and the pages show."""
    with pytest.raises(SamplingError, match=message) as error:
        Sampling(**settings)
    assert settings.items() <= error.value.params.items()  # the catalogs' template gets the value as given


@pytest.mark.parametrize("settings", [
    dict(), dict(temperature=0), dict(temperature=0.0), dict(temperature=10.0), dict(temperature=2),
    dict(top_k=None), dict(top_k=0), dict(top_k=10_000), dict(top_p=None), dict(top_p=1.0), dict(top_p=1e-6),
], ids=str)
def test_the_edges_of_each_range_are_accepted(settings):
    assert Sampling(**settings)


def test_the_record_is_frozen_hashable_and_its_defaults_are_the_ones_the_code_used():
    """stream() drew at temperature 0.8 with no cut-off when given no settings; the command line's
    defaults are the same. Equal records are one cache key, and a record cannot be changed into a
    bad one after it was checked (dataclasses.replace checks the new one)."""
    assert Sampling() == Sampling(temperature=0.8, top_k=None, top_p=None)
    assert len({Sampling(), Sampling(0.8), Sampling(temperature=0.8, top_k=None)}) == 1
    assert len({Sampling(), Sampling(top_k=3), Sampling(top_p=0.5), Sampling(temperature=1.0)}) == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        Sampling().temperature = -1.0
    with pytest.raises(SamplingError, match="top_p must lie in"):
        dataclasses.replace(Sampling(), top_p=2.0)


def test_a_record_knows_whether_it_cuts_off_and_keeps_its_temperature_alone():
    assert not Sampling().cuts_off and not Sampling(top_k=0, top_p=1.0).cuts_off
    assert Sampling(top_k=3).cuts_off and Sampling(top_p=0.9).cuts_off
    assert Sampling(temperature=1.3, top_k=3, top_p=0.9).temperature_only() == Sampling(temperature=1.3)


def test_stream_refuses_loose_settings_and_a_bad_length():
    model, tok = tiny_lm()
    with pytest.raises(TypeError, match="sampling must be a Sampling"):
        list(stream(model, tok, "the", 3, 0.8))
    with pytest.raises(TypeError):
        list(stream(model, tok, "the", 3, temperature=0.8))
    for bad in (0, -3, 10**6, 2.0, True):
        with pytest.raises(SamplingError, match="max_new_tokens must be a whole number from 1 to 2000"):
            check_max_new_tokens(bad)
        with pytest.raises(SamplingError, match="max_new_tokens must be"):
            list(stream(model, tok, "the", bad))


def test_an_unseeded_stream_leaves_torchs_global_generator_alone():
    """stream(seed=None) once reseeded torch's global generator, which other runs draw from."""
    model, tok = tiny_lm()
    torch.manual_seed(123)
    before = torch.get_rng_state()
    a = generate(model, tok, "the", max_new_tokens=20, sampling=PLAIN, seed=None)
    b = generate(model, tok, "the", max_new_tokens=20, sampling=PLAIN, seed=None)
    assert torch.equal(torch.get_rng_state(), before)
    assert a != b  # still a fresh seed each time
