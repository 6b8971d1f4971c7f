"""Batches: a corpus's token ids split for training and validation, and random windows of them,
as in nanoGPT. The texts themselves and their checks are minigpt.corpus's."""
from __future__ import annotations

import torch

from .corpus import check_windows, split_sizes


def split_tokens(ids: torch.Tensor, val_fraction: float, block_size: int,
                 period: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """First (1 - val_fraction) of the tokens for training, the rest for validation. With a
    period (a task's line length) the split falls on a line boundary."""
    n_train, _ = split_sizes(len(ids), val_fraction, block_size)
    n_train -= n_train % period
    return ids[:n_train], ids[n_train:]


def get_batch(
    data: torch.Tensor,
    batch_size: int,
    block_size: int,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
    period: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows of `data`: inputs (B, T) and next-token targets (B, T). With a period, windows
    start only at multiples of it: at a line's first character in a task corpus."""
    starts = torch.randint((len(data) - block_size - 1) // period + 1, (batch_size,), generator=generator) * period
    offsets = torch.arange(block_size + 1)
    windows = data[starts[:, None] + offsets]  # (B, T+1)
    device = torch.device(device)
    if device.type == "cuda":
        windows = windows.pin_memory().to(device, non_blocking=True)
    elif device.type != "cpu":
        windows = windows.to(device)
    return windows[:, :-1], windows[:, 1:]


Windows = list[tuple[torch.Tensor, torch.Tensor]]  # (inputs, targets) batches


def eval_windows(data: torch.Tensor, batch_size: int, block_size: int, batches: int, seed: int,
                 period: int = 1) -> Windows:
    """The fixed windows a loss is measured on: `batches` batches drawn from `data` by one generator
    seeded with `seed`, on the CPU. The same arguments give the same windows, every time and everywhere."""
    generator = torch.Generator().manual_seed(seed)
    return [get_batch(data, batch_size, block_size, generator, period=period) for _ in range(batches)]


def check_batch_fits(data: torch.Tensor, batch_size: int, block_size: int) -> None:
    """Refuse a batch larger than the number of distinct windows the split holds."""
    check_windows(len(data), batch_size, block_size)
