"""`python -m minigpt sample`: text from a checkpoint, streamed to stdout so that it can be piped."""
from __future__ import annotations

import argparse
import sys

from ..checkpoint import from_pretrained
from ..device import resolve_device
from ..sample import Sampling, check_max_new_tokens, prepare_prompt, stream


def cmd_sample(args: argparse.Namespace) -> int:
    sampling = Sampling(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p)  # checked when made
    check_max_new_tokens(args.max_new_tokens)
    checkpoint = from_pretrained(args.checkpoint, device=str(resolve_device(args.device)))
    prompt = prepare_prompt(checkpoint.tokenizer, args.prompt, checkpoint.block_size)
    for note in prompt.notes:
        print(f"note: {note}", file=sys.stderr)
    steps = stream(checkpoint.model, checkpoint.tokenizer, prompt, max_new_tokens=args.max_new_tokens,
                   sampling=sampling, seed=args.seed, block_size=checkpoint.block_size)
    sys.stdout.write(args.prompt)
    for step in steps:
        sys.stdout.write(step.text)
        sys.stdout.flush()
    sys.stdout.write("\n")
    return 0
