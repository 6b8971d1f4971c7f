"""Threads per run: two app runs training at once on a 2-core box, each run's process with one torch
thread (what the server gives a run when two slots share two CPUs: capacity.threads_per_run) against
two threads each (the cores oversubscribed).

Each round starts two ProcessRuns as the Train page does (the Small preset on the default corpus,
`--steps` steps, early stopping off, at the runs' niceness), together, once with each thread count in
alternating order, and times both until they have finished: each run's steps/s and the pair's.

    python -m bench.run_threads --steps 300 --repeats 3
"""
from __future__ import annotations

import argparse
import statistics
import time

from bench.bare_loop import SAMPLE_CHARS
from bench.common import Stats, lscpu_model, print_header, print_table, run_settings
from minigpt import DEFAULT_CORPUS
from minigpt.corpus import demo_prompts, probe_text


def pair(corpus: str, steps: int, threads: int) -> tuple[float, list[float]]:
    """Two runs started together with `threads` torch threads each: the pair's steps/s, and each run's."""
    from minigpt.serve.runs.process import ProcessRun
    from minigpt.serve.runs.recipe import CHILD_NICE, RunSpec

    text, tokenizer, model, train = run_settings(corpus, steps)
    probe = probe_text(tokenizer, text)[: train.block_size]  # what the Train page's run probes its attention on
    prompt = next(iter(demo_prompts(tokenizer)), "")
    runs = [ProcessRun(RunSpec(f"r{i}", model, train, tuple(tokenizer.chars), text, corpus, probe, prompt,
                               # as the app starts a run: niced, in its own process
                               SAMPLE_CHARS, nice=CHILD_NICE, threads=threads)) for i in range(2)]
    started = time.perf_counter()
    for run in runs:
        run.start()
    ended = []
    for run in runs:
        # polled: a run's process tells its end only through its state
        while run.state not in ("finished", "error", "stopped", "closed"):
            time.sleep(0.02)
        ended.append(time.perf_counter() - started)
        run.close()
    return 2 * steps / max(ended), [steps / seconds for seconds in ended]  # the pair ends with its slower run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    args = parser.parse_args()
    print_header("Two runs on two cores: one torch thread each against two")
    print(f"lscpu model name: {lscpu_model()}")
    from minigpt.serve.runs.process import start_fork_server

    start_fork_server()
    results: dict[int, list[tuple[float, list[float]]]] = {1: [], 2: []}
    rows = []
    for round_ in range(args.repeats):
        order = (1, 2) if round_ % 2 == 0 else (2, 1)  # alternating: neither case always runs on a cooler machine
        for threads in order:
            results[threads].append(pair(args.corpus, args.steps, threads))
        one, two = results[1][-1][0], results[2][-1][0]
        rows.append([round_ + 1, " ".join(f"{t} thr" for t in order), f"{one:.1f}", f"{two:.1f}", f"{two / one:.2f}"])
    print_table(["round", "order", "1 thread each: pair steps/s", "2 threads each", "2 / 1"], rows)
    summary = []
    for threads, found in results.items():
        each = [speed for _pair, speeds in found for speed in speeds]
        summary.append([f"{threads} thread{'s' if threads > 1 else ''} each",
                        Stats([p for p, _ in found]).fmt(1), f"{statistics.median(each):.1f}"])
    print_table(["case", "the pair's steps/s, median (min-max)", "a run's steps/s, median"], summary)


if __name__ == "__main__":
    main()
