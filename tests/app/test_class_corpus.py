"""app/parts/class_corpus.py and the class's text on Train (app/state/train_settings.py): the teacher
sets a built-in corpus or uploads a text for the class on the board's controls; a bad file gets
the upload's own message and the class keeps its text; Train opened from the class starts from it,
and a run started there trains on that text. Each person is an AppTest session.

    pytest tests/app/test_class_corpus.py
"""
from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

from helpers.apptest import POEM, home, page, tiny_settings, unescaped
from app.chrome.site import BOARD, HOME, TRAIN
from app.parts import class_corpus
from app.state import choices, classroom, runs
from app.state.corpora import UPLOADED_CORPUS_KEY
from app.views import board
from minigpt import DEFAULT_CORPUS
from minigpt.corpus import MAX_CORPUS_BYTES
from minigpt.serve import MAX_CORPUS_CHARS, ClassCorpus

pytestmark = pytest.mark.slow
POEMS = POEM * 4  # 672 characters: a tenth held out still fills a block of 16


def teacher_controls(lang: str | None = None):
    """A teacher who has started a class, on the board's "Teacher's controls" tab; and the class's code."""
    at = page(home(lang), BOARD.script)
    at.button(key="board_start").click().run()
    at.session_state[board.TAB_KEY] = "教师控制" if lang == "zh" else "Teacher's controls"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at, at.session_state[classroom.CLASS_KEY]


def upload(teacher, name: str, data: bytes):
    teacher.file_uploader(key=class_corpus.UPLOAD_KEY).set_value((name, data, "text/plain")).run()
    assert not teacher.exception, [e.value for e in teacher.exception]
    return teacher


def train_from_the_board(code: str):
    """A learner opens the class's link, then the board's "Train a run for this class" (its address)."""
    learner = page(home(**{"class": code}), BOARD.script)
    links = [l.proto for l in learner.get("page_link") if l.proto.label == "Train a run for this class"]
    assert len(links) == 1
    learner.query_params.update(dict(parse_qsl(links[0].query_string)))
    train = page(learner, TRAIN.script)
    assert not train.exception, [e.value for e in train.exception]
    return train


def said_for_class(train, code: str) -> list[str]:
    return [unescaped(i.value) for i in train.info if f"class {code}" in i.value]


def test_the_teacher_sets_a_built_in_corpus_and_clears_it():
    teacher, code = teacher_controls()
    assert classroom.classes().class_corpus(code) is None
    assert any("No text is set" in c.value for c in teacher.caption)
    teacher.selectbox(key=class_corpus.BUILTIN_KEY).set_value("pydoc-en").run()
    teacher.button(key="class_corpus_set").click().run()
    assert classroom.classes().class_corpus(code) == ClassCorpus("pydoc-en", builtin="pydoc-en")
    assert any("built-in corpus **pydoc-en**" in unescaped(c.value) for c in teacher.caption)
    assert teacher.button(key="class_corpus_set").disabled  # it is the class's already
    teacher.button(key="class_corpus_clear").click().run()
    assert classroom.classes().class_corpus(code) is None


@pytest.mark.parametrize("encoding", ["utf-8", "gbk", "utf-16"])
def test_the_teacher_uploads_the_classs_own_text_in_any_encoding_home_reads(encoding):
    teacher, code = teacher_controls()
    upload(teacher, "poems.txt", POEMS.encode(encoding))
    assert not teacher.error, [e.value for e in teacher.error]
    assert classroom.classes().class_corpus(code) == ClassCorpus("poems.txt", text=POEMS)
    assert any(f"**poems.txt** ({len(POEMS):,} characters)" in unescaped(c.value) for c in teacher.caption)


BAD_FILES = {  # a file, and words its message says (the upload's own messages, minigpt.corpus)
    "empty": (b"", "empty.txt is empty."),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 20, "looks like a binary file"),
    "not UTF-8": ("Le café était très chaud, à côté.\n".encode("latin-1") * 20, "is not valid UTF-8 text (byte 6)"),
    "too large": (b"a b\n" * (MAX_CORPUS_BYTES // 4 + 1), "the limit is 20 MB"),
}


@pytest.mark.parametrize("kind", list(BAD_FILES))
def test_a_bad_file_gets_the_uploads_message_and_the_class_keeps_its_text(kind):
    teacher, code = teacher_controls()
    upload(teacher, "poems.txt", POEMS.encode())
    data, message = BAD_FILES[kind]
    upload(teacher, "empty.txt" if kind == "empty" else "bad.txt", data)
    errors = [unescaped(e.value) for e in teacher.error]
    assert len(errors) == 1 and message in errors[0], errors
    assert classroom.classes().class_corpus(code) == ClassCorpus("poems.txt", text=POEMS)
    assert any("**poems.txt**" in unescaped(c.value) for c in teacher.caption)  # it still says so


def test_a_text_over_the_classs_own_limit_is_refused_with_the_limit():
    teacher, code = teacher_controls()
    upload(teacher, "long.txt", b"ab\n" * (MAX_CORPUS_CHARS // 3 + 1))  # within an upload's 20 MB
    errors = [unescaped(e.value) for e in teacher.error]
    assert len(errors) == 1 and f"at most {MAX_CORPUS_CHARS:,} characters" in errors[0], errors
    assert classroom.classes().class_corpus(code) is None


def test_a_bad_file_is_said_in_chinese_on_a_chinese_page():
    teacher, code = teacher_controls("zh")
    upload(teacher, "empty.txt", b"")
    assert [unescaped(e.value) for e in teacher.error] == ["empty.txt 是空的。"]
    assert classroom.classes().class_corpus(code) is None


@pytest.mark.trains
def test_train_opened_from_the_class_starts_from_its_uploaded_text_and_a_run_trains_on_it():
    teacher, code = teacher_controls()
    upload(teacher, "poems.txt", POEMS.encode("gbk"))
    train = train_from_the_board(code)
    uploaded = train.session_state[UPLOADED_CORPUS_KEY]
    assert train.session_state[choices.CORPUS] == uploaded.key and uploaded.text == POEMS
    said = said_for_class(train, code)
    assert len(said) == 1 and "the class's text poems.txt" in said[0], said
    assert any(f"**poems.txt**, the text of class {code} ({len(POEMS):,} characters)" in unescaped(c.value)
               for c in train.caption)
    train = tiny_settings(train, max_steps=20)
    train.button(key="reset").click().run()  # a run paused at step 0: what it trains on is fixed
    assert not train.error, [e.value for e in train.error]
    entry = runs.registry().get(*train.session_state[runs.OWN_RUN_KEY])
    assert entry.spec.text == POEMS and entry.corpus == "poems.txt"  # the board shows the run's corpus so
    assert "".join(entry.spec.chars) == "".join(sorted(set(POEMS)))  # its vocabulary is the text's characters


def test_train_opened_from_the_class_selects_its_built_in_corpus():
    teacher, code = teacher_controls()
    teacher.selectbox(key=class_corpus.BUILTIN_KEY).set_value("pydoc-en").run()
    teacher.button(key="class_corpus_set").click().run()
    train = train_from_the_board(code)
    assert train.session_state[choices.CORPUS] == "pydoc-en"
    said = said_for_class(train, code)
    assert len(said) == 1 and "the corpus pydoc-en" in said[0], said


def test_the_learner_may_change_the_corpus_and_a_new_class_text_comes_to_train():
    teacher, code = teacher_controls()
    upload(teacher, "poems.txt", POEMS.encode())
    train = train_from_the_board(code)
    at = page(train, HOME.script)
    assert f"poems.txt (class {code})" in at.selectbox(key=choices.CORPUS).options
    assert any(f"The text of class {code}, {len(POEMS):,} characters." in c.value for c in at.caption)
    at.selectbox(key=choices.CORPUS).set_value(DEFAULT_CORPUS).run()
    train = page(at, TRAIN.script)
    assert train.session_state[choices.CORPUS] == DEFAULT_CORPUS and not said_for_class(train, code)
    other = POEMS[::-1]  # the teacher sets another text: Train comes to it
    upload(teacher, "reversed.txt", other.encode())
    train.run()
    assert train.session_state[UPLOADED_CORPUS_KEY].text == other
    assert "the class's text reversed.txt" in said_for_class(train, code)[0]
