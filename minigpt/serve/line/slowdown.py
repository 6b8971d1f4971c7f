"""Whether a training run trains much slower now than runs of its size trained on this server (the
server is busy: others' runs share its CPUs), and when it finishes at its pace now: what its owner
is told on Train. From the run's logged history and the pace the SpeedBook measured. No torch here.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .waiting import MIN_STEPS_MEASURED, Pace

if TYPE_CHECKING:
    from ...train import TrainEvent

SLOW_SHARE = 0.5         # a run below half the pace of its size here is told the server is busy
PRESENT_SECONDS = 60.0   # the pace now: over the last minute of training, its evaluations in it


@dataclass(frozen=True)
class Slowdown:
    """A run training much slower than runs of its size did here: its pace now, theirs, and its time
    left at its pace now."""

    steps_per_sec: float
    usual_steps_per_sec: float
    seconds_left: float

    @property
    def share(self) -> float:
        """Its pace now as a share of the usual one: 0.25 trains at a quarter of the speed."""
        return self.steps_per_sec / self.usual_steps_per_sec


def pace_now(history: Sequence[TrainEvent]) -> float | None:
    """Steps per second over the logged events of the last PRESENT_SECONDS of training (evaluations
    counted, pauses not); None before a run has logged two events past its first steps."""
    if len(history) < 2 or history[-1].step < MIN_STEPS_MEASURED:
        return None
    last = history[-1]
    # the newest event at least PRESENT_SECONDS before the last, else the first: the window's start
    start = next((e for e in reversed(history[:-1]) if e.elapsed <= last.elapsed - PRESENT_SECONDS), history[0])
    steps, seconds = last.step - start.step, last.elapsed - start.elapsed
    return steps / seconds if steps > 0 and seconds > 0 else None


def slowdown(history: Sequence[TrainEvent], max_steps: int, usual: Pace | None) -> Slowdown | None:
    """The run's Slowdown where its pace now is below SLOW_SHARE of `usual`, the pace whole runs of its
    size had here (SpeedBook.pace); None where it is not, or where either pace is not known. A pace
    scaled from runs of another size is too rough to call a run slow by."""
    if usual is None or not usual.measured:
        return None
    pace = pace_now(history)
    if pace is None or pace >= SLOW_SHARE * usual.steps_per_sec:
        return None
    return Slowdown(pace, usual.steps_per_sec, max(max_steps - history[-1].step, 0) / pace)
