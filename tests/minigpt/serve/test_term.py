"""minigpt/serve/classes: a class that lasts the term. It stays open for its days whatever the idle
weeks between lessons, a learner's token is the same learner ten days on and after a restart, a
personal code carries a learner to another device and guessing one is bounded, each lesson session
keeps its own answers in the course's log, a new round archives the board, and erasing a learner or
the class leaves no row of them, on SQLite and on PostgreSQL.

Time moves on a clock the test sets by hand; runs are tiny and trained to their end first.

    pytest tests/minigpt/serve/test_term.py
"""
import hashlib
import secrets
import time

import pytest
import sqlalchemy as sa
from helpers.board_runs import finished

from minigpt.serve.classes.board import CLASS_CORPUS, Challenge, ClassCorpus, ClassLesson
from minigpt.serve.classes.classes import Classes
from minigpt.serve.classes.codes import CODE_ALPHABET
from minigpt.serve.classes.learners import (CLASS_CODE_TRIES, PERSONAL_CODE_TRIES, TRY_WINDOW_SECONDS,
                                            new_learner_token, personal_code, run_key)
from minigpt.serve.classes.roster import BoardError
from minigpt.serve.store import keys
from minigpt.serve.store.database import Store
from minigpt.serve.store.retention import CLASS_DAYS
from minigpt.serve.store.schema import metadata

pytestmark = pytest.mark.trains
DAY = 86400.0


def test_a_class_is_open_ten_idle_days_on_and_ends_when_its_term_is_over(clock):
    classes = Classes(clock=clock)
    opened = classes.open()
    clock.now += 10 * DAY  # no one looked at it since
    assert classes.find(opened.code).code == opened.code
    # a browser keeps the class's cookies until the term's end: the days left, in wall-clock seconds
    assert classes.ends_at(opened.code) - time.time() == pytest.approx((CLASS_DAYS - 10) * DAY, abs=60)
    clock.now += (CLASS_DAYS - 10) * DAY + 1
    with pytest.raises(BoardError, match="has closed"):
        classes.find(opened.code)


def test_a_token_is_a_twelve_character_code_shown_in_fours_and_its_runs_key_is_derived_not_kept():
    token = new_learner_token()
    assert len(token) == 12 and set(token) <= set(CODE_ALPHABET)  # 32 ** 12 = 2 ** 60 codes
    assert personal_code(token) == f"{token[:4]}-{token[4:8]}-{token[8:]}"
    salt = b"\x01" * 16
    assert run_key(token, salt) == run_key(token, salt)  # the same token and salt, on any device: the same key
    assert len({run_key(token, salt), run_key(token, b"\x02" * 16), run_key(new_learner_token(), salt)}) == 3


def test_the_same_token_is_the_same_learner_ten_days_on_and_after_a_restart(database_url, registry, clock):
    store = Store.from_url(database_url)
    classes = Classes(store=store, clock=clock)
    opened = classes.open()
    code, key = opened.code, opened.teacher_key
    ann, salt = new_learner_token(), secrets.token_bytes(16)
    classes.seen(code, ann)
    entry = finished(registry, key=run_key(ann, salt))  # the run's key, from ann's token and the run's salt
    classes.note_run(code, ann, entry.run_id, salt)
    post_id, _post_key = classes.post(code, entry, entry.key, "ann's run", learner=ann, corpus="course-zh")
    classes.lead(code, key, 2)
    classes.answer(code, ann, 2, 1)
    clock.now += 10 * DAY
    assert classes.answered(code, ann, 2) == 1 and classes.learner_runs(code, ann) == [(entry.run_id, salt)]
    assert store.flush(30)
    store.close()

    store = Store.from_url(database_url)  # the server restarts
    try:
        classes = Classes(store=store, clock=clock)
        assert classes.answered(code, ann, 2) == 1
        (run_id, kept_salt), = classes.learner_runs(code, ann)
        assert run_id == entry.run_id and entry.is_owner(run_key(ann, kept_salt))  # ann opens her run again
        assert [row.post_id for row in classes.view(code, registry.get).rows] == [post_id]
        assert classes.claim(code, personal_code(ann).lower(), asker="phone") == ann
        assert classes.learner_runs(code, new_learner_token()) == []  # another token: nothing of ann's
    finally:
        store.close()


def test_a_personal_code_carries_a_learner_and_wrong_codes_are_said_then_refused_for_a_while(clock):
    classes = Classes(clock=clock)
    code = classes.open().code
    ann = new_learner_token()
    classes.seen(code, ann)
    assert classes.claim(code, f" {personal_code(ann)} ", asker="tablet") == ann
    with pytest.raises(BoardError, match="No learner of class") as said:
        classes.claim(code, new_learner_token(), asker="guesser")
    assert said.value.params == {"code": code}
    for _ in range(PERSONAL_CODE_TRIES - 1):
        with pytest.raises(BoardError, match="No learner"):
            classes.claim(code, new_learner_token(), asker="guesser")
    with pytest.raises(BoardError, match="Too many wrong codes") as said:  # even the right code, for a while
        classes.claim(code, ann, asker="guesser")
    assert said.value.params == {"minutes": TRY_WINDOW_SECONDS // 60}
    assert classes.claim(code, ann, asker="tablet") == ann  # another device is not held back by the guesser
    clock.now += TRY_WINDOW_SECONDS
    assert classes.claim(code, ann, asker="guesser") == ann


def test_a_whole_class_of_wrong_codes_from_many_askers_is_refused_too(clock):
    classes = Classes(clock=clock)
    code = classes.open().code
    ann = new_learner_token()
    classes.seen(code, ann)
    for asker in range(CLASS_CODE_TRIES):
        with pytest.raises(BoardError, match="No learner"):
            classes.claim(code, new_learner_token(), asker=f"session {asker}")
    with pytest.raises(BoardError, match="Too many wrong codes"):
        classes.claim(code, ann, asker="a fresh session")
    clock.now += TRY_WINDOW_SECONDS
    assert classes.claim(code, ann, asker="a fresh session") == ann


def test_each_lesson_session_has_its_own_answers_and_the_course_keeps_every_tally(database_url, clock):
    store = Store.from_url(database_url)
    classes = Classes(store=store, clock=clock)
    opened = classes.open()
    code, key = opened.code, opened.teacher_key
    classes.lead(code, key, 1)
    classes.answer(code, "ann", 1, 0)
    classes.answer(code, "bo", 1, 1)
    classes.lead(code, key, 2)
    classes.answer(code, "cy", 2, 2)
    classes.reveal(code, key, 2)
    classes.lead(code, key, None)  # a break
    clock.now += 3600
    classes.lead(code, key, 3)  # an hour later: the same session goes on
    assert classes.lesson(code).revealed == {2}
    clock.now += 7 * DAY
    classes.lead(code, key, 1)  # next week: the next session, its questions open again
    assert classes.lesson(code).revealed == frozenset() and classes.counts(code, key, 1, 3) == [0, 0, 0]
    assert classes.answered(code, "ann", 1) is None
    classes.answer(code, "ann", 1, 2)
    expected = [(1, "", (1, 2, 3), {1: (1, 1), 2: (0, 0, 1)}), (2, "", (1,), {1: (0, 0, 1)})]
    course = classes.course(code, key)
    assert [(s.number, s.lesson, s.steps, s.tallies) for s in course] == expected
    # dated on the wall clock (what the course's log shows), not the classes' own clock the test moves
    assert all(abs(session.started - time.time()) < 60 for session in course)
    with pytest.raises(BoardError, match="Only the browser"):
        classes.course(code, "not the key")
    classes.set_lesson(code, key, ClassLesson("poems.md", "# Poems\n"))
    assert classes.lesson(code).step is None  # the teacher leads the new lesson from its start
    classes.lead(code, key, 1)  # the same day, but another lesson: another session
    assert store.flush(30)
    store.close()

    store = Store.from_url(database_url)
    try:
        again = Classes(store=store, clock=clock)
        course = again.course(code, key)
        assert [(s.number, s.lesson, s.steps, s.tallies) for s in course] == [*expected, (3, "poems.md", (1,), {})]
        assert again.class_lesson(code) == ClassLesson("poems.md", "# Poems\n")
        assert again.answered(code, "ann", 1) is None  # session 3's question is open
    finally:
        store.close()


def test_a_new_round_archives_the_board_and_its_limits_count_afresh(database_url, registry, clock):
    store = Store.from_url(database_url)
    classes = Classes(max_per_learner=1, store=store, clock=clock)
    opened = classes.open()
    code, key = opened.code, opened.teacher_key
    first, second = finished(registry), finished(registry)
    classes.post(code, first, first.key, "week one", learner="ann", corpus="course-zh")
    with pytest.raises(BoardError, match="posted 1 runs"):
        classes.post(code, second, second.key, "again", learner="ann", corpus="course-zh")
    started = classes.new_round(code, key, "week\u202e 2\n")
    assert (started.number, started.name) == (2, "week 2")  # a name is plain text
    assert classes.view(code, registry.get).rows == ()
    classes.post(code, second, second.key, "week two", learner="ann", corpus="course-zh")  # a new round's limit
    assert [row.label for row in classes.archived_view(code, 1).rows] == ["week one"]
    classes.set_corpus(code, key, ClassCorpus("poems.txt", text="roses are red"))
    assert store.flush(30)
    store.close()

    store = Store.from_url(database_url)
    try:
        again = Classes(store=store, clock=clock)
        assert [(r.number, r.name) for r in again.rounds(code)] == [(1, ""), (2, "week 2")]
        assert [row.label for row in again.view(code, registry.get).rows] == ["week two"]
        assert [row.label for row in again.archived_view(code, 1).rows] == ["week one"]
        assert again.class_corpus(code) == ClassCorpus("poems.txt", text="roses are red")
    finally:
        store.close()


def _rows_of(engine: sa.Engine, code: str, tag: bytes | None = None) -> dict[str, int]:
    """Every table's rows of the class `code` (of one learner, by `tag`, where given), by table."""
    counts = {}
    with engine.connect() as connection:
        for table in metadata.sorted_tables:
            if "code" not in table.c or (tag is not None and "learner" not in table.c):
                continue
            where = table.c.code == code
            if tag is not None:
                where &= table.c.learner == tag
            counts[table.name] = connection.execute(sa.select(sa.func.count()).select_from(table).where(where)).scalar()
    return counts


def _run_rows(engine: sa.Engine) -> set[str]:
    with engine.connect() as connection:
        return {row[0] for row in connection.execute(sa.text("SELECT run_id FROM runs"))}


def test_erasing_a_learner_then_the_class_leaves_no_row_of_them(database_url, registry, clock):
    store = Store.from_url(database_url)
    try:
        classes = Classes(store=store, clock=clock)
        opened = classes.open()
        code, key = opened.code, opened.teacher_key
        classes.lead(code, key, 1)
        posts = {}
        for name in ("ann", "bo"):
            token, salt = new_learner_token(), secrets.token_bytes(16)
            entry = finished(registry, key=run_key(token, salt))
            # the run as the store keeps it (a run built by hand is memory-only): erasing must delete it
            store.runs.save(entry.run_id, keys.hashed(entry.key), {"recipe of": name}, f"{name}'s text", name,
                            line_order=None, start_paused=False, max_steps=20)
            classes.seen(code, token)
            classes.note_run(code, token, entry.run_id, salt)
            posts[name] = (token, entry.run_id, classes.post(code, entry, entry.key, name, learner=token,
                                                             corpus="course-zh")[0])
            classes.answer(code, token, 1, 0)
        classes.new_round(code, key, "week 2")  # ann's post is archived: erasing finds it there too
        assert store.flush(30)
        ann_tag = classes.find(code).learner_tag(posts["ann"][0])
        assert set(_rows_of(store.engine, code, ann_tag).values()) == {1}  # a row in each table with a learner

        assert classes.erase_learner(code, key, post_id=posts["ann"][2]) == [posts["ann"][1]]
        assert store.flush(30)
        assert set(_rows_of(store.engine, code, ann_tag).values()) == {0}
        assert _run_rows(store.engine) == {posts["bo"][1]}
        assert classes.learner_runs(code, posts["ann"][0]) == [] and classes.counts(code, key, 1, 2) == [1, 0]
        assert [row.label for row in classes.archived_view(code, 1).rows] == ["bo"]  # gone from the archive too
        with pytest.raises(BoardError, match="Only the browser"):  # naming a learner by their post is the teacher's
            classes.erase_learner(code, None, post_id=posts["bo"][2])

        bo = posts["bo"][0]
        assert classes.erase_learner(code, None, learner=bo) == [posts["bo"][1]]  # bo erases themselves
        classes.close(code, key, erase=True)
        assert store.flush(30)
        assert set(_rows_of(store.engine, code).values()) == {0} and _rows_of(store.engine, code)["classes"] == 0
        assert _run_rows(store.engine) == set()
    finally:
        store.close()


def test_a_challenge_on_the_class_text_follows_the_text_the_class_has_now(registry, clock):
    classes = Classes(clock=clock)
    opened = classes.open()
    code, key = opened.code, opened.teacher_key
    poems = ClassCorpus("poems.txt", text="roses are red")
    assert poems.key == "poems.txt (class text " + hashlib.sha256(b"roses are red").hexdigest()[:8] + ")"
    classes.set_challenge(code, key, Challenge(CLASS_CORPUS))
    entry = finished(registry)  # trained on course-zh (helpers.board_runs)
    classes.post(code, entry, entry.key, "ann", learner="ann", corpus="course-zh")

    def refusals():
        clock.now += 1  # past the view's refresh: the board is read again
        return [(m.template, m.params) for m in classes.view(code, registry.get).rows[0].refusals]

    assert refusals() == []  # no text of the class's own yet: nothing asked of the corpus
    classes.set_corpus(code, key, poems)
    assert refusals() == [("trained on {corpus}, not the class's text {wanted}",
                           {"corpus": "course-zh", "wanted": "poems.txt"})]
    classes.set_corpus(code, key, ClassCorpus("course-zh", builtin="course-zh"))
    assert refusals() == []
    with pytest.raises(ValueError):  # a built-in name and a text at once is no corpus
        classes.set_corpus(code, key, ClassCorpus("both", builtin="course-zh", text="x"))


def test_closing_a_class_hands_back_every_run_of_it_and_a_learner_withdraws_their_post_next_week(registry, clock):
    classes = Classes(clock=clock)
    opened = classes.open()
    code, key = opened.code, opened.teacher_key
    archived, posted, noted = finished(registry), finished(registry), finished(registry)
    classes.post(code, archived, archived.key, "week one", learner="ann", corpus="course-zh")
    classes.new_round(code, key, "week 2")
    post_id, _post_key = classes.post(code, posted, posted.key, "week two", learner="ann", corpus="course-zh")
    classes.seen(code, "bo")
    classes.note_run(code, "bo", noted.run_id, b"\x00" * 16)
    clock.now += 7 * DAY  # next week, with no key of the post in hand: ann's token is enough
    with pytest.raises(BoardError, match="Only the learner who posted"):
        classes.withdraw(code, post_id, None, learner="bo")
    assert classes.posts_of(code, "ann") == [post_id] and classes.posts_of(code, "bo") == []
    classes.withdraw(code, post_id, None, learner="ann")
    assert classes.view(code, registry.get).rows == ()
    # erasing the class lets go of every run of it: archived, posted or only started there
    assert set(classes.close(code, key, erase=True)) == {archived.run_id, noted.run_id}


def test_a_learner_finds_their_newest_runs_again_and_older_notes_go(clock):
    from minigpt.serve.classes.learners import MAX_NOTES

    classes = Classes(clock=clock)
    code = classes.open().code
    for i in range(MAX_NOTES + 2):
        classes.note_run(code, "ann", f"run{i}", bytes([i]) * 16)
    classes.note_run(code, "bo", "bo's", b"\x01" * 16)
    assert [run_id for run_id, _salt in classes.learner_runs(code, "ann")] == [f"run{i}" for i in range(2, MAX_NOTES + 2)]
    assert classes.learner_runs(code, "bo") == [("bo's", b"\x01" * 16)]
