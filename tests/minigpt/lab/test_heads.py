"""minigpt/lab/heads.py: one attention row computed step by step equals the model's own attention and
the forward pass written out by hand; the head statistics give the known answers of hand-built attention.

    pytest tests/minigpt/lab/test_heads.py
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from helpers.maths import hand_forward
from helpers.tiny import tiny_lm
from minigpt.lab.heads import attention_row, head_stats, head_table


@pytest.mark.parametrize("scale", [None, False], ids=["scaled", "unscaled"])
def test_a_row_step_by_step_is_the_models_attention_and_the_hand_forward(shipped, scale):
    model, ids = shipped
    config = model.config
    maps = model.attention_maps(torch.tensor([ids]), scale_attention=scale).double().numpy()
    hand = hand_forward(model, ids, scale=scale)["layers"]
    T = len(ids)
    for layer in range(config.num_layers):
        for head in range(config.num_heads):
            for query in (0, 1, T // 2, T - 1):
                row = attention_row(model, ids, layer, head, query, scale_attention=scale)
                np.testing.assert_allclose(row.weights, maps[layer, head, query], atol=1e-6, rtol=0)
                want = hand[layer]
                np.testing.assert_allclose(row.q, want["Q"][head, query].numpy(), atol=1e-5, rtol=0)
                np.testing.assert_allclose(row.k, want["K"][head].numpy(), atol=1e-5, rtol=0)
                cols = slice(head * config.d_k, (head + 1) * config.d_k)
                np.testing.assert_allclose(row.output, want["output"][query, cols].numpy(), atol=1e-5, rtol=0)
                assert row.divisor == (math.sqrt(config.d_k) if scale is None else 1.0)
                np.testing.assert_allclose(row.scores, row.k @ row.q, atol=1e-9)
                np.testing.assert_allclose(row.scaled, row.scores / row.divisor, atol=1e-12)
                assert list(row.allowed) == [key <= query for key in range(T)]
                assert np.all(row.weights[~row.allowed] == 0) and row.weights.sum() == pytest.approx(1.0)


def test_a_row_of_a_model_trained_without_the_scaling_divides_by_1_as_the_model_does():
    """A model whose config leaves out 1/√d_k (the race's unscaled twin, or an uploaded one): its row
    follows the model, not the usual √d_k, unless the learner asks for unscaled explicitly."""
    model, tok = tiny_lm(seed=3, scale_attention=False)
    with torch.no_grad():  # large weights: scaled and unscaled rows then differ clearly
        for p in model.parameters():
            p.mul_(4)
    ids = tok.encode("the cat sat on")
    hand = hand_forward(model, ids)["layers"]  # scale=None: the model's own config, unscaled
    assert not np.allclose(hand[1]["weights"].numpy(), hand_forward(model, ids, scale=True)["layers"][1]["weights"].numpy(),
                           atol=1e-3)  # the test can tell the two apart
    for scale in (None, False):
        for layer in range(model.config.num_layers):
            row = attention_row(model, ids, layer, 1, len(ids) - 1, scale_attention=scale)
            assert row.divisor == 1.0
            np.testing.assert_allclose(row.weights, hand[layer]["weights"][1, -1].numpy(), atol=1e-6, rtol=0)


def test_every_heads_output_through_w_o_is_the_layers_attention_output(shipped):
    model, ids = shipped
    captured = {}
    block = model.blocks[1]
    def keep(module, args, out):  # returns None: the model's own output stays as it is
        captured["out"] = out[0]

    hook = block.self_attn.register_forward_hook(keep)
    try:
        model.attention_maps(torch.tensor([ids]))
    finally:
        hook.remove()
    query = len(ids) - 3
    heads = [attention_row(model, ids, 1, h, query).output for h in range(model.config.num_heads)]
    w_o = block.self_attn.W_O.weight.detach().double().numpy()
    np.testing.assert_allclose(np.concatenate(heads) @ w_o.T, captured["out"][0, query].double().numpy(), atol=1e-5)


def test_a_row_outside_the_model_or_the_text_is_refused(shipped):
    model, ids = shipped
    with pytest.raises(IndexError):
        attention_row(model, ids, model.config.num_layers, 0, 0)
    with pytest.raises(IndexError):
        attention_row(model, ids, 0, 0, len(ids))


def causal(rows: list[list[float]]) -> np.ndarray:
    return np.array(rows, dtype=float)


def test_a_previous_character_head_is_recognised():
    T = 6
    w = np.zeros((T, T))
    w[0, 0] = 1
    w[np.arange(1, T), np.arange(0, T - 1)] = 1  # every query looks one back
    stats = head_stats(w)
    assert (stats.previous, stats.same, stats.max_weight, stats.entropy) == (1.0, 0.0, 1.0, 0.0)
    assert stats.first == pytest.approx(1 / (T - 1))  # only query 1's previous key is key 0
    assert stats.pattern == "previous"


def test_a_sink_head_and_a_self_looking_head():
    T = 5
    sink = np.zeros((T, T))
    sink[:, 0] = 1
    stats = head_stats(sink)
    assert stats.first == 1.0 and stats.previous == pytest.approx(1 / 4) and stats.pattern == "first"
    same = head_stats(np.eye(T))
    assert same.same == 1.0 and same.previous == 0.0 and same.first == 0.0 and same.pattern is None


def test_a_uniform_head_has_the_largest_entropy_it_can():
    T = 4
    w = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]  # row t: 1/(t+1) on keys 0..t
    stats = head_stats(w)
    assert stats.entropy == pytest.approx((math.log(2) + math.log(3) + math.log(4)) / 3)
    assert stats.max_weight == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)
    assert stats.previous == stats.same == pytest.approx(stats.max_weight)
    assert stats.pattern == "uniform"
    mixed = causal([[1, 0, 0, 0], [0.3, 0.7, 0, 0], [0.1, 0.8, 0.1, 0], [0.05, 0.8, 0.1, 0.05]])  # on key 1
    assert head_stats(mixed).pattern is None  # no clear pattern: nothing claimed


def test_the_head_table_has_a_row_per_layer_and_head(shipped):
    model, ids = shipped
    table = head_table(model.attention_maps(torch.tensor([ids])).numpy())
    config = model.config
    assert len(table) == config.num_layers * config.num_heads
    assert list(table.columns) == ["layer", "head", "entropy", "max_weight", "previous", "same", "first", "pattern"]
    assert table["entropy"].between(0, math.log(len(ids))).all() and table["max_weight"].between(0, 1).all()
