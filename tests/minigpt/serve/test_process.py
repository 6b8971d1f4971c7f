"""minigpt/serve/runs/process.py: a training run in a child process, steered and read from the server.

The reference for what a child trains is the Trainer alone, stepped in this process: the child
must log the same losses and end with the same weights. Nothing here waits on time: each test
waits for the state or step it needs.

    pytest tests/minigpt/serve/test_process.py
"""
import gc
import os
import subprocess
import sys
import threading

import pytest
import torch

from helpers.tiny import TEXT, tiny_config, tiny_plan, tiny_tokenizer
from helpers.waiting import DEADLINE, niceness, parked, thread_niceness, wait_until
from minigpt import TrainConfig, Trainer, build_model
from minigpt.messages import LabError, Message
from minigpt.serve.line.registry import RunRegistry
from minigpt.serve.runs.process import CHILD_THREAD_NAME, ProcessRun
from minigpt.serve.runs.recipe import CHILD_NICE, RunSpec
from minigpt.train import TrainingDiverged

pytestmark = [pytest.mark.trains, pytest.mark.slow,
              pytest.mark.skipif(sys.platform == "win32", reason="the fork server is Unix's")]


def _configs(max_steps=100_000, text=TEXT, **overrides):
    tok = tiny_tokenizer()
    model = tiny_config(vocab_size=tok.vocab_size, dropout=0.1)
    train = TrainConfig(batch_size=4, block_size=8, max_steps=max_steps, warmup_steps=2, eval_interval=20,
                        eval_iters=2, device="cpu", **overrides).validate(model)  # the reference trains on the cpu
    return tok, model, train


def _spec(run_id="r1", max_steps=100_000, text=TEXT, nice: int | None = 0, **overrides) -> RunSpec:
    """A tiny run's spec. Its child trains at the server's priority (`nice` None: the library's
    default, 19), since beside busy processes a child at 19 gets almost no CPU (tests/conftest.py)."""
    tok, model, train = _configs(max_steps, **overrides)
    return RunSpec(run_id, model, train, tuple(tok.chars), text, probe_text="the cat", sample_prompt="the",
                   log_interval=5, **({} if nice is None else {"nice": nice}))


@pytest.fixture
def runs():
    made = []
    yield made
    for run in made:
        run.close()


def _start(runs, **kw) -> ProcessRun:
    run = ProcessRun(_spec(**kw))
    runs.append(run)
    return run


def _step(run) -> int:
    return run.snapshot().step


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    """`code` run by a fresh Python that imports minigpt and the tests' modules, as a fork server
    starts fresh and imports the preload."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    return subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([root, os.path.join(root, "tests")]), **env})


def test_a_child_logs_what_the_trainer_alone_logs_and_ends_with_its_weights(runs):
    tok, model, train = _configs(max_steps=40)
    alone = Trainer(build_model(model, train.seed), tok, TEXT, train, log_interval=5)
    expected = [(e.step, e.train_loss, e.val_loss) for e in alone.events()]

    run = _start(runs, max_steps=40)
    run.start()
    wait_until(lambda: run.state == "finished", "the run to finish")
    snap = run.snapshot()
    assert snap.step == 40 and not run.is_alive() and snap.error is None
    assert [(e.step, e.train_loss, e.val_loss) for e in snap.history[1:]] == expected  # [0]: the untrained model
    assert [r.step for r in snap.evals] == [0, 20, 40]
    assert snap.evals[-1].attention.shape == (2, 2, 7, 7) and snap.evals[-1].sample.startswith("the")
    weights = run.inference_model().state_dict()
    for name, value in alone.model.state_dict().items():
        assert torch.equal(weights[name], value), name
    assert run.trainer.step == 40 and run.trainer.best_val == alone.best_val
    assert run.trainer.model_params == alone.model_params and run.trainer.cfg == alone.cfg
    ours, theirs = run.trainer.val_windows, alone.val_windows  # drawn here, as the Trainer drew them there
    assert len(ours) == len(theirs) and all(torch.equal(a, b) for pair in zip(ours, theirs) for a, b in zip(*pair))


def test_pause_returns_once_the_child_has_paused_and_run_steps_trains_exactly_that_many(runs):
    run = _start(runs)
    run.start(paused=True)
    run.run_steps(3)
    wait_until(lambda: run.state == "paused" and _step(run) >= 3, "three steps from step 0")
    assert _step(run) == 3 and run.snapshot().history[-1].step == 3
    run.resume()
    wait_until(lambda: _step(run) >= 10, "step 10")
    run.pause(timeout=DEADLINE)
    assert parked(run), (run._status["done"], run._sent, run.state)  # the child did the pause, and said so
    paused = run.snapshot()
    assert paused.state == "paused"
    run.run_steps(4)  # a step that landed after pause() returned would end this at paused.step + 5
    wait_until(lambda: run.state == "paused" and _step(run) >= paused.step + 4, "four more steps")
    assert _step(run) == paused.step + 4


def test_stop_keeps_the_weights_to_start_again_and_close_ends_the_child(runs):
    run = _start(runs)
    run.start()
    wait_until(lambda: _step(run) >= 5, "step 5")
    run.stop()
    stopped = run.snapshot()
    assert stopped.state == "stopped" and not run.is_alive()
    run.start()
    wait_until(lambda: _step(run) > stopped.step + 5, "steps after a restart")
    run.close()
    assert run.state == "closed" and run.snapshot().evals == []
    assert run._process.exitcode == 0 and run.trainer.val_windows is None


def test_a_child_that_dies_ends_its_own_run_with_a_sentence_and_the_other_run_trains_on(runs):
    doomed, neighbour = _start(runs, run_id="doomed"), _start(runs, run_id="neighbour")
    doomed.start()
    neighbour.start()
    wait_until(lambda: _step(doomed) > 0 and _step(neighbour) > 0, "both runs to step")
    doomed._process.kill()  # what the out-of-memory killer, or a kernel that crashes, does
    wait_until(lambda: doomed.state == "error", "the dead run to say so")
    error = doomed.snapshot().error
    assert isinstance(error, Message) and error.params["code"] == -9 and "ended unexpectedly" in str(error)
    assert not doomed.is_alive()
    with pytest.raises(RuntimeError, match="has ended"):
        doomed.inference_model()
    step = _step(neighbour)
    wait_until(lambda: _step(neighbour) >= step + 5, "the neighbour to train on")
    assert neighbour.state == "running" and neighbour.snapshot().error is None
    doomed.close()
    doomed.close()  # twice, on a child that is gone: nothing to wait for, nothing raised
    assert doomed.state == "closed"


def test_a_run_that_diverges_in_its_child_reports_the_trainers_own_error(runs):
    run = _start(runs, max_steps=200, lr=1e30, grad_clip=0.0)
    run.start()
    wait_until(lambda: run.state in ("error", "finished"), "the run to end")
    error = run.snapshot().error
    assert isinstance(error, TrainingDiverged)  # the library's error, template and all, for the page to translate
    assert error.template and "lower learning rate" in str(error)


def test_a_setting_the_trainer_refuses_is_raised_where_the_run_is_started():
    tok, model, train = _configs()
    short = TEXT[:12]
    with pytest.raises(LabError) as alone:
        Trainer(build_model(model, train.seed), tok, short, train)
    with pytest.raises(type(alone.value)) as raised:
        ProcessRun(RunSpec("short", model, train, tuple(tok.chars), short))
    assert raised.value.template == alone.value.template and raised.value.params == alone.value.params


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="niceness per thread is Linux's")
def test_the_childs_training_thread_runs_at_niceness_19_and_the_thread_that_answers_keeps_the_servers(runs):
    own = niceness(threading.current_thread())
    run = _start(runs, nice=None)
    run.start()
    wait_until(lambda: _step(run) > 0, "the run to step")
    threads = thread_niceness(run._process.pid)
    assert threads["minigpt-trainer"] == max(CHILD_NICE, own)
    assert threads[CHILD_THREAD_NAME] == own  # pause and weights are answered at the server's priority
    assert niceness(threading.current_thread()) == own


def _a_run_left_training():
    run = ProcessRun(_spec())
    run.start()
    wait_until(lambda: _step(run) > 0, "the run to step")
    return run._process


def test_a_run_nobody_keeps_is_collected_and_its_child_ends():
    process = _a_run_left_training()
    gc.collect()
    wait_until(lambda: process.exitcode is not None, "the child of a collected run to end")


def test_a_run_just_started_holds_its_slot_before_its_child_has_read_the_start(runs):
    registry = RunRegistry(max_runs=1, dispatcher=False)
    try:
        first = registry.submit(tiny_plan(), corpus="tiny", build=lambda run_id: _start(runs, run_id=run_id))
        second = registry.submit(tiny_plan(), corpus="tiny", build=lambda run_id: _start(runs, run_id=run_id))  # at once: the first's start may still be in the pipe
        assert first.is_active() and second.is_waiting() and len(runs) == 1
    finally:
        registry.stop_all()
    assert all(run._process.exitcode is not None for run in runs)  # a registry that goes ends its children


def test_a_child_that_dies_frees_its_slot_and_the_next_run_in_line_starts(runs):
    registry = RunRegistry(max_runs=1, dispatcher=False)
    try:
        first = registry.submit(tiny_plan(), corpus="tiny", build=lambda run_id: _start(runs, run_id=run_id))
        second = registry.submit(tiny_plan(), corpus="tiny", build=lambda run_id: _start(runs, run_id=run_id))
        wait_until(lambda: _step(first.run) > 0, "the first run to train")
        first.run._process.kill()  # the out-of-memory killer, say
        wait_until(lambda: registry.get(second.run_id) is not None and second.is_active(),
                   "the next run to take the freed slot")
        assert first.run.state == "error" and "ended unexpectedly" in str(first.run.snapshot().error)
    finally:
        registry.stop_all()


def test_a_checkpoint_from_a_child_holds_its_weights_step_and_optimizer_state(runs):
    run = _start(runs, max_steps=12)
    run.start()
    wait_until(lambda: run.state == "finished", "the run to finish")
    parts = run.checkpoint_parts()
    weights = run.inference_model().state_dict()
    assert all(torch.equal(parts["model"].state_dict()[k], v) for k, v in weights.items())
    assert parts["trainer_state"]["step"] == 12 and parts["val_loss"] == run.trainer.last_val_loss
    moments = parts["optimizer_state"]["state"][0]
    assert isinstance(moments["exp_avg"], torch.Tensor) and moments["exp_avg"].abs().sum() > 0


def _os_threads(pid="self") -> int:
    with open(f"/proc/{pid}/status") as status:
        return int(status.read().split("Threads:")[1].split()[0])


def _private_dirty_mb(pid: int) -> float:
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        fields = dict(line.split()[:2] for line in rollup if line.rstrip().endswith("kB"))
    return int(fields["Private_Dirty:"]) / 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads and memory are read from Linux's /proc")
def test_the_fork_servers_warm_up_leaves_no_thread_behind_it():
    """A process that forks with a second thread can hand its child a lock that thread held: the
    warm-up's training thread and any OpenMP pool must be gone before the fork server forks."""
    check = ("import torch, threading\n"
             "from tests.minigpt.serve.test_process import _os_threads\n"
             "from helpers.waiting import wait_until\n"
             "before = _os_threads()\n"
             "from minigpt.serve.runs.process import warm_up\n"
             "warm_up()\n"
             "torch.ones(64, 64) @ torch.ones(64, 64)\n"
             "assert threading.active_count() == 1 and torch.get_num_threads() == 1\n"
             "wait_until(lambda: _os_threads() == before, 'the joined thread to leave the kernel')\n")
    done = _python(check, OMP_NUM_THREADS="2")  # as a server without the setting: torch would start a pool
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads are read from Linux's /proc")
def test_a_warm_up_that_fails_leaves_the_fork_server_alive_with_one_thread_and_says_so():
    """The fork server imports process.PRELOAD before it forks anything, and an exception there ends
    it: every run started after that would fail. Here the warm-up's own run fails in its training
    thread: the import must still return, say why in the log, and leave no thread behind."""
    check = ("import threading, torch\n"
             "from tests.minigpt.serve.test_process import _os_threads\n"
             "from minigpt.train import Trainer\n"
             "def fail(self): raise RuntimeError('no gradients today')\n"
             "Trainer.compute_gradients = fail\n"
             "from helpers.waiting import wait_until\n"
             "before = _os_threads()\n"
             "import minigpt.serve.runs.preload\n"
             "assert threading.active_count() == 1\n"
             "wait_until(lambda: _os_threads() == before, 'the joined thread to leave the kernel')\n"
             "print('the fork server goes on')\n")
    done = _python(check)
    assert done.returncode == 0 and done.stdout.strip() == "the fork server goes on", done.stderr[-2000:]
    assert "warm-up run failed" in done.stderr and "did not finish" in done.stderr, done.stderr[-2000:]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memory is read from Linux's /proc")
def test_a_child_shares_what_torch_allocated_for_the_fork_servers_warm_up(runs):
    """Without the warm-up a child wrote about 100 MB of its own on its first steps (torch's
    first-use allocations); with it, about 25 MB, most of it its own data and optimizer."""
    run = _start(runs, max_steps=30)
    run.start()
    wait_until(lambda: run.state == "finished", "the run to finish")
    assert _private_dirty_mb(run._process.pid) < 60
