"""The registry and the classes across a restart: what a server process held, read back by a new one
(a new Store, RunRegistry and Classes on the same database, as after a redeploy). An interrupted run
resumes to the very losses of one never interrupted, in threads, in child processes and as Ray actors, and its
stored curve has no hole where it resumed; finished, training and waiting runs come back as they were, and a
Start after the restart joins the line behind them; a class comes back whole; every key still works and no
other key does. A checkpoint reaches the store after the steps it holds, and an owner's visits keep their
run from retention.

Runs are real and tiny; nothing here sleeps to wait: every wait is on a condition.

    pytest tests/minigpt/serve/test_store_restart.py
"""
import json

import pytest
import torch

from helpers.waiting import parked, wait_until
from minigpt import CharTokenizer, GPTConfig, TrainConfig
from minigpt.serve.store import keys
from minigpt.serve.classes.board import Challenge
from minigpt.serve.classes.classes import Classes
from minigpt.serve.classes.roster import BoardError
from minigpt.serve.line.waiting import WaitingRun
from minigpt.serve.line.registry import NotOwnerError, RunRegistry
from minigpt.serve.store.database import Store
from minigpt.serve.store.retention import Retention
from minigpt.serve.runs.process import build_run
from minigpt.serve.runs.recipe import RunSpec

pytestmark = [pytest.mark.trains, pytest.mark.slow]

FOX = "the quick brown fox jumps over the lazy dog. " * 60
DAY = 86400.0


class Clock:
    """Seconds that pass only when the test says so."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _spec(max_steps: int = 10, eval_interval: int = 5, *, d_model: int = 16, d_ff: int = 32, max_len: int = 16,
          block_size: int = 8, eval_iters: int = 1, warmup_steps: int = 2, threads: int = 1) -> RunSpec:
    tok = CharTokenizer.from_text(FOX)
    model = GPTConfig(vocab_size=tok.vocab_size, d_model=d_model, num_heads=2, num_layers=1, d_ff=d_ff,
                      max_len=max_len).validate()
    train = TrainConfig(max_steps=max_steps, batch_size=4, block_size=block_size, eval_interval=eval_interval,
                        eval_iters=eval_iters, warmup_steps=warmup_steps, device="cpu").validate(model)
    spec = RunSpec("", model, train, tuple(tok.chars), FOX, None, FOX[:16], "t", 10, nice=0, threads=threads)
    return spec


def _builder(in_process: bool = False):
    return lambda spec, resume: build_run(spec, resume, in_process=in_process)


def _submit(registry: RunRegistry, spec: RunSpec, paused: bool = False):
    return registry.submit(spec, corpus="fox", paused=paused)


def _finished(registry: RunRegistry, *entries) -> None:
    for entry in entries:
        wait_until(lambda: registry.get(entry.run_id).run.state == "finished", f"run {entry.run_id} to finish")


def _curve(history) -> list[tuple]:
    return [(e.step, e.train_loss, e.val_loss) for e in history]


class Server:
    """What one server process holds: a store, a registry and the classes, on one database."""

    def __init__(self, url: str, builder, **settings) -> None:
        self.url, self.builder, self.settings = url, builder, settings
        self.store = Store.from_url(url)
        assert self.store.ready, self.store.problem
        self.registry = RunRegistry(store=self.store, builder=builder, **{"max_runs": 1, "dispatcher": False,
                                                                          **settings})
        self.classes = Classes(store=self.store)
        self.stopped = False

    def stop(self) -> None:
        """As a server going down: what the runs logged last is written, then the runs and the store end."""
        if self.stopped:
            return
        self.stopped = True
        try:
            self.registry.stop_all()
            assert self.store.flush(30), "the store did not write what was queued"
        finally:
            self.store.close()


class Servers:
    def __init__(self) -> None:
        self.started: list[Server] = []

    def start(self, url: str, builder, **settings) -> Server:
        server = Server(url, builder, **settings)
        self.started.append(server)
        return server

    def restart(self, server: Server) -> Server:
        server.stop()
        return self.start(server.url, server.builder, **server.settings)


@pytest.fixture
def servers():
    started = Servers()
    yield started
    for server in started.started:
        server.stop()


@pytest.mark.parametrize("where", ["thread", "process", pytest.param("ray", marks=pytest.mark.cluster)])
def test_a_run_interrupted_by_a_restart_resumes_to_the_losses_of_one_never_interrupted(where, tmp_path, servers,
                                                                                       request):
    """On a thread, in a child process, and as an actor on a 2-node Ray cluster (tests/helpers/ray_cluster.py),
    whose actors end with the server that made them."""
    spec = _spec(60, 20, d_model=32, d_ff=64, max_len=32, block_size=16, eval_iters=2, warmup_steps=5,
                       threads=2)  # a run's share of the CPUs: its checkpoint says how many threads it trained on
    in_process = where != "thread"  # out of this interpreter: it trains with the spec's thread count
    if where == "ray":
        cluster = request.getfixturevalue("ray_cluster").cluster
        builder = lambda spec, resume: cluster.run(spec, resume)  # noqa: E731
    else:
        builder = _builder(in_process)
    alone = RunRegistry(max_runs=1, dispatcher=False, builder=builder)
    try:
        whole = _submit(alone, spec)
        _finished(alone, whole)
        uninterrupted = _curve(alone.get(whole.run_id).run.snapshot().history)
    finally:
        alone.stop_all()

    server = servers.start(f"sqlite:///{tmp_path / 'store.db'}", builder)
    entry = _submit(server.registry, spec, paused=True)
    server.registry.control(entry.run_id, entry.key, "steps:45")
    wait_until(lambda: server.registry.get(entry.run_id).run.snapshot().step == 45
               and server.registry.get(entry.run_id).run.state == "paused", "the run to pause at step 45")
    assert server.store.flush(30)
    step, files = server.store.checkpoints.load(entry.run_id)
    meta = json.loads(files["config.json"])["meta"]
    assert step == 40 and meta["trainer_state"]["step"] == 40
    assert meta["threads"] == (spec.threads if in_process else torch.get_num_threads())

    server = servers.restart(server)
    again = server.registry.get(entry.run_id, entry.key)
    assert again.run.state == "interrupted" and again.run.snapshot().step == 45 and again.run.resume_step == 40
    server.registry.control(entry.run_id, entry.key, "resume")
    _finished(server.registry, entry)
    resumed = _curve(server.registry.get(entry.run_id).run.snapshot().history)
    assert [s for s, *_ in resumed] == [s for s, *_ in uninterrupted] and len(resumed) == 7
    server.registry.dispatch()  # the run's last news, written
    assert server.store.flush(30)
    stored = server.store.runs.load(entry.run_id)  # what the next restart reads: the checkpoint's own step too
    assert _curve(stored.history) == resumed
    assert [r.step for r in stored.evals] == [r.step for r in server.registry.get(entry.run_id).run.snapshot().evals]
    for (step, train, val), (_s, train_alone, val_alone) in zip(resumed, uninterrupted):
        assert train == pytest.approx(train_alone, abs=1e-6), step
        assert (val is None) == (val_alone is None) and (val is None or val == pytest.approx(val_alone, abs=1e-6)), step


def test_finished_training_and_waiting_runs_come_back_as_they_were(database_url, servers):
    builder = _builder()
    server = servers.start(database_url, builder)
    registry = server.registry
    short = _spec(30, 20)  # it ends between evaluations: its last checkpoint is its own
    long = _spec(400, 100)
    finished = _submit(registry, short)
    _finished(registry, finished)
    live = registry.get(finished.run_id)
    history = live.run.snapshot().history
    weights = {name: tensor.clone() for name, tensor in live.inference_model().state_dict().items()}
    training = _submit(registry, long, paused=True)
    registry.control(training.run_id, training.key, "steps:15")
    wait_until(lambda: training.run.snapshot().step == 15 and parked(training.run), "the run to pause at step 15")
    head = _submit(registry, long, paused=True)  # once it starts, it holds the slot paused
    second, third = _submit(registry, long), _submit(registry, long)
    assert [registry.place(e) for e in (head, second, third)] == [1, 2, 3]

    assert server.store.flush(30)
    assert [row.run_id for row in server.store.runs.waiting()] == [head.run_id, second.run_id, third.run_id]
    server = servers.restart(server)  # the restored line moves at once: its head starts, paused as asked
    registry = server.registry
    back = registry.get(finished.run_id)
    assert back.run.state == "finished" and back.run.snapshot().history == history
    assert len(history) == 4 and history[-1].step == 30
    restored = back.inference_model().state_dict()
    assert restored.keys() == weights.keys()
    assert all(torch.equal(restored[name], weights[name]) for name in weights)
    stopped = registry.get(training.run_id)
    assert stopped.run.state == "interrupted" and stopped.run.snapshot().step == 15

    wait_until(lambda: registry.get(head.run_id).run.state == "paused", "the head of the line to start")
    waiting = [registry.get(e.run_id) for e in (head, second, third)]
    assert [registry.place(e) for e in waiting] == [None, 1, 2]
    assert [isinstance(e.run, WaitingRun) for e in waiting] == [False, True, True]
    assert all(e.is_owner(old.key) and not e.is_owner(keys.new_key()) for e, old in zip(waiting, (head, second, third)))


def test_the_line_restored_at_a_restart_moves_without_anyone_pressing_anything(tmp_path, servers):
    # the server as the app runs it, on the registry's own dispatcher thread: the owner only watches
    builder = _builder()
    spec = _spec(400, 100)
    server = servers.start(f"sqlite:///{tmp_path / 'store.db'}", builder, dispatcher=True)
    holding = _submit(server.registry, spec, paused=True)
    waiting = _submit(server.registry, spec)
    assert holding.run.state == "paused" and server.registry.place(waiting) == 1

    server = servers.restart(server)  # the run that held the slot comes back interrupted: the slot is free
    wait_until(lambda: server.registry.get(waiting.run_id, waiting.key).run.state not in ("waiting", "starting"),
               "the restored head of the line to start", timeout=20)


def test_a_start_after_a_restart_joins_the_line_behind_the_runs_that_waited_through_it(tmp_path, servers):
    builder = _builder()
    spec = _spec(400, 100)
    server = servers.start(f"sqlite:///{tmp_path / 'store.db'}", builder)
    _submit(server.registry, spec, paused=True)  # holds the one slot until the restart
    head = _submit(server.registry, spec, paused=True)  # once it starts, it holds the slot paused
    second = _submit(server.registry, spec)
    assert [server.registry.place(e) for e in (head, second)] == [1, 2]

    server = servers.restart(server)
    registry = server.registry
    wait_until(lambda: registry.get(head.run_id).run.state == "paused", "the head of the line to start")
    late = _submit(registry, spec)  # numbered after every run the store had in line
    assert [registry.place(registry.get(e.run_id)) for e in (second, late)] == [1, 2]


def test_an_owner_who_opens_their_run_every_day_keeps_it_past_run_days(tmp_path):
    """Retention lets a run on no board go `run_days` after its owner last opened it: the registry
    tells the store when the owner opens it (at most every few minutes), on the store's own clock."""
    wall, clock = Clock(1_000_000.0), Clock(1000.0)
    store = Store.from_url(f"sqlite:///{tmp_path / 'store.db'}", retention=Retention(run_days=7), clock=wall)
    registry = RunRegistry(max_runs=1, dispatcher=False, store=store, builder=_builder(), clock=clock)
    try:
        spec = _spec()
        entry = _submit(registry, spec)
        _finished(registry, entry)
        for day in range(1, 11):
            wall.now += DAY
            clock.now += DAY
            assert registry.get(entry.run_id, entry.key) is not None, f"day {day}"
            assert store.flush(30)
            store.tidy()
            assert store.flush(30)
        assert store.runs.load(entry.run_id) is not None  # made 10 days ago, opened yesterday
        wall.now += 7 * DAY + 60  # then nobody opens it for a week
        store.tidy()
        assert store.flush(30) and store.runs.load(entry.run_id) is None
    finally:
        registry.stop_all()
        store.flush(30)
        store.close()


def test_a_checkpoint_reaches_the_store_after_the_steps_and_evaluation_it_holds(tmp_path, servers, monkeypatch):
    """A server killed between two writes never leaves a checkpoint whose history is missing: when each
    checkpoint is handed to the store, the store already holds the steps and evaluation up to it."""
    builder = _builder()
    server = servers.start(f"sqlite:///{tmp_path / 'store.db'}", builder)
    store, held = server.store, []
    save_checkpoint = store.checkpoints.save

    def history_first(run_id: str, step: int, files: dict) -> bool:
        # writes land in the order they are queued: what the store holds now is what a server killed
        # right after this checkpoint's write would resume with
        assert store.flush(30)
        row = store.runs.load(run_id)
        held.append((step, step in {e.step for e in row.history}, step in {r.step for r in row.evals}))
        return save_checkpoint(run_id, step, files)

    monkeypatch.setattr(store.checkpoints, "save", history_first)
    spec = _spec(30, 10)
    entry = _submit(server.registry, spec)
    _finished(server.registry, entry)
    assert held == [(10, True, True), (20, True, True), (30, True, True)]


def _board(classes: Classes, code: str, key: str, registry: RunRegistry) -> dict:
    view = classes.view(code, registry.get, registry.place)
    lesson = classes.lesson(code)
    return {"rows": [(r.post_id, r.run_id, r.label, r.hidden, r.pinned, r.state, r.step, r.best_val, r.refusals)
                     for r in view.rows],
            "challenge": view.challenge, "lesson": (lesson.step, lesson.revealed),
            "counts": (classes.counts(code, key, 4, 3), classes.counts(code, key, 2, 4)),
            "ann": classes.answered(code, "ann", 4)}


def test_a_class_comes_back_whole_after_a_restart(database_url, servers):
    builder = _builder()
    spec = _spec()
    server = servers.start(database_url, builder, max_runs=2)
    alpha, beta = _submit(server.registry, spec), _submit(server.registry, spec)
    _finished(server.registry, alpha, beta)
    classes = server.classes
    opened = classes.open()
    code, key = opened.code, opened.teacher_key
    classes.set_challenge(code, key, Challenge(corpus="fox", max_steps=100))
    first, _ = classes.post(code, alpha, alpha.key, "alpha", learner="ann", corpus="fox")
    second, _ = classes.post(code, beta, beta.key, "beta", learner="ben", corpus="fox")
    classes.pin(code, key, second)
    classes.hide(code, key, first)
    classes.lead(code, key, 4)
    for learner, step, option in (("ann", 4, 1), ("ben", 4, 1), ("cat", 4, 0), ("ann", 2, 3)):
        classes.answer(code, learner, step, option)
    classes.reveal(code, key, 2)  # after its answers: a revealed step's counts no longer move
    before = _board(classes, code, key, server.registry)
    assert [(r[0], r[2], r[3], r[4]) for r in before["rows"]] == [(second, "beta", False, True),
                                                                   (first, "alpha", True, False)]
    assert before["lesson"] == (4, frozenset({2})) and before["counts"] == ([1, 2, 0], [0, 0, 0, 1])
    assert before["challenge"] == Challenge(corpus="fox", max_steps=100)

    server = servers.restart(server)
    assert server.classes.find(code).is_teacher(key) and not server.classes.find(code).is_teacher(alpha.key)
    assert _board(server.classes, code, key, server.registry) == before


def test_closing_a_class_removes_its_rows_and_erasing_it_removes_its_runs_too(database_url, servers):
    builder = _builder()
    spec = _spec()
    server = servers.start(database_url, builder, max_runs=2)
    alpha, beta = _submit(server.registry, spec), _submit(server.registry, spec)
    _finished(server.registry, alpha, beta)
    classes, store = server.classes, server.store
    closed, erased = classes.open(), classes.open()
    classes.post(closed.code, alpha, alpha.key, "alpha", learner="ann", corpus="fox")
    classes.post(erased.code, beta, beta.key, "beta", learner="ben", corpus="fox")
    classes.answer(closed.code, "ann", 1, 0)
    server.registry.dispatch()
    assert store.flush(30) and store.checkpoints.load(beta.run_id) is not None

    assert classes.close(closed.code, closed.teacher_key) == [alpha.run_id]
    assert store.flush(30)
    assert [c.code for c in store.classes.load()] == [erased.code]
    assert store.runs.load(alpha.run_id) is not None  # closing keeps the runs: their owners may still open them
    assert classes.close(erased.code, erased.teacher_key, erase=True) == [beta.run_id]
    assert store.flush(30)
    assert store.classes.load() == []
    assert store.runs.load(beta.run_id) is None and store.checkpoints.load(beta.run_id) is None
    assert store.runs.load(alpha.run_id) is not None

    server = servers.restart(server)
    for gone in (closed, erased):
        with pytest.raises(BoardError):
            server.classes.find(gone.code)
    assert server.registry.get(beta.run_id) is None and server.registry.get(alpha.run_id) is not None


def test_only_the_owner_key_steers_a_run_after_a_restart(database_url, servers):
    builder = _builder()
    spec = _spec()
    server = servers.start(database_url, builder, max_runs=2)
    mine = _submit(server.registry, spec, paused=True)
    theirs = _submit(server.registry, spec, paused=True)

    server = servers.restart(server)
    registry = server.registry
    entry = registry.get(mine.run_id)
    assert entry.run.state == "interrupted"
    assert entry.is_owner(mine.key)
    for wrong in (None, "", keys.new_key(), theirs.key):
        assert not entry.is_owner(wrong)
        with pytest.raises(NotOwnerError):
            registry.control(mine.run_id, wrong, "resume")
    assert registry.get(mine.run_id).run.state == "interrupted"  # nobody else resumed it
    registry.control(mine.run_id, mine.key, "resume")
    _finished(registry, mine)


def test_a_server_exiting_leaves_its_training_runs_to_come_back_interrupted(tmp_path, servers):
    # what the interpreter's exit does (thread._exit): every run stopped, a child process ended with its
    # server; none of that may reach the store as the run's end, or a redeploy would lose it
    from minigpt.serve.runs.run import EXITING
    from minigpt.serve.runs.thread import _exit

    spec = _spec(2_000, 20)
    server = servers.start(f"sqlite:///{tmp_path / 'store.db'}", _builder(in_process=True))
    entry = _submit(server.registry, spec)
    wait_until(lambda: entry.run.snapshot().step > 20, "the run to train past its first evaluation")
    server.registry.dispatch()
    try:
        _exit()
        wait_until(lambda: entry.run.state in ("stopped", "error"), "the exit to stop the run")
        server.registry.dispatch()  # the dispatcher's next look, as the interpreter winds down
        server.registry.stop_all()
        assert server.store.flush(30)
    finally:
        EXITING.clear()
    server = servers.restart(server)
    back = server.registry.get(entry.run_id, entry.key)
    assert back.run.state == "interrupted" and back.run.resume_step is not None and back.run.resume_step >= 20
