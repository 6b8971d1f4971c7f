"""minigpt/cli/: train, sample, resume and the tasks end to end in subprocesses, as a user runs
them; bad input in-process, where each case is one call of main().

    pytest tests/minigpt/test_cli.py
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.checkpoints import assert_same_curve
from helpers import ROOT
from minigpt.checkpoint import from_pretrained
from minigpt.cli import main

TINY = ["--d-model", "16", "--num-heads", "2", "--num-layers", "1", "--d-ff", "32", "--max-len", "32",
        "--block-size", "16", "--batch-size", "4", "--eval-interval", "10", "--eval-iters", "2"]


def minigpt(*args: str) -> subprocess.CompletedProcess:
    """`python -m minigpt ARGS` in a fresh process, as a user runs it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "minigpt", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)  # a guard against a hang, not a speed limit


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "rhymes.txt"
    path.write_text("hickory dickory dock, the mouse ran up the clock.\n" * 20, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, corpus) -> Path:
    out = tmp_path_factory.mktemp("run") / "ckpt"
    result = minigpt("train", "--corpus", str(corpus), "--out", str(out), "--max-steps", "20", *TINY)
    assert result.returncode == 0, result.stderr
    assert "done: step 20" in result.stderr and result.stdout == ""
    return out


@pytest.fixture(scope="module")
def trained_here(tmp_path_factory, corpus) -> Path:
    """The same training through main() in this process: no interpreter to start."""
    out = tmp_path_factory.mktemp("run") / "ckpt"
    assert main(["train", "--corpus", str(corpus), "--out", str(out), "--max-steps", "20", *TINY]) == 0
    return out


@pytest.mark.slow
def test_train_writes_a_loadable_checkpoint_with_its_history(checkpoint, corpus):
    loaded = from_pretrained(checkpoint)
    assert loaded.model.config.d_model == 16 and loaded.meta["step"] == 20
    assert loaded.meta["corpus"] == str(corpus)
    assert [row[0] for row in loaded.meta["history"]][-1] == 20
    assert loaded.train_config.max_steps == 20


@pytest.mark.slow
def test_sample_prints_only_the_text_to_stdout(checkpoint):
    result = minigpt("sample", "--checkpoint", str(checkpoint), "--prompt", "hick", "--max-new-tokens", "15",
                     "--temperature", "0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("hick") and len(result.stdout.rstrip("\n")) == 4 + 15
    again = minigpt("sample", "--checkpoint", str(checkpoint), "--prompt", "hick", "--max-new-tokens", "15",
                    "--temperature", "0")
    assert again.stdout == result.stdout  # greedy is deterministic


@pytest.mark.slow
def test_resume_continues_to_the_new_max_steps(checkpoint, tmp_path):
    out = tmp_path / "resumed"
    result = minigpt("train", "--resume", str(checkpoint), "--out", str(out), "--max-steps", "30")
    assert result.returncode == 0, result.stderr
    assert "from step 20" in result.stderr
    resumed = from_pretrained(out)
    assert resumed.meta["step"] == 30
    assert [row[0] for row in resumed.meta["history"]][:2] == [10, 20]


@pytest.mark.parametrize(
    "args, message",
    [
        (["sample", "--checkpoint", "{ckpt}", "--prompt", "QQ"], "not in the vocabulary: 'Q'"),
        (["sample", "--checkpoint", "{ckpt}", "--top-p", "1.5"], "top_p"),
        (["sample", "--checkpoint", "{ckpt}", "--temperature", "-1"], "temperature"),
        (["sample", "--checkpoint", "{missing}"], "does not exist"),
        (["sample", "--checkpoint", "{ckpt}", "--device", "cuda:7"], "not available"),
        (["train", "--corpus", "{missing}", "--out", "{out}"], "no corpus named"),
        (["train", "--corpus", "demo-zh", "--out", "{out}", "--d-model", "30"], "divisible"),
        (["train", "--corpus", "demo-zh", "--out", "{out}", "--lr", "0"], "lr must be"),
        (["train", "--corpus", "demo-zh", "--out", "{out}", "--block-size", "200"], "max_len"),
        (["scaling", "--d-k", "0"], "positive"),
    ],
)
def test_bad_input_exits_2_with_one_clear_line(args, message, trained_here, tmp_path, capsys):
    capsys.readouterr()  # the fixture's training log
    paths = {"ckpt": str(trained_here), "missing": str(tmp_path / "nope"), "out": str(tmp_path / "out")}
    assert main([a.format(**paths) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_scaling_prints_the_demo_table(capsys):
    assert main(["scaling"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["d_k", "score_std_unscaled", "score_std_scaled"]
    assert "1.9813" in lines[1] and "0.9022" in lines[4]


@pytest.mark.slow
def test_the_cli_trains_a_task_and_reports_its_accuracy(tmp_path):
    out = minigpt("train", "--corpus", "task-copy", "--out", str(tmp_path / "run"), "--d-model", "16",
                  "--num-heads", "2", "--num-layers", "1", "--d-ff", "32", "--max-len", "16", "--block-size", "13",
                  "--max-steps", "20", "--eval-interval", "10", "--batch-size", "8")
    assert out.returncode == 0, out.stderr
    assert "copy task, held-out lines:" in out.stderr and "(chance 12.5% per character)" in out.stderr
    refused = minigpt("train", "--corpus", "task-copy", "--out", str(tmp_path / "short"), "--block-size", "8",
                      "--max-steps", "5")
    assert refused.returncode == 2 and "block_size at least 13" in refused.stderr


N = 20  # steps of the first half of a resumed run


def test_cli_resume_continues_the_loss_curve_of_an_uninterrupted_run(tmp_path, capsys):
    corpus = tmp_path / "rhymes.txt"
    corpus.write_text("hickory dickory dock, the mouse ran up the clock.\n" * 20, encoding="utf-8")
    # a constant schedule after warmup: the first half's lr must not depend on its own max_steps
    flags = ["--corpus", str(corpus), "--d-model", "16", "--num-heads", "2", "--num-layers", "1", "--d-ff", "32",
             "--max-len", "32", "--block-size", "16", "--batch-size", "4", "--eval-interval", "10",
             "--eval-iters", "2", "--schedule", "constant", "--warmup-steps", "5", "--seed", "3"]
    assert main(["train", "--out", str(tmp_path / "straight"), "--max-steps", str(2 * N), *flags]) == 0
    assert main(["train", "--out", str(tmp_path / "half"), "--max-steps", str(N), *flags]) == 0
    assert main(["train", "--resume", str(tmp_path / "half"), "--out", str(tmp_path / "resumed"),
                 "--max-steps", str(2 * N)]) == 0
    assert f"from step {N}" in capsys.readouterr().err
    straight = from_pretrained(tmp_path / "straight").meta["history"]
    resumed = from_pretrained(tmp_path / "resumed").meta["history"]
    assert [row[0] for row in resumed] == [10, 20, 30, 40]
    assert_same_curve([tuple(row) for row in resumed], [tuple(row) for row in straight])
