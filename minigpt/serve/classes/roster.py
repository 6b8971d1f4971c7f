"""The open classes on this server, each found by its code: opening a class (a fresh code, and a key
for its teacher), finding it, telling its teacher from its learners, closing it, and ending it once
its term is over.

A teacher opens a class and gets a short code (codes.py) and a secret key that only their browser
holds: the server keeps a salted digest of it, enough to check it (store/keys.py). A learner is a
random token their browser keeps for the class, kept here only as a tag under the class's own salt
(keys.tag). Everything is held in memory, bounded: `max_classes` per server, and a class ends
`class_days` after it opened (a term), unless its teacher closes it first: idle weeks between lessons
never end it. With a `store`, every change is written behind.
"""
from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...messages import LabError
from ..store import keys
from .board import Round
from .codes import CODE_LENGTH, is_code, new_code

if TYPE_CHECKING:
    from ..store.database import Store
    from .board import BoardView, Challenge, ClassCorpus, ClassLesson, Post

ACTIVITY_SAVE_SECONDS = 60.0  # a class's last activity is written to the store at most this often
DAY_SECONDS = 86400


class BoardError(LabError, LookupError):
    """A class that is not there (any more), a limit reached, or a key that does not fit."""


@dataclass(frozen=True)
class OpenedClass:
    """What opening a class gives its teacher, once: the code to share and the key to keep."""

    code: str
    teacher_key: str = field(repr=False)


@dataclass(eq=False)
class ClassBoard:
    """One open class: who may change it, and what each part of Classes keeps of it (its posts and
    pin, its challenge, the lesson's step, reveals and answers, its rounds and lesson sessions, its
    learners). Its lock guards all of it."""

    code: str
    teacher_key: bytes = field(repr=False)  # a salted digest (keys.hashed): the key itself is never kept
    salt: bytes = field(repr=False)          # the class's own, under which its learners are tagged (keys.tag)
    last_active: float
    opened: float = 0.0           # on the classes' clock: the class ends class_days after it
    posts: OrderedDict[str, Post] = field(default_factory=OrderedDict)  # the current round's
    archive: dict[int, list[Post]] = field(default_factory=dict)       # an earlier round's posts, by round
    rounds: list[Round] = field(default_factory=list)
    lesson: ClassLesson | None = None   # the teacher's lesson file; None: the built-in lesson
    corpus: ClassCorpus | None = None
    session: int = 0              # the current lesson session (0: none led yet)
    sessions: list[dict] = field(default_factory=list)  # each session's number, started, lesson and steps
    led_at: float = float("-inf")  # the teacher's last lead, on the classes' clock: a long gap starts a session
    past: dict[int, dict[int, dict[bytes, int]]] = field(default_factory=dict)  # earlier sessions' answers
    learners: dict[bytes, float] = field(default_factory=dict)   # tag -> when the store last had them seen
    runs: dict[str, tuple[bytes, bytes]] = field(default_factory=dict)  # run id -> (learner's tag, key salt)
    pinned: str | None = None
    challenge: Challenge | None = None
    version: int = 0              # bumped by every change the registry's runs do not make
    lesson_step: int | None = None  # the lesson step the teacher leads the class through
    lesson_version: int = 0
    answers: dict[int, dict[bytes, int]] = field(default_factory=dict)  # step -> {learner's tag: option}
    revealed: set[int] = field(default_factory=set)  # steps whose right answer the teacher has shown
    _view: BoardView | None = field(default=None, repr=False)
    _checked: float = field(default=float("-inf"), repr=False)
    _saved_active: float = field(default=float("-inf"), repr=False)  # last_active as the store last had it
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def is_teacher(self, key: str | None) -> bool:
        # compared digest to digest in constant time (keys.matches): a wrong key learns nothing of the right one
        return keys.matches(key, self.teacher_key)

    def learner_tag(self, learner: str) -> bytes:
        """What the class keeps of a learner's token: its digest under this class's salt."""
        # under the class's own salt, not a server-wide one: one browser's tags in two classes
        # cannot be matched up, so no answer links a learner across classes
        return keys.tag(self.salt, learner)


class Roster:
    """The open classes, by code. Thread-safe: all sessions share one.

    Limits (each a BoardError in the learner's or teacher's language): `max_classes` open at once.
    A class ends `class_days` after it opened; its code then says it has closed, as after Close.
    """

    def __init__(self, max_classes: int, class_days: float, clock: Callable[[], float],
                 store: Store | None) -> None:
        self.max_classes, self.class_days = max_classes, class_days
        self._clock = clock
        self._lock = threading.Lock()  # the dicts' own: never held while a class's lock is taken, nor inside one
        self._classes: dict[str, ClassBoard] = {}
        self._closed: OrderedDict[str, None] = OrderedDict()  # codes that closed, to say so (bounded)
        self.store = store

    def open(self) -> OpenedClass:
        """A new class with a fresh code and its teacher's key (given out this once: the server
        keeps a salted digest); BoardError when the server holds max_classes already."""
        self._end_term()  # an ended class's place is free before the limit is counted
        with self._lock:
            if len(self._classes) >= self.max_classes:
                raise BoardError("This server already has {limit} open classes, its limit. Close a class you no "
                                 "longer use, or try again when one has ended.", limit=self.max_classes)
            # an old link must not open a new class: a closed code is not handed out again
            code = new_code(lambda code: code in self._classes or code in self._closed)
            key = keys.new_key()
            now = self._clock()
            board = self._classes[code] = ClassBoard(code, keys.hashed(key), secrets.token_bytes(16), now, now)
            board.rounds.append(Round(1, "", wall(now, now)))  # a board starts in its first round
        if self.store is not None:
            self.store.classes.save(code, board.teacher_key, board.salt, wall(board.last_active, self._clock()))
            board._saved_active = board.last_active
        return OpenedClass(code, key)

    def close(self, code: str, teacher_key: str | None, *, erase: bool = False) -> list[str]:
        """Close the class: its code says so from now on, and its rows leave the store. `erase`: the
        runs posted to it, and those its learners started in it, go from the store too (the teacher
        erases the class's data). Returns those runs' ids, for the caller to let go of."""
        board = self._as_teacher(code, teacher_key)
        with self._lock:
            self._classes.pop(board.code, None)
            self._remember_closed(board.code)
        with board._lock:  # the caller forgets them when it erases: every round's posts and every run noted
            posted = [post.run_id for post in board.posts.values()]
            posted += [post.run_id for posts in board.archive.values() for post in posts]
            posted = list(dict.fromkeys([*posted, *board.runs]))
        if self.store is not None:
            self.store.classes.delete(board.code, with_runs=erase)
        return posted

    def find(self, code: str | None, teacher_key: str | None = None) -> ClassBoard:
        """The open class of this code (its teacher's key also counts as activity); BoardError
        for a code that is unknown or has closed, each saying which."""
        self._end_term()
        code = (code or "").strip().upper()  # a code typed in lower case, or pasted with a space, still finds it
        with self._lock:
            board = self._classes.get(code)
            if board is None:
                if code in self._closed:
                    raise BoardError("The class {code} has closed. Its teacher can start a new one.", code=code)
                if is_code(code):
                    raise BoardError("There is no class {code} on this server. Check the code, or start a class.",
                                     code=code)
                raise BoardError("That is not a class code: a code is {length} letters and digits, such as the one "
                                 "your teacher shows.", length=CODE_LENGTH)
            if board.is_teacher(teacher_key):
                # a teacher's look counts as activity, a learner's does not: a class lives while its teacher is there
                board.last_active = self._clock()
        self._save_activity(board)
        return board

    def _as_teacher(self, code: str, teacher_key: str | None) -> ClassBoard:
        board = self.find(code)
        if not board.is_teacher(teacher_key):
            raise BoardError("Only the browser that started this class can change it.")
        board.last_active = self._clock()  # every change the teacher makes keeps the class open
        self._save_activity(board)
        return board

    def _save(self, board: ClassBoard, **values) -> None:
        """A change the teacher made, in the store (with the class's last activity)."""
        if self.store is not None:
            board._saved_active = board.last_active  # this write carries the activity: the next minute's is spared
            self.store.classes.update(board.code, last_active=wall(board.last_active, self._clock()), **values)

    def ends_at(self, code: str) -> float:
        """When the class ends, in wall-clock seconds (its teacher may close it sooner): a browser keeps
        the class's cookies until then."""
        board = self.find(code)
        return wall(board.opened, self._clock()) + self.class_days * DAY_SECONDS

    def _save_activity(self, board: ClassBoard) -> None:
        """The class's last activity, in the store once a minute at most (what a teacher erasing stale
        classes reads; it no longer ends the class)."""
        if self.store is not None and board.last_active - board._saved_active >= ACTIVITY_SAVE_SECONDS:
            board._saved_active = board.last_active
            # not waited for: a page's every look at its class would otherwise wait on the database
            self.store.classes.update(board.code, last_active=wall(board.last_active, self._clock()), wait=False)

    def _remember_closed(self, code: str) -> None:
        self._closed[code] = None
        while len(self._closed) > 4 * self.max_classes:  # the oldest closed codes are forgotten first
            self._closed.popitem(last=False)

    def _end_term(self) -> None:
        # called on every open and find: no timer thread, a class ends when someone next asks
        cutoff = self._clock() - self.class_days * DAY_SECONDS
        with self._lock:
            ended = [c for c, b in self._classes.items() if b.opened < cutoff]
            for code in ended:
                del self._classes[code]
                self._remember_closed(code)
        for code in ended if self.store is not None else ():  # outside the lock: no find waits on the store
            self.store.classes.delete(code)


def wall(at: float, now: float) -> float:
    """A time on the classes' clock as wall-clock seconds, what the store keeps."""
    # the classes' clock is monotonic (it never jumps with the system's), the store's must outlive the process
    return time.time() - max(0.0, now - at)

