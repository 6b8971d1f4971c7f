"""√d_k on a real model: the softmax's signal measured against autograd, and the race between a
scaled and an unscaled model on a configuration where the difference is robust."""
from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

import minigpt.model
from app import runs
from helpers import assert_chinese, home, page, plotly_array, start_tiny_run, tiny_lm
from minigpt import CharTokenizer, GPTConfig, RunLimitError, RunRegistry, TrainConfig, load_corpus
from minigpt.race import scaling_race, softmax_jacobian_norm, softmax_signal


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


def test_a_race_holds_a_training_slot_while_it_trains():
    registry = RunRegistry(max_runs=1)
    with registry.slot():
        with pytest.raises(RunLimitError, match="limit"):
            registry.start(lambda: pytest.fail("built past the cap"), corpus="x", probe="")
        with pytest.raises(RunLimitError):
            with registry.slot():
                pytest.fail("a second race past the cap")
    with registry.slot():  # given back when the race ends
        pass


# ------------------------------------------------------------------ the race on the Experiments page

def race_page(lang: str | None = None, steps: int = 100):
    at = page(home(lang), "pages/8_Experiments.py")
    at.select_slider(key="race_steps").set_value(steps)
    return at.button(key="race").click().run()


def test_the_race_draws_both_models_and_says_what_happened_in_the_measured_numbers():
    at = race_page()
    assert not at.exception and not at.warning
    charts = {spec["layout"]["title"]["text"]: spec for spec in map(json.loads, (c.proto.spec for c in at.get("plotly_chart")))}
    entropy = charts["Mean attention entropy (low = saturated)"]["data"]
    scaled, unscaled = (plotly_array(trace["y"]) for trace in entropy)
    assert [t["name"] for t in entropy] == ["with 1/√d_k", "without"]
    assert plotly_array(entropy[0]["x"])[-1] == 100 and len(scaled) == 11  # step 0, then every 10 steps
    assert unscaled[-1] < scaled[-1]  # saturated without the scaling
    jacobian = [plotly_array(t["y"]) for t in charts["How much of a change in the scores softmax lets through"]["data"]]
    said = [m.value for m in at.markdown if m.value.startswith("After 100 steps")]
    assert len(said) == 1
    assert f"an entropy of {unscaled[-1]:.2f} nats ({scaled[-1]:.2f})" in said[0]
    assert f"passed {jacobian[0][-1] / jacobian[1][-1]:.1f}× less" in said[0]
    again = at.run()  # the last race stays on the page
    assert sum(m.value.startswith("After 100 steps") for m in again.markdown) == 1


def test_a_race_at_the_servers_cap_says_so_and_trains_nothing(monkeypatch):
    monkeypatch.setenv(runs.MAX_RUNS_ENV, "1")
    start_tiny_run()
    at = race_page()
    assert not at.exception
    assert any("its limit" in w.value for w in at.warning)
    assert not any(m.value.startswith("After") for m in at.markdown)


def test_the_race_in_chinese():
    assert_chinese(race_page("zh"), "Experiments, after a race")


@pytest.mark.parametrize("max_runs, finished", [(1, 1), (2, 2)])
def test_two_sessions_racing_at_once_stay_within_the_servers_cap(max_runs, finished):
    """Two races started at the same moment from two threads (two sessions): at a cap of 1 one
    trains and the other is refused with the cap's message; at 2 both train. A race leaves no run
    in the registry for anyone to see."""
    import threading

    registry = RunRegistry(max_runs=max_runs)
    model, tok = tiny_lm()
    config = replace(model.config, num_heads=1)
    train = TrainConfig(batch_size=4, block_size=8, max_steps=30, warmup_steps=2, eval_interval=1000, device="cpu")
    text = "the cat sat on the mat. the dog sat on the log. " * 8
    both = threading.Barrier(2)
    results: list[object] = []

    def session() -> None:
        both.wait()
        try:
            with registry.slot():
                both_started.wait(timeout=5)  # hold the slot until the other has tried
                results.append(list(scaling_race(config, train, tok, text, every=10))[-1].step)
        except RunLimitError as err:
            results.append(err)
            both_started.set()

    both_started = threading.Event()
    if max_runs > 1:
        both_started.set()
    threads = [threading.Thread(target=session) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(map(str, results)).count("30") == finished
    refused = [r for r in results if isinstance(r, RunLimitError)]
    assert len(refused) == 2 - finished and all("limit" in str(r) for r in refused)
    assert registry.active_count() == 0
