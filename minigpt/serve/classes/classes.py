"""Every class on this server (`Classes`): the roster of open classes (roster.py) with their posts
(posts.py), their lesson (lesson.py), their challenge and the board each class's viewers share
(board.py), built here from the posts as their runs move."""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import TYPE_CHECKING

from ...lab.run_records import labels
from ..store.retention import CLASS_IDLE_SECONDS
from .board import BoardRow, BoardView, Challenge, Post
from .lesson import Leading
from .posts import Posting, read_run
from .roster import ClassBoard

if TYPE_CHECKING:
    from ..line.entry import RunEntry
    from ..store.classes import StoredClass
    from ..store.database import Store


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
