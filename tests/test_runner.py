"""TrainingRun: start, pause, resume and stop from other threads; snapshots; runs side by side."""

import threading
import time

import pytest
import torch

from minigpt import TrainConfig, Trainer, TrainingRun, build_model, stop_orphaned_runs, stream
from minigpt.runner import THREAD_NAME

from helpers import TEXT, tiny_config, tiny_tokenizer


def _run(max_steps=100_000, **overrides) -> TrainingRun:
    tok = tiny_tokenizer()
    cfg = TrainConfig(batch_size=4, block_size=8, max_steps=max_steps, warmup_steps=2, eval_interval=20,
                      eval_iters=2, **overrides)
    model = build_model(tiny_config(vocab_size=tok.vocab_size), cfg.seed)
    return TrainingRun(Trainer(model, tok, TEXT, cfg, log_interval=5), probe_text="the cat", sample_prompt="the")


def _wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def run():
    run = _run()
    yield run
    run.stop()


def test_start_pause_resume_stop(run):
    assert run.state == "idle"
    run.start()
    _wait_for(lambda: run.snapshot().step >= 10)
    run.pause()
    paused = run.snapshot()
    assert paused.state == "paused"
    time.sleep(0.3)
    assert run.snapshot().step == paused.step  # no step lands after pause() returns
    run.resume()
    _wait_for(lambda: run.snapshot().step > paused.step + 5)
    run.stop()
    assert run.state == "stopped" and not run.is_alive()
    stopped = run.snapshot().step
    time.sleep(0.2)
    assert run.snapshot().step == stopped


def test_stop_then_start_continues_the_same_model_on_one_thread(run):
    run.start()
    _wait_for(lambda: run.snapshot().step >= 5)
    run.stop()
    before = run.snapshot().step
    run.start()
    _wait_for(lambda: run.snapshot().step > before + 5)
    assert sum(t.name == THREAD_NAME and t.is_alive() for t in threading.enumerate()) == 1


def test_snapshot_while_training_is_consistent_and_fast(run):
    run.start()
    _wait_for(lambda: run.snapshot().step >= 5)
    waits = []
    for _ in range(50):
        t0 = time.perf_counter()
        snap = run.snapshot()
        waits.append(time.perf_counter() - t0)
        steps = [e.step for e in snap.history]
        assert steps == sorted(steps) and (not steps or steps[-1] <= snap.step)
    assert sorted(waits)[len(waits) // 2] < 0.05  # the median read never waits for a training step


def test_inference_model_is_a_detached_copy(run):
    run.start()
    _wait_for(lambda: run.snapshot().step >= 5)
    copy = run.inference_model()
    frozen = {k: v.clone() for k, v in copy.state_dict().items()}
    _wait_for(lambda: run.snapshot().step >= 15)
    assert not copy.training
    for k, v in copy.state_dict().items():
        assert torch.equal(v, frozen[k])
    assert copy.token_embed.weight.data_ptr() != run.trainer.model.token_embed.weight.data_ptr()


def test_finished_run_keeps_eval_samples_and_probe_attention():
    run = _run(max_steps=40)
    run.start()
    _wait_for(lambda: run.state == "finished")
    snap = run.snapshot()
    assert snap.step == 40 and snap.progress == 1.0 and snap.eta_seconds == 0
    assert [r.step for r in snap.evals] == [0, 20, 40]  # step 0: the untrained model
    record = snap.evals[-1]
    assert record.sample.startswith("the") and len(record.sample) > 3
    assert record.attention.shape == (2, 2, 7, 7)  # (layers, heads, T, T) for "the cat"


def test_error_in_training_thread_is_reported_not_raised():
    run = _run()
    run.start()
    _wait_for(lambda: run.snapshot().step >= 5)
    run.pause()
    with torch.no_grad():  # what a too-high learning rate does, mid-run
        # .data: a forward/backward may still be in flight after pause(); an in-place change autograd
        # can see would fail it with "modified by an inplace operation" instead of a NaN loss
        run.trainer.model.final_norm.weight.data.fill_(float("nan"))
    run.resume()
    _wait_for(lambda: run.state == "error")
    assert "lower learning rate" in str(run.snapshot().error)


def test_orphaned_trainer_threads_are_stopped():
    orphan, kept = _run(), _run()
    orphan.start()
    kept.start()
    _wait_for(lambda: orphan.snapshot().step > 0 and kept.snapshot().step > 0)
    assert stop_orphaned_runs(keep={kept}) == 1
    _wait_for(lambda: not orphan.is_alive())
    assert kept.is_alive()
    kept.stop()


def test_close_stops_for_good_and_frees_the_weights():
    import weakref

    run = _run()
    run.start()
    _wait_for(lambda: run.snapshot().step >= 5)
    model = weakref.ref(run.trainer.model)
    run.close()
    assert run.state == "closed" and not run.is_alive()
    assert model() is None  # nothing else held the weights, the optimizer state or the data
    assert run.snapshot().step >= 5  # what a page may still read
    run.start()
    assert run.state == "closed" and not run.is_alive()


def _dropout_run(seed: int) -> TrainingRun:
    tok = tiny_tokenizer()
    cfg = TrainConfig(batch_size=4, block_size=8, max_steps=60, warmup_steps=2, eval_interval=20, eval_iters=2,
                      seed=seed)
    model = build_model(tiny_config(vocab_size=tok.vocab_size, dropout=0.3), cfg.seed)
    return TrainingRun(Trainer(model, tok, TEXT, cfg, log_interval=5), probe_text="the cat", sample_prompt="the")


def _record(run: TrainingRun) -> tuple:
    snap = run.snapshot()
    assert snap.state == "finished", snap.error
    return ([(e.step, e.train_loss, e.val_loss) for e in snap.history],
            [(r.sample, r.attention.tobytes()) for r in snap.evals])


def test_two_runs_training_at_once_each_give_exactly_the_curve_they_give_alone():
    """Dropout, batches and samples come from each run's own generators: neither the other run nor
    a thread that keeps reseeding torch's global generator (as stream(seed=None) once did) changes them."""
    alone = {}
    for seed in (1, 2):
        run = _dropout_run(seed)
        run.start()
        _wait_for(lambda: run.state == "finished")
        alone[seed] = _record(run)
    assert alone[1][0] != alone[2][0]

    together = {seed: _dropout_run(seed) for seed in (1, 2)}
    model, tok = tiny_config(vocab_size=tiny_tokenizer().vocab_size), tiny_tokenizer()
    noisy = build_model(model, seed=0)
    for run in together.values():
        run.start()
    while any(run.state == "running" for run in together.values()):
        torch.manual_seed(int(time.monotonic_ns()) % 2**31)
        torch.rand(1000)
        list(stream(noisy, tok, "the", max_new_tokens=5, seed=None))
    for seed, run in together.items():
        assert _record(run) == alone[seed], f"seed {seed} trained differently beside another run"


def test_a_run_started_paused_waits_at_step_0_and_steps_exactly_as_asked():
    """Reset, then Step: the run waits at step 0; each run_steps(n) trains n steps, no more, logs
    an event where it stops (even between log intervals) and pauses; max_steps caps the last."""
    run = _run(max_steps=12)
    try:
        run.start(paused=True)
        time.sleep(0.3)
        assert run.state == "paused" and run.trainer.step == 0
        for target in (3, 4, 11):  # 3 from 0, 1 more, then 7 more: each between the log interval's 5s
            run.run_steps(target - run.trainer.step)
            _wait_for(lambda: run.state == "paused" and run.trainer.step == target)
            time.sleep(0.2)
            assert run.trainer.step == target and run.snapshot().history[-1].step == target
        run.run_steps(100)
        _wait_for(lambda: run.state == "finished")
        assert run.trainer.step == 12
        run.run_steps(1)  # a finished run stays finished
        assert run.state == "finished"
    finally:
        run.stop()


def test_pause_forgets_a_step_target():
    run = _run(max_steps=100_000)
    try:
        run.start(paused=True)
        run.run_steps(50_000)
        _wait_for(lambda: run.trainer.step > 0)
        run.pause()
        step = run.trainer.step
        run.resume()  # plain resume: no target left, it trains on past it
        _wait_for(lambda: run.trainer.step > step + 5)
        assert run.state == "running"
    finally:
        run.stop()
