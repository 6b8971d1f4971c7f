"""Run under torchrun by test_distributed.py: does DDP average gradients exactly?

Every rank draws the same global batch of world_size x grad_accum x B windows; rank r's
micro-batch m is its block r * grad_accum + m. The mean loss over equal blocks is the mean
loss over the global batch, so one DDP step must give the gradient that a single process
gets from the whole batch. Each rank computes that reference on a private copy of the
model (no collectives), then a few more DDP steps check that the replicas stay identical.
Rank 0 prints one JSON line. Usage: `torchrun --nproc_per_node=2 _ddp_worker.py GRAD_ACCUM`.
"""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for helpers

from helpers.tiny import TEXT, tiny_config, tiny_tokenizer  # noqa: E402
from minigpt import TrainConfig, Trainer, build_model
from minigpt.data import get_batch
from minigpt.distributed import all_reduce_mean, setup, teardown

BATCH, BLOCK = 4, 8


class BlockTrainer(Trainer):
    """Takes its micro-batches from a list instead of drawing them."""

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.queued.pop(0)


def global_batch(trainer: Trainer, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    rows = BATCH * trainer.cfg.grad_accum * trainer.dist.world_size
    return get_batch(trainer.train_data, rows, BLOCK, torch.Generator().manual_seed(step))  # same on all ranks


def queue_blocks(trainer: BlockTrainer, x: torch.Tensor, y: torch.Tensor) -> None:
    first = trainer.dist.rank * trainer.cfg.grad_accum
    blocks = range(first, first + trainer.cfg.grad_accum)
    trainer.queued = [(x[b * BATCH:(b + 1) * BATCH], y[b * BATCH:(b + 1) * BATCH]) for b in blocks]


def main() -> None:
    ctx = setup("cpu")
    tok = tiny_tokenizer()
    # float32 pinned: 'auto' is bf16 on a CPU with AMX, and this compares gradients to 1e-6
    cfg = TrainConfig(batch_size=BATCH, block_size=BLOCK, grad_accum=int(sys.argv[1]), max_steps=10, warmup_steps=0,
                      dtype="float32")
    model = build_model(tiny_config(vocab_size=tok.vocab_size), seed=0)
    reference = copy.deepcopy(model)
    trainer = BlockTrainer(model, tok, TEXT, cfg, dist=ctx)

    x, y = global_batch(trainer, 0)
    queue_blocks(trainer, x, y)
    loss = all_reduce_mean(trainer.compute_gradients())
    ref_loss = reference(x, y)[1]
    ref_loss.backward()
    grad_diff = max((p.grad - r.grad).abs().max().item() for p, r in zip(model.parameters(), reference.parameters()))
    grad_scale = max(r.grad.abs().max().item() for r in reference.parameters())

    trainer.apply_update()
    for step in range(1, 4):
        queue_blocks(trainer, *global_batch(trainer, step))
        trainer.compute_gradients()
        trainer.apply_update()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    replicas = [torch.empty_like(flat) for _ in range(ctx.world_size)]
    dist.all_gather(replicas, flat)
    replica_diff = max((r - flat).abs().max().item() for r in replicas)

    if ctx.is_main:
        print(json.dumps({"world_size": ctx.world_size, "grad_accum": cfg.grad_accum, "loss": loss.item(),
                          "reference_loss": ref_loss.item(), "grad_max_abs_diff": grad_diff,
                          "grad_max_abs": grad_scale, "replica_max_abs_diff": replica_diff}), flush=True)
    del trainer  # its DistributedDataParallel wrapper must go before the process group does
    teardown()


if __name__ == "__main__":
    main()
