"""How many runs may wait in line for a training slot, and when a run that joins is refused.

The line holds a place for every learner the server's classes have seen lately (each may press Start
at once: a lecture hall does) and one more for each training slot, never fewer than WAITING_FLOOR;
whoever runs the server may set the number instead (MINIGPT_MAX_WAITING). A place costs the server
next to nothing; what it truly cannot offer is a slot in time: a run that would start more than
LONGEST_WAIT_SECONDS from now, at the pace this server measured, is refused whatever the places.
The book (book.py) decides by these under its lock. No torch here.
"""
from __future__ import annotations

from collections.abc import Callable

from .entry import RunLimitError
from .waiting import Estimate

WAITING_FLOOR = 120  # places with no class on the server: visitors, a teacher trying runs
LONGEST_WAIT_SECONDS = 2 * 3600  # a run that would start later than this is refused: its lesson is over by then


def waiting_places(slots: int, class_learners: int, set_limit: int | None = None) -> int:
    """Runs that may wait in line: `set_limit` where whoever runs the server set one, else one place per
    learner seen lately and one per slot, at least WAITING_FLOOR."""
    if set_limit is not None:
        return set_limit
    return max(WAITING_FLOOR, class_learners + slots)


def refuse_if_no_room(waiting: int, places: int, wait: Callable[[], Estimate | None]) -> None:
    """RunLimitError where a run that joined a line of `waiting` runs now would find no place among
    `places`, or would start later than LONGEST_WAIT_SECONDS by a measured estimate (`wait()`, read
    only when needed: None before this server has a pace). A rough estimate refuses nobody: a guess
    is no reason to turn a learner away."""
    if waiting >= places:
        line_full(waiting, wait())
    found = wait()
    if found is not None and not found.rough and found.seconds > LONGEST_WAIT_SECONDS:
        raise RunLimitError("This server cannot start a new run soon enough: one that joined the line now would "
                            "start in about {minutes:.0f} minutes, and a run may wait at most {longest:.0f} minutes "
                            "here. Try again when the line is shorter.",
                            minutes=found.seconds / 60, longest=LONGEST_WAIT_SECONDS / 60)


def line_full(waiting: int, wait: Estimate | None) -> None:
    """Refuse a run the line has no place for, saying when one that joined now would start."""
    if wait is None:
        raise RunLimitError("All {waiting} places in the line for training on this server are taken. Try again when "
                            "the line is shorter.", waiting=waiting)
    raise RunLimitError("All {waiting} places in the line for training on this server are taken: a run that joined "
                        "now would start in about {minutes:.0f} minutes. Try again when the line is shorter.",
                        waiting=waiting, minutes=max(1.0, wait.seconds / 60))
