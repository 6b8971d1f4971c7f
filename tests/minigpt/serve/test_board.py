"""minigpt/serve/classes/board.py: the class board on its own, without Streamlit: codes, keys, limits, the
challenge checked from each run's configuration, names as plain text, one view shared by every
viewer, and watching that keeps no run alive.

Classes end on a clock the test moves by hand; runs are tiny and trained to their end first, so
nothing here waits for time to pass.

    pytest tests/minigpt/serve/test_board.py
"""
import pytest

from helpers.board_runs import BATCH, BLOCK, finished, submit
from helpers.waiting import wait_until
from minigpt import TrainConfig
from minigpt.serve.classes.board import Challenge
from minigpt.serve.classes.classes import Classes
from minigpt.serve.classes.codes import CODE_ALPHABET
from minigpt.serve.classes.lesson import MAX_ANSWERS
from minigpt.serve.classes.posts import MAX_NAME, plain_name
from minigpt.serve.classes.roster import BoardError
from minigpt.serve.line.registry import RunRegistry
from minigpt.viz import board_figure

pytestmark = pytest.mark.trains
@pytest.fixture
def classes(clock):
    return Classes(max_classes=3, max_posts=4, max_per_learner=2, class_days=1, refresh_seconds=1.0, clock=clock)


def test_a_code_is_short_and_readable_and_an_unknown_or_closed_one_says_which(classes):
    board = classes.open()
    assert len(board.code) == 4 and set(board.code) <= set(CODE_ALPHABET) and not set(board.code) & set("01OI")
    assert classes.find(board.code.lower()).code == board.code  # typed in lower case on a phone
    unknown = next(c for c in ("AAAA", "BBBB") if c != board.code)
    with pytest.raises(BoardError, match=f"no class {unknown}"):
        classes.find(unknown)
    with pytest.raises(BoardError, match="not a class code"):
        classes.find("<b>hi</b>")
    with pytest.raises(BoardError, match="Only the browser that started"):
        classes.close(board.code, "guess")
    classes.close(board.code, board.teacher_key)
    with pytest.raises(BoardError, match=f"class {board.code} has closed"):
        classes.find(board.code)


def test_only_the_teachers_key_hides_pins_sets_a_challenge_or_closes(classes, registry):
    board = classes.open()
    entry = finished(registry)
    post_id, _key = classes.post(board.code, entry, entry.key, "mine", learner="a", corpus="course-zh")
    for wrong in (None, "", "guess", entry.key):  # a learner's run key is not the class's
        with pytest.raises(BoardError):
            classes.hide(board.code, wrong, post_id)
        with pytest.raises(BoardError):
            classes.pin(board.code, wrong, post_id)
        with pytest.raises(BoardError):
            classes.set_challenge(board.code, wrong, Challenge(max_steps=1))
        with pytest.raises(BoardError):
            classes.close(board.code, wrong)
    view = classes.view(board.code, registry.get)
    assert [r.hidden for r in view.rows] == [False] and view.challenge is None
    classes.hide(board.code, board.teacher_key, post_id)
    clock_free = classes.view(board.code, registry.get)  # a change by the teacher shows at once
    assert clock_free.rows[0].hidden and clock_free.visible() == []


def test_only_the_runs_owner_posts_it_and_only_the_poster_withdraws_it(classes, registry):
    board = classes.open()
    entry, other = finished(registry), finished(registry)
    for wrong in (None, "guess", board.teacher_key, other.key):
        with pytest.raises(BoardError, match="Only the browser session that started a run"):
            classes.post(board.code, entry, wrong, "not mine", learner="b", corpus="course-zh")
    post_id, key = classes.post(board.code, entry, entry.key, "mine", learner="a", corpus="course-zh")
    other_post, other_key = classes.post(board.code, other, other.key, "theirs", learner="b", corpus="course-zh")
    for wrong in (None, "", "guess", other.key, other_key, board.teacher_key):
        with pytest.raises(BoardError, match="Only the learner who posted"):
            classes.withdraw(board.code, post_id, wrong)
    assert len(classes.view(board.code, registry.get).rows) == 2
    classes.withdraw(board.code, post_id, key)  # the post's own key
    classes.withdraw(board.code, other_post, other.key)  # or the run's owner key, which survives a refresh
    assert classes.view(board.code, registry.get).rows == ()


def test_posting_a_run_again_renames_its_post_even_from_a_later_visit(classes, registry):
    board = classes.open()
    entry = finished(registry)
    post_id, key = classes.post(board.code, entry, entry.key, "first name", learner="a", corpus="course-zh")
    assert classes.post(board.code, entry, entry.key, "second", learner="a", corpus="course-zh") == (post_id, None)
    # a refresh or a restart: a new learner id, the same run's key from the address
    assert classes.post(board.code, entry, entry.key, "third", learner="b", corpus="course-zh") == (post_id, None)
    assert [r.label for r in classes.view(board.code, registry.get).rows] == ["third"]
    classes.withdraw(board.code, post_id, key)  # the key handed out at the first post still withdraws it


def test_limits_on_classes_posts_per_board_and_posts_per_learner(classes, registry, clock):
    boards = [classes.open() for _ in range(3)]
    with pytest.raises(BoardError, match="3 open classes"):
        classes.open()
    entries = [finished(registry, max_steps=5) for _ in range(5)]
    code = boards[0].code
    for i, entry in enumerate(entries[:2]):
        classes.post(code, entry, entry.key, f"a{i}", learner="a", corpus="course-zh")
    with pytest.raises(BoardError, match="posted 2 runs"):
        classes.post(code, entries[2], entries[2].key, "a2", learner="a", corpus="course-zh")
    for i, entry in enumerate(entries[2:4]):
        classes.post(code, entry, entry.key, f"b{i}", learner="b", corpus="course-zh")
    with pytest.raises(BoardError, match="already shows 4 runs"):
        classes.post(code, entries[4], entries[4].key, "c", learner="c", corpus="course-zh")
    # a class ends class_days (here 1) after it opened: idle hours never end it sooner, and its teacher's
    # looking does not make it last longer
    clock.now += 0.9 * 86400
    classes.find(boards[1].code, boards[1].teacher_key)
    assert classes.find(boards[0].code).code == boards[0].code  # idle for most of its term: still open
    clock.now += 0.2 * 86400
    for ended in boards:
        with pytest.raises(BoardError, match="has closed"):
            classes.find(ended.code)
    classes.open()  # their places are free again


def test_a_name_is_plain_text_capped_and_a_repeated_one_numbered(classes, registry):
    assert plain_name("  a\x00b\u202e\n  c ") == "a b c"  # control and direction-override characters out
    assert len(plain_name("x" * 100)) == MAX_NAME
    board = classes.open()
    names = ["<b onmouseover=alert(1)>me</b>", "twin", "twin"]
    for i, name in enumerate(names):
        entry = finished(registry, max_steps=5)
        classes.post(board.code, entry, entry.key, name, learner=str(i), corpus="course-zh")
    view = classes.view(board.code, registry.get)
    assert [r.label for r in view.rows] == ["<b onmouseover=alert(1)>me</b>", "twin", "twin (2)"]
    legend = [t["name"] for t in board_figure(view.visible()).to_dict()["data"] if t.get("showlegend") is not False]
    assert legend == ["&lt;b onmouseover=alert(1)&gt;me&lt;/b&gt;", "twin", "twin (2)"]  # Plotly reads no markup
    assert list(view.table()["run"]) == ["<b onmouseover=alert(1)>me</b>", "twin", "twin (2)"]


@pytest.mark.parametrize("name", ["👩\u200d👩\u200d👧\u200d👦", "❤\ufe0f team", "🏳\ufe0f\u200d🌈",
                                  "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F",
                                  "1\ufe0f\u20e3 first", "👋🏽 hi"])
def test_an_emoji_sequence_keeps_its_joiners(name):
    assert plain_name(name) == name


@pytest.mark.parametrize("override", ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
                                      "\u2066", "\u2067", "\u2068", "\u2069"])
def test_bidi_overrides_and_isolates_go_even_beside_an_emoji(override):
    assert plain_name(f"ab{override}cd") == "ab cd"
    assert plain_name(f"👩{override}\u200d👩") == "👩 👩"  # a joiner after what was dropped joins nothing
    assert plain_name(f"\u200d{override}x") == "x"  # a joiner with nothing before it goes


def test_the_server_keeps_only_a_salted_digest_of_the_teachers_key(classes):
    opened, other = classes.open(), classes.open()
    kept = classes.find(opened.code)
    stored = [value for value in vars(kept).values() if isinstance(value, (str, bytes))]
    assert all(opened.teacher_key not in (v if isinstance(v, str) else v.decode("latin-1")) for v in stored)
    import hashlib
    assert hashlib.sha256(opened.teacher_key.encode()).digest() not in stored  # salted, not a bare hash
    assert kept.is_teacher(opened.teacher_key) and not kept.is_teacher(other.teacher_key)
    assert not kept.is_teacher(opened.teacher_key[:-1]) and not kept.is_teacher(None)
    classes.set_challenge(opened.code, opened.teacher_key, Challenge(max_steps=5))
    with pytest.raises(BoardError, match="Only the browser that started"):
        classes.set_challenge(opened.code, other.teacher_key, None)


def test_the_teacher_leads_the_lesson_and_followers_see_a_new_version_only_when_it_changed(classes):
    board = classes.open()
    assert classes.lesson(board.code).step is None
    classes.lead(board.code, board.teacher_key, 3)
    now = classes.lesson(board.code)
    assert (now.step, now.revealed) == (3, frozenset())
    classes.lead(board.code, board.teacher_key, 3)  # the same step again: nothing for followers to redraw
    assert classes.lesson(board.code) == now
    classes.lead(board.code, board.teacher_key, 4)
    moved = classes.lesson(board.code)
    assert moved.step == 4 and moved.version != now.version
    for wrong in (None, "guess"):
        with pytest.raises(BoardError, match="Only the browser that started"):
            classes.lead(board.code, wrong, 5)
    with pytest.raises(BoardError):
        classes.lead(board.code, board.teacher_key, 0)
    classes.lead(board.code, board.teacher_key, None)
    assert classes.lesson(board.code).step is None


def test_answers_count_one_per_learner_with_no_name_and_the_reveal_is_the_teachers(classes):
    board = classes.open()
    classes.lead(board.code, board.teacher_key, 5)
    for learner, option in (("a", 2), ("b", 0), ("c", 2), ("a", 1)):  # a changes their mind
        classes.answer(board.code, learner, 5, option)
    classes.answer(board.code, "d", 6, 0)  # another step's answer counts there, not here
    assert classes.counts(board.code, board.teacher_key, 5, 3) == [1, 1, 1]
    assert classes.counts(board.code, board.teacher_key, 6, 3) == [1, 0, 0]
    assert classes.answered(board.code, "a", 5) == 1 and classes.answered(board.code, "z", 5) is None
    classes.answer(board.code, "c", 5, None)  # taken back
    assert classes.counts(board.code, board.teacher_key, 5, 3) == [1, 1, 0]
    with pytest.raises(BoardError, match="Only the browser that started"):
        classes.counts(board.code, "guess", 5, 3)
    with pytest.raises(BoardError, match="Only the browser that started"):
        classes.reveal(board.code, None, 5)
    for wrong in (-1, 99, "1"):
        with pytest.raises(BoardError, match="not one of the question's options"):
            classes.answer(board.code, "a", 5, wrong)
    version = classes.lesson(board.code).version
    classes.reveal(board.code, board.teacher_key, 5)
    now = classes.lesson(board.code)
    assert now.revealed == {5} and now.version != version
    classes.lead(board.code, board.teacher_key, 6)
    assert classes.lesson(board.code).revealed == {5}  # step 6's question is not revealed yet
    for learner in range(MAX_ANSWERS - 1):
        classes.answer(board.code, f"x{learner}", 6, 0)
    with pytest.raises(BoardError, match=f"{MAX_ANSWERS} answers"):
        classes.answer(board.code, "one too many", 6, 0)
    classes.answer(board.code, "d", 6, 1)  # one who answered already may still change it


def _tags(classes, code: str, step: int) -> set[bytes]:
    """What the class keeps of the learners who answered `step`: their tags."""
    return set(classes.find(code).answers.get(step, {}))


def test_one_browser_token_is_one_learner_in_a_class_and_another_in_the_next(classes):
    """The class keeps a digest of the token under its own salt: the same token answers once however
    often it is sent, and has another tag in another class, so no stolen table links the two."""
    first, second = classes.open(), classes.open()
    token = "k3Vq9xT0bLw2YpZcR7uE1g"  # as classroom.learner makes it, the browser's cookie for the class
    for board in (first, second):
        classes.lead(board.code, board.teacher_key, 1)
        for option in (0, 2, 2):  # a refresh, a second tab: the same token again
            assert classes.answer(board.code, token, 1, option)
    assert classes.counts(first.code, first.teacher_key, 1, 3) == [0, 0, 1]
    assert classes.answered(first.code, token, 1) == 2 and classes.answered(first.code, token + "x", 1) is None
    (ours,), (theirs,) = _tags(classes, first.code, 1), _tags(classes, second.code, 1)
    assert ours != theirs, "one browser has the same tag in two classes"
    import hashlib
    assert token.encode() not in ours and hashlib.sha256(token.encode()).digest() != ours  # salted, not a bare hash
    assert ours == classes.find(first.code).learner_tag(token)


def test_the_reveal_freezes_the_counts_and_hiding_the_answer_reopens_the_question(classes):
    board = classes.open()
    code, key = board.code, board.teacher_key
    classes.lead(code, key, 2)
    for learner, option in (("ann", 0), ("bo", 1), ("cy", 1)):
        classes.answer(code, learner, 2, option)
    classes.reveal(code, key, 2)
    revealed = classes.counts(code, key, 2, 3)
    assert revealed == [1, 2, 0]
    # after the reveal: a change of mind, one who answers only now, one who takes theirs back
    assert not classes.answer(code, "bo", 2, 0)
    assert not classes.answer(code, "dee", 2, 2)
    assert not classes.answer(code, "cy", 2, None)
    assert classes.counts(code, key, 2, 3) == revealed
    assert [classes.answered(code, who, 2) for who in ("ann", "bo", "cy", "dee")] == [0, 1, 1, None]
    assert classes.answer(code, "bo", 3, 2)  # another step is still open
    classes.reveal(code, key, 2, False)  # "hide the answer again": the question is open again
    assert classes.answer(code, "bo", 2, 0) and classes.answer(code, "dee", 2, 2)
    assert classes.counts(code, key, 2, 3) == [2, 1, 1]
    classes.reveal(code, key, 2)
    assert not classes.answer(code, "ann", 2, 1) and classes.counts(code, key, 2, 3) == [2, 1, 1]


def test_the_learners_answers_and_the_frozen_counts_come_back_after_a_restart(database_url):
    """A restart through the store: the same tokens are the same learners with the same answers, a
    revealed step's counts still do not move, and the stored tags of one token differ by class."""
    from minigpt.serve.store.database import Store

    store = Store.from_url(database_url)
    classes = Classes(store=store)
    first, second = classes.open(), classes.open()
    code, key = first.code, first.teacher_key
    classes.lead(code, key, 4)
    for learner, step, option in (("ann", 4, 1), ("bo", 4, 0), ("ann", 5, 2), ("bo", 4, 1)):
        classes.answer(code, learner, step, option)
    classes.answer(second.code, "ann", 4, 0)
    classes.reveal(code, key, 4)
    classes.answer(code, "ann", 4, 0)  # after the reveal: not counted
    before = classes.counts(code, key, 4, 3), classes.counts(code, key, 5, 3)
    assert before == ([0, 2, 0], [0, 0, 1])
    assert store.flush(30)
    store.close()

    store = Store.from_url(database_url)
    try:
        stored = {board.code: board.answers for board in store.classes.load()}
        # ann's tag differs by class (the first class's answers are its first session's; the second was never led)
        assert stored[code][1][4].keys().isdisjoint(stored[second.code][0][4].keys())
        classes = Classes(store=store)
        assert (classes.counts(code, key, 4, 3), classes.counts(code, key, 5, 3)) == before
        assert [classes.answered(code, who, 4) for who in ("ann", "bo")] == [1, 1]
        assert not classes.answer(code, "bo", 4, 2)  # still revealed, still frozen
        assert classes.answer(code, "ann", 5, 0)  # the same learner: one answer, replaced
        assert classes.counts(code, key, 5, 3) == [1, 0, 0] and classes.counts(code, key, 4, 3) == before[0]
    finally:
        store.close()


def test_runs_whose_curves_coincide_are_named_together(classes, registry):
    board = classes.open()
    twins = [finished(registry, max_steps=10, seed=3) for _ in range(2)]
    other = finished(registry, max_steps=10, seed=4)
    for name, entry in (("ann", twins[0]), ("bo", other), ("cy", twins[1])):
        classes.post(board.code, entry, entry.key, name, learner=name, corpus="course-zh")
    view = classes.view(board.code, registry.get)
    assert view.rows[0].record.train_loss == view.rows[2].record.train_loss  # the same seed: the same curve
    assert view.rows[0].record.train_loss != view.rows[1].record.train_loss
    assert view.coinciding() == [("ann", "cy")]


def test_the_challenge_ranks_by_best_validation_loss_and_refuses_from_each_runs_own_config(classes, registry):
    board = classes.open()
    runs = {"short": finished(registry, max_steps=20), "long": finished(registry, max_steps=30),
            "wide": finished(registry, max_steps=20, d_model=32), "other": finished(registry, max_steps=20, seed=1)}
    corpora = {"short": "course-zh", "long": "course-zh", "wide": "course-zh", "other": "course-zh (uploaded)"}
    for name, entry in runs.items():
        classes.post(board.code, entry, entry.key, name, learner=name, corpus=corpora[name])
    small = sum(p.numel() for p in runs["short"].run.inference_model().parameters())  # counted from the model itself
    wide = sum(p.numel() for p in runs["wide"].run.inference_model().parameters())
    assert small < wide
    classes.set_challenge(board.code, board.teacher_key, Challenge("course-zh", max_steps=20, max_params=small))
    view = classes.view(board.code, registry.get)
    refusals = {row.label: [str(m) for m in row.refusals] for row in view.rows}
    assert refusals == {"short": [], "long": ["set to train 30 steps, more than 20"],
                        "wide": [f"{wide:,} parameters, more than {small:,}"],
                        "other": ["trained on course-zh (uploaded), not course-zh"]}  # an upload named like it
    best = min(e.val_loss for e in runs["short"].run.snapshot().history if e.val_loss is not None)
    assert [(row.label, row.best_val) for row in view.ranking()] == [("short", best)]
    classes.set_challenge(board.code, board.teacher_key, Challenge(max_steps=30))
    ranked = classes.view(board.code, registry.get).ranking()
    vals = {name: min(e.val_loss for e in entry.run.snapshot().history if e.val_loss is not None)
            for name, entry in runs.items()}
    assert [row.label for row in ranked] == sorted(vals, key=vals.get)


def test_the_table_counts_characters_seen_and_parameters_and_shows_only_what_differs(classes, registry):
    board = classes.open()
    a, b = finished(registry, max_steps=20), finished(registry, max_steps=20, lr=1e-2)
    for name, entry in (("a", a), ("b", b)):
        classes.post(board.code, entry, entry.key, name, learner=name, corpus="course-zh")
    table = classes.view(board.code, registry.get).table()
    params = sum(p.numel() for p in a.run.inference_model().parameters())
    assert list(table["tokens"]) == [20 * BATCH * BLOCK] * 2 and list(table["params"]) == [params] * 2
    assert list(table["steps"]) == [20, 20] and list(table["lr"]) == [TrainConfig().lr, 1e-2]
    assert "d_model" not in table.columns  # the same in both: not a difference
    assert list(table["run"]) == ["a", "b"]


def test_thirty_viewers_share_one_view_built_again_only_when_a_run_moved(classes, registry, clock):
    board = classes.open()
    entry = submit(registry, max_steps=10_000)
    classes.post(board.code, entry, entry.key, "live", learner="a", corpus="course-zh")
    entry.run.pause()
    wait_until(lambda: entry.run.state == "paused", "the run to pause")
    builds = classes.builds
    views = {id(classes.view(board.code, registry.get)) for _ in range(30)}
    assert len(views) == 1 and classes.builds == builds + 1
    clock.now += 5  # time passes, nothing moved: the same view
    assert id(classes.view(board.code, registry.get)) in views and classes.builds == builds + 1
    step = entry.run.snapshot().step
    entry.run.run_steps(3)
    wait_until(lambda: entry.run.snapshot().step == step + 3 and entry.run.state == "paused", "three more steps")
    assert classes.view(board.code, registry.get).rows[0].step == step  # within refresh_seconds: as it was
    clock.now += 1
    moved = classes.view(board.code, registry.get)
    assert moved.rows[0].step == step + 3 and classes.builds == builds + 2


def test_watching_a_board_keeps_no_run_alive_and_a_released_run_keeps_its_last_curve(classes, registry, clock):
    board = classes.open()
    entry = finished(registry, max_steps=20)
    classes.post(board.code, entry, entry.key, "gone", learner="a", corpus="course-zh")
    for _ in range(4):  # the projector looks every few minutes; the run's owner never comes back
        clock.now += 200
        classes.find(board.code, board.teacher_key)
        classes.view(board.code, registry.get)
    assert registry.get(entry.run_id) is None and entry.run.state == "closed"
    row = classes.view(board.code, registry.get).rows[0]
    assert row.state == "released" and row.record.final_step == 20 and row.best_val is not None


def test_a_run_still_training_is_held_to_the_steps_it_is_set_to_not_the_steps_it_has_done(classes, registry):
    """A run set to 30 steps, paused at 5, is outside a 20-step challenge already: its learning-rate
    schedule and its end are those of 30 steps, whatever it shows now."""
    board = classes.open()
    entry = submit(registry, paused=True, max_steps=30)
    entry.run.run_steps(5)
    wait_until(lambda: entry.run.snapshot().step == 5 and entry.run.state == "paused", "five steps")
    classes.post(board.code, entry, entry.key, "early", learner="a", corpus="course-zh")
    classes.set_challenge(board.code, board.teacher_key, Challenge(max_steps=20))
    row = classes.view(board.code, registry.get).rows[0]
    assert row.step == 5 and [str(m) for m in row.refusals] == ["set to train 30 steps, more than 20"]


def test_the_teacher_pins_one_run_to_the_top_drawn_thicker_and_unpins_it(classes, registry):
    board = classes.open()
    posts = []
    for name in ("a", "b", "c"):
        entry = finished(registry, max_steps=5)
        posts.append(classes.post(board.code, entry, entry.key, name, learner=name, corpus="course-zh")[0])
    classes.pin(board.code, board.teacher_key, posts[2])
    view = classes.view(board.code, registry.get)
    assert [(r.label, r.pinned) for r in view.rows] == [("c", True), ("a", False), ("b", False)]
    widths = {t["name"]: t["line"]["width"] for t in board_figure(view.visible()).to_dict()["data"]
              if t.get("showlegend") is not False}
    assert widths["c"] > widths["a"] == widths["b"]
    assert list(view.table()["run"]) == ["c", "a", "b"]
    classes.pin(board.code, board.teacher_key, None)
    assert [r.label for r in classes.view(board.code, registry.get).rows] == ["a", "b", "c"]


def test_a_posted_run_waiting_for_a_slot_shows_as_waiting_with_its_place(clock, classes):
    registry = RunRegistry(max_runs=1, clock=clock, dispatcher=False)
    try:
        board = classes.open()
        training, waiting = submit(registry, max_steps=10_000), submit(registry)
        for entry in (training, waiting):
            classes.post(board.code, entry, entry.key, entry.run_id, learner=entry.run_id, corpus="course-zh")
        rows = {row.run_id: row for row in classes.view(board.code, registry.get, registry.place).rows}
        assert rows[waiting.run_id].state == "waiting" and rows[waiting.run_id].place == 1
        assert rows[training.run_id].state == "running" and rows[training.run_id].place is None
        registry.control(training.run_id, training.key, "stop")
        clock.now += classes.refresh_seconds
        wait_until(lambda: classes.view(board.code, registry.get, registry.place).rows[1].state == "running",
                   "the waiting run to start once the slot frees")
        assert classes.view(board.code, registry.get, registry.place).rows[1].place is None
    finally:
        registry.stop_all()
