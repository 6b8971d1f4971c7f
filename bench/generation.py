"""Generation speed: the KV cache against re-running the window, and time to the first token.

For each model and context window (max_len), 200 new tokens are sampled after a prompt
that fills the window (every step then sees a full window: the steady state of a long
generation) and after a 2-character prompt (the demo's seeds). Three ways:
- demo: the reference demo's loop (re-implemented in bench/baselines.py): the last
  max_len tokens through the whole model, its extra attention recompute included, per token;
- project re-run: minigpt.sample.stream(use_cache=False), the same idea on MiniGPT;
- project KV cache: minigpt.sample.stream(use_cache=True): one position per token, plus a
  re-prefill of 3/4 of the window each time the window fills (positions are absolute);
- project batched: the same through minigpt.batching.Batcher, one learner alone in its batch:
  what the Generate page runs.

    python -m bench.generation
    python -m bench.generation --configs demo --windows 128 --new-tokens 200 --repeats 7

The first-token table times minigpt.stream from the call to its first Step on the
shipped demo-zh checkpoint (speed does not depend on the weights).
"""
from __future__ import annotations

import argparse
import itertools
import statistics
import threading
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from minigpt import CharTokenizer, GPTConfig, MiniGPT, Sampling, demo_prompts, load_corpus, load_pretrained
from minigpt.batching import Batcher
from minigpt.corpus import DEFAULT_CORPUS
from minigpt.sample import stream

from .baselines import DemoGPT
from .common import (
    BABY, DEMO, add_common_args, apply_threads, clock_from, interleave, measure, paired_ratio, percentile, print_header,
    print_table,
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

    def batched() -> None:  # what the Generate page runs: a learner alone in the model's batch
        list(Batcher(model).stream(tokenizer, prompt, args.new_tokens, Sampling(temperature=0.8), seed=0))

    cases = {
        "demo": lambda: demo_generate(demo, ids, args.new_tokens, window),
        "project re-run": project(False),
        "project KV cache": project(True),
        "project batched": batched,
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
        demo, rerun, cached, batched = (res[k] for k in ("demo", "project re-run", "project KV cache",
                                                          "project batched"))
        rows.append([
            f"{config} (vocab {vocab})", window, prompt_chars or "full", demo.map(per_sec).fmt(0),
            rerun.map(per_sec).fmt(0), cached.map(per_sec).fmt(0), batched.map(per_sec).fmt(0),
            paired_ratio(demo, cached).fmt(1), paired_ratio(demo, batched).fmt(1), paired_ratio(rerun, cached).fmt(1),
        ])
    print(f"tokens/s generating {args.new_tokens} new tokens ({args.repeats} interleaved rounds; prompt in characters, "
          f"'full' fills the window)")
    print_table(["model", "window", "prompt", "demo", "project re-run", "project KV cache", "project batched",
                 "cache x demo", "batched x demo", "cache x re-run"], rows)


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


def flops_per_token(config: GPTConfig, context: int) -> float:
    """The arithmetic of one new token: 2 per weight of the matrix products (QKV, W_O, the FFN's
    two, the tied head), and the attention's q·k and weights·V over `context` keys."""
    d, layers = config.d_model, config.num_layers
    per_layer = 2 * (3 * d * d + d * d + 2 * d * config.d_ff) + 2 * 2 * context * d
    return layers * per_layer + 2 * d * config.vocab_size


def class_writing(model: MiniGPT, tokenizer: CharTokenizer, learners: int, batched: bool, new_tokens: int,
                  prompts: list[str]) -> tuple[float, list[float]]:
    """`learners` threads each asking for `new_tokens` at once, as a class pressing Generate does:
    alone (each its own sample.stream, as the Generate page did) or batched (one Batcher). The
    wall time until the last finished, and each learner's seconds to its last token."""
    batcher = Batcher(model)
    done: list[float] = []
    start = threading.Barrier(learners + 1)

    def learner(i: int) -> None:
        prompt, sampling = prompts[i % len(prompts)], Sampling(temperature=0.8, top_k=(0, 20)[i % 2])
        start.wait()
        t0 = time.perf_counter()
        steps = (batcher.stream(tokenizer, prompt, new_tokens, sampling, seed=i) if batched
                 else stream(model, tokenizer, prompt, new_tokens, sampling, seed=i))
        for _ in steps:
            pass
        done.append(time.perf_counter() - t0)

    threads = [threading.Thread(target=learner, args=(i,)) for i in range(learners)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, done


def bench_learners(args: argparse.Namespace) -> None:
    """Tokens/s for N learners generating at once from the shipped model, alone against batched."""
    checkpoint = load_pretrained(DEFAULT_CORPUS)
    model, tokenizer = checkpoint.model.eval(), checkpoint.tokenizer
    prompts = demo_prompts(tokenizer) or ["\n"]
    rows = []
    for learners in args.learners:
        results = {}
        for batched in (False, True) * args.repeats:  # alone and batched in turn, round by round
            wall, waits = class_writing(model, tokenizer, learners, batched, args.class_tokens, prompts)
            results.setdefault(batched, []).append((wall, waits))
        for batched, runs in results.items():
            walls = [wall for wall, _ in runs]
            waits = [w for _, ws in runs for w in ws]
            wall = statistics.median(walls)
            rows.append([learners, "batched" if batched else "alone", f"{learners * args.class_tokens / wall:,.0f}",
                         f"{args.class_tokens / statistics.median(waits):,.0f}", f"{percentile(waits, 50):.2f}",
                         f"{percentile(waits, 95):.2f}", f"{wall / (learners * args.class_tokens) * 1e3:.3f}"])
    flops = flops_per_token(model.config, model.config.max_len // 2)
    print(f"{args.class_tokens} new tokens for each of N learners at once from the shipped {DEFAULT_CORPUS} model "
          f"({model.num_params():,} parameters, {flops / 1e6:.2f} MFLOP a token at half its context), "
          f"{args.repeats} rounds, median; a learner's wait from the start to its last token")
    print_table(["learners", "path", "tokens/s (all)", "tokens/s (a learner)", "wait p50 s", "wait p95 s",
                 "ms a token"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    parser.add_argument("--windows", nargs="+", type=int, default=[64, 128, 256], help="context windows (max_len)")
    parser.add_argument("--new-tokens", type=int, default=200)
    parser.add_argument("--prompts", nargs="+", type=int, default=[0, 2],
                        help="prompt lengths in characters; 0 fills the window (the demo seeds with 2)")
    parser.add_argument("--data", default=None, help="text file for the baby model's vocabulary (default: Python's docs)")
    parser.add_argument("--learners", nargs="+", type=int, default=[],
                        help="instead: N learners generating at once (e.g. 1 10 100 300), alone and batched")
    parser.add_argument("--class-tokens", type=int, default=40, help="new tokens each learner asks for (--learners)")
    add_common_args(parser, repeats=5)
    args = parser.parse_args()
    apply_threads(args.threads)
    print_header("Generation")
    if args.learners:
        bench_learners(args)
        return
    bench_windows(args)
    bench_first_token(args)


if __name__ == "__main__":
    main()
