"""minigpt/model.py: shapes, the causal mask, the KV cache, weight tying, sdpa against eager attention,
and the configurations it refuses.

    pytest tests/minigpt/test_model.py
"""
import pytest
import torch

from helpers.tiny import tiny_config, tiny_model
from minigpt import ConfigError, GPTConfig, MiniGPT
from minigpt.model import causal_mask, eval_mode


def test_forward_shapes_and_loss():
    model = tiny_model()
    idx = torch.randint(0, 12, (3, 10))
    logits, loss = model(idx, idx)
    assert logits.shape == (3, 10, 12)
    assert loss.ndim == 0 and torch.isfinite(loss)
    logits, loss = model(idx)
    assert loss is None


def test_return_attention_gives_per_layer_weights_from_same_pass():
    model = tiny_model()
    idx = torch.randint(0, 12, (2, 7))
    logits, _, attentions = model(idx, return_attention=True)
    assert len(attentions) == 2
    for weights in attentions:
        assert weights.shape == (2, 2, 7, 7)  # (B, H, T, T)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 7))
        assert torch.all(weights.triu(diagonal=1) == 0)  # nothing attends to the future
    torch.testing.assert_close(logits, model(idx)[0], atol=1e-5, rtol=0)


def test_future_tokens_do_not_change_past_logits():
    model = tiny_model()
    idx = torch.randint(0, 12, (1, 12))
    changed = idx.clone()
    changed[0, 8:] = (changed[0, 8:] + 1) % 12
    for path in ("sdpa", "eager"):
        a, _ = model(idx, attn_implementation=path)
        b, _ = model(changed, attn_implementation=path)
        torch.testing.assert_close(a[:, :8], b[:, :8])
        assert not torch.allclose(a[:, 8:], b[:, 8:])


@pytest.mark.parametrize("scale_attention", [True, False])
def test_sdpa_and_eager_attention_agree_on_outputs_and_gradients(scale_attention):
    model = tiny_model(scale_attention=scale_attention)
    idx = torch.randint(0, 12, (2, 16))
    grads = {}
    for path in ("sdpa", "eager"):
        model.zero_grad()
        logits, loss = model(idx, idx.roll(-1, 1), attn_implementation=path)
        loss.backward()
        grads[path] = (logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()})
    torch.testing.assert_close(grads["sdpa"][0], grads["eager"][0], atol=1e-5, rtol=0)
    for name, grad in grads["sdpa"][1].items():
        torch.testing.assert_close(grad, grads["eager"][1][name], atol=1e-5, rtol=0, msg=name)


def test_lm_head_is_tied_to_token_embedding():
    model = tiny_model()
    assert model.lm_head.weight is model.token_embed.weight
    names = [n for n, _ in model.named_parameters()]
    assert "lm_head.weight" not in names  # counted once
    idx = torch.randint(0, 12, (1, 5))
    model(idx, idx)[1].backward()
    assert model.token_embed.weight.grad is not None


def test_parameter_count_matches_the_demo_model():
    config = GPTConfig(vocab_size=208)  # the demo's corpus has 208 distinct characters
    assert MiniGPT(config).num_params() == config.num_params() == 162_624


def test_scale_switch_changes_attention_sharpness():
    model = tiny_model()
    idx = torch.randint(0, 12, (1, 16))
    _, _, scaled = model(idx, return_attention=True)
    _, _, unscaled = model(idx, return_attention=True, scale_attention=False)
    assert not torch.allclose(scaled[0], unscaled[0])
    # Without the 1/sqrt(d_k) factor the scores are sqrt(d_k) times larger: same argmax, sharper.
    assert torch.equal(scaled[0].argmax(-1), unscaled[0].argmax(-1))
    assert unscaled[0].amax(-1).mean() >= scaled[0].amax(-1).mean()


def test_kv_cache_step_by_step_equals_full_forward():
    model = tiny_model()
    idx = torch.randint(0, 12, (1, 10))
    full, _ = model(idx)
    cache = model.new_kv_cache()
    prefix, _ = model(idx[:, :4], kv_cache=cache)
    steps = [model(idx[:, t : t + 1], kv_cache=cache)[0] for t in range(4, 10)]
    torch.testing.assert_close(torch.cat([prefix, *steps], dim=1), full, atol=1e-5, rtol=0)
    assert cache.length == 10


def test_kv_cache_chunk_after_prefix_uses_offset_causal_mask():
    model = tiny_model()
    idx = torch.randint(0, 12, (1, 9))
    full, _ = model(idx)
    for path in ("sdpa", "eager"):
        cache = model.new_kv_cache()
        a, _ = model(idx[:, :5], kv_cache=cache, attn_implementation=path)
        b, _ = model(idx[:, 5:], kv_cache=cache, attn_implementation=path)
        torch.testing.assert_close(torch.cat([a, b], 1), full, atol=1e-5, rtol=0)


def test_the_model_keeps_no_window_and_decode_one_runs_the_hooks_on_its_attention():
    """A window reaches the attention only as an argument (a knock-out passes it through a forward
    pre-hook): the model has no such attribute, and decode_one, whose fast path calls no module,
    takes forward() while an attention layer is hooked, so the hook is not skipped."""
    model = tiny_model()
    assert not any(hasattr(block.self_attn, "window") for block in model.blocks)
    ids = [3, 1, 4, 1, 5, 9]
    with torch.no_grad():
        plain, _ = model(torch.tensor([ids]))
        calls = []
        handle = model.blocks[1].self_attn.register_forward_pre_hook(
            lambda m, args, kwargs: calls.append(1) or (args, {**kwargs, "window": 2}), with_kwargs=True)
        try:
            windowed, _ = model(torch.tensor([ids]))
            cache = model.new_kv_cache()
            decoded = torch.stack([model.decode_one(i, cache) for i in ids])
        finally:
            handle.remove()
    assert len(calls) == 1 + len(ids)  # the full forward once, then every one-token step
    torch.testing.assert_close(decoded, windowed[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(windowed[0, :2], plain[0, :2], atol=1e-6, rtol=0)  # a window of 2 cuts nothing yet
    assert not torch.allclose(windowed[0, 2:], plain[0, 2:], atol=1e-4)


def test_sequence_longer_than_max_len_is_refused():
    model = tiny_model()
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_causal_mask_with_offset_queries():
    allowed = causal_mask(2, 5)  # the last two of five positions ask
    assert allowed.tolist() == [[True, True, True, True, False], [True] * 5]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(d_model=30, num_heads=4), "divisible"),
        (dict(d_model=15, num_heads=1), "even"),
        (dict(num_layers=0), "num_layers"),
        (dict(dropout=1.5), "dropout"),
        (dict(vocab_size=0), "vocab_size"),
    ],
)
def test_invalid_model_configs_are_refused_with_a_reason(overrides, message):
    with pytest.raises(ConfigError, match=message):
        MiniGPT(tiny_config(**overrides))


def test_eval_mode_turns_dropout_off_inside_and_gives_back_the_mode_it_found_even_after_an_error():
    """Every measurement of a model that may be training runs inside eval_mode: dropout off for the
    block (two forward passes agree), and the model back in training afterwards, even when the
    block raised; a model that was in eval mode stays in it."""
    config = GPTConfig(vocab_size=7, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=8, dropout=0.5)
    model, x = MiniGPT(config, seed=0).train(), torch.tensor([[1, 2, 3, 4]])
    assert not torch.equal(model(x)[0], model(x)[0])  # training: dropout draws new masks
    with eval_mode(model):
        assert not model.training and torch.equal(model(x)[0], model(x)[0])
    assert model.training
    with pytest.raises(KeyError), eval_mode(model):
        raise KeyError("a measurement that failed")
    assert model.training
    model.eval()
    with eval_mode(model):
        pass
    assert not model.training
