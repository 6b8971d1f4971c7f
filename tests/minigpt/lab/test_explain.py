"""minigpt/lab/explain.py: one attention row computed step by step equals the model's own attention and
the forward pass written out by hand; the head statistics give the known answers of hand-built
attention; the next-character distribution, positions, embeddings, the tied head, the logit
lens, the lesson's character table and surprisal, each against a formula written out here.

    pytest tests/minigpt/lab/test_explain.py
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from helpers.maths import hand_forward, hand_positions
from helpers.tiny import tiny_lm
from minigpt import Sampling, load_pretrained
from minigpt.corpus import DEMO_SENTENCE
from minigpt.lab.diagnosis import uniform_loss
from minigpt.lab.explain import character_table, surprisal
from minigpt.lab.explain import (attention_row, beliefs, embedding_pca, head_stats, head_table, last_query_attention,
                                 logit_lens, nearest_rows, next_logits, position_similarity)


@pytest.fixture(scope="module")
def shipped():
    checkpoint = load_pretrained("course-zh")
    return checkpoint.model, checkpoint.tokenizer.encode(DEMO_SENTENCE)


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


def test_position_similarity_depends_only_on_the_distance_as_the_cosines_say():
    d_model, T = 16, 24
    pe = hand_positions(T, d_model).numpy()
    sim = position_similarity(pe)
    freqs = [1 / 10000 ** (i / d_model) for i in range(0, d_model, 2)]
    for p, q in ((0, 1), (3, 10), (5, 23)):  # PE(p)·PE(q) = Σ cos((p − q) ω_i), and |PE|² = d_model / 2
        assert sim[p, q] == pytest.approx(sum(math.cos((p - q) * w) for w in freqs) / (d_model / 2), abs=1e-9)
    assert np.allclose(np.diag(sim), 1) and np.allclose(sim, sim.T)
    assert sim[0, 1] > sim[0, 4] > sim[0, 12]  # nearby positions look more alike


def test_embedding_pca_finds_the_axes_an_eigendecomposition_finds():
    rng = np.random.default_rng(0)
    direction = np.array([3.0, 4.0, 0.0]) / 5
    table = np.outer(rng.normal(size=50), direction) * 4 + rng.normal(size=(50, 3)) * 0.1
    coords, share = embedding_pca(table)
    centred = table - table.mean(axis=0)
    values, vectors = np.linalg.eigh(centred.T @ centred)  # ascending
    top = vectors[:, ::-1][:, :2]
    np.testing.assert_allclose(np.abs(coords), np.abs(centred @ top), atol=1e-9)  # up to each axis's sign
    np.testing.assert_allclose(share, values[::-1][:2] / values.sum(), atol=1e-12)
    assert share[0] > 0.99


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


def test_the_nearest_characters_are_the_rows_with_the_largest_cosine_by_hand():
    rng = np.random.default_rng(0)
    table = rng.normal(size=(40, 8))
    table[7] = 3 * table[3] + 0.01 * rng.normal(size=8)  # the same direction as row 3, three times as long
    near = nearest_rows(table, 3, k=4)
    by_hand = sorted((i for i in range(40) if i != 3), key=lambda i: -float(
        table[i] @ table[3] / math.sqrt(float(table[i] @ table[i]) * float(table[3] @ table[3]))))[:4]
    assert near == by_hand and near[0] == 7 and 3 not in near


def test_the_logit_lens_first_row_names_each_character_itself_through_the_tied_head(shipped):
    """What the page says of the lens's first row: before any layer, the vector is the character's own
    row of E (scaled, plus its position), and the tied head scores a row highest against itself."""
    model, ids = shipped
    first = logit_lens(model, ids)[0]
    assert list(first.argmax(-1)) == ids and first.max(-1).min() > 0.9
