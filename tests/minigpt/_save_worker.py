"""Helper process for the SIGKILL test in test_checkpoint.py: forks savers to be killed.

Importing torch takes about a second, so this process imports it once and forks one saver
per kill. Usage: `_save_worker.py RUN_DIR REFERENCE`. At start it saves checkpoints A and B
(each with an AdamW state) into REFERENCE/A and REFERENCE/B, saves A as step 0 of RUN_DIR, and
says "started". Then, one line per message:
  test -> "go <step>"      the worker forks a child that saves B, A, B, ... as steps <step>,
                           <step> + 1, ... of RUN_DIR, forever;
  child -> "ready <pid>"   before its first save, so the test can SIGKILL it at a random moment;
  worker -> "reaped <st>"  once the child has died, with its raw wait status.
Any other line, or end of input, ends the worker.
"""
from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import torch

from minigpt.checkpoint import save_checkpoint, save_pretrained
from minigpt import GPTConfig
from minigpt import MiniGPT
from minigpt import CharTokenizer

TEXT = "hello world, tiny checkpoints"


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _trained(seed: int, tokenizer: CharTokenizer) -> tuple[MiniGPT, torch.optim.Optimizer]:
    """A tiny model after one AdamW step, so the optimizer file has real state."""
    config = GPTConfig(vocab_size=tokenizer.vocab_size, d_model=16, num_heads=2, num_layers=1,
                       d_ff=32, max_len=16, dropout=0.0)
    model = MiniGPT(config, seed=seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = torch.tensor([tokenizer.encode(TEXT[:9])])
    _, loss = model(ids[:, :-1], ids[:, 1:])
    loss.backward()
    optimizer.step()
    return model, optimizer


def _save_forever(run_dir: Path, first_step: int, pairs: dict, tokenizer: CharTokenizer) -> None:
    try:
        _say(f"ready {os.getpid()}")
        for step in itertools.count(first_step):
            label = "BA"[step % 2]
            model, optimizer = pairs[label]
            save_checkpoint(run_dir, step, model, tokenizer, meta={"label": label}, optimizer=optimizer)
    finally:
        os._exit(1)  # never fall back into the parent's loop; SIGKILL is the expected end


def main(run_dir: Path, reference: Path) -> None:
    torch.set_num_threads(1)  # the savers compute nothing; spare the CPUs for the test's reads
    tokenizer = CharTokenizer.from_text(TEXT)
    pairs = {"A": _trained(1, tokenizer), "B": _trained(2, tokenizer)}
    for label, (model, optimizer) in pairs.items():
        save_pretrained(reference / label, model, tokenizer, meta={"label": label}, optimizer=optimizer)
    model, optimizer = pairs["A"]
    save_checkpoint(run_dir, 0, model, tokenizer, meta={"label": "A"}, optimizer=optimizer)
    _say("started")
    for line in sys.stdin:
        words = line.split()
        if len(words) != 2 or words[0] != "go":
            break
        pid = os.fork()
        if pid == 0:
            _save_forever(run_dir, int(words[1]), pairs, tokenizer)
        _, status = os.waitpid(pid, 0)
        _say(f"reaped {status}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
