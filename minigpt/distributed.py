"""Training on several processes under PyTorch's launcher, torchrun, with DistributedDataParallel.

torchrun starts one process per device, on one machine or many, and tells each where it
stands through environment variables: `WORLD_SIZE` (processes in all), `RANK` (this one's
place among them), `LOCAL_RANK` (its place on this machine) and `GROUP_RANK` (the machine's
place). This module owns reading them, joining the process group (NCCL on CUDA, gloo on
CPU), choosing each process's device (`cuda:LOCAL_RANK` on CUDA) and the few collectives
the trainer and the CLI use.
Without torchrun's variables there is one process of world size 1 and every helper here
is a no-op, so the same code runs alone unchanged. Nothing happens at import time.
"""
from __future__ import annotations

import gc
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .device import DeviceError, resolve_device

ENV_VARS = ("WORLD_SIZE", "RANK", "LOCAL_RANK")


@dataclass(frozen=True)
class DistContext:
    """This process's place in the job."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    node_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        """Rank 0 alone logs, evaluates and writes checkpoints."""
        return self.rank == 0


def launched_by_torchrun() -> bool:
    return all(name in os.environ for name in ENV_VARS)


def setup(device: str = "auto") -> DistContext:
    """Join the process group torchrun set up and pick this process's device.

    `device` is TrainConfig.device: "auto" or "cuda" mean cuda:LOCAL_RANK when CUDA is
    available (one GPU per process), "cpu" means gloo on CPU even on a GPU machine.
    """
    rank, local_rank, world_size = (int(os.environ[name]) for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
    chosen = resolve_device(device)
    if chosen.type == "cuda":
        if chosen.index is not None and chosen.index != local_rank:
            raise DeviceError(
                "under torchrun each process uses cuda:LOCAL_RANK (here cuda:{local_rank}); "
                "pass --device cuda or auto instead of {device!r}.", local_rank=local_rank, device=device,
            )
        chosen = torch.device("cuda", local_rank)
        torch.cuda.set_device(chosen)
    elif chosen.type != "cpu":
        raise DeviceError("distributed training runs on CUDA (NCCL) or CPU (gloo), not {device}.",
                          device=chosen.type)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if chosen.type == "cuda" else "gloo")
    node_rank = int(os.environ.get("GROUP_RANK", 0))
    return DistContext(rank=rank, local_rank=local_rank, world_size=world_size, node_rank=node_rank, device=chosen)


def teardown() -> None:
    if dist.is_initialized():
        # A DistributedDataParallel wrapper left for the garbage collector would be freed after
        # the process group, at interpreter exit, and abort the process ("terminate called
        # without an active exception"): collect it while the group still exists.
        gc.collect()
        dist.destroy_process_group()


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def all_reduce_mean(tensor: torch.Tensor) -> torch.Tensor:
    """The mean of `tensor` over all processes, in place; the tensor itself when alone."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        tensor /= dist.get_world_size()
    return tensor


def gather_ranks(ctx: DistContext) -> list[str]:
    """'rank/world_size on node N, device' for every process, gathered everywhere: proof that all joined."""
    line = f"{ctx.rank}/{ctx.world_size} on node {ctx.node_rank}, {ctx.device}"
    if not dist.is_initialized():
        return [line]
    lines: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(lines, line)
    return [str(item) for item in lines]
