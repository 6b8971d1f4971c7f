"""The maths, pinned against references that share no code with minigpt.

- `helpers.maths.hand_forward`: the forward pass written out formula by formula from the weights;
- golden logits of the shipped checkpoints computed by the reference demo's own model class
  (tests/cross/golden/make_golden.py);
- softmax(logits / T), the warmup + cosine formula and AdamW's first step, by hand.
A wrong scale, a post-LN block, a missing √d_model, a late learning rate or a validation loss
taken on the training split each fail here (see tests/mutants.py for the list tried).

    pytest tests/cross/test_maths.py
"""
import json
import math
from pathlib import Path

import pytest
import torch

from helpers.maths import hand_forward, hand_lr, hand_positions, hand_softmax
from helpers.tiny import tiny_config, tiny_tokenizer
from minigpt import CharTokenizer, Sampling, TrainConfig, Trainer, build_model, load_pretrained
from minigpt.sample import stream
from minigpt.train import lr_at
from minigpt.model import sinusoidal_positions
from minigpt.sample import next_token_distribution

GOLDEN = json.loads((Path(__file__).parent / "golden" / "shipped_logits.json").read_text("utf-8"))

DEMO_SENTENCE = "深度学习是人工智能的重要领域"  # the reference demo's attention example


@pytest.fixture(scope="module")
def demo_zh():
    return load_pretrained("demo-zh")


@pytest.fixture(scope="module")
def pydoc_en():
    return load_pretrained("pydoc-en")


@pytest.mark.parametrize("scale", [True, False], ids=["scaled", "unscaled"])
def test_attention_weights_equal_softmax_of_q_k_over_sqrt_d_k_computed_by_hand(demo_zh, scale):
    model, tok = demo_zh.model, demo_zh.tokenizer
    ids = tok.encode(DEMO_SENTENCE)
    _, _, maps = model(torch.tensor([ids]), return_attention=True, scale_attention=scale)
    expected = hand_forward(model, ids, scale=scale)["layers"]
    assert len(maps) == len(expected) == model.config.num_layers
    for layer, (got, want) in enumerate(zip(maps, expected)):
        torch.testing.assert_close(got[0].double(), want["weights"], atol=2e-5, rtol=0,
                                   msg=lambda m, layer=layer: f"layer {layer + 1}: {m}")


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
def test_logits_equal_the_forward_pass_written_out_by_hand(demo_zh, attn_implementation):
    model, tok = demo_zh.model, demo_zh.tokenizer
    ids = tok.encode(DEMO_SENTENCE)
    logits, _ = model(torch.tensor([ids]), attn_implementation=attn_implementation)
    torch.testing.assert_close(logits[0].double(), hand_forward(model, ids)["logits"], atol=2e-4, rtol=0)


def test_a_random_model_with_large_weights_matches_the_hand_forward_too():
    """Trained weights could hide a bug that a sharp random model shows (and the other way round)."""
    torch.manual_seed(3)
    model = build_model(tiny_config(vocab_size=12, d_model=32, num_heads=2, num_layers=2, d_ff=48), seed=3).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(8.0)  # large scores: a wrong scale changes every softmax
    ids = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]
    logits, _, maps = model(torch.tensor([ids]), return_attention=True)
    want = hand_forward(model, ids)
    torch.testing.assert_close(logits[0].double(), want["logits"], atol=1e-3, rtol=1e-4)
    for got, layer in zip(maps, want["layers"]):
        torch.testing.assert_close(got[0].double(), layer["weights"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("corpus", list(GOLDEN["checkpoints"]))
def test_shipped_checkpoints_give_the_reference_demo_models_logits(corpus):
    """Golden logits from the reference demo's MiniGPT class loaded with our weights."""
    checkpoint = load_pretrained(corpus)
    for row in GOLDEN["checkpoints"][corpus]:
        ids = torch.tensor([checkpoint.tokenizer.encode(row["prompt"])])
        logits, _ = checkpoint.model(ids)
        torch.testing.assert_close(logits[0, -1].double(), torch.tensor(row["last_logits"], dtype=torch.float64),
                                   atol=1e-4, rtol=0, msg=lambda m, p=row["prompt"]: f"prompt {p!r}: {m}")


@pytest.mark.parametrize("corpus", list(GOLDEN["checkpoints"]))
def test_one_token_decoding_gives_the_reference_demo_models_logits(corpus):
    """decode_one, the fast path generation takes per token, fed the prompt one token at a time."""
    checkpoint = load_pretrained(corpus)
    model = checkpoint.model.eval()
    for row in GOLDEN["checkpoints"][corpus]:
        cache = model.new_kv_cache()
        with torch.inference_mode():
            for token in checkpoint.tokenizer.encode(row["prompt"]):
                logits = model.decode_one(token, cache)
        torch.testing.assert_close(logits.double(), torch.tensor(row["last_logits"], dtype=torch.float64),
                                   atol=1e-4, rtol=0, msg=lambda m, p=row["prompt"]: f"prompt {p!r}: {m}")


@pytest.mark.parametrize("scale", [True, False], ids=["scaled", "unscaled"])
def test_one_token_decoding_equals_the_hand_forward_at_every_position(scale):
    """A sharp random model (weights x 3) at every position of a full window, with and without
    1/sqrt(d_k): a position off by one, a missing scale or a wrong GELU shows at some position."""
    model = build_model(tiny_config(scale_attention=scale), seed=5).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3)
    ids = torch.randint(0, model.config.vocab_size, (model.config.max_len,), generator=torch.Generator().manual_seed(1))
    want = hand_forward(model, ids.tolist())["logits"]
    cache = model.new_kv_cache()
    with torch.inference_mode():
        got = torch.stack([model.decode_one(int(t), cache) for t in ids])
    torch.testing.assert_close(got.double(), want, atol=2e-4, rtol=0)
    assert cache.length == model.config.max_len


def test_sinusoidal_positions_follow_the_formula_number_by_number():
    torch.testing.assert_close(sinusoidal_positions(50, 16).double(), hand_positions(50, 16), atol=1e-5, rtol=0)


@pytest.mark.parametrize("temperature", [0.25, 0.7, 1.0, 1.6, 3.0])
def test_next_token_distribution_is_softmax_of_logits_over_temperature(temperature):
    logits = torch.randn(40, generator=torch.Generator().manual_seed(0)) * 3
    exps = [math.exp(v / temperature) for v in logits.tolist()]
    expected = torch.tensor([e / sum(exps) for e in exps])
    got = next_token_distribution(logits, Sampling(temperature=temperature))
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("temperature", [0.5, 1.6])
@pytest.mark.slow
def test_sampled_characters_follow_softmax_over_temperature(pydoc_en, temperature):
    """2,000 one-character samples after one prompt: their frequencies are softmax(logits / T)."""
    model, tok = pydoc_en.model, pydoc_en.tokenizer
    prompt = "The "
    with torch.no_grad():
        logits = hand_forward(model, tok.encode(prompt))["logits"][-1]
    expected = hand_softmax(logits / temperature)
    wrong = hand_softmax(logits * temperature)
    n = 2000
    counts = torch.zeros(tok.vocab_size, dtype=torch.float64)
    for seed in range(n):
        step = next(stream(model, tok, prompt, max_new_tokens=1, sampling=Sampling(temperature=temperature), seed=seed))
        counts[step.token] += 1
    tv = 0.5 * (counts / n - expected).abs().sum().item()
    assert 0.5 * (wrong - expected).abs().sum().item() > 0.3  # the test can tell the two apart
    assert tv < 0.1, f"sampled frequencies are {tv:.3f} (total variation) away from softmax(logits / T)"


def test_step_probabilities_are_the_models_untempered_softmax(pydoc_en):
    model, tok = pydoc_en.model, pydoc_en.tokenizer
    prompt = "import "
    steps = list(stream(model, tok, prompt, max_new_tokens=3, sampling=Sampling(temperature=1.7, top_k=5), seed=0))
    text = prompt
    for step in steps:
        with torch.no_grad():
            probs = hand_softmax(hand_forward(model, tok.encode(text))["logits"][-1])
        assert step.prob == pytest.approx(probs[step.token].item(), abs=1e-5)
        top = torch.topk(probs, 5)
        assert [c for c, _ in step.top] == [tok.chars[i] for i in top.indices.tolist()]
        assert [p for _, p in step.top] == pytest.approx(top.values.tolist(), abs=1e-5)
        text += step.text


LR, MIN_LR, WARMUP, STEPS = 1e-2, 1e-3, 5, 30


def _trainer(**overrides) -> Trainer:
    tok = tiny_tokenizer()
    from helpers.tiny import TEXT
    settings = dict(batch_size=4, block_size=8, max_steps=STEPS, warmup_steps=WARMUP, eval_interval=10,
                    eval_iters=2, lr=LR, min_lr=MIN_LR, seed=0)
    cfg = TrainConfig(**(settings | overrides))
    model = build_model(tiny_config(vocab_size=tok.vocab_size, dropout=0.1), cfg.seed)
    return Trainer(model, tok, TEXT, cfg, log_interval=5)


def test_each_optimizer_step_uses_the_learning_rate_of_its_own_step():
    trainer = _trainer()
    used = []
    trainer.optimizer.register_step_pre_hook(lambda opt, args, kwargs: used.append(opt.param_groups[0]["lr"]))
    list(trainer.events())
    assert used == pytest.approx([hand_lr(s, LR, MIN_LR, WARMUP, STEPS) for s in range(STEPS)], rel=1e-9)


def test_learning_rate_at_the_warmup_boundary_and_its_maximum():
    cfg = TrainConfig(lr=LR, min_lr=MIN_LR, warmup_steps=WARMUP, max_steps=STEPS)
    assert lr_at(0, cfg) == pytest.approx(LR / WARMUP)
    assert lr_at(WARMUP - 1, cfg) == pytest.approx(LR)   # the last warmup step reaches lr
    assert lr_at(WARMUP, cfg) == pytest.approx(LR)       # and the cosine starts there
    schedule = [lr_at(s, cfg) for s in range(STEPS)]
    assert max(schedule) == pytest.approx(LR, rel=1e-12)
    assert all(b < a for a, b in zip(schedule[WARMUP:], schedule[WARMUP + 1:]))
    assert schedule[-1] == pytest.approx(hand_lr(STEPS - 1, LR, MIN_LR, WARMUP, STEPS)) and schedule[-1] > MIN_LR


def test_adamw_first_step_moves_each_parameter_by_lr_and_decays_only_matrices():
    """Adam's first update is lr * g / (|g| + eps) = ±lr; AdamW also shrinks matrices by lr * wd."""
    wd = 0.5
    trainer = _trainer(weight_decay=wd, grad_clip=0.0)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.compute_gradients()
    grads = {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters()}
    lr = trainer.apply_update()
    assert lr == pytest.approx(LR / WARMUP)
    for name, p in trainer.model.named_parameters():
        decay = wd if p.dim() >= 2 else 0.0
        g = grads[name]
        expected = before[name] * (1 - lr * decay) - lr * g / (g.abs() + 1e-8)
        torch.testing.assert_close(p.detach(), expected, atol=1e-7, rtol=0, msg=lambda m, n=name: f"{n}: {m}")


def test_gradient_clipping_caps_the_total_norm_the_optimizer_sees():
    trainer = _trainer(grad_clip=0.05)
    norms = []
    trainer.optimizer.register_step_pre_hook(lambda opt, a, k: norms.append(
        torch.linalg.vector_norm(torch.stack([p.grad.norm() for g in opt.param_groups for p in g["params"]])).item()))
    raw = []
    for _ in range(5):
        trainer.compute_gradients()
        raw.append(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in trainer.model.parameters()])).item())
        trainer.apply_update()
    assert min(raw) > 0.05  # every step needed clipping
    assert norms == pytest.approx([0.05] * 5, rel=1e-4)


@pytest.mark.slow
def test_validation_loss_is_measured_on_the_held_out_tail():
    """The corpus's last 10% follows another pattern than the rest: a model that learned the head
    must score worse there. Computed on the training split, val loss would equal train loss."""
    head, tail = "abcdef" * 90, "afedcb" * 10   # 540 + 60 characters; val_fraction 0.1 holds out the 60
    text = head + tail
    tok = CharTokenizer.from_text(text)
    cfg = TrainConfig(batch_size=8, block_size=8, max_steps=250, warmup_steps=10, eval_interval=250, eval_iters=4,
                      lr=1e-2, min_lr=1e-3, seed=0)
    model = build_model(tiny_config(vocab_size=tok.vocab_size, dropout=0.0), cfg.seed)
    trainer = Trainer(model, tok, text, cfg)
    assert tok.decode(trainer.val_data.tolist()) == tail
    last = list(trainer.events())[-1]
    assert last.train_eval_loss < 0.3
    assert last.val_loss > last.train_eval_loss + 1.0


def test_evaluation_measures_the_model_without_dropout():
    """The val loss is the plain cross-entropy of the model's predictions: computed by hand here
    over the same windows, with the heavy dropout of training nowhere in it."""
    from helpers.tiny import TEXT
    from minigpt.data import get_batch

    tok = tiny_tokenizer()
    cfg = TrainConfig(batch_size=4, block_size=8, max_steps=10, eval_iters=3, seed=0)
    model = build_model(tiny_config(vocab_size=tok.vocab_size, dropout=0.5), seed=0)
    trainer = Trainer(model, tok, TEXT, cfg)
    _, val = trainer.evaluate()
    generator = torch.Generator().manual_seed(cfg.seed + 2)  # the fixed batches evaluate() draws
    losses = []
    for _ in range(cfg.eval_iters):
        x, y = get_batch(trainer.val_data, cfg.batch_size, cfg.block_size, generator)
        for xs, ys in zip(x.tolist(), y.tolist()):
            log_probs = torch.log_softmax(hand_forward(model, xs)["logits"], -1)
            losses.append(-log_probs[range(len(ys)), ys].mean().item())
    assert val == pytest.approx(sum(losses) / len(losses), abs=1e-4)


def test_adamw_second_step_follows_the_configured_betas():
    """m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g², update lr · m̂ / (√v̂ + eps), by hand."""
    b1, b2, eps = 0.5, 0.6, 1e-8
    trainer = _trainer(weight_decay=0.0, grad_clip=0.0, betas=(b1, b2), warmup_steps=1, schedule="constant")
    params = dict(trainer.model.named_parameters())
    p = {n: t.detach().clone().double() for n, t in params.items()}
    m = {n: torch.zeros_like(t) for n, t in p.items()}
    v = {n: torch.zeros_like(t) for n, t in p.items()}
    for step in (1, 2):
        trainer.compute_gradients()
        grads = {n: t.grad.detach().double() for n, t in params.items()}
        lr = trainer.apply_update()
        for n in p:
            m[n] = b1 * m[n] + (1 - b1) * grads[n]
            v[n] = b2 * v[n] + (1 - b2) * grads[n] ** 2
            m_hat, v_hat = m[n] / (1 - b1**step), v[n] / (1 - b2**step)
            p[n] = p[n] - lr * m_hat / (v_hat.sqrt() + eps)
    for n, t in params.items():
        torch.testing.assert_close(t.detach().double(), p[n], atol=1e-6, rtol=0, msg=lambda msg, n=n: f"{n}: {msg}")
