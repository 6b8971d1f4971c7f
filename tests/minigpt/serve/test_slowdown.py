"""minigpt/serve/line/slowdown.py: whether a training run trains much slower now than runs of its size did
on this server, and when it finishes at its pace now, from logged events whose figures are written here.

    pytest tests/minigpt/serve/test_slowdown.py
"""
from __future__ import annotations

from minigpt.serve.line.slowdown import Slowdown, pace_now, slowdown
from minigpt.serve.line.waiting import Pace
from minigpt.train import TrainEvent


def _events(*points: tuple[int, float]) -> list[TrainEvent]:
    """Logged events at (step, seconds of training)."""
    return [TrainEvent(step=step, max_steps=1000, train_loss=2.0, lr=1e-3, tokens_per_sec=0.0, elapsed=elapsed)
            for step, elapsed in points]


# 10 steps/s for its first 100 steps, then the server filled: 10 steps every 20 s (0.5 steps/s)
SLOWED = _events(*[(step, step / 10) for step in range(10, 101, 10)], (110, 30.0), (120, 50.0), (130, 70.0),
                 (140, 90.0))


def test_the_pace_now_is_the_last_minute_of_training_not_the_average():
    assert pace_now(SLOWED) == 0.5  # (140 - 110) steps in (90 - 30) s; the average is 140 / 90


def test_a_run_under_half_the_pace_of_its_size_here_is_slowed_and_finishes_at_its_pace_now():
    # its size trained at 2 steps/s here; its average, 1.56 steps/s, is not under half of that, its pace now is
    assert slowdown(SLOWED, 1000, Pace(2.0, True)) == Slowdown(0.5, 2.0, 1720.0)  # 860 steps left at 0.5 steps/s
    assert slowdown(SLOWED, 1000, Pace(2.0, True)).share == 0.25


def test_a_run_at_half_the_usual_pace_or_more_is_not_slowed():
    assert slowdown(SLOWED, 1000, Pace(1.0, True)) is None


def test_without_a_pace_measured_for_its_size_nothing_is_said():
    assert slowdown(SLOWED, 1000, None) is None
    assert slowdown(SLOWED, 1000, Pace(2.0, False)) is None  # scaled from another size: too rough


def test_a_young_run_has_no_pace_now_until_two_events_past_its_first_steps():
    assert pace_now(_events((10, 1.0))) is None
    assert pace_now(_events((5, 1.0), (8, 2.0))) is None  # the first steps are slow: warm-up
    assert pace_now(_events((10, 1.0), (20, 3.0))) == 5.0  # under a minute in all: from its first event
