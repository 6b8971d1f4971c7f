"""`python -m minigpt scaling`: the sqrt(d_k) experiment's table on stdout."""
from __future__ import annotations

import argparse

from ..lab.scaling import scaling_experiment


def cmd_scaling(args: argparse.Namespace) -> int:
    table = scaling_experiment(args.d_k, args.seq_len, args.seed, args.num_samples)  # ConfigError for bad values
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    return 0
