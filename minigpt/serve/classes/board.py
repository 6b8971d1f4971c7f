"""The class board: a teacher's class, the runs its learners post to it, and the one view of it
that everyone watching shares.

A teacher opens a class and gets a short code (what the class types or clicks: ?class=K7Q2) and
a secret key that only their browser holds (the server keeps a salted digest of it, enough to
check it: keys.py): with it, and only with it, entries are hidden or pinned, a challenge is set, the
class is led through the lesson (its step, each step's check question revealed) and the class
is closed. Learners answer the step's question anonymously; the teacher sees the counts, which the
reveal freezes: they are the class's answer until the teacher hides the answer again, which reopens
the question. A learner is a random token their browser keeps for the class, kept here only as a tag
under the class's own salt (keys.tag): one answer per learner per step, and the limit on posts, hold
across a refresh and a restart, and no tag links one browser's answers in two classes. A learner
posts a run of their own (the run's owner key proves it is theirs) under a name, and gets the
post's own key back: only that key withdraws it. A post shows the run's name, settings, curves and
latest sample, nothing else.

Posts refer to runs in the RunRegistry, which keeps training them; the board reads them without
an owner's key, so watching a board never keeps a run alive. `Classes.view` builds a class's
view at most once per `refresh_seconds`, and only when a posted run has moved: thirty viewers
share one computation. Everything is served from memory, bounded: classes per server, posts per
class and per learner, and a class ends `idle_seconds` after its last activity. With a `store`
(store.py), every change is written behind, and a new process opens with the classes that have not
ended: their posts, challenges, pins, the lesson's step, reveals and answers. A post's curve then
comes back from its run, which the registry reads from the store too. No Streamlit here.
"""
from __future__ import annotations

import itertools
import secrets
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

from ...lab.run_records import RunRecord, labels
from ...messages import N_, LabError, Message
from ..store import keys
from ..store.database import CLASS_IDLE_SECONDS

if TYPE_CHECKING:
    import pandas as pd

    from ...config import GPTConfig, TrainConfig
    from ..line.registry import RunEntry
    from ..store.database import Store, StoredClass

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I: read off a projector, typed on a phone
CODE_LENGTH = 4
MAX_NAME = 40  # characters of a post's name
MAX_OPTIONS = 8     # a check question's options, at most
MAX_ANSWERS = 200   # learners' answers kept for one step of the lesson
ACTIVITY_SAVE_SECONDS = 60.0  # a class's last activity is written to the store at most this often
EMOJI_JOINERS = {"\u200d", "\ufe0f"} | {chr(c) for c in range(0xE0020, 0xE0080)}  # ZWJ, emoji style, flag tags


class BoardError(LabError, LookupError):
    """A class that is not there (any more), a limit reached, or a key that does not fit."""


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
        return [row for row in self.rows if not row.hidden]

    def ranking(self) -> list[BoardRow]:
        """The visible runs that meet the challenge and have been evaluated, best first."""
        if self.challenge is None:
            return []
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
            elif len(row.record.steps) >= 2:
                groups.append([row])
        return [tuple(row.label for row in group) for group in groups if len(group) > 1]

    def table(self) -> pd.DataFrame:
        """One row per visible run: its name, the settings that differ between the runs, then
        COLUMNS (for the page and the CSV)."""
        import pandas as pd  # here: a page start-up does without pandas
        from ...lab.run_records import differing_settings
        rows = self.visible()
        records = [row.record for row in rows]
        settings = differing_settings(records).T if len(records) > 1 else pd.DataFrame(index=range(len(rows)))
        settings.index = range(len(rows))
        table = pd.DataFrame({"run": [row.label for row in rows]})
        table = pd.concat([table, settings], axis=1)
        for name, column in COLUMNS.items():
            table[name] = [column.value(row) for row in rows]
        return table


@dataclass(frozen=True)
class OpenedClass:
    """What opening a class gives its teacher, once: the code to share and the key to keep."""

    code: str
    teacher_key: str = field(repr=False)


@dataclass(frozen=True)
class LessonNow:
    """Where the teacher is leading the class: a lesson step from 1 (None: not leading), the steps
    whose question has been revealed, and a number that changes with either, so that a follower
    redraws only when it changed."""

    step: int | None
    revealed: frozenset[int]
    version: int


@dataclass(eq=False)
class ClassBoard:
    code: str
    teacher_key: bytes = field(repr=False)  # a salted digest (keys.hashed): the key itself is never kept
    salt: bytes = field(repr=False)          # the class's own, under which its learners are tagged (keys.tag)
    last_active: float
    posts: OrderedDict[str, Post] = field(default_factory=OrderedDict)
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
        return keys.matches(key, self.teacher_key)

    def learner_tag(self, learner: str) -> bytes:
        """What the class keeps of a learner's token: its digest under this class's salt."""
        return keys.tag(self.salt, learner)


def plain_name(name: str) -> str:
    """A post's name as plain text: control and format characters out (bidi overrides and
    isolates among them), spaces collapsed, at most MAX_NAME characters. The joiners inside an
    emoji sequence stay (the zero-width joiner of 👩‍👩‍👧‍👦, the emoji-style selector of ❤️, a
    flag's tags): each only after a symbol or another joiner. Markup stays as typed characters:
    every place that shows it escapes it."""
    kept: list[str] = []
    for c in name:
        if unicodedata.category(c)[0] != "C":
            kept.append(c)
        elif c in EMOJI_JOINERS and kept and (unicodedata.category(kept[-1]) in ("So", "Sk") or kept[-1] in EMOJI_JOINERS
                                               or kept[-1] in "#*0123456789"):
            kept.append(c)
        else:
            kept.append(" ")
    return " ".join("".join(kept).split())[:MAX_NAME].strip()


class Classes:
    """Every class on this server. Thread-safe: all sessions share one.

    Limits (each a BoardError in the learner's or teacher's language): `max_classes` open at
    once, `max_posts` runs on one board, `max_per_learner` posts by one learner on one board.
    A class ends `idle_seconds` after its last activity (a post, a withdrawal, anything its
    teacher does or looks at); its code then says it has closed, as after Close.
    """

    def __init__(self, max_classes: int = 20, max_posts: int = 40, max_per_learner: int = 3,
                 idle_seconds: float = CLASS_IDLE_SECONDS, refresh_seconds: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, store: Store | None = None) -> None:
        self.max_classes, self.max_posts, self.max_per_learner = max_classes, max_posts, max_per_learner
        self.idle_seconds, self.refresh_seconds = idle_seconds, refresh_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._classes: dict[str, ClassBoard] = {}
        self._closed: OrderedDict[str, None] = OrderedDict()  # codes that closed, to say so (bounded)
        self._positions = itertools.count()  # posting order, across classes: what the store sorts posts by
        self.builds = 0  # views built: what the board's cost is counted in
        self.store = store
        if store is not None:
            stored = store.load_classes()
            # posting order goes on after every position the store has used (withdrawn posts' too)
            self._positions = itertools.count(store.max_post_position() + 1)
            for board in stored:
                self._restore(board)

    def _restore(self, stored: StoredClass) -> None:
        """A class the store kept, as it was: its last activity as long ago as it was then."""
        from ..store.database import record_from_json

        since = max(0.0, time.time() - stored.last_active)
        board = ClassBoard(stored.code, stored.teacher_key, stored.salt, self._clock() - since,
                           pinned=stored.pinned, lesson_step=stored.lesson_step, revealed=set(stored.revealed),
                           answers={step: dict(given) for step, given in stored.answers.items()},
                           challenge=Challenge(**stored.challenge) if stored.challenge else None)
        board._saved_active = board.last_active
        for row in stored.posts:
            board.posts[row["post_id"]] = Post(row["post_id"], row["name"], row["run_id"], row["post_key"],
                                               row["run_key"], row["learner"], row["corpus"],
                                               record_from_json(row["record"]), row["sample"], row["state"],
                                               row["step"], row["hidden"])
        self._classes[board.code] = board

    # -- the teacher --------------------------------------------------------------------------
    def open(self) -> OpenedClass:
        """A new class with a fresh code and its teacher's key (given out this once: the server
        keeps a salted digest); BoardError when the server holds max_classes already."""
        self._end_idle()
        with self._lock:
            if len(self._classes) >= self.max_classes:
                raise BoardError("This server already has {limit} open classes, its limit. Close a class you no "
                                 "longer use, or try again when one has ended.", limit=self.max_classes)
            while True:
                code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
                if code not in self._classes and code not in self._closed:  # an old link must not open a new class
                    break
            key = keys.new_key()
            board = self._classes[code] = ClassBoard(code, keys.hashed(key), secrets.token_bytes(16), self._clock())
        if self.store is not None:
            self.store.save_class(code, board.teacher_key, board.salt, _wall(board.last_active, self._clock()))
            board._saved_active = board.last_active
        return OpenedClass(code, key)

    def close(self, code: str, teacher_key: str | None, *, erase: bool = False) -> list[str]:
        """Close the class: its code says so from now on, and its rows leave the store. `erase`: the
        runs posted to it go from the store too (the teacher erases the class's data). Returns the
        posted runs' ids."""
        board = self._as_teacher(code, teacher_key)
        with self._lock:
            self._classes.pop(board.code, None)
            self._remember_closed(board.code)
        with board._lock:
            posted = [post.run_id for post in board.posts.values()]
        if self.store is not None:
            self.store.delete_class(board.code, with_runs=erase)
        return posted

    def hide(self, code: str, teacher_key: str | None, post_id: str, hidden: bool = True) -> None:
        board = self._as_teacher(code, teacher_key)
        with board._lock:
            if post_id in board.posts:
                board.posts[post_id].hidden = hidden
                board.version += 1
        if self.store is not None and post_id in board.posts:
            self.store.update_post(post_id, hidden=hidden, wait=True)

    def pin(self, code: str, teacher_key: str | None, post_id: str | None) -> None:
        """Pin one post to the top of the board (None: unpin)."""
        board = self._as_teacher(code, teacher_key)
        with board._lock:
            board.pinned = post_id if post_id in board.posts else None
            board.version += 1
        self._save(board, pinned=board.pinned)

    def set_challenge(self, code: str, teacher_key: str | None, challenge: Challenge | None) -> None:
        board = self._as_teacher(code, teacher_key)
        with board._lock:
            board.challenge = challenge
            board.version += 1
        self._save(board, challenge=asdict(challenge) if challenge is not None else None)

    def lead(self, code: str, teacher_key: str | None, step: int | None) -> None:
        """Lead the class to lesson `step` (from 1), or stop leading (None)."""
        board = self._as_teacher(code, teacher_key)
        if step is not None and (not isinstance(step, int) or step < 1):
            raise BoardError("There is no lesson step {step}.", step=step)
        with board._lock:
            if board.lesson_step != step:
                board.lesson_step = step
                board.lesson_version += 1
        self._save(board, lesson_step=step)

    def reveal(self, code: str, teacher_key: str | None, step: int, revealed: bool = True) -> None:
        """Show the right answer of `step`'s question to the class, which freezes its counts (`answer`);
        or hide it again, which reopens the question: a learner's next change counts again."""
        board = self._as_teacher(code, teacher_key)
        with board._lock:
            if (step in board.revealed) != revealed:
                board.revealed.symmetric_difference_update({step})
                board.lesson_version += 1
            shown = sorted(board.revealed)
        self._save(board, revealed=shown)

    def counts(self, code: str, teacher_key: str | None, step: int, options: int) -> list[int]:
        """How many learners chose each of the `options` options of `step`'s question: counts
        alone, for the teacher; no one is named."""
        board = self._as_teacher(code, teacher_key)
        with board._lock:
            chosen = list(board.answers.get(step, {}).values())
        return [chosen.count(option) for option in range(options)]

    # -- learners -----------------------------------------------------------------------------
    def lesson(self, code: str) -> LessonNow:
        """Where the teacher leads the class now: cheap, what each follower polls."""
        board = self.find(code)
        with board._lock:
            return LessonNow(board.lesson_step, frozenset(board.revealed), board.lesson_version)

    def answer(self, code: str, learner: str, step: int, option: int | None) -> bool:
        """A learner's answer to `step`'s question (None takes it back); a later answer replaces
        an earlier one. It counts with no name; `learner` only keeps one answer per learner. Once
        the step is revealed its counts are the class's answer: a change is not counted (False),
        until the teacher reopens the question."""
        board = self.find(code)
        if option is not None and not (isinstance(option, int) and 0 <= option < MAX_OPTIONS):
            raise BoardError("That is not one of the question's options.")
        tag = board.learner_tag(learner)
        with board._lock:
            if step in board.revealed:
                return False
            given = board.answers.setdefault(step, {})
            if option is None:
                given.pop(tag, None)
            elif tag in given or len(given) < MAX_ANSWERS:
                given[tag] = option
            else:
                raise BoardError("This question already has {limit} answers, the most one class keeps.",
                                 limit=MAX_ANSWERS)
        if self.store is not None:
            self.store.save_answer(board.code, step, tag, option)
        return True

    def answered(self, code: str, learner: str, step: int) -> int | None:
        """The option this learner's counted answer to `step`'s question chose, if any."""
        board = self.find(code)
        with board._lock:
            return board.answers.get(step, {}).get(board.learner_tag(learner))

    def post(self, code: str, entry: RunEntry, run_key: str | None, name: str, *, learner: str,
             corpus: str) -> tuple[str, str]:
        """Post the run `entry` (its owner's key proves it is the poster's) under `name`; returns
        the post's id and its key, which alone withdraws it (None where the run was posted already:
        posting it again renames its post, from this visit or a later one with the run's key)."""
        board = self.find(code)
        if not entry.is_owner(run_key):
            raise BoardError("Only the browser session that started a run can post it to the class board.")
        name = plain_name(name) or entry.run_id
        tag = board.learner_tag(learner)
        with board._lock:
            for post in board.posts.values():
                if post.run_id == entry.run_id and (post.learner == tag or keys.matches(run_key, post.run_key)):
                    post.name = plain_name(name)
                    board.version += 1
                    board.last_active = self._clock()
                    break
            else:
                if len(board.posts) >= self.max_posts:
                    raise BoardError("This class board already shows {limit} runs, its limit.", limit=self.max_posts)
                if sum(p.learner == tag for p in board.posts.values()) >= self.max_per_learner:
                    raise BoardError("You have posted {limit} runs to this board, the most one learner may: "
                                     "withdraw one to post another.", limit=self.max_per_learner)
                post_key = keys.new_key()
                post = Post(secrets.token_urlsafe(9), name, entry.run_id, keys.hashed(post_key), keys.hashed(run_key),
                            tag, corpus, *_read(entry, name))
                board.posts[post.post_id] = post
                board.version += 1
                board.last_active = self._clock()
                self._save_post(board, post)
                return post.post_id, post_key
        if self.store is not None:
            self.store.update_post(post.post_id, name=post.name, wait=True)
        return post.post_id, None

    def withdraw(self, code: str, post_id: str, key: str | None) -> None:
        """Take a post off the board: `key` is the post's own key, or the posted run's owner key
        (which a learner's address keeps across a refresh)."""
        board = self.find(code)
        with board._lock:
            post = board.posts.get(post_id)
            if post is None:
                return
            if not (keys.matches(key, post.key) or keys.matches(key, post.run_key)):
                raise BoardError("Only the learner who posted a run can withdraw it.")
            del board.posts[post_id]
            if board.pinned == post_id:
                board.pinned = None
            board.version += 1
            board.last_active = self._clock()
        if self.store is not None:
            self.store.delete_post(post_id)

    # -- everyone -----------------------------------------------------------------------------
    def find(self, code: str | None, teacher_key: str | None = None) -> ClassBoard:
        """The open class of this code (its teacher's key also counts as activity); BoardError
        for a code that is unknown or has closed, each saying which."""
        self._end_idle()
        code = (code or "").strip().upper()
        with self._lock:
            board = self._classes.get(code)
            if board is None:
                if code in self._closed:
                    raise BoardError("The class {code} has closed. Its teacher can start a new one.", code=code)
                if len(code) == CODE_LENGTH and all(c in CODE_ALPHABET for c in code):
                    raise BoardError("There is no class {code} on this server. Check the code, or start a class.",
                                     code=code)
                raise BoardError("That is not a class code: a code is {length} letters and digits, such as the one "
                                 "your teacher shows.", length=CODE_LENGTH)
            if board.is_teacher(teacher_key):
                board.last_active = self._clock()
        self._save_activity(board)
        return board

    def view(self, code: str, lookup: Callable[[str], RunEntry | None],
             place: Callable[[RunEntry], int | None] = lambda entry: None) -> BoardView:
        """The class's board now, from the runs as `lookup` finds them (a registry's get, without a
        key), and for a run waiting for a training slot, its `place` in line (a registry's place).
        Built again at most once per refresh_seconds, and only when something shown changed."""
        board = self.find(code)
        with board._lock:
            now = self._clock()
            if board._view is not None and board._view.key[0] == board.version and \
                    now - board._checked < self.refresh_seconds:  # a change on the board itself shows at once
                return board._view
            board._checked = now
            moved = False
            for post in board.posts.values():
                entry = lookup(post.run_id)
                if entry is None:
                    if post.state != "released":
                        post.state, moved = "released", True
                    continue
                snap = entry.run.snapshot()
                at = place(entry) if snap.state == "waiting" else None
                if (snap.step, snap.state, len(snap.history), at) != (post.step, post.state, len(post.record.steps),
                                                                       post.place):
                    state = post.state
                    post.record, post.sample, post.state, post.step = _read(entry, post.name, snap)
                    post.place, moved = at, True
                    if post.state != state:  # the store keeps what the board shows of a run whose own rows go
                        self._save_post(board, post, wait=False)
            key = (board.version,
                   tuple((p.post_id, p.step, p.state, len(p.record.steps), p.place) for p in board.posts.values()))
            if board._view is None or moved or board._view.key != key:
                board._view = _build(board, key)
                self.builds += 1
            return board._view

    # -- upkeep -------------------------------------------------------------------------------
    def _as_teacher(self, code: str, teacher_key: str | None) -> ClassBoard:
        board = self.find(code)
        if not board.is_teacher(teacher_key):
            raise BoardError("Only the browser that started this class can change it.")
        board.last_active = self._clock()
        self._save_activity(board)
        return board

    def _save(self, board: ClassBoard, **values) -> None:
        """A change the teacher made, in the store (with the class's last activity)."""
        if self.store is not None:
            board._saved_active = board.last_active
            self.store.update_class(board.code, last_active=_wall(board.last_active, self._clock()), **values)

    def _save_activity(self, board: ClassBoard) -> None:
        """The class's last activity, in the store once a minute at most: it ends idle_seconds after it."""
        if self.store is not None and board.last_active - board._saved_active >= ACTIVITY_SAVE_SECONDS:
            board._saved_active = board.last_active
            self.store.update_class(board.code, last_active=_wall(board.last_active, self._clock()), wait=False)

    def _save_post(self, board: ClassBoard, post: Post, wait: bool = True) -> None:
        if self.store is None:
            return
        from ..store.database import record_json

        self.store.save_post(board.code, {
            "post_id": post.post_id, "position": next(self._positions), "name": post.name, "run_id": post.run_id,
            "post_key": post.key, "run_key": post.run_key, "learner": post.learner, "corpus": post.corpus,
            "record": record_json(post.record), "sample": post.sample, "state": post.state, "step": post.step,
            "hidden": post.hidden}) if wait else self.store.update_post(
            post.post_id, record=record_json(post.record), sample=post.sample, state=post.state, step=post.step)

    def _remember_closed(self, code: str) -> None:
        self._closed[code] = None
        while len(self._closed) > 4 * self.max_classes:
            self._closed.popitem(last=False)

    def _end_idle(self) -> None:
        cutoff = self._clock() - self.idle_seconds
        with self._lock:
            ended = [c for c, b in self._classes.items() if b.last_active < cutoff]
            for code in ended:
                del self._classes[code]
                self._remember_closed(code)
        for code in ended if self.store is not None else ():
            self.store.delete_class(code)


def _wall(at: float, now: float) -> float:
    """A time on the classes' clock as wall-clock seconds, what the store keeps."""
    return time.time() - max(0.0, now - at)


def _same_curve(a: RunRecord, b: RunRecord) -> bool:
    ours, theirs = dict(zip(a.steps, a.train_loss)), dict(zip(b.steps, b.train_loss))
    both = ours.keys() & theirs.keys()
    return len(both) >= 2 and all(ours[step] == theirs[step] for step in both)


def _read(entry: RunEntry, name: str, snap=None) -> tuple[RunRecord, str, str, int]:
    """A run's record (as the comparison keeps it), latest sample, state and step, read now."""
    snap = snap if snap is not None else entry.run.snapshot()
    trainer = entry.run.trainer
    record = RunRecord.of_run(name, entry.corpus, trainer.model_config, trainer.cfg, snap)
    return record, snap.evals[-1].sample if snap.evals else "", snap.state, snap.step


def _build(board: ClassBoard, key: tuple) -> BoardView:
    posts = list(board.posts.values())
    if board.pinned in board.posts:
        posts.sort(key=lambda p: p.post_id != board.pinned)  # stable: the rest keep posting order
    names = labels([replace(p.record, name=p.name) for p in posts])
    rows = []
    for post, label in zip(posts, names):
        record = replace(post.record, name=label)
        train = record.train
        rows.append(BoardRow(post.post_id, post.run_id, label, record, post.sample, post.state, post.step,
                             record.model.num_params(),
                             post.step * train.batch_size * train.block_size * train.grad_accum,
                             post.hidden, post.post_id == board.pinned,
                             tuple(board.challenge.refusals(post.corpus, record)) if board.challenge else (),
                             post.place))
    return BoardView(board.code, key, tuple(rows), board.challenge)
