"""minigpt/train.py: the Trainer's determinism, learning, events, schedule, clipping, early stopping,
resuming (inside one process and through checkpoint files), and the settings it refuses.

    pytest tests/minigpt/test_train.py
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from helpers.checkpoints import assert_same_curve
from helpers.tiny import TEXT, tiny_config, tiny_lm, tiny_tokenizer
from minigpt import (CharTokenizer, ConfigError, GPTConfig, TrainConfig, Trainer, build_model, estimate_loss,
                     load_corpus, validation_windows)
from minigpt.checkpoint import from_pretrained, save_pretrained
from minigpt.train import TrainingDiverged, lr_at
from minigpt.data import eval_windows


def _trainer(seed=0, **overrides) -> Trainer:
    tok = tiny_tokenizer()
    settings = dict(batch_size=4, block_size=8, max_steps=30, warmup_steps=5, eval_interval=10, eval_iters=2)
    cfg = TrainConfig(seed=seed, **(settings | overrides))
    model = build_model(tiny_config(vocab_size=tok.vocab_size, dropout=0.1), cfg.seed)
    return Trainer(model, tok, TEXT, cfg, log_interval=5)


def _losses(trainer: Trainer) -> list[tuple]:
    return [(e.step, e.train_loss, e.val_loss) for e in trainer.events()]


def test_same_seed_gives_the_same_loss_curve():
    assert _losses(_trainer(seed=1)) == _losses(_trainer(seed=1))
    assert _losses(_trainer(seed=1)) != _losses(_trainer(seed=2))


def test_training_lowers_the_loss():
    trainer = _trainer(lr=1e-2, max_steps=120)
    events = list(trainer.events())
    assert events[-1].step == 120
    assert events[-1].train_loss < events[0].train_loss * 0.7


def test_events_report_step_lr_speed_and_val_loss_at_evaluations():
    events = list(_trainer().events())
    assert [e.step for e in events] == [5, 10, 15, 20, 25, 30]
    assert [e.val_loss is not None for e in events] == [False, True, False, True, False, True]
    assert all(e.tokens_per_sec > 0 and e.lr > 0 for e in events)
    assert all(b.elapsed >= a.elapsed for a, b in zip(events, events[1:]))


def test_resume_continues_the_same_loss_curve():
    full = _losses(_trainer())
    first = _trainer()
    events = first.events()
    head = [next(events) for _ in range(3)]  # up to step 15
    state, opt_state = first.state_dict(), first.optimizer.state_dict()
    weights = {k: v.clone() for k, v in first.model.state_dict().items()}
    second = _trainer()
    second.model.load_state_dict(weights)
    second.load_state_dict(state, opt_state)
    tail = _losses(second)
    resumed = [(e.step, e.train_loss, e.val_loss) for e in head] + tail
    assert [r[0] for r in resumed] == [f[0] for f in full]
    for (_, a, va), (_, b, vb) in zip(resumed, full):
        assert a == pytest.approx(b, rel=1e-5)
        assert (va is None) == (vb is None) and (va is None or va == pytest.approx(vb, rel=1e-5))


def test_lr_warms_up_then_decays_to_min_lr():
    cfg = TrainConfig(lr=1e-3, min_lr=1e-4, warmup_steps=10, max_steps=110)
    assert lr_at(0, cfg) == pytest.approx(1e-4)
    assert lr_at(9, cfg) == pytest.approx(1e-3)
    assert lr_at(60, cfg) == pytest.approx(1e-4 + 0.5 * 9e-4)
    assert lr_at(110, cfg) == pytest.approx(1e-4)
    assert lr_at(50, TrainConfig(lr=1e-3, warmup_steps=10, schedule="constant")) == 1e-3


def test_gradients_are_clipped_to_grad_clip():
    trainer = _trainer(grad_clip=0.01)
    trainer.compute_gradients()
    trainer.apply_update()
    norm = torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), math.inf)
    assert norm <= 0.01 + 1e-6


def test_weight_decay_skips_biases_and_layernorms():
    trainer = _trainer(weight_decay=0.1)
    decayed, plain = trainer.optimizer.param_groups
    assert decayed["weight_decay"] == 0.1 and all(p.dim() >= 2 for p in decayed["params"])
    assert plain["weight_decay"] == 0.0 and all(p.dim() == 1 for p in plain["params"])


def test_nan_loss_stops_training_with_advice():
    trainer = _trainer()
    with torch.no_grad():
        trainer.model.final_norm.weight.fill_(float("nan"))
    with pytest.raises(TrainingDiverged, match="lower learning rate"):
        list(trainer.events())


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(lr=0.0), "lr"), (dict(lr=-1e-3), "lr"), (dict(batch_size=0), "batch_size"),
        (dict(block_size=17), "max_len"), (dict(max_steps=0), "max_steps"), (dict(schedule="linear"), "schedule"),
        (dict(grad_clip=-1.0), "grad_clip"),
    ],
)
def test_invalid_training_configs_are_refused_with_a_reason(overrides, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**overrides).validate(tiny_config())


def test_config_from_dict_rejects_unknown_keys_and_wrong_types():
    assert GPTConfig.from_dict(GPTConfig(vocab_size=5).to_dict()) == GPTConfig(vocab_size=5)
    with pytest.raises(ConfigError, match="unknown"):
        GPTConfig.from_dict({"vocab_size": 5, "n_embd": 3})
    with pytest.raises(ConfigError, match="d_model must be int"):
        GPTConfig.from_dict({"vocab_size": 5, "d_model": "64"})
    assert TrainConfig.from_dict(TrainConfig().to_dict()) == TrainConfig()


def test_a_model_over_the_memory_budget_is_refused_before_allocation():
    from minigpt import check_memory_budget
    from minigpt.config import training_memory_bytes

    big = GPTConfig(vocab_size=100, d_model=1024, num_heads=8, num_layers=24, d_ff=4096, max_len=1024)
    train = TrainConfig(batch_size=32, block_size=1024)
    assert training_memory_bytes(big, train) > 16 * big.num_params() > 4 * 2**30
    with pytest.raises(ConfigError, match="needs about .* MB to train"):
        check_memory_budget(big, train, budget_bytes=2**30)
    check_memory_budget(tiny_config(), TrainConfig(batch_size=4, block_size=8), budget_bytes=2**30)


def test_a_batch_larger_than_the_corpus_can_fill_is_refused():
    from minigpt import CorpusError

    with pytest.raises(CorpusError, match="distinct windows"):
        _trainer(batch_size=400)


# resuming through the checkpoint files: 2N steps straight equal N, a save, a load and N more
N = 20
SETTINGS = dict(batch_size=4, block_size=8, max_steps=2 * N, warmup_steps=5, eval_interval=10, eval_iters=2, seed=7)


def _resumable_trainer(model=None) -> Trainer:
    tokenizer = tiny_tokenizer()
    cfg = TrainConfig(**SETTINGS)  # cosine decay over all 2N steps, in both halves
    if model is None:
        config = GPTConfig(vocab_size=tokenizer.vocab_size, d_model=16, num_heads=2, num_layers=2, d_ff=32,
                           max_len=16, dropout=0.1)
        model = build_model(config, cfg.seed)
    return Trainer(model, tokenizer, TEXT, cfg, log_interval=5)


def _curve(events) -> list[tuple[int, float, float | None]]:
    return [(e.step, e.train_loss, e.val_loss) for e in events]


def test_resume_through_save_pretrained_and_from_pretrained_continues_the_loss_curve(tmp_path):
    straight = _resumable_trainer()
    full = _curve(straight.events())

    first = _resumable_trainer()
    events = first.events()
    head = []
    while not head or head[-1][0] < N:
        head.append(_curve([next(events)])[0])
    save_pretrained(tmp_path / "ckpt", first.model, first.tokenizer, train_config=first.cfg,
                    meta={"trainer_state": first.state_dict()}, optimizer=first.optimizer)
    del first, events  # nothing but the files carries over

    loaded = from_pretrained(tmp_path / "ckpt", with_optimizer=True)
    second = _resumable_trainer(loaded.model)
    assert loaded.train_config == second.cfg
    second.load_state_dict(loaded.meta["trainer_state"], loaded.optimizer_state)
    assert second.step == N
    assert_same_curve(head + _curve(second.events()), full)
    for (name, a), b in zip(straight.model.state_dict().items(), second.model.state_dict().values()):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), name


def test_early_stopping_ends_a_run_once_val_loss_stops_improving():
    text = load_corpus("demo-zh")
    tok = CharTokenizer.from_text(text)
    cfg = TrainConfig(batch_size=8, block_size=16, max_steps=2000, warmup_steps=5, eval_interval=10, eval_iters=4,
                      lr=1e-2, early_stop_patience=2, seed=0)
    model = build_model(GPTConfig(vocab_size=tok.vocab_size, d_model=32, num_heads=2, num_layers=1, d_ff=64,
                                  max_len=32, dropout=0.0), 0)
    trainer = Trainer(model, tok, text, cfg)
    events = [e for e in trainer.events() if e.val_loss is not None]
    assert trainer.stopped_early and trainer.step < cfg.max_steps
    vals = [e.val_loss for e in events]
    best = int(np.argmin(vals))
    assert best == len(vals) - 1 - cfg.early_stop_patience  # exactly `patience` evaluations without a new low
    assert all(v >= vals[best] for v in vals[best + 1:])
    assert trainer.evaluate()[1] == pytest.approx(vals[best], abs=1e-6)  # it ends on the best weights


def test_the_loss_is_the_cross_entropy_by_hand_and_uniform_logits_give_ln_vocab():
    model, tok = tiny_lm()
    ids = torch.tensor(tok.encode("the cat sat on the mat. the dog sat on the log. " * 3))
    windows = eval_windows(ids, batch_size=4, block_size=8, batches=2, seed=0)
    assert [x.shape for x, _ in windows] == [(4, 8)] * 2
    again = eval_windows(ids, batch_size=4, block_size=8, batches=2, seed=0)
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(windows, again))
    hand = []
    for x, y in windows:
        probs = torch.softmax(model(x)[0].double(), dim=-1)
        hand.append(-probs.gather(-1, y[..., None]).log().mean().item())
    assert estimate_loss(model, windows) == pytest.approx(np.mean(hand), abs=1e-5)
    with torch.no_grad():
        model.final_norm.weight.zero_(), model.final_norm.bias.zero_()  # every logit 0: a uniform guess
    assert estimate_loss(model, windows) == pytest.approx(math.log(tok.vocab_size), abs=1e-6)


def test_validation_windows_are_the_held_out_tail_and_a_tasks_windows_start_at_its_lines():
    ids = torch.arange(1300) % 13  # thirteen-token "lines": a window starts at a line when its first id is 0
    cfg = TrainConfig(batch_size=8, block_size=13, eval_iters=5, val_fraction=0.1, seed=3)
    windows = validation_windows(ids, cfg, period=13)
    assert len(windows) == cfg.eval_iters and all(x.shape == (8, 13) for x, _ in windows)
    assert all((x[:, 0] == 0).all() for x, _ in windows)  # every window at a line's start
    positions = torch.arange(1300)
    starts = validation_windows(positions, cfg, period=13)  # the same draws on token positions
    assert all((x >= 1300 - 130).all() for x, _ in starts)  # the last tenth only: never a training token
    for x, y in windows:
        assert torch.equal(y[:, :-1], x[:, 1:])  # targets: the next token


def test_a_trainer_reports_the_val_loss_of_its_validation_windows():
    trainer = _trainer()
    list(trainer.events())
    ids = torch.tensor(trainer.tokenizer.encode(TEXT))
    assert estimate_loss(trainer.model, validation_windows(ids, trainer.cfg)) == pytest.approx(trainer.evaluate()[1])
