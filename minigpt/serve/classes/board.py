"""The class board: a teacher's class, the runs its learners post to it, and the one view of it
that everyone watching shares; `Classes`, every class on this server, composed of its parts:

    codes.py    a class's code (?class=K7Q2)
    roster.py   the open classes: opening, finding, closing, ending them after their term; the teacher's key
    posts.py    the runs posted, withdrawn, hidden and pinned; the board's rounds
    lesson.py   the teacher leading the lesson: its step, the quick checks, their tally and reveals, and
                each lesson session of the course
    learners.py who has opened the class, their personal codes, the runs they started, erasing one
    board.py    the records: the challenge, a post, each posted run's row, the view of a board, the
                class's lesson and text, a round, a lesson session
    classes.py  Classes, composing them, and building each board's view from its posts

Posts refer to runs in the RunRegistry, which keeps training them; the board reads them without
an owner's key, so watching a board never keeps a run alive. `Classes.view` builds a class's
view at most once per `refresh_seconds`, and only when a posted run has moved: thirty viewers
share one computation. With a `store` (store/database.py), every change is written behind, and a
new process opens with the classes that have not ended: their posts, challenges, pins, the
lesson's step, reveals and answers, their rounds, sessions, learners, lesson and text. A post's
curve then comes back from its run, which the registry reads from the store too. No Streamlit here.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from ...lab.run_records import RunRecord
from ...messages import N_, Message

if TYPE_CHECKING:
    import pandas as pd

    from ...config import GPTConfig, TrainConfig

CLASS_CORPUS = "class"  # a challenge's corpus that names the class's own text, whichever it is now


@dataclass(frozen=True)
class ClassCorpus:
    """The text a class trains on: a built-in corpus (`builtin`, its key) or the teacher's upload
    (`text`, under the file's name as `label`)."""

    label: str
    builtin: str | None = None
    text: str | None = field(default=None, repr=False)

    @property
    def key(self) -> str:
        """The corpus key of a run trained on it (what its post keeps): the built-in name, or the file's
        name and a digest of its text, which neither a learner's own upload nor another text of the
        same name has."""
        if self.builtin is not None:
            return self.builtin
        return f"{self.label} (class text {hashlib.sha256((self.text or '').encode()).hexdigest()[:8]})"


@dataclass(frozen=True)
class Challenge:
    """The teacher's goal: the lowest best validation loss, among runs that trained on `corpus`
    (a built-in corpus's name, or CLASS_CORPUS: the class's own text), were set to at most
    `max_steps` steps and have at most `max_params` parameters. None leaves a constraint out."""

    corpus: str | None = None
    max_steps: int | None = None
    max_params: int | None = None

    def refusals(self, corpus: str, record: RunRecord, class_corpus: ClassCorpus | None = None) -> list[Message]:
        """Why a run does not meet the challenge, from its own configuration (`corpus` is the key
        of the corpus it trained on, an upload's never a built-in name): empty when it does."""
        return self.misfits(corpus, record.model, record.train, class_corpus)

    def misfits(self, corpus: str, model: GPTConfig, train: TrainConfig,
                class_corpus: ClassCorpus | None = None) -> list[Message]:
        """Why a run of these settings (`model` sized for `corpus`'s vocabulary) would not meet the
        challenge: what the Train page says before Start, and the board of a posted run. A challenge on
        the class's text (CLASS_CORPUS) compares with `class_corpus`, and asks nothing of the corpus
        while the class has none."""
        reasons = []
        if self.corpus == CLASS_CORPUS:
            if class_corpus is not None and corpus != class_corpus.key:
                reasons.append(Message("trained on {corpus}, not the class's text {wanted}", corpus=corpus,
                                       wanted=class_corpus.label))
        elif self.corpus is not None and corpus != self.corpus:
            reasons.append(Message("trained on {corpus}, not {wanted}", corpus=corpus, wanted=self.corpus))
        if self.max_steps is not None and train.max_steps > self.max_steps:
            reasons.append(Message("set to train {steps:,} steps, more than {limit:,}", steps=train.max_steps,
                                   limit=self.max_steps))
        params = model.num_params()
        if self.max_params is not None and params > self.max_params:
            reasons.append(Message("{params:,} parameters, more than {limit:,}", params=params, limit=self.max_params))
        return reasons


@dataclass
class Post:
    """A run on a board: where to read it, and what was last read of it."""

    post_id: str
    name: str
    run_id: str
    key: bytes = field(repr=False)  # a salted digest of the poster's secret (keys.py), which withdraws the post
    run_key: bytes = field(repr=False)  # one of the run's owner key, which withdraws it too (after a refresh)
    learner: bytes = field(repr=False)  # who posted, tagged under the class's salt
    corpus: str                   # the key of the corpus the run trained on
    record: RunRecord             # the run as last read: kept when the run itself is released
    sample: str                   # its latest evaluation's sample
    state: str
    step: int                     # its trainer's step as last read (the record logs every few steps)
    hidden: bool = False
    place: int | None = None      # its place in line while it waits for a training slot
    round: int = 1                # the board's round it was posted in (Round)


@dataclass(frozen=True)
class ClassLesson:
    """The lesson a teacher loaded into their class: its file's name and its Markdown text, which the
    app reads (the server keeps it as text and never interprets it)."""

    name: str
    text: str = field(repr=False)


@dataclass(frozen=True)
class Round:
    """A round of the board ("week 3"): the posts of earlier rounds are archived, never lost."""

    number: int
    name: str
    started: float                # wall-clock seconds


@dataclass(frozen=True)
class LessonSession:
    """One lesson session of the course: when it began (wall clock), the lesson's name ("" for the
    built-in one), the steps led in the order first reached, and per step how many learners chose
    each option (counts alone: no one is named)."""

    number: int
    started: float
    lesson: str
    steps: tuple[int, ...]
    tallies: dict[int, tuple[int, ...]]


@dataclass(frozen=True)
class BoardRow:
    """One posted run as the board shows it."""

    post_id: str
    run_id: str
    label: str                    # its name, numbered where two share one
    record: RunRecord
    sample: str
    state: str
    step: int
    params: int
    tokens: int                   # characters seen in training: steps × batch × block × micro-batches
    hidden: bool
    pinned: bool
    refusals: tuple[Message, ...]  # why it does not meet the challenge (empty: it does, or there is none)
    place: int | None = None       # its place in line while it waits for a training slot

    @property
    def best_val(self) -> float | None:
        return min(self.record.val_loss) if self.record.val_loss else None


@dataclass(frozen=True)
class Column:
    """One of the board's own columns: its header, marked for the catalogs (the app shows it in the
    learner's language, the CSV too), and its value in a row."""

    label: str
    value: Callable[[BoardRow], object]


RUN_LABEL = N_("run")  # the first column: each run's name on the board
# the board's own columns, after the name and the settings that differ between the runs: a new one
# is one line here
COLUMNS = {
    "best_val": Column(N_("best val loss"), lambda row: row.best_val),
    "steps": Column(N_("steps"), lambda row: row.step),
    "tokens": Column(N_("characters seen"), lambda row: row.tokens),
    "params": Column(N_("parameters"), lambda row: row.params),
    "seconds": Column(N_("time (s)"), lambda row: round(row.record.elapsed, 1)),
}


@dataclass(frozen=True)
class BoardView:
    """A class's board at one update: every run's row (pinned first, then in posting order) and,
    with a challenge, the ranking. `key` changes whenever anything shown changes."""

    code: str
    key: tuple
    rows: tuple[BoardRow, ...]
    challenge: Challenge | None

    def visible(self) -> list[BoardRow]:
        # a hidden run keeps its row (the teacher may show it again), off the chart and the ranking
        return [row for row in self.rows if not row.hidden]

    def ranking(self) -> list[BoardRow]:
        """The visible runs that meet the challenge and have been evaluated, best first."""
        if self.challenge is None:
            return []
        # a run not evaluated yet has no loss to rank by
        fit = [row for row in self.visible() if not row.refusals and row.best_val is not None]
        return sorted(fit, key=lambda row: row.best_val)

    def coinciding(self) -> list[tuple[str, ...]]:
        """The visible runs whose curves lie on top of each other, each group by its labels: the
        same train loss at every step both have logged (at least two), as two runs with the same
        settings and seed have. The chart draws one line for them, so the board says so."""
        return list(self._coinciding)

    @cached_property
    def _coinciding(self) -> tuple[tuple[str, ...], ...]:
        # once per view, which every viewer shares; a run is compared only with the groups whose first
        # run logged one of its (step, loss) points: two curves that coincide share two at least
        groups: list[list[BoardRow]] = []
        holding: dict[tuple[int, float], list[int]] = {}  # a logged point: the groups whose first run has it
        for row in self.visible():
            points = list(zip(row.record.steps, row.record.train_loss))
            near = sorted({g for point in points for g in holding.get(point, ())})
            found = next((g for g in near if _same_curve(groups[g][0].record, row.record)), None)
            if found is not None:
                groups[found].append(row)
            elif len(row.record.steps) >= 2:  # one logged step agrees with any curve: no group on it alone
                for point in points:
                    holding.setdefault(point, []).append(len(groups))
                groups.append([row])
        return tuple(tuple(row.label for row in group) for group in groups if len(group) > 1)

    @cached_property
    def digest(self) -> str:
        """A short stand-in for `key`, for the caches of what every viewer of this view is shown."""
        return hashlib.blake2b(repr((self.code, self.key)).encode(), digest_size=12).hexdigest()

    def table(self) -> pd.DataFrame:
        """One row per visible run: its name, the settings that differ between the runs, then
        COLUMNS (for the page and the CSV)."""
        import pandas as pd  # here: a page start-up does without pandas
        from ...lab.run_records import differing_settings
        rows = self.visible()
        records = [row.record for row in rows]
        # one run differs from nothing: no settings columns then
        settings = differing_settings(records).T if len(records) > 1 else pd.DataFrame(index=range(len(rows)))
        settings.index = range(len(rows))  # lined up with the rows by position, for the concat
        table = pd.DataFrame({"run": [row.label for row in rows]})
        table = pd.concat([table, settings], axis=1)
        for name, column in COLUMNS.items():
            table[name] = [column.value(row) for row in rows]
        return table


def _same_curve(a: RunRecord, b: RunRecord) -> bool:
    # compared where both logged a step: a run still training coincides with its finished twin so far
    ours, theirs = dict(zip(a.steps, a.train_loss)), dict(zip(b.steps, b.train_loss))
    both = ours.keys() & theirs.keys()
    return len(both) >= 2 and all(ours[step] == theirs[step] for step in both)


