"""Resuming from a checkpoint continues the loss curve: 2N steps straight equal N, a save, a load
and N more, with the same seed and data order (dropout on, so its per-step masks are covered too).

test_train.py checks this inside one process on the Trainer's state; here the state goes through
the checkpoint files, once through the library and once through the command line."""
from __future__ import annotations

import pytest
import torch

from minigpt import GPTConfig, TrainConfig, Trainer, build_model, from_pretrained, save_pretrained
from minigpt.cli import main

from helpers import TEXT, tiny_tokenizer

N = 20
SETTINGS = dict(batch_size=4, block_size=8, max_steps=2 * N, warmup_steps=5, eval_interval=10, eval_iters=2, seed=7)


def _trainer(model=None) -> Trainer:
    tokenizer = tiny_tokenizer()
    cfg = TrainConfig(**SETTINGS)  # cosine decay over all 2N steps, in both halves
    if model is None:
        config = GPTConfig(vocab_size=tokenizer.vocab_size, d_model=16, num_heads=2, num_layers=2, d_ff=32,
                           max_len=16, dropout=0.1)
        model = build_model(config, cfg.seed)
    return Trainer(model, tokenizer, TEXT, cfg, log_interval=5)


def _curve(events) -> list[tuple[int, float, float | None]]:
    return [(e.step, e.train_loss, e.val_loss) for e in events]


def assert_same_curve(resumed: list, straight: list) -> None:
    assert [row[0] for row in resumed] == [row[0] for row in straight]
    for (step, loss, val), (_, want, want_val) in zip(resumed, straight):
        assert loss == pytest.approx(want, rel=1e-5, abs=1e-6), step
        assert (val is None) == (want_val is None), step
        assert val is None or val == pytest.approx(want_val, rel=1e-5, abs=1e-6), step


def test_resume_through_save_pretrained_and_from_pretrained_continues_the_loss_curve(tmp_path):
    straight = _trainer()
    full = _curve(straight.events())

    first = _trainer()
    events = first.events()
    head = []
    while not head or head[-1][0] < N:
        head.append(_curve([next(events)])[0])
    save_pretrained(tmp_path / "ckpt", first.model, first.tokenizer, train_config=first.cfg,
                    meta={"trainer_state": first.state_dict()}, optimizer=first.optimizer)
    del first, events  # nothing but the files carries over

    loaded = from_pretrained(tmp_path / "ckpt", with_optimizer=True)
    second = _trainer(loaded.model)
    assert loaded.train_config == second.cfg
    second.load_state_dict(loaded.meta["trainer_state"], loaded.optimizer_state)
    assert second.step == N
    assert_same_curve(head + _curve(second.events()), full)
    for (name, a), b in zip(straight.model.state_dict().items(), second.model.state_dict().values()):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), name


def test_cli_resume_continues_the_loss_curve_of_an_uninterrupted_run(tmp_path, capsys):
    corpus = tmp_path / "rhymes.txt"
    corpus.write_text("hickory dickory dock, the mouse ran up the clock.\n" * 20, encoding="utf-8")
    # a constant schedule after warmup: the first half's lr must not depend on its own max_steps
    flags = ["--corpus", str(corpus), "--d-model", "16", "--num-heads", "2", "--num-layers", "1", "--d-ff", "32",
             "--max-len", "32", "--block-size", "16", "--batch-size", "4", "--eval-interval", "10",
             "--eval-iters", "2", "--schedule", "constant", "--warmup-steps", "5", "--seed", "3"]
    assert main(["train", "--out", str(tmp_path / "straight"), "--max-steps", str(2 * N), *flags]) == 0
    assert main(["train", "--out", str(tmp_path / "half"), "--max-steps", str(N), *flags]) == 0
    assert main(["train", "--resume", str(tmp_path / "half"), "--out", str(tmp_path / "resumed"),
                 "--max-steps", str(2 * N)]) == 0
    assert f"from step {N}" in capsys.readouterr().err
    straight = from_pretrained(tmp_path / "straight").meta["history"]
    resumed = from_pretrained(tmp_path / "resumed").meta["history"]
    assert [row[0] for row in resumed] == [10, 20, 30, 40]
    assert_same_curve([tuple(row) for row in resumed], [tuple(row) for row in straight])
