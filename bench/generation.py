"""Generation speed: the KV cache against re-running the window, and time to the first token.

For each model and context window (max_len), 200 new tokens are sampled after a prompt
that fills the window (every step then sees a full window: the steady state of a long
generation) and after a 2-character prompt (the demo's seeds). Three ways:
- demo: the reference demo's loop (re-implemented in bench/baselines.py): the last
  max_len tokens through the whole model, its extra attention recompute included, per token;
- project re-run: minigpt.stream(use_cache=False), the same idea on MiniGPT;
- project KV cache: minigpt.stream(use_cache=True): one position per token, plus a
  re-prefill of 3/4 of the window each time the window fills (positions are absolute).

    python -m bench.generation
    python -m bench.generation --configs demo --windows 128 --new-tokens 200 --repeats 7

The first-token table times minigpt.stream from the call to its first Step on the
shipped demo-zh checkpoint (speed does not depend on the weights).
"""
from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from minigpt import CharTokenizer, GPTConfig, MiniGPT, Sampling, load_corpus, load_pretrained, stream

from .baselines import DemoGPT
from .common import (
    BABY, DEMO, add_common_args, apply_threads, clock_from, interleave, measure, paired_ratio, print_header, print_table,
)

CONFIGS = {"demo": DEMO, "baby": BABY}  # their models: the batches do not matter here


@torch.no_grad()
def demo_generate(model: DemoGPT, ids: list[int], new_tokens: int, window: int, temperature: float = 0.8) -> list[int]:
    """The demo's sampling loop: re-run the last `window` tokens for every new token."""
    tokens = list(ids)
    for _ in range(new_tokens):
        # the whole window again for every token: no cache
        logits = model(torch.tensor([tokens[-window:]], dtype=torch.long))
        probs = F.softmax(logits[0, -1, :] / temperature, dim=-1)
        tokens.append(torch.multinomial(probs, 1).item())
    return tokens


def cases_for(config: str, window: int, prompt_chars: int, args: argparse.Namespace) -> tuple[dict[str, Callable[[], None]], int]:
    shape = CONFIGS[config]
    text = load_corpus(args.data if args.data and config == "baby" else shape.corpus)
    tokenizer = CharTokenizer.from_text(text)
    prompt = (text * (1 + window // len(text)))[:prompt_chars or window]  # prompt_chars 0: fill the window
    torch.manual_seed(0)  # the same random weights in every case: speed does not depend on training
    model = MiniGPT(GPTConfig(vocab_size=tokenizer.vocab_size, d_model=shape.d_model, num_heads=shape.num_heads,
                              num_layers=shape.num_layers, d_ff=shape.d_ff, max_len=window)).eval()
    demo = DemoGPT(tokenizer.vocab_size, shape.d_model, shape.num_heads, shape.num_layers, shape.d_ff, max_len=window,
                   dropout=0.1).eval()  # the demo's own dropout, off in eval() as when it samples
    ids = tokenizer.encode(prompt)

    def project(use_cache: bool) -> Callable[[], None]:
        return lambda: list(stream(model, tokenizer, prompt, args.new_tokens, Sampling(temperature=0.8), seed=0,
                                   use_cache=use_cache))

    cases = {
        "demo": lambda: demo_generate(demo, ids, args.new_tokens, window),
        "project re-run": project(False),
        "project KV cache": project(True),
    }
    return cases, tokenizer.vocab_size


def bench_windows(args: argparse.Namespace) -> None:
    def per_sec(seconds: float) -> float:
        return args.new_tokens / seconds

    rows = []
    for config, window, prompt_chars in itertools.product(args.configs, args.windows, args.prompts):
        cases, vocab = cases_for(config, window, prompt_chars, args)
        # the three cases in turn, every round
        res = interleave(cases, repeats=args.repeats, warmup=1, clock=clock_from(args.clock))
        demo, rerun, cached = res["demo"], res["project re-run"], res["project KV cache"]
        rows.append([
            f"{config} (vocab {vocab})", window, prompt_chars or "full", demo.map(per_sec).fmt(0),
            rerun.map(per_sec).fmt(0), cached.map(per_sec).fmt(0), paired_ratio(demo, cached).fmt(1),
            paired_ratio(rerun, cached).fmt(1),
        ])
    print(f"tokens/s generating {args.new_tokens} new tokens ({args.repeats} interleaved rounds; prompt in characters, "
          f"'full' fills the window)")
    print_table(["model", "window", "prompt", "demo", "project re-run", "project KV cache", "cache x demo",
                 "cache x re-run"], rows)


# what a learner waits for before the text starts to stream
def first_token(model: MiniGPT, tokenizer: CharTokenizer, prompt: str, use_cache: bool) -> None:
    next(stream(model, tokenizer, prompt, 200, Sampling(temperature=0.8), seed=0, use_cache=use_cache))


def bench_first_token(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    checkpoint = load_pretrained("demo-zh")
    load_s = time.perf_counter() - t0
    model, tokenizer = checkpoint.model, checkpoint.tokenizer
    text = load_corpus("demo-zh")
    rows = []
    for label, prompt in (("empty prompt", ""), ("20-character prompt", text[1:21]),
                          (f"{model.config.max_len}-character prompt (full window)", text[: model.config.max_len])):
        for use_cache in (True, False):
            stats = measure(lambda p=prompt, c=use_cache: first_token(model, tokenizer, p, c),
                            # milliseconds each: more rounds for a steady median
                            repeats=max(args.repeats, 20), warmup=2)
            rows.append([label, "KV cache" if use_cache else "re-run", stats.map(lambda s: s * 1e3).fmt(2)])
    print(f"time to the first streamed token, the shipped demo-zh model ({model.num_params():,} "
          f"parameters); loading the checkpoint itself took {load_s * 1e3:.0f} ms once (goal: first token < 50 ms)")
    print_table(["prompt", "path", "ms to first token"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    parser.add_argument("--windows", nargs="+", type=int, default=[64, 128, 256], help="context windows (max_len)")
    parser.add_argument("--new-tokens", type=int, default=200)
    parser.add_argument("--prompts", nargs="+", type=int, default=[0, 2],
                        help="prompt lengths in characters; 0 fills the window (the demo seeds with 2)")
    parser.add_argument("--data", default=None, help="text file for the baby model's vocabulary (default: Python's docs)")
    add_common_args(parser, repeats=5)
    args = parser.parse_args()
    apply_threads(args.threads)
    print_header("Generation")
    bench_windows(args)
    bench_first_token(args)


if __name__ == "__main__":
    main()
