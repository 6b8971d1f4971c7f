"""When a waiting run should start, from the runs the registry holds: each busy slot's progress (a slot
lent to a page's own work, a run being built, a run training or paused) and each run ahead in line, at
the pace this server measured for its shape (waiting.estimate does the arithmetic). No torch here.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from ..runs.run import Run
from .entry import HeldSlot, RunEntry
from .waiting import Estimate, Pace, Progress, SpeedBook, WaitingRun, estimate


def start_estimate(entries: Iterable[RunEntry], slots: int, now: float, speeds: SpeedBook,
                   ahead: list[RunEntry]) -> Estimate | None:
    """When the run behind `ahead` should start, on `slots` slots. Read under the registry's lock: the
    runs' facts take their own locks, never the registry's, so this cannot deadlock."""
    paces: dict[tuple, Pace | None] = {}

    def pace(shape: tuple) -> Pace | None:  # once per shape: a class's line of hundreds holds a few shapes
        if shape not in paces:
            paces[shape] = speeds.pace(shape)
        return paces[shape]

    busy = [slot for slot in (_busy_slot(entry, now, pace) for entry in entries) if slot is not None]
    # a run ahead that will start paused makes the figure rough: its owner decides when it trains
    return estimate(slots, busy, [(e.spec.max_steps, pace(e.spec.shape), e.run.paused) for e in ahead])


def _busy_slot(entry: RunEntry, now: float, pace: Callable[[tuple], Pace | None]) -> tuple | None:
    """An entry's slot as an estimate reads it (its progress, its shape's pace), or None where it holds none."""
    run = entry.run
    if isinstance(run, HeldSlot) and run.is_alive():
        # the page's own work reports no steps: the slot counts from when it was granted
        return Progress(0, run.spec.max_steps, since=now - run.granted), pace(entry.spec.shape)
    if isinstance(run, WaitingRun):  # in line holds no slot; being built, its slot is taken
        return (Progress(0, entry.spec.max_steps), pace(entry.spec.shape)) if run.state == "starting" else None
    # active first: a protocol's isinstance is slow, and a line of hundreds is read under the lock
    if entry.is_active() and isinstance(run, Run):
        trainer = run.trainer
        # `since` counts building and evaluations too, which a whole run's pace includes
        return (Progress(trainer.step, entry.spec.max_steps, trainer.elapsed, since=now - entry.started,
                         paused=run.state == "paused"), pace(entry.spec.shape))
    return None
