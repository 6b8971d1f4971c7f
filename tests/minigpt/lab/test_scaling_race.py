"""minigpt/lab/scaling_race.py: √d_k on a real model: the softmax's signal measured against autograd, and the race
between a scaled and an unscaled model, within the server's cap.

    pytest tests/minigpt/lab/test_scaling_race.py
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

import minigpt.model
from helpers.tiny import tiny_lm, tiny_plan
from helpers.waiting import DEADLINE, wait_until
from minigpt import CharTokenizer, GPTConfig, TrainConfig, load_corpus
from minigpt.serve.line.registry import RunRegistry
from minigpt.lab.scaling_race import scaling_race, softmax_jacobian_norm, softmax_signal


def test_the_jacobian_norm_from_the_weights_is_autograds():
    torch.manual_seed(0)
    scores = torch.randn(5, 7, dtype=torch.float64) * 3
    scores[:, 5:] = float("-inf")  # masked keys, as the causal mask leaves them
    for row in scores:
        jacobian = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), row)
        jacobian = torch.nan_to_num(jacobian)  # −inf inputs: their entries are 0
        assert softmax_jacobian_norm(torch.softmax(row, -1)).item() == pytest.approx(jacobian.norm().item(), abs=1e-12)
    assert softmax_jacobian_norm(torch.tensor([0.0, 1.0, 0.0])).item() == 0.0  # saturated: nothing gets through
    uniform = torch.full((4,), 0.25)  # J = I/4 − 1/16: ‖J‖² = 4·(3/16)² + 12·(1/16)² = 48/256
    assert softmax_jacobian_norm(uniform).item() == pytest.approx(math.sqrt(48 / 256))


def test_the_score_gradient_is_autograds_gradient_at_the_softmax_input(monkeypatch):
    model, tok = tiny_lm()
    x = torch.tensor([tok.encode("the cat sat on th")[:12]])
    y = torch.tensor([tok.encode("he cat sat on the")[:12]])
    real, inputs = minigpt.model.F.softmax, []

    def keep(scores, dim):  # the attention's softmax: keep its input's gradient
        scores.retain_grad()
        inputs.append(scores)
        return real(scores, dim=dim)

    monkeypatch.setattr(minigpt.model.F, "softmax", keep)
    _, loss, _ = model(x, y, return_attention=True)
    loss.backward()
    want = [torch.nan_to_num(s.grad).norm().item() for s in inputs]
    monkeypatch.setattr(minigpt.model.F, "softmax", real)
    signal = softmax_signal(model, x, y)
    np.testing.assert_allclose(signal.score_grad, want, rtol=1e-5)
    assert signal.loss == pytest.approx(loss.item())
    assert all(p.grad is None for p in model.parameters())  # it leaves no gradients behind


@pytest.mark.slow
def test_without_scaling_one_head_of_d_k_64_saturates_and_lets_less_through():
    """One head of d_k 64 on the course text, 100 steps, both from the same weights and batches:
    unscaled, its rows saturate (lower entropy, larger max weight) and its softmax Jacobian
    shrinks. The raw ‖∂loss/∂scores‖ is not robust at this size (it crosses over between steps
    50 and 150 as the loss falls), so the test reads the Jacobian, which depends on the weights alone."""
    text = load_corpus("course-zh")
    tok = CharTokenizer.from_text(text)
    config = GPTConfig(vocab_size=tok.vocab_size, d_model=64, num_heads=1, num_layers=1, d_ff=256, max_len=32,
                       dropout=0.0)
    train = TrainConfig(batch_size=16, block_size=32, max_steps=100, warmup_steps=10, eval_interval=1000,
                        device="cpu")
    points = list(scaling_race(config, train, tok, text, every=50))
    assert [p.step for p in points] == [0, 50, 100]
    first, last = points[0], points[-1]
    assert first.scaled.loss == pytest.approx(first.unscaled.loss, abs=0.05)  # the same start
    assert last.unscaled.entropy[0] < 0.5 * last.scaled.entropy[0]
    assert last.unscaled.max_weight[0] > last.scaled.max_weight[0] + 0.1
    assert last.unscaled.jacobian[0] < 0.6 * last.scaled.jacobian[0]


@pytest.mark.trains
def test_two_sessions_racing_at_once_on_one_slot_wait_in_the_line_one_after_the_other():
    """Two races asked for at the same moment from two threads (two sessions), on a server with one
    slot: one holds it and races; the other waits in line, then races once the slot is given back.
    Neither is refused, the two never train at once, and a race leaves nothing in the registry."""
    import threading

    registry = RunRegistry(max_runs=1, dispatcher=False)
    model, tok = tiny_lm()
    config = replace(model.config, num_heads=1)
    train = TrainConfig(batch_size=4, block_size=8, max_steps=30, warmup_steps=2, eval_interval=1000, device="cpu")
    text = "the cat sat on the mat. the dog sat on the log. " * 8
    both, lock = threading.Barrier(2), threading.Lock()
    racing, most, results = [0], [0], []

    def session() -> None:
        both.wait()
        entry = registry.request_slot(tiny_plan(max_steps=60))
        wait_until(lambda: registry.get(entry.run_id, entry.key) and entry.is_active(), "this race's turn")
        with lock:
            racing[0] += 1
            most[0] = max(most[0], racing[0])
        results.append(list(scaling_race(config, train, tok, text, every=10))[-1].step)
        with lock:
            racing[0] -= 1
        registry.give_back(entry)

    threads = [threading.Thread(target=session) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=DEADLINE)
        assert not t.is_alive(), "a race never ended"
    assert results == [30, 30] and most[0] == 1
    assert registry.active_count() == 0 and registry.waiting_count() == 0


def test_the_entropy_and_max_weight_are_each_rows_by_hand_averaged():
    """Per layer: the mean over every (batch, head, query) row of -Σ w ln w over its keys, and of the
    row's largest weight, from the attention weights themselves (masked keys weigh 0 and add 0)."""
    model, tok = tiny_lm()
    text = "the cat sat on the mat. the dog"
    x = torch.tensor([tok.encode(text[:12]), tok.encode(text[12:24])])
    y = torch.tensor([tok.encode(text[1:13]), tok.encode(text[13:25])])
    signal = softmax_signal(model, x, y)
    weights = torch.stack([model.attention_maps(row[None]).double() for row in x], dim=1)  # (L, B, H, T, T)
    for layer, w in enumerate(weights):
        rows = w.reshape(-1, w.shape[-1])
        entropy = [-sum(p * math.log(p) for p in row.tolist() if p > 0) for row in rows]
        assert signal.entropy[layer] == pytest.approx(sum(entropy) / len(entropy), abs=1e-5)
        assert signal.max_weight[layer] == pytest.approx(rows.max(-1).values.mean().item(), abs=1e-6)
