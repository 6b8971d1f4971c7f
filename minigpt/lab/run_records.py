"""Runs kept for comparison: what a finished (or stopped) run measured, its settings and a name,
held by the server under an unguessable id, and the tables that set runs side by side.

A `RunRecord` is small (the loss curve, the configs, a few numbers: no weights), so a server
keeps many; `RunShelf` holds at most `max_records` and lets the oldest go first. Whoever knows a
record's id can read it, and nothing else: there is no list of all ids, so a session sees only
the runs it kept or was sent a link to.
"""
from __future__ import annotations

import csv
import io
import secrets
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING

from ..config import GPTConfig, TrainConfig

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

SETTINGS = [f.name for f in fields(GPTConfig) if f.name != "vocab_size"] + \
           [f.name for f in fields(TrainConfig) if f.name not in ("device", "compile", "dtype")]


@dataclass(frozen=True)
class RunRecord:
    name: str
    corpus: str
    model: GPTConfig
    train: TrainConfig
    steps: tuple[int, ...]          # where train_loss was logged
    train_loss: tuple[float, ...]
    val_steps: tuple[int, ...]      # the evaluations
    val_loss: tuple[float, ...]
    elapsed: float                  # seconds of training (pauses excluded)
    tokens_per_sec: float
    record_id: str = field(default_factory=lambda: secrets.token_urlsafe(9))

    @classmethod
    def of_run(cls, name: str, corpus: str, model: GPTConfig, train: TrainConfig, snapshot) -> "RunRecord":
        """From a run's snapshot (serve.runs.run.RunSnapshot): its history and speed as they are now."""
        history = snapshot.history
        evals = [e for e in history if e.val_loss is not None]
        return cls(name, corpus, model, train, tuple(e.step for e in history), tuple(e.train_loss for e in history),
                   tuple(e.step for e in evals), tuple(e.val_loss for e in evals), snapshot.elapsed,
                   snapshot.tokens_per_sec)

    @property
    def final_step(self) -> int:
        return self.steps[-1] if self.steps else 0

    def settings(self) -> dict:
        values = {**asdict(self.model), **asdict(self.train)}
        return {"corpus": self.corpus, **{name: values[name] for name in SETTINGS}}


class RunShelf:
    """The server's kept runs, by id; thread-safe, at most `max_records` in memory, oldest out first.
    With a `store` (minigpt.serve.store.database.Store: its save_record and load_records), every record is
    written there too, and one memory let go (or a previous process held) is read back from it."""

    def __init__(self, max_records: int = 200, store=None):
        self.max_records, self.store = max_records, store
        self._records: OrderedDict[str, RunRecord] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, record: RunRecord) -> str:
        self._remember(record)
        if self.store is not None:
            self.store.records.save(record)
        return record.record_id

    def _remember(self, record: RunRecord) -> None:
        with self._lock:
            self._records[record.record_id] = record
            while len(self._records) > self.max_records:
                self._records.popitem(last=False)

    def rename(self, record_id: str, name: str) -> None:
        """Give a kept record a new name; nothing if the shelf has let it go."""
        found = self.get([record_id])
        if found:
            self.put(replace(found[0], name=name))

    def get(self, record_ids: list[str]) -> list[RunRecord]:
        """The records of these ids that are still kept, in the order asked."""
        with self._lock:
            found = {i: self._records[i] for i in record_ids if i in self._records}
        missing = [i for i in record_ids if i not in found]
        if missing and self.store is not None:
            for record in self.store.records.load(missing):
                self._remember(record)
                found[record.record_id] = record
        return [found[i] for i in record_ids if i in found]


def labels(records: list[RunRecord]) -> list[str]:
    """The records' names, a repeated one numbered ("run 1", "run 1 (2)"): a table needs them unique."""
    seen: dict[str, int] = {}
    out = []
    for r in records:
        seen[r.name] = seen.get(r.name, 0) + 1
        out.append(r.name if seen[r.name] == 1 else f"{r.name} ({seen[r.name]})")
    return out


def differing_settings(records: list[RunRecord]) -> pd.DataFrame:
    """The settings whose values differ between the records: one row per setting, one column
    per record (by name, numbered where two share one). Empty when every setting is the same."""
    import pandas as pd  # here, not at the top: every page's start-up does without it
    every = [r.settings() for r in records]  # once per record: a lecture hall's board has hundreds
    rows = {name: [settings[name] for settings in every] for name in ["corpus"] + SETTINGS}
    differ = {name: values for name, values in rows.items() if len({repr(v) for v in values}) > 1}
    return pd.DataFrame.from_dict(differ, orient="index", columns=labels(records))


def results_table(records: list[RunRecord]) -> pd.DataFrame:
    """Each record's steps, last train and val loss, best val loss, time and speed."""
    import pandas as pd  # here, not at the top: every page's start-up does without it
    return pd.DataFrame({
        "run": labels(records),
        "steps": [r.final_step for r in records],
        "train_loss": [r.train_loss[-1] if r.train_loss else float("nan") for r in records],
        "val_loss": [r.val_loss[-1] if r.val_loss else float("nan") for r in records],
        "best_val": [min(r.val_loss) if r.val_loss else float("nan") for r in records],
        "seconds": [r.elapsed for r in records],
        "tokens_per_sec": [r.tokens_per_sec for r in records],
    })


def history_table(history) -> pd.DataFrame:
    """A run's logged events (train.TrainEvent) as a table, one row per event: for a CSV."""
    import pandas as pd  # here, not at the top: every page's start-up does without it
    return pd.DataFrame([{"step": e.step, "train_loss": e.train_loss, "val_loss": e.val_loss, "lr": e.lr,
                          "tokens_per_sec": e.tokens_per_sec, "elapsed_s": e.elapsed,
                          "task_accuracy": getattr(e.score, "chars", None),  # a task's TaskScore, at evaluations
                          "task_solved": getattr(e.score, "lines", None)} for e in history],
                        columns=["step", "train_loss", "val_loss", "lr", "tokens_per_sec", "elapsed_s", "task_accuracy",
                                 "task_solved"])


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet may take for a formula at a cell's start


def csv_text(table: pd.DataFrame) -> str:
    """A table as CSV that a spreadsheet opens as data: a text cell (a learner's run name, say) that
    starts like a formula gets a leading apostrophe, OWASP's advice against CSV injection. Numbers stay
    numbers, negative ones too; every text cell is quoted."""
    def safe(value):
        return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value

    safe_table = table.map(safe)
    safe_table.columns = [safe(str(name)) for name in table.columns]
    return safe_table.to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC)  # every text quoted: a lone CR too


def attention_npz(attention: np.ndarray, text: str, scaled: bool) -> bytes:
    """Attention weights (layers, heads, T, T) as a compressed .npz, with the text they are of
    (`chars`, one string per position) and whether the scores were divided by √d_k."""
    import numpy as np  # here: the class board imports this module, and Home need not wait for numpy

    buffer = io.BytesIO()
    np.savez_compressed(buffer, attention=np.asarray(attention, dtype=np.float32), chars=np.array(list(text)),
                        scaled=np.array(scaled))
    return buffer.getvalue()
