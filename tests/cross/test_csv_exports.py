"""Every CSV the app exports opens as data in a spreadsheet (issue 49): the class board's table, a
run's history and the comparison, each built as its page builds it, with names that begin like a
formula (=, +, -, @, a tab, a carriage return; OWASP's list). Read back with Python's csv module, no
text cell begins with one of them, the text still reads as the learner typed it (behind an
apostrophe), and the numbers, negative ones too, stay numbers. The expected cells are written out
by hand.

    pytest tests/cross/test_csv_exports.py
"""
from __future__ import annotations

import ast
import csv
import io
import tomllib
from pathlib import Path

import pytest

from app.views.board import shown_table
from helpers.tiny import TEXT, tiny_config, tiny_plan, tiny_tokenizer
from helpers.waiting import wait_until
from minigpt import GPTConfig, TrainConfig, Trainer, build_model
from minigpt.lab.run_records import RunRecord, csv_text, history_table, results_table
from minigpt.serve.classes.classes import Classes
from minigpt.serve.line.registry import RunRegistry
from minigpt.serve.runs.thread import TrainingRun
from minigpt.train import TrainEvent

ROOT = Path(__file__).resolve().parents[2]
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
LINK = '=HYPERLINK("http://x","x")'
NAMES = [LINK, "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"]
UPLOAD = LINK + ".txt (uploaded)"  # an uploaded corpus is named by its file (app/state/corpora.py)
STEPS = 20


def read_back(text: str) -> list[list]:
    """The CSV's rows as a spreadsheet sees them: a quoted cell is text (str), an unquoted one a
    number (float), an empty one ''."""
    return list(csv.reader(io.StringIO(text, newline=""), quoting=csv.QUOTE_NONNUMERIC))


def assert_no_formula(rows: list[list]) -> None:
    for row in rows:
        for cell in row:
            assert not (isinstance(cell, str) and cell.startswith(FORMULA_STARTS)), (cell, row)


def column(rows: list[list], name: str) -> list:
    return [row[rows[0].index(name)] for row in rows[1:]]


def _build(run_id: str | None = None) -> TrainingRun:
    tok = tiny_tokenizer()
    cfg = TrainConfig(batch_size=4, block_size=8, max_steps=STEPS, warmup_steps=2, eval_interval=5, eval_iters=1)
    model = build_model(tiny_config(vocab_size=tok.vocab_size), 0)
    return TrainingRun(Trainer(model, tok, TEXT, cfg), sample_prompt="the", sample_chars=8, run_id=run_id)


@pytest.fixture
def registry():
    registry = RunRegistry(max_runs=4, idle_seconds=600, dispatcher=False)
    yield registry
    registry.stop_all()


def finished(registry: RunRegistry, corpus: str):
    entry = registry.submit(tiny_plan(), corpus=corpus, build=lambda run_id: _build(run_id))
    wait_until(lambda: entry.run.state == "finished", "the run to finish")
    return entry


@pytest.mark.trains
def test_the_class_boards_csv_neutralises_a_name_or_an_upload_that_begins_like_a_formula(registry):
    """app/views/board.py: the teacher's "Download the table (.csv)" is csv_text(shown_table(view)). Six
    learners post a run each under the six names; another run trained on an upload named like a
    formula, so the corpus differs and has its column. The board makes a tab or a carriage return
    a space and trims it (plain_name), so those two read "x" and "x (2)"."""
    classes = Classes()
    board = classes.open()
    runs, upload = [finished(registry, "course-zh") for _ in NAMES], finished(registry, UPLOAD)
    for i, (name, run) in enumerate(zip(NAMES, runs)):
        classes.post(board.code, run, run.key, name, learner=f"learner {i}", corpus="course-zh")
    classes.post(board.code, upload, upload.key, "plain", learner="another", corpus=UPLOAD)
    rows = read_back(csv_text(shown_table(classes.view(board.code, registry.get))))
    assert_no_formula(rows)
    assert column(rows, "run") == ["'" + LINK, "'+1+1", "'-2+3", "'@SUM(A1)", "x", "x (2)", "plain"]
    assert column(rows, "Corpus") == ["course-zh"] * 6 + ["'" + UPLOAD]
    assert column(rows, "steps") == [float(STEPS)] * 7
    for name in ("best val loss", "characters seen", "parameters", "time (s)"):
        assert all(isinstance(cell, float) for cell in column(rows, name)), name


@pytest.mark.trains
def test_a_runs_history_csv_holds_only_numbers_under_plain_column_names(registry):
    """app/views/training.py: "Download the history (.csv)" is csv_text(history_table(snapshot.history)).
    A history carries no text a learner typed: every cell reads back as a number, or empty where
    nothing was measured (val loss between evaluations)."""
    entry = finished(registry, "course-zh")
    rows = read_back(csv_text(history_table(entry.run.snapshot().history)))
    assert_no_formula(rows)
    assert rows[0] == ["step", "train_loss", "val_loss", "lr", "tokens_per_sec", "elapsed_s", "task_accuracy",
                       "task_solved"]
    assert column(rows, "step")[-1] == float(STEPS)
    assert all(isinstance(cell, float) or cell == "" for row in rows[1:] for cell in row)


def test_a_negative_number_in_a_history_stays_a_number_not_neutralised_text():
    """No loss is negative, but csv_text must leave every number alone: -0.5 is a number to a
    spreadsheet, and an apostrophe would make it text."""
    events = [TrainEvent(step=1, max_steps=2, train_loss=-0.5, lr=-1e-3, tokens_per_sec=10.0, elapsed=-2.0,
                         val_loss=-0.25)]
    rows = read_back(csv_text(history_table(events)))
    assert rows[1][:6] == [1.0, -0.5, -0.25, -0.001, 10.0, -2.0]


def test_the_comparisons_csv_neutralises_each_name_that_begins_like_a_formula_and_keeps_its_numbers():
    """app/parts/compare.py: the comparison's "Download the table (.csv)" is csv_text(results_table(picked)).
    A kept run's name is what the learner typed, a tab or a carriage return included."""
    records = []
    for i, name in enumerate(NAMES):
        events = [TrainEvent(step=s, max_steps=20, train_loss=t, lr=1e-3, tokens_per_sec=500.0, elapsed=s / 10,
                             val_loss=v) for s, t, v in ((10, 2.5, 2.6), (20, 1.5, 1.75))]
        snapshot = type("Snapshot", (), {"history": events, "elapsed": 2.0 + i, "tokens_per_sec": 500.0})
        records.append(RunRecord.of_run(name, UPLOAD, GPTConfig(vocab_size=30), TrainConfig(), snapshot))
    rows = read_back(csv_text(results_table(records)))
    assert_no_formula(rows)
    assert rows[0] == ["run", "steps", "train_loss", "val_loss", "best_val", "seconds", "tokens_per_sec"]
    assert column(rows, "run") == ["'" + LINK, "'+1+1", "'-2+3", "'@SUM(A1)", "'\tx", "'\rx"]
    assert rows[1][1:] == [20.0, 1.5, 1.75, 1.75, 2.0, 500.0]
    assert column(rows, "seconds") == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]


def test_every_csv_download_in_the_app_writes_through_csv_text_and_streamlits_own_is_off():
    """A new CSV button must go through csv_text too. And st.dataframe's own "Download as CSV"
    (Streamlit 1.67 writes each cell as it is, quoted, never neutralised) would export the same run
    names raw, from every table: the app turns it off."""
    downloads = {}
    for path in [*sorted((ROOT / "app").rglob("*.py")), *sorted((ROOT / "pages").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "download_button":
                source = ast.get_source_segment(path.read_text(encoding="utf-8"), node)
                if ".csv" in source:
                    data = next(k.value for k in node.keywords if k.arg == "data")
                    downloads[f"{path.name}:{node.lineno}"] = "csv_text(" in ast.unparse(data)
    assert {name.split(":")[0] for name in downloads} >= {"board.py", "training.py", "compare.py"}
    assert all(downloads.values()), downloads
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["client"]["disableDataExport"] is True


def test_the_course_csv_neutralises_a_lesson_file_named_like_a_formula(monkeypatch):
    """app/parts/course.py: the Course tab's "Download the course (.csv)" is csv_text(sessions_table(...)).
    A teacher's lesson file is named as its file was (a name like a formula, say); the counts stay
    numbers. The class follows a lesson of one step with a check of three options (the right one: B),
    led in two sessions (the second after the teacher loaded the file again)."""
    from app.parts import course
    from app.state import classroom
    from minigpt.serve import ClassLesson

    lesson = ClassLesson(LINK + ".md", "## One step\n\nview: next\npage: Generate\n\nWords.\n\n### Check\n\n"
                                       "? Which?\n\n- [ ] a\n- [x] b\n- [ ] c\n\nbecause: So.\n")
    classes = Classes()
    monkeypatch.setattr(classroom, "classes", lambda: classes)
    board = classes.open()
    for session in ([1, 1, 0], [2]):
        classes.set_lesson(board.code, board.teacher_key, lesson)  # the next lead begins the next session
        classes.lead(board.code, board.teacher_key, 1)
        for n, option in enumerate(session):
            classes.answer(board.code, f"learner-{n:04d}", 1, option)
    rows = read_back(csv_text(course.sessions_table(board.code, classes.course(board.code, board.teacher_key))))
    assert_no_formula(rows)
    assert rows[0] == ["session", "date", "lesson", "step", "title", "A", "B", "C", "answered", "right answer",
                       "chose it"]
    assert column(rows, "lesson") == ["'" + LINK + ".md"] * 2
    assert [row[rows[0].index("A"):] for row in rows[1:]] == [[1.0, 2.0, 0.0, 3.0, "B", 2.0],
                                                               [0.0, 0.0, 1.0, 1.0, "B", 0.0]]
