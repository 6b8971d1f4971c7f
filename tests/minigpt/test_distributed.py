"""minigpt/distributed.py: training under torchrun, DistributedDataParallel with gloo on CPU, in real
subprocesses; gradient accumulation; the precision chosen by default.

Every torchrun launch starts fresh Python processes (seconds each on a small machine), so
the two-process run and its single-process twin are made once per module and shared by
the tests that read them.

    pytest tests/minigpt/test_distributed.py
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import ROOT
from helpers.tiny import TEXT, tiny_config, tiny_tokenizer
from minigpt import ConfigError, TrainConfig, Trainer, build_model, load_zip
from minigpt.archive import folder_zip
from minigpt.checkpoint import from_pretrained, latest_checkpoint
from minigpt.cli import build_parser, main
from minigpt import load_corpus
from minigpt.data import eval_windows, split_tokens
from minigpt.distributed import DistContext, all_reduce_mean, barrier, gather_ranks, launched_by_torchrun
from minigpt import estimate_loss
from minigpt.train import autocast_dtype, estimate_mfu, flops_per_token

WORKER = Path(__file__).resolve().parent / "_ddp_worker.py"
TINY = ["--corpus", "demo-zh", "--d-model", "16", "--num-heads", "2", "--num-layers", "1", "--d-ff", "32",
        "--max-len", "16", "--dropout", "0", "--block-size", "16", "--lr", "1e-2", "--min-lr", "1e-3",
        "--warmup-steps", "10", "--eval-interval", "100", "--eval-iters", "4", "--log-interval", "10",
        "--device", "cpu", "--seed", "1"]
STEPS = 200
PER_RANK_BATCH = 16
# Both runs start from the same weights but draw different windows (per-rank seeds), so their
# losses differ by sampling noise: 0.006 to 0.045 nats over seeds 1 to 4 of this setup.
LOSS_TOLERANCE = 0.1  # nats, on a final loss near 0.65
TIMEOUT_S = 600  # a guard against a hung launch on a busy machine, not a speed limit


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")


def _torchrun_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", *args]


def _run(command: list[str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(command, capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _train_under_torchrun(*args: str) -> subprocess.CompletedProcess:
    return _run(_torchrun_command("--standalone", "--nproc_per_node=2", "-m", "minigpt", "train", *args))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _meta(run_dir: Path) -> dict:
    return json.loads((latest_checkpoint(run_dir) / "config.json").read_text())["meta"]


def _fixed_batch_loss(directory: Path) -> float:
    """The checkpoint's loss on the same 512 training windows, whichever run made it."""
    checkpoint = from_pretrained(directory)
    ids = torch.tensor(checkpoint.tokenizer.encode(load_corpus("demo-zh")))
    train, _ = split_tokens(ids, TrainConfig.val_fraction, 16)
    return estimate_loss(checkpoint.model, eval_windows(train, batch_size=64, block_size=16, batches=8, seed=0))


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory) -> tuple[Path, str]:
    """2 processes x batch 16 for STEPS steps: (checkpoint folder, stderr of the launch)."""
    out = tmp_path_factory.mktemp("ddp") / "ckpt"
    proc = _train_under_torchrun(*TINY, "--max-steps", str(STEPS), "--batch-size", str(PER_RANK_BATCH),
                                 "--out", str(out))
    return out, proc.stderr


@pytest.fixture(scope="module")
def single_run(tmp_path_factory) -> tuple[Path, str]:
    """The same command without torchrun, at the same global batch of 2 x 16."""
    out = tmp_path_factory.mktemp("single") / "ckpt"
    log = io.StringIO()
    with contextlib.redirect_stderr(log):
        status = main(["train", *TINY, "--max-steps", str(STEPS), "--batch-size", str(2 * PER_RANK_BATCH),
                       "--out", str(out)])
    assert status == 0, log.getvalue()
    return out, log.getvalue()


@pytest.mark.torchrun
@pytest.mark.slow
def test_torchrun_runs_both_ranks_and_rank_0_alone_logs_and_writes_one_checkpoint(ddp_run):
    out, log = ddp_run
    assert "2 processes ready: rank 0/2 on node 0, cpu, rank 1/2 on node 0, cpu" in log
    assert "global batch 16 x 1 micro-batches x 2 processes = 32 sequences per step" in log
    assert log.count("training 5,520 parameters") == 1 and log.count("done: step 200") == 1
    assert os.listdir(out.parent) == ["ckpt"]  # nothing written beside the run folder
    assert os.listdir(out) == [f"checkpoint-{STEPS}"]  # one save per evaluation; only the newest kept
    assert sorted(os.listdir(out / f"checkpoint-{STEPS}")) == ["config.json", "model.safetensors",
                                                              "optimizer.safetensors"]
    meta = _meta(out)
    assert meta["world_size"] == 2 and meta["step"] == STEPS


@pytest.mark.torchrun
@pytest.mark.slow
def test_the_dashboard_loaders_open_the_torchrun_checkpoint(ddp_run):
    out, _ = ddp_run
    for checkpoint in (from_pretrained(out), load_zip(folder_zip(out))):
        assert checkpoint.train_config.batch_size == PER_RANK_BATCH
        ids = torch.tensor([checkpoint.tokenizer.encode("深度学习")])
        logits, _ = checkpoint.model(ids)
        assert logits.shape == (1, 4, checkpoint.tokenizer.vocab_size) and torch.isfinite(logits).all()


@pytest.mark.torchrun
@pytest.mark.slow
def test_torchrun_loss_matches_one_process_with_the_same_global_batch(ddp_run, single_run):
    (ddp_out, _), (single_out, single_log) = ddp_run, single_run
    assert "processes ready" not in single_log and _meta(single_out)["world_size"] == 1
    ddp_loss, single_loss = _fixed_batch_loss(ddp_out), _fixed_batch_loss(single_out)
    start = _meta(single_out)["history"][0][1]
    assert ddp_loss < 0.5 * start and single_loss < 0.5 * start  # both learned
    assert abs(ddp_loss - single_loss) < LOSS_TOLERANCE, (ddp_loss, single_loss)


@pytest.mark.torchrun
@pytest.mark.slow
def test_resume_under_torchrun_continues_from_the_saved_step_and_optimizer(ddp_run, tmp_path):
    out, _ = ddp_run
    resumed = tmp_path / "resumed"
    proc = _train_under_torchrun("--resume", str(out), "--out", str(resumed), "--max-steps", str(STEPS + 100),
                                 "--log-interval", "10")
    assert "from step 200" in proc.stderr and "2 processes ready" in proc.stderr
    before, after = _meta(out), _meta(resumed)
    assert after["step"] == STEPS + 100 and after["world_size"] == 2
    assert after["history"][: len(before["history"])] == before["history"]
    assert [row[0] for row in after["history"][len(before["history"]):]] == list(range(210, 310, 10))
    first_resumed_loss = after["history"][len(before["history"])][1]
    assert first_resumed_loss < 1.5 * before["history"][-1][1]  # no restart from scratch
    optimizer_state = from_pretrained(resumed, with_optimizer=True).optimizer_state
    assert int(optimizer_state["state"][0]["step"]) == STEPS + 100  # AdamW's moments came along


@pytest.mark.torchrun
@pytest.mark.slow
def test_two_torchrun_nodes_on_loopback_train_one_model(tmp_path):
    out = tmp_path / "ckpt"
    node = _torchrun_command("--nnodes=2", "--nproc_per_node=1", "--rdzv-backend=c10d",
                             f"--rdzv-endpoint=127.0.0.1:{_free_port()}", "--rdzv-id=minigpt-test",
                             "-m", "minigpt", "train", *TINY, "--max-steps", "30", "--eval-interval", "30",
                             "--batch-size", "8", "--out", str(out))
    procs = [subprocess.Popen(node, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                              cwd=ROOT) for _ in range(2)]
    try:
        logs = [proc.communicate(timeout=TIMEOUT_S)[1] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in procs] == [0, 0], [log[-2000:] for log in logs]
    ready = "2 processes ready: rank 0/2 on node 0, cpu, rank 1/2 on node 1, cpu"
    assert sorted(ready in log for log in logs) == [False, True]  # one node holds rank 0 and logs
    assert os.listdir(tmp_path) == ["ckpt"]
    assert _meta(out)["world_size"] == 2 and _meta(out)["step"] == 30
    assert from_pretrained(out).model.config.d_model == 16


@pytest.mark.torchrun
@pytest.mark.slow
def test_ddp_gradient_equals_the_single_process_gradient_of_the_global_batch():
    proc = _run(_torchrun_command("--standalone", "--nproc_per_node=2", str(WORKER), "2"))
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["world_size"] == 2 and result["grad_accum"] == 2
    assert result["loss"] == pytest.approx(result["reference_loss"], abs=1e-5)
    assert result["grad_max_abs_diff"] < 1e-6 < 1e-3 * result["grad_max_abs"]  # float32 rounding only
    assert result["replica_max_abs_diff"] == 0.0  # the replicas stay bit-identical after more steps


def _first_gradients(batch_size: int, grad_accum: int) -> tuple[float, list[torch.Tensor]]:
    tok = tiny_tokenizer()
    # float32 pinned: 'auto' is bf16 on a CPU with AMX, and the gradients are compared to 1e-6
    cfg = TrainConfig(batch_size=batch_size, block_size=8, grad_accum=grad_accum, seed=3, dtype="float32")
    model = build_model(tiny_config(vocab_size=tok.vocab_size), cfg.seed)
    loss = Trainer(model, tok, TEXT, cfg).compute_gradients()
    return loss.item(), [p.grad.clone() for p in model.parameters()]


def test_grad_accum_of_two_half_batches_gives_the_gradient_of_the_whole_batch():
    # The batch generator draws 4 + 4 windows exactly as it draws 8 at once, so the two
    # micro-batches are the two halves of the single-step batch.
    whole_loss, whole = _first_gradients(batch_size=8, grad_accum=1)
    halves_loss, halves = _first_gradients(batch_size=4, grad_accum=2)
    assert halves_loss == pytest.approx(whole_loss, abs=1e-6)
    for a, b in zip(whole, halves):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=0)


def test_tokens_per_step_counts_every_micro_batch():
    tok = tiny_tokenizer()
    cfg = TrainConfig(batch_size=4, block_size=8, grad_accum=3)
    trainer = Trainer(build_model(tiny_config(vocab_size=tok.vocab_size), 0), tok, TEXT, cfg)
    assert trainer.tokens_per_step == 4 * 3 * 8


def test_grad_accum_below_one_is_refused():
    with pytest.raises(ConfigError, match="grad_accum"):
        TrainConfig(grad_accum=0).validate()
    with pytest.raises(ConfigError, match="dtype"):
        TrainConfig(dtype="float16").validate()


def test_without_torchrun_there_is_one_process_and_collectives_do_nothing(monkeypatch):
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert not launched_by_torchrun()
    x = torch.tensor([1.0, 3.0])
    assert all_reduce_mean(x) is x and x.tolist() == [1.0, 3.0]
    barrier()
    assert gather_ranks(DistContext()) == ["0/1 on node 0, cpu"]


def test_bfloat16_autocast_is_the_cpu_default_only_with_amx_and_trains(monkeypatch):
    """On a CPU 'auto' means bf16 only where AMX makes it faster; float32 is always float32."""
    import minigpt.train

    cpu = torch.device("cpu")
    monkeypatch.setattr(minigpt.train, "cpu_has_amx", lambda: False)
    assert autocast_dtype("auto", cpu) is None and autocast_dtype("bfloat16", cpu) is torch.bfloat16
    monkeypatch.setattr(minigpt.train, "cpu_has_amx", lambda: True)
    assert autocast_dtype("auto", cpu) is torch.bfloat16
    assert autocast_dtype("float32", cpu) is None
    tok = tiny_tokenizer()
    cfg = TrainConfig(batch_size=4, block_size=8, max_steps=4, warmup_steps=0, eval_interval=4, eval_iters=1,
                      dtype="bfloat16")
    model = build_model(tiny_config(vocab_size=tok.vocab_size), 0)
    events = list(Trainer(model, tok, TEXT, cfg).events())
    assert events[-1].step == 4 and all(torch.isfinite(torch.tensor(e.train_loss)) for e in events)
    assert all(p.dtype == torch.float32 for p in model.parameters())  # autocast, not a cast of the weights


def test_cli_has_grad_accum_compile_and_dtype_flags():
    args = build_parser().parse_args(["train", "--out", "x", "--grad-accum", "4", "--compile", "--dtype", "bfloat16"])
    assert (args.grad_accum, args.compile, args.dtype) == (4, True, "bfloat16")
    assert build_parser().parse_args(["train", "--out", "x", "--compile", "false"]).compile is False


def test_mfu_uses_nanogpts_flops_per_token():
    config = tiny_config(vocab_size=12)
    assert flops_per_token(config, 16) == 6 * config.num_params() + 12 * 2 * 16 * 16
    assert estimate_mfu(config, 16, tokens_per_sec=1000.0, peak_flops=1e12) == pytest.approx(
        flops_per_token(config, 16) * 1000 / 1e12)
