"""minigpt/lab/predictions.py: the next-character distribution, the tied head, the logit lens, the
lesson's character table and surprisal, each against a formula written out here.

    pytest tests/minigpt/lab/test_predictions.py
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from helpers.maths import hand_forward
from helpers.tiny import tiny_lm
from minigpt import Sampling
from minigpt.lab.diagnosis import uniform_loss
from minigpt.lab.heads import last_query_attention
from minigpt.lab.predictions import beliefs, character_table, logit_lens, next_logits, surprisal


def hand_softmax_list(xs: list[float]) -> list[float]:
    exps = [math.exp(x - max(xs)) for x in xs]
    return [e / sum(exps) for e in exps]


def test_beliefs_are_softmax_over_temperature_then_the_cut_offs_by_hand():
    logits = [2.0, 1.0, 0.0, -1.0]
    at_2 = beliefs(np.array(logits), Sampling(temperature=2.0))
    np.testing.assert_allclose(at_2.tempered, hand_softmax_list([x / 2 for x in logits]), atol=1e-12)
    np.testing.assert_allclose(at_2.final, at_2.tempered, atol=1e-12) and not at_2.removed.any()
    top2 = beliefs(np.array(logits), Sampling(temperature=1.0, top_k=2))
    np.testing.assert_allclose(top2.final, hand_softmax_list(logits[:2]) + [0, 0], atol=1e-12)
    assert list(top2.removed) == [False, False, True, True]
    p = hand_softmax_list(logits)  # 0.644, 0.237, 0.087, 0.032: top-p 0.85 keeps the first two, 0.9 three
    assert list(beliefs(np.array(logits), Sampling(temperature=1.0, top_p=0.85)).removed) == [False, False, True, True]
    assert list(beliefs(np.array(logits), Sampling(temperature=1.0, top_p=0.9)).removed) == [False, False, False, True]
    kept = p[:2]
    entropy = -sum(q / sum(kept) * math.log(q / sum(kept)) for q in kept)
    assert top2.entropy == pytest.approx(entropy) and top2.effective_choices == pytest.approx(math.exp(entropy))
    greedy = beliefs(np.array(logits), Sampling(temperature=0.0))
    assert list(greedy.final) == [1, 0, 0, 0] and greedy.entropy == 0.0 and greedy.effective_choices == 1.0


def test_the_next_logits_and_the_attention_behind_them_are_the_models(shipped):
    model, ids = shipped
    logits, _ = model(torch.tensor([ids]))
    np.testing.assert_allclose(next_logits(model, ids), logits[0, -1].detach().double().numpy(), atol=1e-6)
    short, _ = model(torch.tensor([ids[-5:]]))
    np.testing.assert_allclose(next_logits(model, ids, block_size=5), short[0, -1].detach().double().numpy(), atol=1e-6)
    rows = last_query_attention(model, ids)
    want = model.attention_maps(torch.tensor([ids]))[:, :, -1].mean(dim=1).numpy()
    np.testing.assert_allclose(rows, want, atol=1e-7)
    assert rows.shape == (model.config.num_layers, len(ids)) and np.allclose(rows.sum(axis=1), 1.0)


def test_the_tied_head_turns_a_vector_back_into_scores_with_the_embedding_table(shipped):
    model, ids = shipped
    assert model.lm_head.weight is model.token_embed.weight
    h = model.final_norm(model.residual_stream(torch.tensor([ids]))[-1])[0].detach().double().numpy()
    E = model.token_embed.weight.detach().double().numpy()
    logits, _ = model(torch.tensor([ids]))
    np.testing.assert_allclose(h @ E.T, logits[0].detach().double().numpy(), atol=1e-4)  # logits = h · Eᵀ


def test_the_logit_lens_last_read_out_is_the_models_prediction(shipped):
    model, ids = shipped
    lens = logit_lens(model, ids)
    logits, _ = model(torch.tensor([ids]))
    assert lens.shape == (model.config.num_layers + 1, len(ids), model.config.vocab_size)
    np.testing.assert_allclose(lens[-1], torch.softmax(logits[0], -1).detach().double().numpy(), atol=1e-6)
    np.testing.assert_allclose(lens.sum(axis=-1), 1.0, atol=1e-5)  # float32 softmax
    first = model.lm_head(model.final_norm(model.embed(torch.tensor([ids]))))[0]
    np.testing.assert_allclose(lens[0], torch.softmax(first, -1).detach().double().numpy(), atol=1e-6)


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


def test_the_logit_lens_first_row_names_each_character_itself_through_the_tied_head(shipped):
    """What the page says of the lens's first row: before any layer, the vector is the character's own
    row of E (scaled, plus its position), and the tied head scores a row highest against itself."""
    model, ids = shipped
    first = logit_lens(model, ids)[0]
    assert list(first.argmax(-1)) == ids and first.max(-1).min() > 0.9
