"""Tiny runs for the class board's tests, trained to their end on a thread, and a clock the test moves
by hand: nothing in those tests waits for time to pass."""
from __future__ import annotations

from helpers.tiny import TEXT, tiny_config, tiny_plan, tiny_tokenizer
from helpers.waiting import wait_until
from minigpt import TrainConfig, Trainer, build_model
from minigpt.serve.runs.thread import TrainingRun

BATCH, BLOCK = 4, 8


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def build(max_steps: int = 20, d_model: int = 16, run_id: str | None = None, **train) -> TrainingRun:
    tok = tiny_tokenizer()
    cfg = TrainConfig(batch_size=BATCH, block_size=BLOCK, max_steps=max_steps, warmup_steps=2, eval_interval=5,
                      eval_iters=1, **train)
    model = build_model(tiny_config(vocab_size=tok.vocab_size, d_model=d_model), 0)
    return TrainingRun(Trainer(model, tok, TEXT, cfg), sample_prompt="the", sample_chars=8, run_id=run_id)


def submit(registry, paused: bool = False, key: str | None = None, **settings):
    return registry.submit(tiny_plan(), corpus="course-zh", build=lambda run_id: build(**settings, run_id=run_id),
                           paused=paused, key=key)


def finished(registry, key: str | None = None, **settings):
    entry = submit(registry, key=key, **settings)
    wait_until(lambda: entry.run.state == "finished", "the run to finish")
    return entry
