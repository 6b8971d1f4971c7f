"""Every class on this server (`Classes`): the roster of open classes (roster.py) with their posts
and rounds (posts.py), their lesson and its sessions (lesson.py), their learners (learners.py), their
challenge and corpus, and the board each class's viewers share (board.py), built here from the posts
as their runs move."""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import TYPE_CHECKING

from ...lab.run_records import labels
from ..store.retention import CLASS_DAYS
from .board import BoardRow, BoardView, Challenge, ClassCorpus, ClassLesson, Post, Round
from .learners import Learners
from .lesson import Leading
from .posts import Posting, read_run
from .roster import BoardError, ClassBoard

# a class's uploaded text, at most: below an upload's own 20 MB, for every learner who trains on it holds a copy,
# and the store reads it back with its class
MAX_CORPUS_CHARS = 2_000_000

if TYPE_CHECKING:
    from ..line.entry import RunEntry
    from ..store.classes import StoredClass
    from ..store.database import Store


# runs on one board's round: a lecture hall of 300, with room. A post is its run's settings, curves and
# sample, a few KB, and a board of more than a few runs draws the best of them over the class's band
MAX_POSTS = 400


class Classes(Leading, Posting, Learners):
    """Every class on this server: the roster of open classes (roster.py) with their posts and rounds
    (posts.py), their lesson (lesson.py), their learners (learners.py), their challenge, corpus and
    shared view. Thread-safe: all sessions share one.

    Limits (each a BoardError in the learner's or teacher's language): `max_classes` open at
    once, `max_posts` runs on one board's round, `max_per_learner` posts by one learner in a round.
    A class ends `class_days` after it opened (a term), or when its teacher closes it; its code then
    says it has closed.
    """

    def __init__(self, max_classes: int = 20, max_posts: int = MAX_POSTS, max_per_learner: int = 3,
                 class_days: float = CLASS_DAYS, refresh_seconds: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, store: Store | None = None) -> None:
        super().__init__(max_classes, class_days, clock, store)  # the roster, whose classes every part reads
        self._learners_init()
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

        now = self._clock()

        def ours(at: float) -> float:
            # the store keeps wall-clock seconds, the classes a monotonic clock: the time since carries over
            return now - max(0.0, time.time() - at)

        board = ClassBoard(stored.code, stored.teacher_key, stored.salt, ours(stored.last_active), ours(stored.created),
                           pinned=stored.pinned, lesson_step=stored.lesson_step, revealed=set(stored.revealed),
                           challenge=Challenge(**stored.challenge) if stored.challenge else None,
                           lesson=ClassLesson(**stored.lesson) if stored.lesson else None,
                           corpus=ClassCorpus(**stored.corpus) if stored.corpus else None,
                           session=stored.session, sessions=stored.sessions,
                           led_at=ours(stored.led_at) if stored.led_at is not None else float("-inf"),
                           rounds=[Round(**r) for r in stored.rounds] or [Round(1, "", stored.created)],
                           runs=dict(stored.runs), learners={tag: ours(seen) for tag, seen in stored.learners.items()})
        board._saved_active = board.last_active
        answers = {number: {step: dict(given) for step, given in steps.items()}
                   for number, steps in stored.answers.items()}
        board.answers = answers.pop(board.session, {})
        board.past = answers
        current = board.rounds[-1].number
        for row in stored.posts:
            # the post as last read, its place in line unknown until the registry is asked again
            post = Post(row["post_id"], row["name"], row["run_id"], row["post_key"], row["run_key"], row["learner"],
                        row["corpus"], record_from_json(row["record"]), row["sample"], row["state"], row["step"],
                        row["hidden"], round=row["round"] or 1)
            if post.round == current:
                board.posts[post.post_id] = post
            else:
                board.archive.setdefault(post.round, []).append(post)
        self._classes[board.code] = board

    def set_corpus(self, code: str, teacher_key: str | None, corpus: ClassCorpus | None) -> None:
        """The text the class trains on (Train opened from the class starts from it), or none (None)."""
        board = self._as_teacher(code, teacher_key)
        if corpus is not None and (corpus.builtin is None) == (corpus.text is None):
            raise ValueError("a class's corpus is a built-in one or an uploaded text, one of the two")
        if corpus is not None and corpus.text is not None and len(corpus.text) > MAX_CORPUS_CHARS:
            raise BoardError("A class's text may be at most {limit:,} characters long.", limit=MAX_CORPUS_CHARS)
        with board._lock:
            board.corpus = corpus
            board.version += 1
        self._save(board, corpus=asdict(corpus) if corpus is not None else None)

    def class_corpus(self, code: str) -> ClassCorpus | None:
        return self.find(code).corpus

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
                board._view = _build(board, key, list(board.posts.values()))
                self.builds += 1
            return board._view

    def archived_view(self, code: str, number: int) -> BoardView:
        """An earlier round's board, as its posts were last read: read-only, its runs not read again."""
        board = self.find(code)
        with board._lock:
            posts = list(board.archive.get(number, []))
            return _build(board, (("round", number), len(posts)), posts)

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



def _build(board: ClassBoard, key: tuple, posts: list[Post]) -> BoardView:
    if board.pinned in {post.post_id for post in posts}:
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
                             tuple(board.challenge.refusals(post.corpus, record, board.corpus)) if board.challenge else (),
                             post.place))
    return BoardView(board.code, key, tuple(rows), board.challenge)
