"""The teacher leading the class through the lesson: the step everyone follows, each step's quick
check question, the learners' answers and their tally, and the reveal of the right answer; over a
term, the lesson sessions (one each time the teacher leads after SESSION_GAP_HOURS away, or after
loading another lesson), whose steps and tallies make the course's log.

Learners answer the step's question anonymously; the teacher sees the counts, which the reveal
freezes: they are the class's answer until the teacher hides the answer again, which reopens the
question. A learner is kept only as their tag under the class's salt (roster.py): one answer per
learner per step, across a refresh and a restart. With a store, the step, the reveals and every
answer are written behind, and a new process opens with them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .board import LessonSession
from .roster import BoardError, ClassBoard, Roster, wall

if TYPE_CHECKING:
    from .board import ClassLesson

MAX_OPTIONS = 8     # a check question's options, at most
MAX_ANSWERS = 200   # learners' answers kept for one step of the lesson
# a lesson led again after this long away is the next lesson session: a week's lessons are apart by days,
# a break within one lesson by minutes
SESSION_GAP_HOURS = 6
MAX_LESSON_CHARS = 200_000  # a lesson file's text, at most (the app's own limit on a file is below it)


@dataclass(frozen=True)
class LessonNow:
    """Where the teacher is leading the class: a lesson step from 1 (None: not leading), the steps
    whose question has been revealed, and a number that changes with either, so that a follower
    redraws only when it changed."""

    step: int | None
    revealed: frozenset[int]
    version: int


class Leading(Roster):
    """The lesson's part of Classes: the teacher leads and reveals, learners follow and answer."""

    # -- the teacher --------------------------------------------------------------------------
    def lead(self, code: str, teacher_key: str | None, step: int | None) -> None:
        """Lead the class to lesson `step` (from 1), or stop leading (None)."""
        board = self._as_teacher(code, teacher_key)
        if step is not None and (not isinstance(step, int) or step < 1):
            raise BoardError("There is no lesson step {step}.", step=step)
        now = self._clock()
        with board._lock:
            started = step is not None and (now - board.led_at > SESSION_GAP_HOURS * 3600 or not board.sessions)
            if started:
                self._new_session(board, now)
            if step is not None:
                board.led_at = now
                steps = board.sessions[-1]["steps"]
                if step not in steps:
                    steps.append(step)
            if board.lesson_step != step or started:
                board.lesson_step = step
                board.lesson_version += 1  # the same step led again leaves the followers' pages as they are
            session = dict(board.sessions[-1]) if board.sessions else None
            shown = sorted(board.revealed)
        if session is not None and self.store is not None:
            self.store.classes.save_session(board.code, session)
        led = {"led_at": wall(board.led_at, now)} if step is not None else {}  # stopping keeps when it last led
        self._save(board, lesson_step=step, session=board.session, revealed=shown, **led)

    def _new_session(self, board: ClassBoard, now: float) -> None:
        """The class's next lesson session (its lock held): the last one's answers go to the course's log,
        and the questions open again."""
        if board.session:
            board.past[board.session] = board.answers
        board.session += 1
        board.answers, board.revealed = {}, set()
        name = board.lesson.name if board.lesson is not None else ""
        board.sessions.append({"number": board.session, "started": wall(now, now), "lesson": name, "steps": []})

    def set_lesson(self, code: str, teacher_key: str | None, lesson: ClassLesson | None) -> None:
        """The lesson the class follows: a teacher's file (`lesson`), or the built-in one (None). The
        teacher leads it from its first step; the next lead starts a new lesson session, whose answers
        are its own (another lesson's step 3 is another question)."""
        board = self._as_teacher(code, teacher_key)
        if lesson is not None and len(lesson.text) > MAX_LESSON_CHARS:
            raise BoardError("A lesson may be at most {limit:,} characters long.", limit=MAX_LESSON_CHARS)
        from dataclasses import asdict

        with board._lock:
            board.lesson = lesson
            board.lesson_step, board.led_at = None, float("-inf")
            board.lesson_version += 1  # followers redraw: their lesson has changed
        self._save(board, lesson=asdict(lesson) if lesson is not None else None, lesson_step=None, led_at=None)

    def class_lesson(self, code: str) -> ClassLesson | None:
        """The lesson the class follows, or None for the built-in one."""
        return self.find(code).lesson

    def course(self, code: str, teacher_key: str | None) -> tuple[LessonSession, ...]:
        """The class's lesson sessions, oldest first, with each one's tallies: the course's log."""
        board = self._as_teacher(code, teacher_key)
        with board._lock:
            answers = {**board.past, board.session: board.answers}
            return tuple(LessonSession(s["number"], s["started"], s["lesson"], tuple(s["steps"]),
                                       _tallies(answers.get(s["number"], {})))
                         for s in board.sessions)

    def reveal(self, code: str, teacher_key: str | None, step: int, revealed: bool = True) -> None:
        """Show the right answer of `step`'s question to the class, which freezes its counts (`answer`);
        or hide it again, which reopens the question: a learner's next change counts again."""
        board = self._as_teacher(code, teacher_key)
        with board._lock:
            if (step in board.revealed) != revealed:
                board.revealed.symmetric_difference_update({step})  # in or out, whichever it is not yet
                board.lesson_version += 1
            shown = sorted(board.revealed)  # copied under the lock: the store writes it after it is let go
        self._save(board, revealed=shown)

    def counts(self, code: str, teacher_key: str | None, step: int, options: int) -> list[int]:
        """How many learners chose each of the `options` options of `step`'s question: counts
        alone, for the teacher; no one is named."""
        board = self._as_teacher(code, teacher_key)
        with board._lock:
            chosen = list(board.answers.get(step, {}).values())  # the options alone: the tags stay behind
        # an option past `options` (a question shortened since) is kept but counted nowhere
        return [chosen.count(option) for option in range(options)]

    # -- learners -----------------------------------------------------------------------------
    def lesson(self, code: str) -> LessonNow:
        """Where the teacher leads the class now: cheap, what each follower polls."""
        board = self.find(code)
        with board._lock:
            # a frozen copy: the follower compares it with the last one it drew, while the teacher moves on
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
            # frozen once revealed: a learner who has seen the right answer could otherwise switch
            # to it, and the tally would show the answer, not what the class thought
            if step in board.revealed:
                return False
            given = board.answers.setdefault(step, {})
            if option is None:
                given.pop(tag, None)
            elif tag in given or len(given) < MAX_ANSWERS:  # a learner already counted may always change
                given[tag] = option
            else:
                raise BoardError("This question already has {limit} answers, the most one class keeps.",
                                 limit=MAX_ANSWERS)
            session = board.session
        if self.store is not None:  # None deletes the stored answer too
            self.store.classes.save_answer(board.code, session, step, tag, option)
        return True

    def answered(self, code: str, learner: str, step: int) -> int | None:
        """The option this learner's counted answer to `step`'s question chose, if any."""
        board = self.find(code)
        with board._lock:
            return board.answers.get(step, {}).get(board.learner_tag(learner))


def _tallies(answers: dict[int, dict[bytes, int]]) -> dict[int, tuple[int, ...]]:
    """How many learners chose each option, per step: counts as long as the highest option chosen."""
    tallies = {}
    for step, given in sorted(answers.items()):
        chosen = list(given.values())
        if chosen:
            tallies[step] = tuple(chosen.count(option) for option in range(max(chosen) + 1))
    return tallies
