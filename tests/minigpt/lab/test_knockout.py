"""minigpt/lab/knockout.py: each knock-out against the forward pass written out by hand with that part
removed, the effects the maths predicts (a layer without heads adds nothing; without positions a
prefix is a bag of characters), the loss by hand, head importance, and the loaded model left
exactly as it was.

    pytest tests/minigpt/lab/test_knockout.py
"""
from __future__ import annotations


import numpy as np
import pytest
import torch

from helpers.maths import hand_forward
from helpers.tiny import tiny_lm
from minigpt import load_corpus, load_pretrained
from minigpt.corpus import DEMO_SENTENCE
from minigpt.data import eval_windows
from minigpt.lab.knockout import Knockout, KnockoutError, head_importance, knocked_out
from minigpt import estimate_loss


@pytest.fixture(scope="module")
def shipped():
    checkpoint = load_pretrained("course-zh")
    return checkpoint.model, checkpoint.tokenizer.encode(DEMO_SENTENCE)


def logits(model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids]))[0][0].double()


@pytest.mark.parametrize("knockout, hand", [
    (Knockout(heads=frozenset({(0, 1), (1, 3)})), {"zero_heads": {(0, 1), (1, 3)}}),
    (Knockout(positions=True), {"positions": False}),
    (Knockout(window=3), {"window": 3}),
    (Knockout(heads=frozenset({(1, 0)}), positions=True, window=5), {"zero_heads": {(1, 0)}, "positions": False,
                                                                       "window": 5}),
], ids=["two heads", "positions", "window 3", "all three"])
def test_a_knockout_is_the_hand_forward_with_that_part_removed(shipped, knockout, hand):
    model, ids = shipped
    want = hand_forward(model, ids, **hand)
    np.testing.assert_allclose(logits(knocked_out(model, knockout), ids), want["logits"], atol=2e-4, rtol=0)
    assert not np.allclose(want["logits"], hand_forward(model, ids)["logits"], atol=1e-2)  # it does change them


@pytest.mark.slow
def test_the_shuffled_head_is_an_untied_copy_of_the_embedding_in_another_order(shipped):
    model, ids = shipped
    twin = knocked_out(model, Knockout(shuffled_head=True, shuffle_seed=3))
    embedding, head = model.token_embed.weight.detach(), twin.lm_head.weight.detach()
    assert twin.lm_head.weight is not twin.token_embed.weight  # untied
    matches = [[torch.equal(head[i], embedding[j]) for j in range(len(embedding))] for i in range(len(head))]
    order = [row.index(True) for row in matches]
    assert sorted(order) == list(range(len(embedding))) and order != sorted(order)  # a permutation, not the same
    hand = hand_forward(model, ids, head_weight=embedding.double()[order])
    np.testing.assert_allclose(logits(twin, ids), hand["logits"], atol=2e-4, rtol=0)
    assert torch.equal(twin.token_embed.weight, model.token_embed.weight)  # the input side is the same


def test_zeroing_every_head_of_a_layer_makes_its_attention_sublayer_output_zero(shipped):
    model, ids = shipped
    heads = model.config.num_heads
    twin = knocked_out(model, Knockout(heads=frozenset((0, h) for h in range(heads))))
    outputs = {}
    hooks = [block.self_attn.register_forward_hook(lambda m, a, out, i=i: outputs.__setitem__(i, out[0]))
             for i, block in enumerate(twin.blocks)]
    try:
        logits(twin, ids)
    finally:
        for hook in hooks:
            hook.remove()
    assert torch.count_nonzero(outputs[0]) == 0
    assert outputs[1].abs().max() > 1e-3  # layer 2 still attends


def first_attention_output(model, ids: list[int]) -> torch.Tensor:
    """The first layer's attention sublayer output (T, d_model)."""
    kept = {}
    hook = model.blocks[0].self_attn.register_forward_hook(lambda m, a, out: kept.__setitem__("out", out[0][0]))
    try:
        logits(model, ids)
    finally:
        hook.remove()
    return kept["out"]


def test_without_positions_the_first_attention_sees_its_prefix_as_a_bag_of_characters(shipped):
    """Without positions nothing tells the first layer's keys apart but their characters, so the
    query at t gets the same output when the characters before it are shuffled. (Deeper layers
    do not: under the causal mask each earlier position saw a different prefix of its own.)"""
    model, ids = shipped
    t = len(ids) - 1
    shuffled = ids[:t][::-1] + [ids[t]]
    bag = knocked_out(model, Knockout(positions=True))
    torch.testing.assert_close(first_attention_output(bag, shuffled)[t], first_attention_output(bag, ids)[t],
                               atol=1e-5, rtol=0)
    moved = first_attention_output(model, shuffled)[t] - first_attention_output(model, ids)[t]
    assert moved.abs().max() > 0.05  # with positions, the order shows


def test_a_window_leaves_no_weight_beyond_it_in_either_attention_path(shipped):
    model, ids = shipped
    twin = knocked_out(model, Knockout(window=4))
    maps = twin.attention_maps(torch.tensor([ids])).numpy()  # the eager path
    T = len(ids)
    far = np.array([[q - k >= 4 or k > q for k in range(T)] for q in range(T)])
    assert np.all(maps[..., far] == 0) and np.allclose(maps.sum(-1), 1.0, atol=1e-5)
    with torch.no_grad():
        fused = twin(torch.tensor([ids]))[0]  # the sdpa path
        eager = twin(torch.tensor([ids]), attn_implementation="eager")[0]
        cache, stepped = twin.new_kv_cache(), []
        for i in ids:  # one token at a time through the KV cache, as generation does
            stepped.append(twin(torch.tensor([[i]]), kv_cache=cache)[0][0, -1])
        cache = twin.new_kv_cache()
        decoded = [twin.decode_one(i, cache) for i in ids]  # generation's own step
    torch.testing.assert_close(fused, eager, atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.stack(stepped), fused[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.stack(decoded), fused[0], atol=1e-5, rtol=0)
    wide = knocked_out(model, Knockout(window=T))  # a window as long as the text cuts nothing
    torch.testing.assert_close(logits(wide, ids), logits(model, ids), atol=1e-6, rtol=0)


@pytest.mark.parametrize("knockout", [Knockout(heads=frozenset({(0, 1), (1, 0)})), Knockout(positions=True),
                                      Knockout(shuffled_head=True)], ids=["heads", "positions", "shuffled head"])
def test_generation_one_token_at_a_time_sees_the_knockout(shipped, knockout):
    """Generation's one-token step reads the knocked-out weights (zeroed W_O columns, zeroed
    positions, an untied shuffled head), not the loaded model's."""
    model, ids = shipped
    twin = knocked_out(model, knockout)
    cache = twin.new_kv_cache()
    with torch.inference_mode():
        decoded = torch.stack([twin.decode_one(i, cache) for i in ids]).double()
    torch.testing.assert_close(decoded, logits(twin, ids), atol=1e-5, rtol=0)
    assert (decoded - logits(model, ids)).abs().max() > 1e-3


def test_knockouts_leave_the_loaded_model_as_it_was(shipped):
    model, ids = shipped
    before = {k: v.clone() for k, v in model.state_dict().items()}
    want = logits(model, ids)
    for knockout in (Knockout(heads=frozenset({(0, 0)})), Knockout(positions=True), Knockout(window=2),
                     Knockout(shuffled_head=True)):
        knocked_out(model, knockout)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert model.lm_head.weight is model.token_embed.weight
    assert not any(m._forward_pre_hooks or m._forward_hooks for m in model.modules())  # the window's hook is the copy's
    assert not any(hasattr(b.self_attn, "window") for b in model.blocks)  # the core model keeps no knock-out state
    assert torch.equal(logits(model, ids), want)


def test_a_knockout_of_a_knockout_keeps_the_first_ones_window(shipped):
    """The window rides on the copy's attention layers (a forward pre-hook), and deep-copies with
    it: knocking out more of a copy keeps its window, the narrower where both bring one."""
    model, ids = shipped
    narrow = knocked_out(model, Knockout(window=3))
    torch.testing.assert_close(logits(knocked_out(narrow, Knockout(heads=frozenset({(0, 1)}))), ids),
                               logits(knocked_out(model, Knockout(heads=frozenset({(0, 1)}), window=3)), ids),
                               atol=1e-6, rtol=0)
    torch.testing.assert_close(logits(knocked_out(narrow, Knockout(window=5)), ids), logits(narrow, ids),
                               atol=1e-6, rtol=0)


def test_a_knockout_of_a_part_the_model_lacks_says_which():
    model, _ = tiny_lm()  # 2 layers of 2 heads
    with pytest.raises(KnockoutError, match="no layer 3, head 1"):
        knocked_out(model, Knockout(heads=frozenset({(2, 0)})))
    with pytest.raises(KnockoutError, match="at least itself"):
        knocked_out(model, Knockout(window=0))


def test_head_importance_is_zero_for_a_head_that_already_adds_nothing(shipped):
    model, _ = shipped
    tokenizer = load_pretrained("course-zh").tokenizer
    ids = torch.tensor(tokenizer.encode(load_corpus("course-zh")[-3000:]))
    windows = eval_windows(ids, batch_size=8, block_size=32, batches=1, seed=0)
    silent = knocked_out(model, Knockout(heads=frozenset({(1, 2)})))
    rise = head_importance(silent, windows)
    assert rise.shape == (model.config.num_layers, model.config.num_heads)
    assert rise[1, 2] == 0.0
    assert np.count_nonzero(np.abs(rise) > 1e-4) >= rise.size - 2  # the others all matter, more or less
    single = estimate_loss(knocked_out(silent, Knockout(heads=frozenset({(0, 1)}))), windows) - estimate_loss(silent, windows)
    assert rise[0, 1] == pytest.approx(single, abs=1e-6)
