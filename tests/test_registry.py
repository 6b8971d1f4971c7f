"""The run registry on its own, without Streamlit: owners, the cap, idle release, replacement."""
import subprocess
import sys

import pytest

from helpers import ROOT, TEXT, tiny_config, tiny_tokenizer
from minigpt import NotOwnerError, RunLimitError, RunRegistry, TrainConfig, Trainer, TrainingRun, build_model


def _build() -> TrainingRun:
    tok = tiny_tokenizer()
    cfg = TrainConfig(batch_size=4, block_size=8, max_steps=100_000, warmup_steps=2, eval_interval=10_000,
                      eval_iters=1)
    return TrainingRun(Trainer(build_model(tiny_config(vocab_size=tok.vocab_size), 0), tok, TEXT, cfg))


@pytest.fixture
def registry():
    registry = RunRegistry(max_runs=1, idle_seconds=60, max_kept=3)
    yield registry
    registry.stop_all()


def test_the_library_and_its_registry_import_no_streamlit():
    code = "import sys, minigpt.registry; assert not [m for m in sys.modules if m.startswith('streamlit')]"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


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


def test_runs_nobody_looks_at_are_released_and_at_most_max_kept_stay(registry):
    registry.max_runs = 10
    entries = [registry.start(_build, corpus="c", probe="p") for _ in range(3)]
    for entry in entries:
        registry.control(entry.run_id, entry.key, "stop")
    entries.append(registry.start(_build, corpus="c", probe="p"))  # one more than max_kept
    kept = [e for e in entries if registry.get(e.run_id) is not None]
    assert len(kept) == 3 and entries[0] not in kept  # the longest-unseen stopped run went first
    entries[1].last_seen -= 120
    assert registry.get(entries[1].run_id) is None and entries[1].run.state == "closed"
