"""minigpt/serve/line/registry.py: the run registry on its own, without Streamlit: owners, the line for a
training slot (first in, first out, one run per owner, its length, absent owners, failures), the
estimates a waiting learner is shown, watchers following the owner, what is kept of ended runs,
and the release of runs nobody looks at.

Time is a clock the test moves by hand, and the line moves only when the test calls dispatch():
no test waits for time to pass. Most runs here are `Scripted` runs whose step and pace the test
sets, so that a place and an estimate can be checked against arithmetic done by hand; the real
runs (a Trainer on a thread) check what only they can show.

    pytest tests/minigpt/serve/test_registry.py
"""
import threading
import pytest
import torch

from helpers.tiny import TEXT, tiny_config, tiny_tokenizer
from helpers.waiting import wait_until
from minigpt import TrainConfig, Trainer, build_model
from minigpt.serve.runs.kept import KEPT_SHARE, KeptRun
from minigpt.serve.line.waiting import Estimate, start_in
from minigpt.serve.runs.recipe import RunSpec
from minigpt.serve.line.registry import HeldSlot, NotOwnerError, RunLimitError, RunRegistry
from helpers.scripted_run import Scripted
from minigpt.serve.runs.run import Run
from minigpt.serve.runs.thread import TrainingRun

IDLE, AWAY = 600, 60  # seconds an owner may stay away from a run, and from a waiting run


class Clock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _plan(max_steps: int = 300, d_model: int = 16) -> RunSpec:
    tok = tiny_tokenizer()
    model = tiny_config(vocab_size=tok.vocab_size, d_model=d_model).validate()
    train = TrainConfig(batch_size=4, block_size=8, max_steps=max_steps, warmup_steps=2, eval_interval=10_000,
                        eval_iters=1).validate(model)
    return RunSpec("", model, train, tuple(tok.chars), TEXT)


class Line:
    """A registry of scripted runs: `join` puts one in line for an owner, `runs` are the ones built, in order."""

    def __init__(self, clock: Clock, slots: int = 1, **settings):
        self.registry = RunRegistry(max_runs=slots, idle_seconds=IDLE, waiting_idle_seconds=AWAY, clock=clock,
                                    dispatcher=False, **settings)
        self.runs: dict[str, Scripted] = {}
        self.built: list[str] = []
        self._lock = threading.Lock()

    def build(self, run_id: str) -> Scripted:
        with self._lock:
            assert run_id not in self.runs, "a run built twice"
            training = sum(r.is_alive() for r in self.runs.values())
            assert training < self.registry.max_runs, f"a run built while {training} train on {self.registry.max_runs}"
            self.built.append(run_id)
            self.runs[run_id] = run = Scripted(run_id)
            return run

    def join(self, plan: RunSpec | None = None, replace=None, paused: bool = False):
        return self.registry.submit(plan or _plan(), corpus="c", build=self.build, replace=replace, paused=paused)

    def end(self, entry, state: str = "finished") -> None:
        self.runs[entry.run_id]._state = state
        self.registry.dispatch()


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def line(clock):
    line = Line(clock)
    yield line
    line.registry.stop_all()


# -- the line -----------------------------------------------------------------------------------
def test_a_start_on_a_full_server_waits_in_line_and_starts_when_the_slot_frees(line):
    first, second = line.join(), line.join()
    assert first.run.state == "running" and second.run.state == "waiting"
    assert line.registry.place(second) == 1 and line.registry.place(first) is None
    line.end(first)
    assert second.run.state == "running" and line.built == [first.run_id, second.run_id]


def test_concurrent_starts_give_a_strict_fifo_line_with_no_run_lost_or_duplicated(clock):
    """Forty owners press Start at once from forty threads; then the line drains as runs end. The
    runs start in the order the line gave them, each exactly once, never more than the slots at once."""
    line = Line(clock, slots=3)
    entries, barrier = [], threading.Barrier(40)

    def press() -> None:
        barrier.wait()
        entries.append(line.join())

    threads = [threading.Thread(target=press) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    by_order = sorted(entries, key=lambda e: e.order)
    assert len({e.order for e in entries}) == 40
    while len(line.built) < 40:
        training = [r for r in line.runs.values() if r.state == "running"]
        assert len(training) == 3 or len(line.built) + len(training) >= 40
        line.end(line.registry.get(training[0].run_id))
    assert line.built == [e.run_id for e in by_order]
    assert [line.registry.place(e) for e in entries] == [None] * 40


def test_places_count_from_the_front_and_move_up_as_the_line_drains(line):
    running = line.join()
    waiting = [line.join() for _ in range(3)]
    assert [line.registry.place(e) for e in waiting] == [1, 2, 3]
    line.end(running)
    assert [line.registry.place(e) for e in waiting] == [None, 1, 2]
    assert line.registry.waiting_count() == 2


def test_a_second_start_replaces_the_owners_waiting_run_and_keeps_its_place(line):
    line.join()
    mine, theirs = line.join(), line.join()
    again = line.join(replace=(mine.run_id, mine.key))
    assert line.registry.get(mine.run_id) is None and mine.run.state == "closed"
    assert line.registry.place(again) == 1 and line.registry.place(theirs) == 2
    assert line.registry.successor(mine.run_id) is again


def test_a_start_never_replaces_someone_elses_waiting_run(line):
    line.join()
    theirs = line.join()
    mine = line.join(replace=(theirs.run_id, "not their key"))
    assert line.registry.place(theirs) == 1 and line.registry.place(mine) == 2


def test_a_second_start_replaces_the_owners_training_run_and_goes_to_the_back(line):
    """Replacing a run that trains frees its slot, but the new run queues behind those already waiting."""
    mine = line.join()
    theirs = line.join()
    again = line.join(replace=(mine.run_id, mine.key))
    assert line.runs[mine.run_id].state == "closed"
    assert theirs.run.state == "running" and line.registry.place(again) == 1


def test_the_owner_cancels_a_waiting_run_and_nobody_else_can(line):
    line.join()
    mine, theirs = line.join(), line.join()
    with pytest.raises(NotOwnerError):
        line.registry.control(mine.run_id, theirs.key, "cancel")
    line.registry.control(mine.run_id, mine.key, "cancel")
    assert line.registry.get(mine.run_id) is None and line.registry.place(theirs) == 1


def test_stop_on_a_waiting_run_takes_it_out_of_the_line(line):
    line.join()
    mine = line.join()
    line.registry.control(mine.run_id, mine.key, "stop")
    assert line.registry.get(mine.run_id) is None and line.registry.waiting_count() == 0


def test_a_waiting_run_whose_owner_shows_no_sign_of_life_is_dropped_before_it_starts(line, clock):
    running = line.join()
    present, absent = line.join(), line.join()
    for _ in range(3):
        clock.now += AWAY - 1
        line.registry.get(present.run_id, present.key)  # any page of theirs, or the run's link
        line.registry.get(running.run_id, running.key)
    assert line.registry.get(absent.run_id) is None and absent.run.state == "closed"
    assert line.registry.place(present) == 1
    line.end(running)
    assert line.built == [running.run_id, present.run_id]


def test_a_watcher_looking_at_a_waiting_run_keeps_nothing_alive(line, clock):
    line.join()
    waiting = line.join()
    clock.now += AWAY / 2
    line.registry.get(waiting.run_id)  # someone with the read-only link
    clock.now += AWAY / 2 + 1
    assert line.registry.get(waiting.run_id) is None


def test_past_the_lines_length_limit_start_is_refused_with_the_wait(clock):
    line = Line(clock, max_waiting=2)
    running = line.join(plan=_plan(max_steps=300))
    waiting = [line.join(plan=_plan(max_steps=300)) for _ in range(2)]
    line.runs[running.run_id].at(100, 20.0)  # 5 steps/s: 40 s to go, then two runs of 60 s each
    line.registry.dispatch()
    with pytest.raises(RunLimitError, match="All 2 places in the line") as refused:
        line.join()
    assert refused.value.params["minutes"] == pytest.approx(160 / 60)
    again = line.join(replace=(waiting[0].run_id, waiting[0].key))  # replacing one's own is no new place
    assert line.registry.place(again) == 1


def test_a_run_that_fails_frees_its_slot_for_the_next(line):
    failing, next_one = line.join(), line.join()
    line.end(failing, "error")
    assert next_one.run.state == "running"
    assert line.registry.get(failing.run_id) is failing  # its owner still reads why


def test_a_run_that_cannot_be_built_tells_its_owner_and_the_next_starts(clock):
    registry = RunRegistry(max_runs=1, clock=clock, dispatcher=False)

    def refuse(run_id):
        raise MemoryError("no memory for this run")

    try:
        broken = registry.submit(_plan(), corpus="c", build=refuse)
        assert broken.run.state == "error" and "no memory" in str(broken.run.snapshot().error)
        nxt = registry.submit(_plan(), corpus="c", build=lambda run_id: Scripted(run_id))
        assert nxt.run.state == "running"
    finally:
        registry.stop_all()


def test_a_paused_run_holds_its_slot(line):
    paused = line.join(paused=True)
    waiting = line.join()
    assert paused.run.state == "paused" and waiting.run.state == "waiting"
    line.registry.control(paused.run_id, paused.key, "resume")
    line.end(paused, "stopped")
    assert waiting.run.state == "running"


def test_the_dispatcher_starts_the_next_run_with_nobody_looking(clock):
    registry = RunRegistry(max_runs=1, clock=clock)  # with its dispatcher thread, as the app runs it
    built = []
    try:
        first = registry.submit(_plan(), corpus="c", build=lambda run_id: built.append(Scripted(run_id)) or built[-1])
        second = registry.submit(_plan(), corpus="c", build=lambda run_id: built.append(Scripted(run_id)) or built[-1])
        assert first.run.state == "running" and second.is_waiting()
        built[0]._state = "finished"  # its run ends; no page asks the registry anything
        wait_until(lambda: second.run.state == "running", "the dispatcher to start the next run")
    finally:
        registry.stop_all()


def test_a_run_cancelled_while_it_is_built_is_closed_and_frees_its_slot(clock):
    registry = RunRegistry(max_runs=1, clock=clock, dispatcher=False)
    building, go, made = threading.Event(), threading.Event(), []

    def slow(run_id):
        building.set()
        go.wait(timeout=60)
        made.append(Scripted(run_id))
        return made[-1]

    try:
        entry = registry.submit(_plan(), corpus="c", build=lambda run_id: Scripted(run_id))
        waiting = registry.submit(_plan(), corpus="c", build=slow)
        mover = threading.Thread(target=lambda: (entry.run.stop(), registry.dispatch()))
        mover.start()
        building.wait(timeout=60)
        assert waiting.run.state == "starting" and registry.active_count() == 1  # the build holds the slot
        registry.control(waiting.run_id, waiting.key, "cancel")
        go.set()
        mover.join()
        assert made[0].state == "closed" and registry.get(waiting.run_id) is None
        assert registry.gone_reason(waiting.run_id) == "cancelled" and registry.active_count() == 0
    finally:
        go.set()
        registry.stop_all()


def test_a_run_that_fails_to_start_is_closed_and_says_why(clock):
    class Refuses(Scripted):
        def start(self, paused=False):
            raise RuntimeError("the child refused to start")

    registry = RunRegistry(max_runs=1, clock=clock, dispatcher=False)
    made = []
    try:
        entry = registry.submit(_plan(), corpus="c", build=lambda run_id: made.append(Refuses(run_id)) or made[-1])
        assert entry.run.state == "error" and "refused to start" in str(entry.run.snapshot().error)
        assert made[0].state == "closed" and registry.active_count() == 0
    finally:
        registry.stop_all()


def test_a_run_paused_past_its_grace_while_others_wait_is_stopped_for_the_line(clock):
    line = Line(clock, paused_grace_seconds=120)
    paused = line.join(paused=True)
    clock.now += 200
    line.registry.dispatch()
    assert paused.run.state == "paused"  # nobody waits: it may stay paused
    line.registry.control(paused.run_id, paused.key, "steps:5")  # its owner steps through: it is in use
    waiting = line.join()
    clock.now += 50
    line.registry.get(waiting.run_id, waiting.key)  # the learner who waits is there
    clock.now += 50
    line.registry.get(waiting.run_id, waiting.key)
    assert paused.run.state == "paused" and not paused.stopped_for_line
    clock.now += 21
    line.registry.get(waiting.run_id, waiting.key)
    assert paused.stopped_for_line and line.runs[paused.run_id].state == "stopped"
    line.registry.dispatch()
    assert waiting.run.state == "running"
    line.registry.stop_all()


def test_a_finished_run_whose_weights_cannot_be_read_is_let_go_after_a_few_tries(line):
    entry = line.join()
    line.runs[entry.run_id]._state = "finished"
    for _ in range(2):
        line.registry.dispatch()
        assert line.runs[entry.run_id].state == "finished"  # its process may just be busy: tried again
    line.registry.dispatch()
    assert line.runs[entry.run_id].state == "closed"  # its process is let go; the entry stays, as it was
    assert line.registry.get(entry.run_id) is entry


def test_why_a_run_is_gone_is_remembered_for_its_owner(line, clock):
    line.join()
    cancelled, dropped = line.join(), line.join()
    line.registry.control(cancelled.run_id, cancelled.key, "cancel")
    clock.now += AWAY + 1
    line.registry.dispatch()
    assert line.registry.gone_reason(cancelled.run_id) == "cancelled"
    assert line.registry.gone_reason(dropped.run_id) == "dropped"


# -- the estimates --------------------------------------------------------------------------------
def test_start_in_gives_each_run_ahead_the_first_slot_that_frees():
    # slots free at 25 s and 40 s; runs ahead of 30 s and 20 s: 25→55, 40→60: the next starts at 55 s
    assert start_in(2, [40.0, 25.0], [30.0, 20.0]) == 55.0
    assert start_in(2, [40.0, 25.0], []) == 25.0
    assert start_in(3, [10.0], [5.0]) == 0.0  # two slots are free now
    assert start_in(1, [30.0, 10.0], []) == 30.0  # more runs than slots (the setting was lowered): 10 s frees none


def test_each_waiting_learner_is_shown_a_start_computed_from_the_runs_ahead(clock):
    """Two slots, both taken 20 s ago: a run of a shape this server trains whole in 60 s (40 s to go)
    and one of a shape it trains in 45 s (25 s to go). Three wait, of a shape trained whole in 30 s.
    By hand: the first starts in 25 s, the second in 40 s, the third in 25 + 30 = 55 s."""
    line = Line(clock, slots=2)
    slow_plan, fast_plan, plan = _plan(d_model=32), _plan(d_model=24), _plan()
    line.join(plan=slow_plan), line.join(plan=fast_plan)
    waiting = [line.join(plan=plan) for _ in range(3)]
    for shape_plan, seconds in ((slow_plan, 60.0), (fast_plan, 45.0), (plan, 30.0)):
        line.registry.speeds.finished(shape_plan.shape, 300, seconds)
    clock.now += 20
    for entry in waiting:
        line.registry.get(entry.run_id, entry.key)
    assert [line.registry.estimate(e) for e in waiting] == [Estimate(25.0, False), Estimate(40.0, False),
                                                            Estimate(55.0, False)]


def test_a_whole_runs_pace_is_the_median_of_the_last_few_and_counts_from_the_slot_to_the_end(line, clock):
    plan = _plan()
    for seconds in (30.0, 31.0, 90.0):  # one run slowed by a busy moment moves nothing
        running = line.join(plan=plan)
        clock.now += seconds
        line.runs[running.run_id].at(300, seconds - 5)  # its trainer's own clock leaves out its build and more
        line.runs[running.run_id]._state = "finished"
        line.registry.dispatch()
    assert line.registry.speeds.pace(plan.shape).steps_per_sec == pytest.approx(300 / 31.0)


def test_before_any_run_finished_a_training_runs_own_pace_gives_a_rough_estimate(clock):
    line = Line(clock, slots=1)
    small = _plan()
    running = line.join(plan=small)
    wide = _plan(d_model=32)
    waiting = [line.join(plan=wide), line.join(plan=wide)]
    line.runs[running.run_id].at(150, 15.0)  # 10 steps/s of training: 15 s to go, before its evaluations
    line.registry.dispatch()
    work = wide.model.num_params() / small.model.num_params()  # same batch and block: work scales with parameters
    first, second = (line.registry.estimate(e) for e in waiting)
    assert first == Estimate(15.0, True)
    assert second.rough and second.seconds == pytest.approx(15.0 + 300 / (10.0 / work))


def test_no_estimate_before_the_server_has_any_pace(line):
    line.join()
    waiting = line.join()
    assert line.registry.estimate(waiting) is None


# -- work on the caller's thread ------------------------------------------------------------------
def test_a_slot_for_the_callers_own_work_waits_in_the_same_line(line):
    running = line.join()
    race = line.registry.request_slot(_plan())
    after = line.join()
    assert line.registry.place(race) == 1 and line.registry.place(after) == 2
    line.end(running)
    assert isinstance(race.run, HeldSlot) and race.is_active() and after.run.state == "waiting"
    assert line.registry.claim(race)
    line.registry.give_back(race)
    assert after.run.state == "running"


def test_a_granted_slot_its_page_never_claims_goes_to_the_next_in_line(line, clock):
    running = line.join()
    race, after = line.registry.request_slot(_plan()), line.join()
    line.end(running)
    assert isinstance(race.run, HeldSlot)  # granted while its page was away
    clock.now += 21  # more than CLAIM_SECONDS
    line.registry.dispatch()
    assert not race.is_active() and after.run.state == "running" and not line.registry.claim(race)


def test_a_claimed_slot_is_held_while_its_work_runs_longer_than_the_line_waits_for_anyone(line, clock):
    race = line.registry.request_slot(_plan())
    assert line.registry.claim(race)
    after = line.join()
    for _ in range(3):  # a long race: its page looks at nothing meanwhile; the learner behind it is there
        clock.now += AWAY - 1
        line.registry.get(after.run_id, after.key)
    assert race.is_active() and after.is_waiting()


# -- owners and watchers -------------------------------------------------------------------------
def test_only_the_key_steers_a_run(line):
    entry = line.join()
    with pytest.raises(NotOwnerError):
        line.registry.control(entry.run_id, "guess", "stop")
    line.registry.control(entry.run_id, entry.key, "pause")
    assert entry.run.state == "paused"


def test_a_watcher_follows_every_replacement_to_the_owners_newest_run(line):
    first = line.join()
    second = line.join(replace=(first.run_id, first.key))
    third = line.join(replace=(second.run_id, second.key))
    assert line.registry.successor(first.run_id) is third and line.registry.successor(second.run_id) is third
    assert line.registry.successor(third.run_id) is None


def test_a_run_its_owner_left_is_released_though_others_still_watch_it(line, clock):
    """A class watches the teacher's run from a link without the key. Their looking keeps nothing
    alive: only the owner's does. Released, the run is closed and its slot is free again."""
    entry = line.join()
    for _ in range(2):
        clock.now += 20
        assert line.registry.get(entry.run_id) is entry
    clock.now += IDLE - 2 * 20 + 1
    assert line.registry.get(entry.run_id) is None
    assert line.runs[entry.run_id].state == "closed" and line.registry.active_count() == 0
    assert line.join().run.state == "running"


def test_a_run_its_owner_keeps_looking_at_is_never_released(line, clock):
    entry = line.join()
    for _ in range(5):
        clock.now += IDLE - 1
        assert line.registry.get(entry.run_id, entry.key) is entry
    clock.now += IDLE + 1
    assert line.registry.get(entry.run_id, entry.key) is None


# -- what is kept of runs that ended --------------------------------------------------------------
def _real(max_steps: int = 12):
    def build(run_id: str) -> TrainingRun:
        tok = tiny_tokenizer()
        cfg = TrainConfig(batch_size=4, block_size=8, max_steps=max_steps, warmup_steps=2, eval_interval=6,
                          eval_iters=1)
        return TrainingRun(Trainer(build_model(tiny_config(vocab_size=tok.vocab_size), 0), tok, TEXT, cfg),
                           probe_text=TEXT[:8], run_id=run_id)
    return build


@pytest.mark.trains
def test_a_finished_run_is_kept_small_with_the_same_weights_and_history(clock):
    registry = RunRegistry(max_runs=1, clock=clock, dispatcher=False)
    try:
        entry = registry.submit(_plan(max_steps=12), corpus="c", build=_real())
        trained = entry.run
        wait_until(lambda: trained.state == "finished" and not trained.is_alive(), "the run to finish")
        ids = torch.tensor([tiny_tokenizer().encode(TEXT[:8])])
        before, history = trained.inference_model()(ids)[0], trained.snapshot().history
        registry.dispatch()
        assert isinstance(entry.run, KeptRun) and trained.state == "closed" and trained.trainer.model is None
        assert torch.equal(entry.run.inference_model()(ids)[0], before)
        snap = entry.run.snapshot()
        assert snap.state == "finished" and snap.step == 12 and snap.history == history
        assert [r.step for r in snap.evals] == [0, 6, 12] and all(r.attention is not None for r in snap.evals)
        assert entry.run.trainer.step == 12 and entry.run.trainer.val_windows is not None
        # what it holds, counted by hand: float32 weights without the tied head twice, and three (2, 2, 8, 8) maps
        params = sum(p.numel() for p in build_model(tiny_config(vocab_size=tiny_tokenizer().vocab_size), 0)
                     .state_dict().values())
        assert entry.run.nbytes() >= 4 * params + 3 * 2 * 2 * 8 * 8 * 4
    finally:
        registry.stop_all()


def _finished(registry, clock, count: int, max_steps: int = 4) -> list:
    """`count` real runs started a second apart, each finished and kept small."""
    entries = []
    for _ in range(count):
        clock.now += 1
        entries.append(registry.submit(_plan(max_steps=max_steps), corpus="c", build=_real(max_steps)))
        run = entries[-1].run
        wait_until(lambda: run.state == "finished" and not run.is_alive(), "the run to finish")
        registry.dispatch()
    return entries


@pytest.mark.trains
def test_kept_runs_past_their_memory_are_released_the_longest_unseen_first(clock):
    measure = RunRegistry(max_runs=1, clock=clock, dispatcher=False)
    try:
        size = _finished(measure, clock, 1)[0].run.nbytes()  # every run below is the same run again
    finally:
        measure.stop_all()
    registry = RunRegistry(max_runs=1, clock=clock, dispatcher=False, kept_bytes=2 * size + size // 2)
    try:
        entries = _finished(registry, clock, 2)
        clock.now += 1
        registry.get(entries[0].run_id, entries[0].key)  # its owner is back: the second is now the longest unseen
        entries += _finished(registry, clock, 1)
        assert [registry.get(e.run_id) is not None for e in entries] == [True, False, True]
    finally:
        registry.stop_all()


@pytest.mark.trains
def test_a_long_time_lapse_is_kept_within_its_share_of_the_memory_for_kept_runs(clock):
    measure = RunRegistry(max_runs=1, clock=clock, dispatcher=False)
    try:
        whole = _finished(measure, clock, 1, max_steps=24)[0].run  # evaluations at 0, 6, 12, 18 and 24
        share = whole.nbytes() - whole.snapshot().evals[0].attention.nbytes  # a frame too many: some must go
    finally:
        measure.stop_all()
    registry = RunRegistry(max_runs=1, clock=clock, dispatcher=False, kept_bytes=KEPT_SHARE * share)
    try:
        kept = _finished(registry, clock, 1, max_steps=24)[0].run
        frames = [r.step for r in kept.snapshot().evals if r.attention is not None]
        assert kept.nbytes() <= share and frames[0] == 0 and frames[-1] == 24  # its first and last frames stay
    finally:
        registry.stop_all()


def test_a_scripted_run_is_a_run_to_the_registry():
    assert isinstance(Scripted("x"), Run)  # else the registry would never start, steer or keep it
