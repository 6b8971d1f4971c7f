"""app/state/runs.py: a session's run in the registry: the owner steers, watchers watch, the URL reattaches
a refresh, a full server puts Start in line, the slots hold under simultaneous clicks, and abandoned
runs are released.

    pytest tests/app/test_runs.py
"""
import sys
import threading

import pytest

from app.state import choices, corpora, runs
from helpers.apptest import home, own_run, page, start_tiny_run, tiny_settings
from helpers.tiny import tiny_plan
from helpers.waiting import niceness, thread_niceness, wait_until
from minigpt import GPTConfig, TrainConfig, Trainer, build_model
from minigpt.serve.line.registry import NotOwnerError, RunRegistry
from minigpt.serve.runs.thread import TrainingRun
from minigpt.serve.runs.process import CHILD_THREAD_NAME
from minigpt.serve import server as face
from app.chrome.site import GENERATE, TRAIN

pytestmark = pytest.mark.trains


def tiny_training_run() -> TrainingRun:
    corpus = corpora.builtin_corpus("demo-zh")
    tokenizer, model, train = runs.run_configs(
        corpus, GPTConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=32),
        TrainConfig(block_size=16, batch_size=4, max_steps=20_000))
    return TrainingRun(Trainer(build_model(model, 0), tokenizer, corpus.text, train))


def test_a_watcher_follows_the_owner_to_the_new_run():
    owner = tiny_settings(page(home(), TRAIN.script))
    owner.button(key="start").click().run()
    first, _ = own_run(owner)
    watcher = page(home(run=first), TRAIN.script)
    owner.button(key="start").click().run()  # "Start a new run"
    second, _ = own_run(owner)
    page(watcher, GENERATE.script)
    assert any(f"`{second}`" in w.value and "new run" in w.value for w in watcher.warning)
    assert watcher.session_state[runs.WATCHED_RUN_KEY] == second and watcher.query_params["run"] == second
    assert not any("No training run" in i.value for i in watcher.info)
    page(watcher, TRAIN.script)
    assert any(f"watching run `{second}`" in i.value for i in watcher.info)


def test_another_session_watches_the_run_but_cannot_stop_or_replace_it():
    owner = start_tiny_run()
    run_id, key = own_run(owner)
    watcher = page(home(run=run_id), TRAIN.script)
    assert watcher.metric[0].value == "running"
    assert watcher.button(key="pause").disabled and watcher.button(key="stop").disabled
    assert any("watching" in i.value for i in watcher.info)
    with pytest.raises(NotOwnerError):
        runs.registry().control(run_id, "not-the-key", "stop")
    tiny_settings(watcher).button(key="start").click().run()  # the watcher's own run
    assert own_run(watcher)[0] != run_id
    assert runs.registry().get(run_id).run.state == "running"


def test_a_refresh_with_the_owner_key_in_the_url_reattaches_with_control():
    run_id, key = own_run(start_tiny_run())
    refreshed = page(home(run=run_id, key=key), TRAIN.script)
    assert own_run(refreshed) == (run_id, key)
    assert not refreshed.button(key="pause").disabled
    refreshed.button(key="stop").click().run()
    assert refreshed.metric[0].value == "stopped"


def test_an_address_naming_an_unknown_run_says_so_without_echoing_it():
    at = home(run="![x](http://example.invalid/p.png)")
    assert any("no longer on this server" in w.value and "example" not in w.value for w in at.warning)
    assert "run" not in at.query_params


def test_the_owner_url_carries_the_run_id_and_key():
    at = start_tiny_run()
    run_id, key = own_run(at)
    assert at.query_params["run"] == run_id and at.query_params["key"] == key


def test_a_start_on_a_full_server_waits_in_line_sees_its_place_and_starts_by_itself(monkeypatch):
    """Issue 48: on a server with every slot busy, Start is accepted; the learner sees their place, the
    server's slots, and, once a run has trained here, when theirs should start. When a slot frees,
    their run trains without their pressing anything again."""
    monkeypatch.setenv(face.MAX_RUNS_ENV, "2")
    running = [start_tiny_run() for _ in range(2)]
    entries = [runs.registry().get(*own_run(at)) for at in running]
    wait_until(lambda: all(entry.run.snapshot().step >= 10 for entry in entries), "both runs to have a pace")
    third = tiny_settings(page(home(), TRAIN.script))
    assert not third.button(key="start").disabled
    third.button(key="start").click().run()
    assert not third.error and not third.metric  # no run's numbers yet: its place instead
    mine = runs.registry().get(*own_run(third))
    assert mine.is_waiting() and runs.registry().place(mine) == 1
    shown = [i.value for i in third.info if "in line" in i.value]
    assert len(shown) == 1 and shown[0].startswith("**1st in line**: it starts in about "), shown
    assert "All 2 training slots are in use" in shown[0]
    assert any("2 training slots on this server · 2 in use · 1 run waiting" in c.value for c in third.caption)
    runs.registry().control(*own_run(running[0]), "stop")
    wait_until(lambda: mine.is_active(), "the waiting run to take the freed slot")
    third.run()
    assert third.metric[0].value == "running"


def test_the_owner_can_replace_their_run_when_the_server_is_at_its_cap(monkeypatch):
    monkeypatch.setenv(face.MAX_RUNS_ENV, "1")
    at = start_tiny_run()
    first, _ = own_run(at)
    at.button(key="start").click().run()
    assert not at.error
    assert own_run(at)[0] != first
    assert runs.registry().get(first) is None
    assert runs.registry().active_count() == 1


def test_a_start_that_cannot_train_shows_why_and_leaves_the_previous_run_training():
    at = home()
    at.selectbox(key=choices.CORPUS).set_value("demo-zh").run()  # 448 characters: a short validation split
    at = tiny_settings(page(at, TRAIN.script))
    at.button(key="start").click().run()
    first, _ = own_run(at)
    at.select_slider(key="max_len").set_value(64)
    at.slider(key="block_size").set_value(60).run()  # longer than the demo corpus' validation split
    assert any("validation split" in e.value for e in at.error)
    assert at.button(key="start").disabled  # refused from the corpus' length, before anything is built

    assert own_run(at)[0] == first and runs.registry().get(first).run.state == "running"


@pytest.mark.slow
def test_simultaneous_starts_all_get_a_place_and_never_build_more_runs_than_the_slots():
    """16 Start clicks at the same instant on 2 slots: none refused; exactly 2 runs are built and
    train, at no moment a third training thread, even briefly; the other 14 wait in places 1 to 14."""
    registry = RunRegistry(max_runs=2, dispatcher=False)
    clicks = 16
    built, entries, gate = [], [], threading.Barrier(clicks + 1)
    peak, done = [0], threading.Event()

    def watch_threads():  # samples the built runs' threads for the whole burst
        gate.wait()
        while not done.is_set():
            peak[0] = max(peak[0], sum(run.is_alive() for run in list(built)))

    def build(run_id):
        run = tiny_training_run()
        built.append(run)
        return run

    def click():
        gate.wait()
        entries.append(registry.submit(tiny_plan(), corpus="demo-zh", build=build))

    watcher = threading.Thread(target=watch_threads)
    watcher.start()
    threads = [threading.Thread(target=click) for _ in range(clicks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    watcher.join()
    try:
        assert len(entries) == clicks and len(built) == 2 and registry.active_count() == 2
        assert peak[0] <= 2 and all(run.is_alive() for run in built)
        assert sorted(p for p in map(registry.place, entries) if p is not None) == list(range(1, clicks - 1))
    finally:
        registry.stop_all()


@pytest.mark.parametrize("train_in", ["process", "thread"])
def test_runs_whose_owner_stopped_looking_are_released(monkeypatch, train_in):
    monkeypatch.setenv(face.TRAIN_IN_ENV, train_in)
    monkeypatch.setenv(face.IDLE_ENV, "60")  # read when the registry is made
    at = start_tiny_run()
    run_id, _ = own_run(at)
    entry = runs.registry().get(run_id)
    assert runs.registry().idle_seconds == 60
    entry.last_seen -= 61  # as if its owner had been away a minute
    back = runs.registry().get(run_id)  # read back from the store: a view of what it had done, nothing training
    assert back is not entry and not back.run.is_alive() and back.run.state in ("interrupted", "finished")
    assert entry.run.state == "closed"
    wait_until(lambda: not entry.run.is_alive(), "the released run's thread to end")
    if train_in == "process":  # its memory went with its process
        wait_until(lambda: entry.run._process.exitcode is not None, "the released run's process to end")
    else:
        assert entry.run.trainer.model is None and entry.run.trainer.optimizer is None  # freed, though we hold it
    at.run()  # the owner comes back to their run, as the store kept it, and may start a new one
    assert not any("no longer on this server" in w.value for w in at.warning)
    assert not at.exception and not at.button(key="start").disabled


def test_a_new_registry_stops_trainer_threads_an_old_one_left_behind():
    orphan = tiny_training_run()
    orphan.start()  # as if started through a registry that a code reload replaced
    runs.registry()
    wait_until(lambda: not orphan.is_alive(), "the orphan's thread to end")


def test_a_run_refuses_pause_stop_and_replace_from_anyone_without_its_key():
    """The watcher's buttons are disabled (see above; AppTest, like a browser, cannot click them);
    behind them the registry itself refuses every request that lacks the owner's key."""
    owner = start_tiny_run()
    run_id, _ = own_run(owner)
    for action in ("pause", "resume", "stop"):
        for forged_key in ("not-the-key", "", None):
            with pytest.raises(NotOwnerError):
                runs.registry().control(run_id, forged_key, action)
    theirs = runs.registry().submit(tiny_plan(), corpus="demo-zh", build=lambda new_id: tiny_training_run(), replace=(run_id, "not-the-key"))
    assert theirs.run_id != run_id
    assert runs.registry().get(run_id).run.state == "running"  # the owner's run is untouched
    owner.run()
    assert owner.metric[0].value == "running" and not owner.button(key="pause").disabled


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="niceness per thread is Linux's")
@pytest.mark.parametrize("train_in, told, expected", [
    ("thread", "5", 5), ("thread", None, 0),
    ("process", "5", 5), ("process", None, 19),  # unset, a child yields to the server that shares its box
])
def test_a_learners_run_trains_at_the_priority_the_server_is_told(monkeypatch, train_in, told, expected):
    monkeypatch.setenv(face.TRAIN_IN_ENV, train_in)
    if told is None:
        monkeypatch.delenv(face.NICE_ENV, raising=False)
    else:
        monkeypatch.setenv(face.NICE_ENV, told)
    entry = runs.registry().get(own_run(start_tiny_run())[0])
    own = niceness(threading.current_thread())
    # the training thread lowers its priority first thing: wait for that (a child at 19 may step slowly)
    wait_until(lambda: entry.run.snapshot().step > 0 or _training_niceness(entry.run, train_in) not in (None, own),
               "the training thread to lower its priority, or to step")
    if train_in == "thread":
        assert niceness(entry.run._thread) == max(expected, own)
    else:
        threads = thread_niceness(entry.run._process.pid)
        assert threads["minigpt-trainer"] == max(expected, own)
        assert threads[CHILD_THREAD_NAME] == own  # pause and weights are answered at the server's priority
    assert niceness(threading.current_thread()) == own  # the page that started it, unchanged


def _training_niceness(run, train_in: str) -> int | None:
    if train_in == "thread":
        return niceness(run._thread) if run._thread is not None and run._thread.is_alive() else None
    return thread_niceness(run._process.pid).get("minigpt-trainer")


def test_the_suite_trains_its_runs_at_the_servers_priority():
    """tests/conftest.py sets it, and says why. The test above checks what a server does unset."""
    assert face.ServerSettings.from_env().nice == 0



def test_the_smallest_box_trains_one_run_at_a_time_and_keeps_a_class_of_40s_finished_runs(monkeypatch):
    """Issue 48: the slots and the runs kept come from the box, and a class of 40 keeps every finished
    run on Community Cloud's smallest box (690 MB, one core; the server holds ~300 MB when it sizes)."""
    from minigpt.serve.host.capacity import Capacity

    mb = 2**20
    slots, kept = face.server_sizes(Capacity(1.0, (690 - 300) * mb, "cgroup v1"))
    assert slots == 1 and kept >= 40
    assert kept * face.KEPT_RUN_BYTES + slots * face.RUN_BYTES + face.SERVER_BYTES <= (690 - 300) * mb
    assert face.server_sizes(Capacity(16.0, 16_000 * mb, "no control group"))[0] == 16  # a school server
    assert face.server_sizes(Capacity(16.0, 200 * mb, "cgroup v2"))[0] == 1  # memory, not CPUs, bounds it
    assert face.server_sizes(Capacity(1.0, (690 - 300) * mb, "cgroup v1"), max_runs=3)[0] == 3  # the setting wins


def test_a_waiting_run_is_told_its_place_in_chinese(monkeypatch):
    from helpers.language import assert_chinese

    monkeypatch.setenv(face.MAX_RUNS_ENV, "1")
    start_tiny_run("zh")
    waiting = start_tiny_run("zh")
    assert runs.registry().get(*own_run(waiting)).is_waiting()
    assert any(i.value.startswith("**排在第 1 位**") for i in waiting.info), [i.value for i in waiting.info]
    assert_chinese(waiting, "Train, waiting in line", besides=[own_run(waiting)[0]])
