"""What the line's book remembers beside the runs it holds: the runs it let go (who replaced them, why
they went, which the store did not have either), and the runs kept in their small form (their sizes,
and the tries at reading an ended run's weights). Neither locks: the book's lock guards both.
"""
from __future__ import annotations

from collections import OrderedDict

from .entry import RunEntry

MAX_REMEMBERED = 256  # replaced and forgotten runs remembered, for watchers and for their owners' notices
KEEP_TRIES = 3         # reads of a finished run's weights before its process is let go without a small form


class LetGo:
    """Runs the registry let go, each remembered for the pages that still point at it."""

    def __init__(self) -> None:
        self._successors: OrderedDict[str, str] = OrderedDict()  # replaced run id -> its replacement's id
        self._gone: OrderedDict[str, str] = OrderedDict()        # forgotten run id -> why (a gone_reason)
        self._missing: OrderedDict[str, None] = OrderedDict()    # ids the store did not have either

    def went(self, entry: RunEntry, successor: RunEntry | None, reason: str | None) -> None:
        if successor is not None:
            _remember(self._successors, entry.run_id, successor.run_id)
        if reason is not None:
            _remember(self._gone, entry.run_id, reason)

    def newest(self, run_id: str) -> str | None:
        """The id of the run that replaced `run_id`, following every replacement; None if none did."""
        seen = set()
        while run_id in self._successors and run_id not in seen:  # `seen`: a cycle cannot hang a page
            seen.add(run_id)
            run_id = self._successors[run_id]
        return run_id if seen else None

    def reason(self, run_id: str) -> str | None:
        return self._gone.get(run_id)

    def missing(self, run_id: str) -> None:
        _remember(self._missing, run_id, None)  # a link that leads nowhere asks the database once, not per rerun

    def not_in_store(self, run_id: str) -> bool:
        """Not worth asking the store for: it said so, or the run was replaced (watchers follow its owner)."""
        return run_id in self._missing or run_id in self._successors


class KeptRuns:
    """Runs held in their small form (or read from the store): their sizes within `kept_bytes`."""

    def __init__(self, entries: dict[str, RunEntry], kept_bytes: int) -> None:
        self._entries = entries  # the book's own runs, read here only: a kept run it let go is skipped
        self.kept_bytes = kept_bytes
        self._kept: dict[str, int] = {}        # run id -> bytes, for runs swapped for their small form
        self._keep_tries: dict[str, int] = {}  # run id -> failed reads of its weights so far

    def __contains__(self, run_id: str) -> bool:
        return run_id in self._kept

    def add(self, run_id: str, nbytes: int) -> None:
        self._kept[run_id] = nbytes  # 0: its weights could not be had, it holds no memory
        self._keep_tries.pop(run_id, None)

    def tried(self, run_id: str) -> bool:
        return run_id in self._keep_tries

    def swap(self, entry: RunEntry, kept) -> bool:
        """`entry`'s ended run swapped for its small form `kept`, or given up on after KEEP_TRIES failed
        reads (None: its weights could not be had); False: try again at the next look."""
        if kept is None:
            tries = self._keep_tries[entry.run_id] = self._keep_tries.get(entry.run_id, 0) + 1
            if tries < KEEP_TRIES:
                return False
            self.add(entry.run_id, 0)  # its weights cannot be had: its process is let go all the same
        else:
            entry.swap(kept)
            self.add(entry.run_id, kept.nbytes())
        return True

    def drop(self, run_id: str) -> None:
        self._kept.pop(run_id, None)
        self._keep_tries.pop(run_id, None)

    def past_budget(self) -> list[RunEntry]:
        """Kept runs past kept_bytes, the longest unseen first: the ones to let go."""
        total = sum(self._kept.values())
        dropped = []
        for entry in sorted((self._entries[i] for i in self._kept if i in self._entries), key=lambda e: e.last_seen):
            if total <= self.kept_bytes:
                break  # the rest fit: the runs seen most lately stay
            total -= self._kept[entry.run_id]
            dropped.append(entry)
        return dropped


def _remember(memory: OrderedDict, key: str, value: str) -> None:
    memory[key] = value
    while len(memory) > MAX_REMEMBERED:
        memory.popitem(last=False)  # the oldest first: a notice that old has been read long since
