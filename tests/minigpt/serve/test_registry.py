"""minigpt/serve/registry.py: the run registry on its own, without Streamlit: owners, the cap, replacement,
watchers following the owner, and the release of runs nobody looks at.

Idle release is tested on a clock the test moves by hand: no test waits for time to pass.

    pytest tests/minigpt/serve/test_registry.py
"""
import pytest

from helpers.tiny import TEXT, tiny_config, tiny_tokenizer
from helpers.waiting import wait_until
from minigpt import TrainConfig, Trainer, build_model
from minigpt.serve.registry import NotOwnerError, RunLimitError, RunRegistry
from minigpt.serve.runner import TrainingRun

pytestmark = pytest.mark.trains
IDLE = 60  # seconds the registry below lets an owner stay away


class Clock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _build(max_steps: int = 100_000) -> TrainingRun:
    tok = tiny_tokenizer()
    cfg = TrainConfig(batch_size=4, block_size=8, max_steps=max_steps, warmup_steps=2, eval_interval=10_000,
                      eval_iters=1)
    return TrainingRun(Trainer(build_model(tiny_config(vocab_size=tok.vocab_size), 0), tok, TEXT, cfg))


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def registry(clock):
    registry = RunRegistry(max_runs=1, idle_seconds=IDLE, max_kept=3, clock=clock)
    yield registry
    registry.stop_all()


def test_the_cap_refuses_another_owner_but_lets_the_owner_replace_their_run(registry):
    first = registry.start(_build, corpus="c", probe="p")
    with pytest.raises(RunLimitError, match="1 run, its limit"):
        registry.start(_build, corpus="c", probe="p")
    second = registry.start(_build, corpus="c", probe="p", replace=(first.run_id, first.key))
    assert registry.get(first.run_id) is None and first.run.state == "closed"
    assert registry.active_count() == 1 and second.is_active()


def test_only_the_key_steers_a_run(registry):
    entry = registry.start(_build, corpus="c", probe="p")
    with pytest.raises(NotOwnerError):
        registry.control(entry.run_id, "guess", "stop")
    registry.control(entry.run_id, entry.key, "pause")
    assert entry.run.state == "paused"


def test_a_watcher_follows_every_replacement_to_the_owners_newest_run(registry):
    first = registry.start(_build, corpus="c", probe="p")
    second = registry.start(_build, corpus="c", probe="p", replace=(first.run_id, first.key))
    third = registry.start(_build, corpus="c", probe="p", replace=(second.run_id, second.key))
    assert registry.successor(first.run_id) is third and registry.successor(second.run_id) is third
    assert registry.successor(third.run_id) is None


def test_a_run_its_owner_left_is_released_though_others_still_watch_it(registry, clock):
    """A class watches the teacher's run from a link without the key. Their looking keeps nothing
    alive: only the owner's does. Released, the run is closed and its slot is free again."""
    entry = registry.start(_build, corpus="c", probe="p")
    for _ in range(2):  # watchers look every 20 s
        clock.now += 20
        assert registry.get(entry.run_id) is entry
    clock.now += IDLE - 2 * 20 + 1  # the owner last looked IDLE + 1 seconds ago
    assert registry.get(entry.run_id) is None
    assert entry.run.state == "closed" and registry.active_count() == 0
    registry.start(_build, corpus="c", probe="p")  # the slot it held is free


def test_a_run_its_owner_keeps_looking_at_is_never_released(registry, clock):
    entry = registry.start(_build, corpus="c", probe="p")
    for _ in range(5):
        clock.now += IDLE - 1
        assert registry.get(entry.run_id, entry.key) is entry  # the owner's page polls it
    clock.now += IDLE - 1
    assert registry.get(entry.run_id) is entry and entry.is_active()
    clock.now += 2  # now the owner has been away IDLE + 1 seconds
    assert registry.get(entry.run_id, entry.key) is None


def _stopped(registry, clock, count: int) -> list:
    """`count` runs started a second apart, each stopped by its owner."""
    entries = []
    for _ in range(count):
        clock.now += 1
        entries.append(registry.start(_build, corpus="c", probe="p"))
        registry.control(entries[-1].run_id, entries[-1].key, "stop")
    return entries


def test_at_most_max_kept_runs_stay_and_the_longest_unseen_stopped_run_goes_first(registry, clock):
    registry.max_runs = 10
    entries = _stopped(registry, clock, 3)
    clock.now += 1
    entries.append(registry.start(_build, corpus="c", probe="p"))  # one more than max_kept
    kept = [e for e in entries if registry.get(e.run_id) is not None]
    assert kept == entries[1:] and entries[0].run.state == "closed"


def test_past_max_kept_a_run_that_trains_stays_even_when_it_was_seen_longest_ago(registry, clock):
    registry.max_runs = 10
    clock.now += 1
    training = registry.start(_build, corpus="c", probe="p")  # seen first, and still training
    stopped = _stopped(registry, clock, 2)
    clock.now += 1
    registry.start(_build, corpus="c", probe="p")  # one more than max_kept
    assert registry.get(training.run_id) is training and training.run.state == "running"
    assert registry.get(stopped[0].run_id) is None and stopped[0].run.state == "closed"  # the oldest idle one


def test_a_slot_is_likely_to_free_when_the_running_run_nearest_its_end_finishes(clock):
    """The time left of the running run nearest its end, at its own pace: a run with a thousand
    times more steps to go is not the one, and a paused run frees nothing."""
    registry = RunRegistry(max_runs=3, idle_seconds=IDLE, clock=clock)
    try:
        near = registry.start(lambda: _build(max_steps=20_000), corpus="c", probe="p")
        far = registry.start(lambda: _build(max_steps=20_000_000), corpus="c", probe="p")
        registry.start(_build, corpus="c", probe="p", paused=True)
        wait_until(lambda: near.run.snapshot().eta_seconds and far.run.snapshot().eta_seconds,
                   "both runs to know their pace")
        soonest = registry.soonest_free()
        assert soonest is not None and 0 < soonest < far.run.snapshot().eta_seconds / 100
        near.run.pause()
        wait_until(lambda: near.run.state == "paused", "the near run to pause")
        assert registry.soonest_free() > soonest * 100  # now the far run's
        far.run.pause()
        wait_until(lambda: far.run.state == "paused", "the far run to pause")
        assert registry.soonest_free() is None  # nothing running: no run can say
    finally:
        registry.stop_all()
