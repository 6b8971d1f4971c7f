"""minigpt/serve/runs/thread.py: a TrainingRun started, paused, resumed and stopped from other threads; snapshots;
runs side by side; the tokens per second it shows; the allocator setting a run's own process trains with.

Nothing here waits on time: a test waits for the step it needs (`wait_until`), or for the
training thread to be parked at its gate (`parked`), where no further step can land.

    pytest tests/minigpt/serve/test_thread.py
"""
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
import weakref

import pytest
import torch

from helpers import ROOT
from helpers.tiny import TEXT, tiny_config, tiny_tokenizer
from helpers.waiting import niceness, parked, wait_until
from minigpt import TrainConfig, Trainer, build_model
from minigpt.sample import stream
from minigpt.serve.runs.thread import TrainingRun, stop_orphaned_runs
from minigpt.serve.runs.run import steady_speed
from minigpt.serve.runs.thread import THREAD_NAME
from minigpt.train import TrainEvent

pytestmark = pytest.mark.trains


def _run(max_steps=100_000, nice=0, **overrides) -> TrainingRun:
    tok = tiny_tokenizer()
    cfg = TrainConfig(batch_size=4, block_size=8, max_steps=max_steps, warmup_steps=2, eval_interval=20,
                      eval_iters=2, **overrides)
    model = build_model(tiny_config(vocab_size=tok.vocab_size), cfg.seed)
    return TrainingRun(Trainer(model, tok, TEXT, cfg, log_interval=5), probe_text="the cat", sample_prompt="the",
                       nice=nice)


def _step(run: TrainingRun) -> int:
    return run.snapshot().step


@pytest.fixture
def run():
    run = _run()
    yield run
    run.stop()


def test_start_pause_resume_stop(run):
    assert run.state == "idle"
    run.start()
    wait_until(lambda: _step(run) >= 10, "step 10")
    run.pause()
    paused = run.snapshot()
    assert paused.state == "paused"
    wait_until(lambda: parked(run), "the paused thread to wait at its gate")
    assert _step(run) == paused.step  # the step in flight at pause() was dropped, not landed
    run.resume()
    wait_until(lambda: _step(run) > paused.step + 5, "steps after resume")
    run.stop(timeout=None)
    assert run.state == "stopped" and not run.is_alive()


def test_stop_then_start_continues_the_same_model_on_one_thread(run):
    run.start()
    wait_until(lambda: _step(run) >= 5, "step 5")
    run.stop(timeout=None)
    before = _step(run)
    run.start()
    wait_until(lambda: _step(run) > before + 5, "steps after the restart")
    assert sum(t.name == THREAD_NAME and t.is_alive() for t in threading.enumerate()) == 1


def test_a_snapshot_never_waits_for_the_training_step_in_flight(run):
    """Forward and backward run outside the lock: with the trainer held inside a forward pass, a
    snapshot still returns, and it is consistent (its history ordered, never past its step)."""
    inside, release = threading.Event(), threading.Event()

    def hold(module, args):
        if threading.current_thread() is run._thread:  # the trainer's own forward, nobody else's
            inside.set()
            release.wait()

    run.start()
    wait_until(lambda: _step(run) >= 5, "step 5")
    handle = run.trainer.model.register_forward_pre_hook(hold)
    try:
        wait_until(inside.is_set, "the trainer inside a forward pass")
        taken = []
        reader = threading.Thread(target=lambda: taken.append(run.snapshot()), daemon=True)
        reader.start()
        snap = wait_until(lambda: taken and taken[0], "a snapshot while the step is held")
        steps = [e.step for e in snap.history]
        assert steps == sorted(steps) and steps[-1] <= snap.step
    finally:
        handle.remove()
        release.set()


def test_inference_model_is_a_detached_copy(run):
    run.start()
    wait_until(lambda: _step(run) >= 5, "step 5")
    copy = run.inference_model()
    frozen = {k: v.clone() for k, v in copy.state_dict().items()}
    wait_until(lambda: _step(run) >= 15, "step 15")
    assert not copy.training
    for k, v in copy.state_dict().items():
        assert torch.equal(v, frozen[k])
    assert copy.token_embed.weight.data_ptr() != run.trainer.model.token_embed.weight.data_ptr()


def test_finished_run_keeps_eval_samples_and_probe_attention():
    run = _run(max_steps=40)
    run.start()
    wait_until(lambda: run.state == "finished", "the run to finish")
    snap = run.snapshot()
    assert snap.step == 40 and snap.progress == 1.0 and snap.eta_seconds == 0
    assert [r.step for r in snap.evals] == [0, 20, 40]  # step 0: the untrained model
    record = snap.evals[-1]
    assert record.sample.startswith("the") and len(record.sample) > 3
    assert record.attention.shape == (2, 2, 7, 7)  # (layers, heads, T, T) for "the cat"


def test_error_in_training_thread_is_reported_not_raised():
    run = _run()
    run.start()
    wait_until(lambda: _step(run) >= 5, "step 5")
    run.pause()
    wait_until(lambda: parked(run), "the paused thread to wait at its gate")
    with torch.no_grad():  # what a too-high learning rate does, mid-run
        run.trainer.model.final_norm.weight.fill_(float("nan"))
    run.resume()
    wait_until(lambda: run.state == "error", "the run to fail")
    assert "lower learning rate" in str(run.snapshot().error)


def test_orphaned_trainer_threads_are_stopped():
    orphan, kept = _run(), _run()
    orphan.start()
    kept.start()
    wait_until(lambda: _step(orphan) > 0 and _step(kept) > 0, "both runs to step")
    assert stop_orphaned_runs(keep={kept}) == 1
    wait_until(lambda: not orphan.is_alive(), "the orphan's thread to end")
    assert kept.is_alive()
    kept.stop()


def test_close_stops_for_good_and_frees_the_weights():
    run = _run()
    run.start()
    wait_until(lambda: _step(run) >= 5, "step 5")
    model = weakref.ref(run.trainer.model)
    run.close(timeout=None)
    assert run.state == "closed" and not run.is_alive()
    assert model() is None  # nothing else held the weights, the optimizer state or the data
    assert _step(run) >= 5  # what a page may still read
    run.start()
    assert run.state == "closed" and not run.is_alive()


def test_a_run_closed_inside_a_step_is_closed_at_once_and_frees_its_weights_when_the_step_ends():
    """A server releasing an abandoned run does not wait for its step: the run reads closed at once,
    and the thread frees the model as it leaves."""
    run, inside, release = _run(), threading.Event(), threading.Event()

    def hold(module, args):
        if threading.current_thread() is run._thread:
            inside.set()
            release.wait()

    run.start()
    wait_until(lambda: _step(run) >= 5, "step 5")
    model = weakref.ref(run.trainer.model)
    handle = model().register_forward_pre_hook(hold)
    wait_until(inside.is_set, "the trainer inside a forward pass")
    run.close(timeout=0)
    assert run.state == "closed" and run.is_alive()  # closed, though its step has not ended
    handle.remove()
    release.set()
    wait_until(lambda: not run.is_alive(), "the thread to leave")
    assert run.state == "closed" and model() is None


def test_the_shown_tokens_per_second_is_the_median_of_the_last_intervals():
    """One slow interval (an evaluation) does not move it; only the last SPEED_WINDOW intervals
    count; the untrained model's step-0 event has no speed."""
    def events(speeds, first_step=1):
        return [TrainEvent(step=first_step + i, max_steps=100, train_loss=1.0, lr=1e-3, tokens_per_sec=s,
                           elapsed=float(i)) for i, s in enumerate(speeds)]

    assert steady_speed(events([1800, 5400, 5300, 1900, 5200, 5500, 5400])) == 5300  # by hand: the 4th of 7 sorted
    assert steady_speed(events([100, 100, 5000, 5200, 5400, 5600, 5800, 6000, 6200])) == 5600  # the last 7
    assert steady_speed(events([4000, 4100, 4300, 9000])) == 4200  # an even count: the mean of the middle two
    assert steady_speed(events([0.0], first_step=0)) == 0.0  # before the first step: nothing to show
    speeds = [3.0, 1.0, 7.0, 5.0, 9.0]
    assert steady_speed(events(speeds), window=3) == statistics.median(speeds[-3:])


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


@pytest.mark.slow
def test_two_runs_training_at_once_each_give_exactly_the_curve_they_give_alone():
    """Dropout, batches and samples come from each run's own generators: neither the other run nor
    a thread that keeps reseeding torch's global generator (as stream(seed=None) once did) changes them."""
    alone = {}
    for seed in (1, 2):
        run = _dropout_run(seed)
        run.start()
        wait_until(lambda: run.state == "finished", "the run to finish")
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
        wait_until(lambda: parked(run), "the thread to wait at its gate")
        assert run.trainer.step == 0
        for target in (3, 4, 11):  # 3 from 0, 1 more, then 7 more: each between the log interval's 5s
            run.run_steps(target - run.trainer.step)
            wait_until(lambda: run.trainer.step >= target and parked(run), f"the run to stop at step {target}")
            assert run.trainer.step == target and run.snapshot().history[-1].step == target
        run.run_steps(100)
        wait_until(lambda: run.state == "finished", "the run to finish")
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
        wait_until(lambda: run.trainer.step > 0, "the first step")
        run.pause()
        step = run.trainer.step
        run.resume()  # plain resume: no target left, it trains on past it
        wait_until(lambda: run.trainer.step > step + 5, "steps past the forgotten target")
        assert run.state == "running"
    finally:
        run.stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="niceness per thread is Linux's")
def test_a_run_trains_at_its_lower_priority_and_the_threads_that_serve_pages_keep_theirs():
    own = niceness(threading.current_thread())
    run = _run(nice=7)
    try:
        run.start()
        wait_until(lambda: _step(run) > 0, "the run to step")
        assert niceness(run._thread) == max(7, own)
        assert niceness(threading.current_thread()) == own  # the caller, and any page, unchanged
    finally:
        run.stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's kernel name is read from Linux's /proc")
def test_the_training_thread_has_its_name_in_the_kernel_and_the_callers_keeps_its_own():
    """A profile of the server (ps -L, py-spy, bench.class_board) tells training from serving by it."""
    def kernel_name(thread: threading.Thread) -> str:
        with open(f"/proc/self/task/{thread.native_id}/comm") as comm:
            return comm.read().strip()
    own = kernel_name(threading.current_thread())
    run = _run()
    try:
        run.start()
        wait_until(lambda: _step(run) > 0, "the run to step")
        assert kernel_name(run._thread) == THREAD_NAME == "minigpt-trainer"
        assert kernel_name(threading.current_thread()) == own != THREAD_NAME
    finally:
        run.stop()


STEPS_OF_ALLOCATIONS = """
import ctypes, mmap, resource, sys, torch
from minigpt.serve.runs.thread import M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, keep_freed_memory

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

STEP = 3 * 16 * 2**20  # a step's activations: three blocks of 16 MB
fresh = mmap.mmap(-1, STEP)  # memory never touched: what faulting a step's activations in costs here
before = faults()
for page in range(0, STEP, mmap.PAGESIZE):
    fresh[page] = 1
fresh_faults = faults() - before
if sys.argv[1] == "keep":
    kept = keep_freed_memory()
else:  # the opposite, pinned: every block mapped on its own and unmapped when freed
    libc = ctypes.CDLL(None)
    kept = not (libc.mallopt(M_MMAP_THRESHOLD, 128 * 2**10) and libc.mallopt(M_TRIM_THRESHOLD, 0))
late = []
for _ in range(6):  # a step's activations, made and freed again, step after step
    before = faults()
    activations = [torch.ones(4 * 2**20) for _ in range(3)]
    del activations
    late.append(faults() - before)
print(kept, fresh_faults, max(late[-3:]))
"""


def _page_faults_of_a_late_step(mode: str) -> tuple[bool, int, int]:
    """In a fresh process (the allocator's settings are the whole process's): whether the allocator took
    the setting, how many faults touching a step's worth of fresh memory counts on this kernel, and the
    most one of the last steps faulted in."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", STEPS_OF_ALLOCATIONS, mode], capture_output=True, text=True,
                          env=env, cwd=ROOT, check=True, timeout=120)  # a guard against a hang, not a speed limit
    kept, fresh, late = done.stdout.split()
    return kept == "True", int(fresh), int(late)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's")
def test_a_process_that_keeps_freed_memory_faults_no_pages_in_again_step_after_step():
    """What a run's worker process asks of glibc, which by default may give the top of its heap back to
    the kernel after a step and fault it in again at the next (bench/bare_loop.py). Measured against this
    kernel's own count for a step of fresh memory (huge pages count fewer faults, and a sandboxed kernel
    may count none), and against an allocator pinned to return every block."""
    kept, fresh, faults = _page_faults_of_a_late_step("keep")
    if not kept:
        pytest.skip("this C library has no glibc mallopt")
    if fresh == 0:
        pytest.skip("this kernel counts no minor page faults (ru_minflt), so none can be compared")
    assert faults < fresh // 4
    returned, _, returned_faults = _page_faults_of_a_late_step("return")
    assert not returned and returned_faults >= fresh // 2  # the probe sees memory coming back when it does
