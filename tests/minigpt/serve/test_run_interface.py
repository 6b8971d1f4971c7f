"""minigpt/serve/runs/run.py: the one suite every implementation of a run passes.

`Run` (trains, steered): TrainingRun on a thread, ProcessRun in a child process, RayRun in an actor
on a 2-node Ray cluster the test starts (tests/helpers/ray_cluster.py). `RunView` (read
only): a run waiting in line (WaitingRun), a finished run kept small (KeptRun), a run read back
from the store (StoredRun). The registry and
the pages use a run through these protocols alone, so each behaviour below is what they rely on,
checked the same way on each implementation. Numbers are pinned where an implementation could get
them wrong on its own: the step count, the evaluation steps, the parameter count counted off the
model, and the logits of the weights it hands out.

    pytest tests/minigpt/serve/test_run_interface.py
"""
import sys
import tempfile

import pytest
import torch

from helpers.tiny import TEXT, tiny_config, tiny_tokenizer
from helpers.waiting import parked, wait_until
from minigpt import TrainConfig, Trainer, build_model
from minigpt.model import MiniGPT
from minigpt.serve.runs.kept import KeptRun
from minigpt.serve.line.waiting import WaitingRun
from minigpt.serve.runs.run import Run, RunView, TrainerFacts
from minigpt.serve.runs.thread import TrainingRun
from minigpt.serve.store.keys import hashed
from minigpt.serve.store.database import Store
from minigpt.serve.line.stored import StoredRun
from minigpt.serve.runs.process import ProcessRun
from minigpt.serve.runs.recipe import RunSpec
from minigpt.serve.runs.cluster import RayRun

pytestmark = pytest.mark.trains
STEPS, EVAL = 12, 6
PROBE = "the cat"


def _configs(max_steps: int = STEPS):
    tok = tiny_tokenizer()
    model = tiny_config(vocab_size=tok.vocab_size, dropout=0.1).validate()
    train = TrainConfig(batch_size=4, block_size=8, max_steps=max_steps, warmup_steps=2, eval_interval=EVAL,
                        eval_iters=2, device="cpu").validate(model)
    return tok, model, train


def thread_run(run_id: str, max_steps: int = STEPS) -> TrainingRun:
    tok, model, train = _configs(max_steps)
    return TrainingRun(Trainer(build_model(model, train.seed), tok, TEXT, train, log_interval=1), probe_text=PROBE,
                       sample_prompt="the", run_id=run_id)


def spec(run_id: str, max_steps: int = STEPS) -> RunSpec:
    tok, model, train = _configs(max_steps)
    return RunSpec(run_id, model, train, tuple(tok.chars), TEXT, probe_text=PROBE, sample_prompt="the", log_interval=1,
                   nice=0)


def process_run(run_id: str, max_steps: int = STEPS) -> ProcessRun:
    return ProcessRun(spec(run_id, max_steps))


def ray_run(run_id: str, max_steps: int = STEPS, *, cluster) -> RayRun:
    """A run in an actor on the test's 2-node Ray cluster (tests/helpers/ray_cluster.py)."""
    return RayRun(spec(run_id, max_steps), cluster.cluster)


IMPLEMENTATIONS = [pytest.param(thread_run, id="thread"),
                   pytest.param(process_run, id="process", marks=[
                       pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="the fork server")]),
                   pytest.param(ray_run, id="ray", marks=[pytest.mark.slow, pytest.mark.cluster])]


@pytest.fixture(params=IMPLEMENTATIONS)
def make(request):
    made = []
    extra = {"cluster": request.getfixturevalue("ray_cluster")} if request.param is ray_run else {}

    def build(run_id: str = "r", max_steps: int = STEPS):
        made.append(request.param(run_id, max_steps, **extra))
        return made[-1]

    yield build
    for run in made:
        run.close(timeout=None)


def _logits(model: MiniGPT) -> torch.Tensor:
    ids = torch.tensor([tiny_tokenizer().encode(PROBE)])
    with torch.no_grad():
        return model.eval()(ids)[0]


# -- Run: every run that trains ---------------------------------------------------------------------
def test_it_is_a_run_and_its_trainer_answers_what_pages_read(make):
    run = make()
    assert isinstance(run, Run) and isinstance(run.trainer, TrainerFacts)
    tok, model, train = _configs()
    counted = sum(p.numel() for p in build_model(model, 0).parameters())  # off the model, not its config
    assert run.trainer.model_params == counted and run.trainer.cfg.max_steps == STEPS
    assert run.trainer.tokenizer.chars == tok.chars and run.trainer.step == 0 and run.state == "idle"
    assert run.trainer.val_windows is not None


def test_it_trains_to_max_steps_with_evaluations_at_0_and_every_interval(make):
    run = make()
    run.start()
    wait_until(lambda: run.state == "finished" and not run.is_alive(), "the run to finish")
    snap = run.snapshot()
    assert snap.step == STEPS and snap.progress == 1.0 and snap.error is None
    assert [e.step for e in snap.history] == list(range(STEPS + 1))  # step 0's evaluation, then every logged step
    assert [r.step for r in snap.evals] == [0, EVAL, 2 * EVAL]
    assert all(r.attention.shape == (2, 2, len(PROBE), len(PROBE)) for r in snap.evals)
    assert run.trainer.step == STEPS and run.trainer.last_val_loss == snap.evals[-1].val_loss


def test_pause_returns_once_no_step_lands_and_run_steps_trains_exactly_that_many(make):
    run = make(max_steps=100_000)
    run.start()
    wait_until(lambda: run.snapshot().step > 0, "a first step")
    run.pause()
    paused = run.snapshot().step
    assert run.state == "paused"
    if isinstance(run, TrainingRun):
        wait_until(lambda: parked(run), "the thread to park at its gate")
    assert run.snapshot().step == paused
    run.run_steps(5)
    wait_until(lambda: run.state == "paused" and run.snapshot().step >= paused + 5, "five steps")
    assert run.snapshot().step == paused + 5
    run.resume()
    wait_until(lambda: run.snapshot().step > paused + 5, "training to go on")


def test_stop_keeps_the_weights_and_close_frees_the_run(make):
    run = make(max_steps=100_000)
    run.start()
    wait_until(lambda: run.snapshot().step >= 3, "three steps")
    run.stop()
    assert run.state == "stopped"
    wait_until(lambda: not run.is_alive(), "training to end")
    first = run.inference_model()
    assert not first.training and torch.equal(_logits(first), _logits(run.checkpoint_parts()["model"]))
    run.close()
    assert run.state == "closed" and not run.is_alive()


def test_the_weights_it_hands_out_are_the_ones_it_trained(make):
    """A finished run's copy against the same run trained by hand, step for step, by the Trainer."""
    run = make()
    run.start()
    wait_until(lambda: run.state == "finished" and not run.is_alive(), "the run to finish")
    tok, model, train = _configs()
    trainer = Trainer(build_model(model, train.seed), tok, TEXT, train, log_interval=1)
    losses = [e.train_loss for e in trainer.events() if e.step > 0]
    assert [e.train_loss for e in run.snapshot().history if e.step > 0] == pytest.approx(losses)
    assert torch.allclose(_logits(run.inference_model()), _logits(trainer.model), atol=1e-6)
    parts = run.checkpoint_parts()
    assert parts["trainer_state"]["step"] == STEPS and parts["optimizer_state"]["state"]


# -- RunView: runs that do not train ----------------------------------------------------------------
def _kept(run_id: str) -> KeptRun:
    run = thread_run(run_id)
    run.start()
    wait_until(lambda: run.state == "finished" and not run.is_alive(), "the run to finish")
    kept = KeptRun(run)
    run.close()
    return kept


def _waiting(run_id: str) -> WaitingRun:
    tok, model, train = _configs()
    return WaitingRun(run_id, RunSpec("", model, train, tuple(tok.chars), TEXT), thread_run)


def _stored(run_id: str, store: list | None = None) -> StoredRun:
    """A finished run as a restarted server reads it: its rows and its checkpoint, from an SQLite store."""
    tok, model, train = _configs()
    db = Store.from_url(f"sqlite:///{tempfile.mkdtemp(prefix='minigpt-test-')}/store.db")
    spec = RunSpec(run_id, model, train, tuple(tok.chars), TEXT, probe_text=PROBE, sample_prompt="the", log_interval=1)
    db.runs.save(run_id, hashed("key"), spec.recipe(), TEXT, "c", line_order=None, start_paused=False,
                max_steps=STEPS)
    run = thread_run(run_id)
    run.on_checkpoint = lambda step, files: db.checkpoints.save(run_id, step, files)
    run.start()
    wait_until(lambda: run.state == "finished" and not run.is_alive(), "the run to finish")
    snap = run.snapshot()
    db.runs.add_history(run_id, snap.history, snap.evals)
    db.runs.update(run_id, state=snap.state, step=snap.step, elapsed=snap.elapsed)
    assert db.flush(30)
    if store is not None:
        store.append((snap, run.inference_model()))
    run.close()
    return StoredRun(db.runs.load(run_id), db)


@pytest.mark.parametrize("view", [_kept, _waiting, _stored], ids=["kept", "waiting", "stored"])
def test_a_view_reads_like_a_run_and_closes(view):
    run = view("v")
    assert isinstance(run, RunView) and not isinstance(run, Run) and isinstance(run.trainer, TrainerFacts)
    snap = run.snapshot()
    assert snap.run_id == "v" and snap.state == run.state and snap.max_steps == STEPS
    assert run.trainer.step == snap.step and not run.is_alive()
    model = run.inference_model()
    assert not model.training and model.config == run.trainer.model_config
    parts = run.checkpoint_parts()
    assert parts["optimizer_state"] is None and parts["trainer_state"]["step"] == snap.step
    assert torch.equal(_logits(parts["model"]), _logits(model))
    assert run.trainer.val_windows is not None
    run.close()
    assert run.state == "closed"


def test_a_stored_run_reads_as_the_finished_run_did_with_its_final_weights():
    seen = []
    stored = _stored("s", seen)
    before, model = seen[0]
    snap = stored.snapshot()
    assert stored.state == "finished" and snap.step == STEPS and stored.resume_step == STEPS
    assert [(e.step, e.train_loss, e.val_loss) for e in snap.history] == \
        [(e.step, e.train_loss, e.val_loss) for e in before.history]
    assert [(r.step, r.sample) for r in snap.evals] == [(r.step, r.sample) for r in before.evals]
    assert torch.equal(_logits(stored.inference_model()), _logits(model))


def test_a_waiting_run_hands_out_the_weights_its_run_starts_from():
    waiting = _waiting("w")
    tok, model, train = _configs()
    assert waiting.state == "waiting" and waiting.snapshot().step == 0
    assert torch.equal(_logits(waiting.inference_model()), _logits(build_model(model, train.seed)))


def test_a_kept_run_keeps_the_finished_runs_curve_samples_and_attention():
    run = thread_run("k")
    run.start()
    wait_until(lambda: run.state == "finished" and not run.is_alive(), "the run to finish")
    before, logits = run.snapshot(), _logits(run.inference_model())
    kept = KeptRun(run)
    run.close()
    snap = kept.snapshot()
    assert snap.history == before.history and [r.sample for r in snap.evals] == [r.sample for r in before.evals]
    assert all((a.attention == b.attention).all() for a, b in zip(snap.evals, before.evals))
    assert torch.equal(_logits(kept.inference_model()), logits) and kept.state == "finished"


def test_a_kept_run_past_its_share_of_memory_thins_its_time_lapse_but_keeps_the_first_and_last_frames():
    run = thread_run("t", max_steps=4 * EVAL)  # evaluations at 0, 6, 12, 18, 24
    run.start()
    wait_until(lambda: run.state == "finished" and not run.is_alive(), "the run to finish")
    whole = KeptRun(run)
    frame = whole.snapshot().evals[0].attention.nbytes
    thinned = KeptRun(run, max_bytes=whole.nbytes() - frame)  # one frame too many
    run.close()
    kept = [r.step for r in thinned.snapshot().evals if r.attention is not None]
    assert kept[0] == 0 and kept[-1] == 4 * EVAL and len(kept) < 5 and thinned.nbytes() <= whole.nbytes() - frame
    assert [r.sample for r in thinned.snapshot().evals] == [r.sample for r in whole.snapshot().evals]  # the rest stays
