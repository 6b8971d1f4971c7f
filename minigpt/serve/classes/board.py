"""The class board: a teacher's class, the runs its learners post to it, and the one view of it
that everyone watching shares; `Classes`, every class on this server, composed of its parts:

    codes.py    a class's code (?class=K7Q2)
    roster.py   the open classes: opening, finding, closing, ending idle ones; the teacher's key
    posts.py    the runs posted, withdrawn, hidden and pinned
    lesson.py   the teacher leading the lesson: its step, the quick checks, their tally and reveals
    board.py    the challenge, each posted run's row, the view built from them, and Classes

Posts refer to runs in the RunRegistry, which keeps training them; the board reads them without
an owner's key, so watching a board never keeps a run alive. `Classes.view` builds a class's
view at most once per `refresh_seconds`, and only when a posted run has moved: thirty viewers
share one computation. With a `store` (store/database.py), every change is written behind, and a
new process opens with the classes that have not ended: their posts, challenges, pins, the
lesson's step, reveals and answers. A post's curve then comes back from its run, which the
registry reads from the store too. No Streamlit here.
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from ...lab.run_records import RunRecord, labels
from ...messages import N_, Message
from ..store.retention import CLASS_IDLE_SECONDS
from .codes import CODE_ALPHABET, CODE_LENGTH
from .lesson import MAX_ANSWERS, MAX_OPTIONS, Leading, LessonNow
from .posts import MAX_NAME, Post, Posting, plain_name, read_run
from .roster import BoardError, ClassBoard, OpenedClass

if TYPE_CHECKING:
    import pandas as pd

    from ...config import GPTConfig, TrainConfig
    from ..line.registry import RunEntry
    from ..store.classes import StoredClass
    from ..store.database import Store

# what app/ and the tests import of the classes: every name from here, wherever it lives
__all__ = ["CLASS_IDLE_SECONDS", "CODE_ALPHABET", "CODE_LENGTH", "COLUMNS", "MAX_ANSWERS", "MAX_NAME", "MAX_OPTIONS",
           "RUN_LABEL", "BoardError", "BoardRow", "BoardView", "Challenge", "Classes", "Column", "LessonNow",
           "OpenedClass", "plain_name"]


@dataclass(frozen=True)
class Challenge:
    """The teacher's goal: the lowest best validation loss, among runs that trained on `corpus`
    (a built-in corpus's name), were set to at most `max_steps` steps and have at most
    `max_params` parameters. None leaves a constraint out."""

    corpus: str | None = None
    max_steps: int | None = None
    max_params: int | None = None

    def refusals(self, corpus: str, record: RunRecord) -> list[Message]:
        """Why a run does not meet the challenge, from its own configuration (`corpus` is the key
        of the corpus it trained on, an upload's never a built-in name): empty when it does."""
        return self.misfits(corpus, record.model, record.train)

    def misfits(self, corpus: str, model: GPTConfig, train: TrainConfig) -> list[Message]:
        """Why a run of these settings (`model` sized for `corpus`'s vocabulary) would not meet the
        challenge: what the Train page says before Start, and the board of a posted run."""
        reasons = []
        if self.corpus is not None and corpus != self.corpus:
            reasons.append(Message("trained on {corpus}, not {wanted}", corpus=corpus, wanted=self.corpus))
        if self.max_steps is not None and train.max_steps > self.max_steps:
            reasons.append(Message("set to train {steps:,} steps, more than {limit:,}", steps=train.max_steps,
                                   limit=self.max_steps))
        params = model.num_params()
        if self.max_params is not None and params > self.max_params:
            reasons.append(Message("{params:,} parameters, more than {limit:,}", params=params, limit=self.max_params))
        return reasons


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
        groups: list[list[BoardRow]] = []
        for row in self.visible():
            group = next((g for g in groups if _same_curve(g[0].record, row.record)), None)
            if group is not None:
                group.append(row)
            elif len(row.record.steps) >= 2:  # one logged step agrees with any curve: no group on it alone
                groups.append([row])
        return [tuple(row.label for row in group) for group in groups if len(group) > 1]

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



class Classes(Leading, Posting):
    """Every class on this server: the roster of open classes (roster.py) with their posts
    (posts.py), their lesson (lesson.py), their challenge and their shared view. Thread-safe: all
    sessions share one.

    Limits (each a BoardError in the learner's or teacher's language): `max_classes` open at
    once, `max_posts` runs on one board, `max_per_learner` posts by one learner on one board.
    A class ends `idle_seconds` after its last activity (a post, a withdrawal, anything its
    teacher does or looks at); its code then says it has closed, as after Close.
    """

    def __init__(self, max_classes: int = 20, max_posts: int = 40, max_per_learner: int = 3,
                 idle_seconds: float = CLASS_IDLE_SECONDS, refresh_seconds: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, store: Store | None = None) -> None:
        super().__init__(max_classes, idle_seconds, clock, store)  # the roster, whose classes every part reads
        self.max_posts, self.max_per_learner = max_posts, max_per_learner
        self.refresh_seconds = refresh_seconds  # the runs read once per class per refresh, however many watch
        self._positions = itertools.count()  # posting order, across classes: what the store sorts posts by
        self.builds = 0  # views built: what the board's cost is counted in
        if store is not None:
            stored = store.classes.load()
            # posting order goes on after every position the store has used (withdrawn posts' too)
            self._positions = itertools.count(store.classes.max_post_position() + 1)
            for board in stored:
                self._restore(board)

    def _restore(self, stored: StoredClass) -> None:
        """A class the store kept, as it was: its last activity as long ago as it was then."""
        from ..store.codecs import record_from_json

        # the store keeps wall-clock seconds, the classes a monotonic clock: the idle time carries over
        since = max(0.0, time.time() - stored.last_active)
        board = ClassBoard(stored.code, stored.teacher_key, stored.salt, self._clock() - since,
                           pinned=stored.pinned, lesson_step=stored.lesson_step, revealed=set(stored.revealed),
                           answers={step: dict(given) for step, given in stored.answers.items()},
                           challenge=Challenge(**stored.challenge) if stored.challenge else None)
        board._saved_active = board.last_active
        for row in stored.posts:
            # the post as last read, its place in line unknown until the registry is asked again
            board.posts[row["post_id"]] = Post(row["post_id"], row["name"], row["run_id"], row["post_key"],
                                               row["run_key"], row["learner"], row["corpus"],
                                               record_from_json(row["record"]), row["sample"], row["state"],
                                               row["step"], row["hidden"])
        self._classes[board.code] = board

    def set_challenge(self, code: str, teacher_key: str | None, challenge: Challenge | None) -> None:
        board = self._as_teacher(code, teacher_key)
        with board._lock:
            board.challenge = challenge
            board.version += 1
        self._save(board, challenge=asdict(challenge) if challenge is not None else None)  # kept as JSON

    def view(self, code: str, lookup: Callable[[str], RunEntry | None],
             place: Callable[[RunEntry], int | None] = lambda entry: None) -> BoardView:
        """The class's board now, from the runs as `lookup` finds them (a registry's get, without a
        key), and for a run waiting for a training slot, its `place` in line (a registry's place).
        Built again at most once per refresh_seconds, and only when something shown changed."""
        board = self.find(code)
        with board._lock:
            now = self._clock()
            # within refresh_seconds every viewer gets the last view: thirty viewers redrawing read the
            # runs once, not thirty times
            if board._view is not None and board._view.key[0] == board.version and \
                    now - board._checked < self.refresh_seconds:  # a change on the board itself shows at once
                return board._view
            board._checked = now
            moved = self._read_posts(board, lookup, place)
            # whatever a row shows changes one of these: a run's step, state, logged points or place in line
            key = (board.version,
                   tuple((p.post_id, p.step, p.state, len(p.record.steps), p.place) for p in board.posts.values()))
            if board._view is None or moved or board._view.key != key:
                board._view = _build(board, key)
                self.builds += 1
            return board._view

    def _read_posts(self, board: ClassBoard, lookup: Callable[[str], RunEntry | None],
                    place: Callable[[RunEntry], int | None]) -> bool:
        """Read each posted run again (the board's lock held); whether any has moved."""
        moved = False
        for post in board.posts.values():
            entry = lookup(post.run_id)
            if entry is None:  # the registry let the run go: the post keeps its last read, marked released
                if post.state != "released":
                    post.state, moved = "released", True
                continue
            snap = entry.run.snapshot()
            at = place(entry) if snap.state == "waiting" else None
            # the record is rebuilt only when the run moved: a snapshot is cheap, a record of its history is not
            if (snap.step, snap.state, len(snap.history), at) != (post.step, post.state, len(post.record.steps),
                                                                   post.place):
                state = post.state
                post.record, post.sample, post.state, post.step = read_run(entry, post.name, snap)
                post.place, moved = at, True
                if post.state != state:  # the store keeps what the board shows of a run whose own rows go
                    self._save_post(board, post, wait=False)
        return moved


def _same_curve(a: RunRecord, b: RunRecord) -> bool:
    # compared where both logged a step: a run still training coincides with its finished twin so far
    ours, theirs = dict(zip(a.steps, a.train_loss)), dict(zip(b.steps, b.train_loss))
    both = ours.keys() & theirs.keys()
    return len(both) >= 2 and all(ours[step] == theirs[step] for step in both)


def _build(board: ClassBoard, key: tuple) -> BoardView:
    posts = list(board.posts.values())
    if board.pinned in board.posts:
        posts.sort(key=lambda p: p.post_id != board.pinned)  # stable: the rest keep posting order
    names = labels([replace(p.record, name=p.name) for p in posts])  # two posts named alike get numbers
    rows = []
    for post, label in zip(posts, names):
        record = replace(post.record, name=label)
        train = record.train
        rows.append(BoardRow(post.post_id, post.run_id, label, record, post.sample, post.state, post.step,
                             record.model.num_params(),
                             post.step * train.batch_size * train.block_size * train.grad_accum,
                             post.hidden, post.post_id == board.pinned,
                             # read from the run's settings, not its progress: a run set to too many steps
                             # is refused from its first step, before it could rank
                             tuple(board.challenge.refusals(post.corpus, record)) if board.challenge else (),
                             post.place))
    return BoardView(board.code, key, tuple(rows), board.challenge)
