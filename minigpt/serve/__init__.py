"""MiniGPT Lab's serving wing: runs for many sessions, the line they wait in, the store that keeps
them across restarts, and the classes. Its rooms import downwards only (tests/cross/test_layers.py):

    host   capacity of this box, turns at a shared model      (imports no other room)
    runs   what a run is (RunSpec, RunSnapshot), and where it trains: a thread, a child process, a Ray actor
    store  the database: schema and migrations, the writer, one module per kind of record
    classes  the class board, the lesson a teacher leads     (above the store)
    line   the registry of runs and the line for the slots  (above the store)
    server the face: open_server(settings) builds all of it

This module is the face the app imports: `open_server` and its settings, and the record types and
errors pages read. Each name is imported from its module on first use (PEP 562), so that Home draws
before torch has loaded; the TYPE_CHECKING block is the one list of the names, for type checkers and
for __getattr__ alike.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_names

if TYPE_CHECKING:
    from .classes.board import (CLASS_CORPUS, COLUMNS, RUN_LABEL, BoardView, Challenge, ClassCorpus, ClassLesson,
                                LessonSession, Round)
    from .classes.classes import MAX_CORPUS_CHARS, Classes
    from .classes.codes import CODE_ALPHABET, CODE_LENGTH
    from .classes.learners import PERSONAL_CODE_TRIES, new_learner_token, personal_code, run_key
    from .classes.lesson import MAX_LESSON_CHARS, MAX_OPTIONS, SESSION_GAP_HOURS, LessonNow
    from .classes.posts import MAX_NAME
    from .classes.roster import BoardError
    from .host.turns import TurnQueue
    from .line.entry import HeldSlot, NotOwnerError, RunEntry, RunLimitError
    from .line.registry import RunRegistry
    from .line.slowdown import Slowdown, slowdown
    from .runs.cluster import ClusterError, Size
    from .runs.recipe import SAMPLE_TEMPERATURE, RunSpec
    from .runs.run import INTERRUPTED, RunSnapshot
    from .line.stored import NoWeightsError
    from .server import (ADDRESS_ENV, CLASS_DAYS_ENV, RUNS_ON_ENV, TRAIN_IN_ENV, Database, Placement, Server,
                         ServerSettings, connect_database, open_server, prepare_training, writable_folder)
    from .store.engine import CONNECT_SECONDS
    from .store.faults import StoreError
    from .store.retention import CLASS_DAYS

__all__, __getattr__, __dir__ = lazy_names(__file__, __name__)
