"""The tables, written down once for each schema version: version 3's as the store uses them today
(`metadata` and its `*_table`s), versions 1 and 2 frozen as they made them (`version_1`, `version_2`),
so that a migration, and its test, starts from the tables it really met and never borrows today's.

A new version adds its tables here beside the others, freezes the ones it changes (as `version_1`
does), and a migration in migrations.py from the one before."""
from __future__ import annotations

import re

import sqlalchemy as sa

SCHEMA_VERSION = 3
# a run's (and a kept record's) id as the store accepts it: it names a checkpoint folder on disk too, so
# nothing that could climb out of it (a slash, dots) and no longer than its column
RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")

# ------------------------------------------------------------------------------ version 3 (current)
metadata = sa.MetaData()

meta_table = sa.Table(
    "minigpt_meta", metadata,
    sa.Column("name", sa.String(32), primary_key=True),          # "schema_version", so far the only one
    sa.Column("value", sa.String(64), nullable=False),          # text, whatever the setting
)
classes_table = sa.Table(
    "classes", metadata,
    sa.Column("code", sa.String(8), primary_key=True),           # what learners type to join
    sa.Column("teacher_key", sa.LargeBinary, nullable=False),   # keys.hashed: salt + digest
    sa.Column("salt", sa.LargeBinary, nullable=False),          # the class's salt for its learners' tags
    sa.Column("challenge", sa.JSON),                            # the board's Challenge as a dict; None: none set
    sa.Column("pinned", sa.String(32)),                         # the post_id drawn first on the board
    sa.Column("lesson_step", sa.Integer),                       # None: no lesson led yet
    sa.Column("revealed", sa.JSON, nullable=False),             # the lesson's steps whose answers are shown
    sa.Column("created", sa.Float, nullable=False),             # wall-clock seconds: it ends class_days after
    sa.Column("last_active", sa.Float, nullable=False),         # its teacher's last change or look
    # version 3: a class that lasts the term
    sa.Column("lesson", sa.JSON),                               # the teacher's ClassLesson as a dict; None: built-in
    sa.Column("corpus", sa.JSON),                               # the class's ClassCorpus as a dict; None: none set
    sa.Column("round", sa.Integer),                             # the board's current round (None: 1)
    sa.Column("session", sa.Integer),                           # the current lesson session (None: none yet)
    sa.Column("led_at", sa.Float),                              # wall clock of the teacher's last lead
)
posts_table = sa.Table(
    "posts", metadata,
    sa.Column("post_id", sa.String(32), primary_key=True),
    # indexed: a class's posts are read and deleted together
    sa.Column("code", sa.String(8), sa.ForeignKey("classes.code", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("position", sa.Integer, nullable=False),          # posting order
    sa.Column("name", sa.String(160), nullable=False),           # what the learner called it on the board
    # no foreign key to runs: a post carries its run's record, sample, state and step itself (below)
    sa.Column("run_id", sa.String(32), nullable=False, index=True),
    sa.Column("post_key", sa.LargeBinary, nullable=False),      # keys.hashed: the key handed out when posted
    sa.Column("run_key", sa.LargeBinary, nullable=False),       # keys.hashed of the run's owner key: withdraws too
    sa.Column("learner", sa.LargeBinary, nullable=False),       # keys.tag under the class's salt
    sa.Column("corpus", sa.String(300), nullable=False),        # the corpus's label as the board shows it
    sa.Column("record", sa.JSON, nullable=False),               # the run as the board compares it (codecs.record_json)
    sa.Column("sample", sa.Text, nullable=False),
    # the run's state and step as last read (update_post, not waited for): a restarted board draws them
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("step", sa.Integer, nullable=False),
    sa.Column("hidden", sa.Boolean, nullable=False),            # hidden by the teacher
    sa.Column("round", sa.Integer),                             # the round it was posted in (None: 1)
)
answers_table = sa.Table(  # one row per answer: thirty learners answering at once never rewrite one row
    "lesson_answers", metadata,
    sa.Column("code", sa.String(8), sa.ForeignKey("classes.code", ondelete="CASCADE"), primary_key=True),
    sa.Column("session", sa.Integer, primary_key=True),         # the lesson session it was given in
    sa.Column("step", sa.Integer, primary_key=True),            # the lesson's step answered
    sa.Column("learner", sa.LargeBinary(32), primary_key=True),  # keys.tag: one answer per learner and step
    sa.Column("option", sa.Integer, nullable=False),            # the chosen option's index
)
sessions_table = sa.Table(  # the course: each lesson session's date, lesson and steps (answers above)
    "lesson_sessions", metadata,
    sa.Column("code", sa.String(8), sa.ForeignKey("classes.code", ondelete="CASCADE"), primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True),
    sa.Column("started", sa.Float, nullable=False),             # wall clock
    sa.Column("lesson", sa.String(160), nullable=False),        # the lesson's name ("": the built-in one)
    sa.Column("steps", sa.JSON, nullable=False),                # the steps led, in the order first reached
)
rounds_table = sa.Table(  # the board's rounds: the posts of an earlier round are archived, not lost
    "rounds", metadata,
    sa.Column("code", sa.String(8), sa.ForeignKey("classes.code", ondelete="CASCADE"), primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(160), nullable=False),
    sa.Column("started", sa.Float, nullable=False),
)
learners_table = sa.Table(  # who has opened the class: a tag, never a token (a personal code checks against it)
    "learners", metadata,
    sa.Column("code", sa.String(8), sa.ForeignKey("classes.code", ondelete="CASCADE"), primary_key=True),
    sa.Column("learner", sa.LargeBinary(32), primary_key=True),  # keys.tag under the class's salt
    sa.Column("first_seen", sa.Float, nullable=False),
    sa.Column("last_seen", sa.Float, nullable=False),
)
learner_runs_table = sa.Table(  # the runs a learner started in the class, found again next week
    "learner_runs", metadata,
    sa.Column("code", sa.String(8), sa.ForeignKey("classes.code", ondelete="CASCADE"), primary_key=True),
    sa.Column("run_id", sa.String(32), primary_key=True),
    sa.Column("learner", sa.LargeBinary(32), nullable=False, index=True),
    sa.Column("salt", sa.LargeBinary(16), nullable=False),      # with the learner's token, derives the run's key
    sa.Column("created", sa.Float, nullable=False),
)
corpora_table = sa.Table(  # each text once, however many runs train on it
    "corpora", metadata,
    sa.Column("sha256", sa.String(64), primary_key=True),       # of the text, UTF-8: equal texts share a row
    sa.Column("text", sa.Text, nullable=False),
)
runs_table = sa.Table(
    "runs", metadata,
    sa.Column("run_id", sa.String(32), primary_key=True),
    sa.Column("owner_key", sa.LargeBinary, nullable=False),     # keys.hashed of the owner's key
    sa.Column("recipe", sa.JSON, nullable=False),               # what rebuilds it: configs, vocabulary, probe
    sa.Column("corpus_sha256", sa.String(64), sa.ForeignKey("corpora.sha256"), nullable=False),
    sa.Column("corpus_label", sa.String(300), nullable=False),  # the corpus's name as the run's page shows it
    sa.Column("state", sa.String(16), nullable=False),          # a run state's name; "waiting" when saved
    sa.Column("step", sa.Integer, nullable=False),
    sa.Column("elapsed", sa.Float, nullable=False),             # seconds trained
    sa.Column("tokens_per_sec", sa.Float, nullable=False),
    sa.Column("stopped_early", sa.Boolean, nullable=False),
    sa.Column("error", sa.JSON),                                # the run's error as the registry wrote it; None
    sa.Column("line_order", sa.Integer),                        # its place in line while it waits
    sa.Column("start_paused", sa.Boolean, nullable=False),      # it starts paused once its turn comes
    sa.Column("checkpoint_step", sa.Integer),                   # its newest checkpoint's step
    sa.Column("created", sa.Float, nullable=False),             # wall clock; orders runs with no place in line
    sa.Column("last_seen", sa.Float, nullable=False),           # its owner last opened it: retention counts from it
)
events_table = sa.Table(  # a run's logged steps (TrainEvent as JSON, codecs.event_json)
    "run_events", metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("step", sa.Integer, primary_key=True),            # a step logged again (after a resume) replaces it
    sa.Column("event", sa.JSON, nullable=False),
)
evals_table = sa.Table(
    "run_evals", metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("step", sa.Integer, primary_key=True),            # the step evaluated at
    # a loss that is not finite (a diverged run) is written as text: codecs.finite
    sa.Column("train_loss", sa.Float, nullable=False),
    sa.Column("val_loss", sa.Float, nullable=False),
    sa.Column("sample", sa.Text, nullable=False),               # the text sampled at that evaluation
)
blobs_table = sa.Table(  # checkpoints inside the database (any database but SQLite's file)
    "checkpoint_files", metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("step", sa.Integer, primary_key=True),            # a run keeps Retention.checkpoints steps
    sa.Column("name", sa.String(64), primary_key=True),         # the file's name in a checkpoint folder
    sa.Column("data", sa.LargeBinary, nullable=False),          # the file's bytes, whole
)
records_table = sa.Table(  # runs kept for comparison (lab.run_records.RunShelf)
    "kept_records", metadata,
    sa.Column("record_id", sa.String(32), primary_key=True),
    sa.Column("record", sa.JSON, nullable=False),               # codecs.record_json
    sa.Column("created", sa.Float, nullable=False),             # wall clock: retention counts from it
)


# ------------------------------------------------------------------------------------ version 2
def version_2() -> sa.MetaData:
    """Version 2's tables that version 3 changed, frozen: what _migrate_1_to_2 made and _migrate_2_to_3
    reads. A class lasted hours: one lesson, its answers keyed by step alone, one board with no rounds."""
    md = sa.MetaData()
    sa.Table(
        "classes", md,
        sa.Column("code", sa.String(8), primary_key=True),
        sa.Column("teacher_key", sa.LargeBinary, nullable=False),
        sa.Column("salt", sa.LargeBinary, nullable=False),
        sa.Column("challenge", sa.JSON),
        sa.Column("pinned", sa.String(32)),
        sa.Column("lesson_step", sa.Integer),
        sa.Column("revealed", sa.JSON, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("last_active", sa.Float, nullable=False),
    )
    sa.Table(
        "answers", md,
        sa.Column("code", sa.String(8), sa.ForeignKey("classes.code", ondelete="CASCADE"), primary_key=True),
        sa.Column("step", sa.Integer, primary_key=True),
        sa.Column("learner", sa.LargeBinary(32), primary_key=True),
        sa.Column("option", sa.Integer, nullable=False),
    )
    return md


# ------------------------------------------------------------------------------------ version 1
def version_1() -> sa.MetaData:
    """Version 1's tables, frozen: what migrations.create_version_1 makes and _migrate_1_to_2 reads. It
    had no answers table; its classes kept the lesson (step, revealed, every answer) in one JSON value,
    which every answer rewrote whole. A fresh MetaData each call: nothing here is bound to today's."""
    md = sa.MetaData()
    sa.Table(
        "minigpt_meta", md,
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("value", sa.String(64), nullable=False),
    )
    sa.Table(
        "classes", md,
        sa.Column("code", sa.String(8), primary_key=True),
        sa.Column("teacher_key", sa.LargeBinary, nullable=False),
        sa.Column("salt", sa.LargeBinary, nullable=False),
        sa.Column("challenge", sa.JSON),
        sa.Column("pinned", sa.String(32)),
        # {"step": int, "revealed": [step], "answers": {str(step): {tag.hex(): option}}}
        sa.Column("lesson", sa.JSON, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("last_active", sa.Float, nullable=False),
    )
    sa.Table(
        "posts", md,
        sa.Column("post_id", sa.String(32), primary_key=True),
        sa.Column("code", sa.String(8), sa.ForeignKey("classes.code", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("name", sa.String(160), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=False, index=True),
        sa.Column("post_key", sa.LargeBinary, nullable=False),
        sa.Column("run_key", sa.LargeBinary, nullable=False),
        sa.Column("learner", sa.LargeBinary, nullable=False),
        sa.Column("corpus", sa.String(300), nullable=False),
        sa.Column("record", sa.JSON, nullable=False),
        sa.Column("sample", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("step", sa.Integer, nullable=False),
        sa.Column("hidden", sa.Boolean, nullable=False),
    )
    # every table written out again, even where version 2 kept it as it was: nothing borrowed from today's
    _version_1_runs(md)
    sa.Table(
        "kept_records", md,
        sa.Column("record_id", sa.String(32), primary_key=True),
        sa.Column("record", sa.JSON, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
    )
    return md


def _version_1_runs(md: sa.MetaData) -> None:
    """Version 1's runs and what hangs off them: the corpora, their logged steps and checkpoints."""
    sa.Table(
        "corpora", md,
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("text", sa.Text, nullable=False),
    )
    sa.Table(
        "runs", md,
        sa.Column("run_id", sa.String(32), primary_key=True),
        sa.Column("owner_key", sa.LargeBinary, nullable=False),
        sa.Column("recipe", sa.JSON, nullable=False),
        sa.Column("corpus_sha256", sa.String(64), sa.ForeignKey("corpora.sha256"), nullable=False),
        sa.Column("corpus_label", sa.String(300), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("step", sa.Integer, nullable=False),
        sa.Column("elapsed", sa.Float, nullable=False),
        sa.Column("tokens_per_sec", sa.Float, nullable=False),
        sa.Column("stopped_early", sa.Boolean, nullable=False),
        sa.Column("error", sa.JSON),
        sa.Column("line_order", sa.Integer),
        sa.Column("start_paused", sa.Boolean, nullable=False),
        sa.Column("checkpoint_step", sa.Integer),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("last_seen", sa.Float, nullable=False),
    )
    sa.Table(
        "run_events", md,
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
        sa.Column("step", sa.Integer, primary_key=True),
        sa.Column("event", sa.JSON, nullable=False),
    )
    sa.Table(
        "run_evals", md,
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
        sa.Column("step", sa.Integer, primary_key=True),
        sa.Column("train_loss", sa.Float, nullable=False),
        sa.Column("val_loss", sa.Float, nullable=False),
        sa.Column("sample", sa.Text, nullable=False),
    )
    sa.Table(
        "checkpoint_files", md,
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
        sa.Column("step", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )
