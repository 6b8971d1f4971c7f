"""A Plotly figure's arrays as numbers, however plotly serialised them, and the figures drawn over
training steps, built for a run of any length."""
from __future__ import annotations

import base64
from types import SimpleNamespace

import numpy as np

from minigpt.lab.tasks import TaskScore
from minigpt.train import TrainEvent
from minigpt.viz import board_figure, compare_figure, loss_figure, race_figure, right_key_figure, task_figure


def plotly_array(value) -> np.ndarray:
    """A figure's array as plotly serialises it: a list, or base64 'bdata' with its dtype."""
    if isinstance(value, dict) and "bdata" in value:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if isinstance(shape, str):  # "14, 14"
            shape = [int(n) for n in shape.split(",")]
        return array.reshape(shape) if shape else array
    return np.array(value, dtype=float)


def over_steps(steps) -> dict:
    """Every figure of minigpt.viz drawn over training steps, for a run evaluated at `steps` (one
    or more): the loss chart, a task's accuracy, the class board, the comparison, the √d_k race
    and the time-lapse's right keys. The records, rows and race points are read by attribute."""
    steps = list(steps)
    losses = [6.6 - step / 100 for step in steps]
    record = SimpleNamespace(name="first", steps=steps, train_loss=losses, val_steps=steps, val_loss=losses)
    events = [TrainEvent(step=step, max_steps=600, train_loss=loss, lr=1e-3, tokens_per_sec=1.0, elapsed=float(step),
                         val_loss=loss, score=TaskScore(chars=0.5, lines=0.25, chance=0.125, count=64))
              for step, loss in zip(steps, losses)]

    def race_side(loss):
        return SimpleNamespace(loss=loss, entropy=np.array([1.0]), jacobian=np.array([0.5]))

    race = [SimpleNamespace(step=step, scaled=race_side(loss), unscaled=race_side(loss + 0.1))
            for step, loss in zip(steps, losses)]
    return {
        "the loss chart": loss_figure(events),
        "a task's accuracy": task_figure(events, chance=0.125),
        "the class board": board_figure([SimpleNamespace(label="小明", post_id="p1", pinned=False, record=record)]),
        "the comparison": compare_figure([record]),
        "the √d_k race": race_figure(race, "loss"),
        "the time-lapse's right keys": right_key_figure(steps, np.full((len(steps), 2, 4), 0.2), chance=0.125),
    }
