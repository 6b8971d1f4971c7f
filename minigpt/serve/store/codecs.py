"""What the store writes as JSON and reads back: a run's logged steps (TrainEvent) and a kept record
(RunRecord). JSON, and PostgreSQL's float columns, take no NaN or infinity; a run that diverged has
them, so those numbers travel as text ("nan", "inf") and come back as floats."""
from __future__ import annotations

import math
from dataclasses import asdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...lab.run_records import RunRecord
    from ...train import TrainEvent

# the fields of a TrainEvent that may come back as text (finite); any other field is read as written
_LOSSES = ("train_loss", "val_loss", "train_eval_loss")


def finite(value: float | None) -> float | str | None:
    """JSON and PostgreSQL's float columns take no NaN or infinity: those travel as text."""
    if value is None or math.isfinite(value):
        return value
    return str(value)


def number(value):
    """What finite wrote, as a number again (float("nan") reads its text); anything else as it is."""
    return float(value) if isinstance(value, str) else value


def event_json(event: TrainEvent) -> dict:
    """A logged step as JSON: every float of it finite or text."""
    return {k: finite(v) if isinstance(v, float) else v for k, v in asdict(event).items()}


def event_values(data: dict) -> dict:
    """A logged step's JSON as TrainEvent's keyword arguments."""
    return {k: number(v) if k in _LOSSES else v for k, v in data.items()}


def record_json(record: RunRecord) -> dict:
    """A kept record as JSON; a loss that is not finite (a run that diverged) travels as text."""
    data = asdict(record)
    # asdict would give the configs' every field; to_dict gives what from_dict reads back
    data["model"], data["train"] = record.model.to_dict(), record.train.to_dict()
    for name in ("train_loss", "val_loss"):
        data[name] = [finite(v) for v in data[name]]
    for name in ("elapsed", "tokens_per_sec"):
        data[name] = finite(data[name])
    # tuples become lists here, not in the driver: the dict compares equal to what is read back
    return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}


def record_from_json(data: dict) -> RunRecord:
    """A kept record from record_json's JSON."""
    from ...config import GPTConfig, TrainConfig  # here, not at the top: the store loads without the lab
    from ...lab.run_records import RunRecord

    values = dict(data)  # a copy: the row's JSON stays as it was read
    values["model"], values["train"] = GPTConfig.from_dict(data["model"]), TrainConfig.from_dict(data["train"])
    for name in ("steps", "train_loss", "val_steps", "val_loss"):
        values[name] = tuple(number(v) for v in data[name])
    values["elapsed"], values["tokens_per_sec"] = number(data["elapsed"]), number(data["tokens_per_sec"])
    return RunRecord(**values)
