"""An app run against a bare training loop: steps per second of the Train page's default run
beside plain PyTorch doing the same optimizer steps, each in a fresh process on one pinned core.

- bare: the reference, written plainly: random windows of the encoded corpus, forward,
  cross-entropy, backward, clip_grad_norm_ 1.0, AdamW (fused, torch's fastest on a CPU), and
  nothing else: no evaluation, no sample, no learning-rate schedule;
- app: a ProcessRun as the Train page starts one (app/state/runs.py start_run): the probe text, the
  sample prompt and its 80 characters, the run's niceness, evaluations at the preset's interval
  with a sample and the probe's attention maps at each, the news sent through the pipe. Timed
  in the measuring process from start() to the state "finished", so all of that counts;
- thread (--thread): the same run as a TrainingRun on a thread of the measuring process;
- store (--store): the app run as the app trains it with its store on: through a registry whose
  SQLite store takes its history as it goes and a checkpoint at every evaluation;
- bare-kept (--bare-kept): the bare loop in a process whose allocator keeps freed memory, as a run's
  worker process does (runner.keep_freed_memory): what is left of the app's overhead once the bare
  loop has that too.

Every case is the same model, corpus, batch and block (the default preset, early stopping off,
`--steps` steps), with one torch thread, in a process of its own pinned to `--core`. Rounds
alternate the order (A B, B A, ...), and the ratio app/bare is taken round by round.

    python -m bench.bare_loop --steps 300 --repeats 3
    python -m bench.bare_loop --steps 300 --repeats 5 --thread --corpus demo-zh
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from minigpt import DEFAULT_CORPUS, DEFAULT_PRESET, GPTConfig, TrainConfig
from minigpt.corpus import demo_prompts, probe_text
from minigpt.model import MiniGPT

from .common import Stats, cpu_seconds, lscpu_model, print_header, print_table, run_settings

CASES = ("bare", "app", "thread", "bare-kept", "store")
RESULT = "RESULT "  # the line a case's process prints its figures on
SAMPLE_CHARS = 80   # the sample's length at each evaluation on a corpus that is not a task's (app/state/runs.py)


# ---------------------------------------------------------------- the reference
def bare_loop(model_cfg: GPTConfig, train_cfg: TrainConfig, ids: torch.Tensor, steps: int) -> tuple[float, float]:
    """Wall and CPU seconds for `steps` plain optimizer steps on the training split of `ids`."""
    model = MiniGPT(model_cfg, seed=train_cfg.seed).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=train_cfg.lr, betas=train_cfg.betas,
                                  weight_decay=train_cfg.weight_decay, fused=True)
    data = ids[: int(len(ids) * (1 - train_cfg.val_fraction))]
    B, T = train_cfg.batch_size, train_cfg.block_size
    offsets = torch.arange(T + 1)
    generator = torch.Generator().manual_seed(train_cfg.seed)
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        windows = data[torch.randint(len(data) - T, (B, 1), generator=generator) + offsets]  # (B, T+1)
        logits, _ = model(windows[:, :-1])
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), windows[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    return time.perf_counter() - started, time.process_time() - cpu


# ---------------------------------------------------------------- the app's run
def app_run(corpus: str, steps: int, in_process: bool = True) -> dict:
    """Build a run as app/state/runs.py start_run does, start it, wait until it has finished."""
    from minigpt.lab.tasks import task_for_corpus, training_hooks
    from minigpt.serve.runs.thread import TrainingRun
    from minigpt.serve.runs.process import ProcessRun, start_fork_server
    from minigpt.serve.runs.recipe import CHILD_NICE, RunSpec
    from minigpt.train import Trainer, build_model

    text, tokenizer, model, train = run_settings(corpus, steps)
    if task_for_corpus(corpus) is not None:
        raise SystemExit("this bench times the default corpus's run; a task's corpus samples differently")
    probe = probe_text(tokenizer, text)[: train.block_size]
    prompt = next(iter(demo_prompts(tokenizer)), "")
    if in_process:
        start_fork_server()  # the server starts it once, before any run
        run = ProcessRun(RunSpec("bench", model, train, tuple(tokenizer.chars), text, corpus, probe, prompt,
                                 SAMPLE_CHARS, nice=CHILD_NICE, threads=1))  # the server's share of one core
    else:
        trainer = Trainer(build_model(model, train.seed, train.device), tokenizer, text, train,
                          **training_hooks(None))
        run = TrainingRun(trainer, probe_text=probe, sample_prompt=prompt, sample_chars=SAMPLE_CHARS, run_id="bench")
    child = run._process.pid if in_process else None
    started, cpu = time.perf_counter(), time.process_time() + cpu_seconds([child] if child else [])
    run.start()
    while run.state not in ("finished", "error", "stopped", "closed"):
        time.sleep(0.02)
    wall, cpu = time.perf_counter() - started, time.process_time() + cpu_seconds([child] if child else []) - cpu
    snap = run.snapshot()
    run.close()
    if snap.state != "finished":
        raise SystemExit(f"the run ended {snap.state}: {snap.error}")
    return {"seconds": wall, "cpu": cpu, "steps": snap.step, "run_elapsed": snap.elapsed, "evals": len(snap.evals)}


def app_run_with_store(corpus: str, steps: int) -> dict:
    """The app run as the app trains it with its store on (app/state/runs.py): through a registry whose
    store (SQLite in a temporary folder) takes the run's history as it goes and a checkpoint at every
    evaluation. Timed as app_run: from the start command (which submit sends once it has built the run:
    a free slot) to the end of its training; building the run (its process's fork) is outside both
    clocks."""
    import tempfile

    from minigpt.serve.line.registry import RunRegistry
    from minigpt.serve.store.database import Store
    from minigpt.serve.runs.process import build_run, start_fork_server
    from minigpt.serve.runs.recipe import CHILD_NICE, RunSpec

    text, tokenizer, model, train = run_settings(corpus, steps)
    probe = probe_text(tokenizer, text)[: train.block_size]
    prompt = next(iter(demo_prompts(tokenizer)), "")
    start_fork_server()
    store = Store.from_url(f"sqlite:///{tempfile.mkdtemp(prefix='minigpt-bench-store-')}/minigpt.db")
    registry = RunRegistry(max_runs=1, store=store, builder=lambda spec, resume: build_run(spec, resume))
    spec = RunSpec("", model, train, tuple(tokenizer.chars), text, corpus, probe, prompt, SAMPLE_CHARS,
                   nice=CHILD_NICE, threads=1)
    entry = registry.submit(spec, corpus=corpus)
    run = entry.run  # a free slot: built, and told to start, on this thread, in submit
    child = run._process.pid
    started, cpu = time.perf_counter(), time.process_time() + cpu_seconds([child] if child else [])
    while run.state not in ("finished", "error", "stopped", "closed"):
        time.sleep(0.02)
    wall, cpu = time.perf_counter() - started, time.process_time() + cpu_seconds([child] if child else []) - cpu
    snap = run.snapshot()
    registry.stop_all()
    store.flush(30)
    saved = store.runs.load(entry.run_id)
    store.close()
    if snap.state != "finished" or saved is None or saved.checkpoint_step != snap.step:
        raise SystemExit(f"the run ended {snap.state} ({snap.error}); the store has step "
                         f"{saved and saved.checkpoint_step}'s checkpoint")
    return {"seconds": wall, "cpu": cpu, "steps": snap.step, "run_elapsed": snap.elapsed, "evals": len(snap.evals)}


def run_case(case: str, corpus: str, steps: int) -> dict:
    torch.set_num_threads(1)
    if case == "bare-kept":
        from minigpt.serve.runs.thread import keep_freed_memory

        keep_freed_memory()
    if case.startswith("bare"):
        text, tokenizer, model, train = run_settings(corpus, steps)
        ids = torch.tensor(tokenizer.encode(text), dtype=torch.long)
        wall, cpu = bare_loop(model, train, ids, steps)
        return {"seconds": wall, "cpu": cpu, "steps": steps}
    if case == "store":
        return app_run_with_store(corpus, steps)
    return app_run(corpus, steps, in_process=case == "app")


# ---------------------------------------------------------------- rounds of fresh processes
def timed_case(case: str, corpus: str, steps: int, core: int, nice: int) -> dict:
    """One case in a fresh interpreter pinned to `core`; what it printed on its RESULT line."""
    def pin() -> None:
        os.sched_setaffinity(0, {core})
        if case.startswith("bare") and nice:
            os.nice(nice)  # the app's training thread trains at its run's niceness: the reference too

    command = [sys.executable, "-m", "bench.bare_loop", "--case", case, "--corpus", corpus, "--steps", str(steps)]
    done = subprocess.run(command, capture_output=True, text=True, preexec_fn=pin, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if done.returncode or not lines:
        raise SystemExit(f"{case} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return json.loads(lines[-1][len(RESULT):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps per run (the class challenge's 300)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; each runs every case once")
    parser.add_argument("--corpus", default=DEFAULT_CORPUS, help=f"a built-in corpus (default {DEFAULT_CORPUS})")
    parser.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)), help="the core every case runs on")
    parser.add_argument("--thread", action="store_true", help="add the run on a thread (TrainingRun)")
    parser.add_argument("--store", action="store_true",
                        help="add the app run with the store on (its history and a checkpoint at each evaluation "
                             "written to SQLite)")
    parser.add_argument("--bare-kept", action="store_true",
                        help="add the bare loop with the allocator keeping freed memory, as a run's process does")
    parser.add_argument("--nice", type=int, default=None,
                        help="the bare loop's niceness (default: the app run's training thread's, 19)")
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)  # one case in this process
    args = parser.parse_args()
    if args.case:
        print(RESULT + json.dumps(run_case(args.case, args.corpus, args.steps)))
        return

    from minigpt.serve.runs.recipe import CHILD_NICE

    nice = CHILD_NICE if args.nice is None else args.nice
    print_header("An app run against the bare training loop")
    _, tokenizer, model, train = run_settings(args.corpus, args.steps)
    print(f"lscpu model name: {lscpu_model()}")
    print(f"preset {DEFAULT_PRESET} on {args.corpus} (vocabulary {tokenizer.vocab_size}): d_model {model.d_model}, "
          f"{model.num_layers} layers, batch {train.batch_size} x block {train.block_size}, {args.steps} steps, "
          f"an evaluation every {train.eval_interval} ({train.eval_iters} batches per split); each case a fresh "
          f"process on core {args.core}, 1 torch thread; the bare loop at niceness {nice}, the app's training "
          f"thread at its run's ({CHILD_NICE})\n")
    cases = ["bare", "app"] + (["thread"] if args.thread else []) + (["bare-kept"] if args.bare_kept else []) \
        + (["store"] if args.store else [])
    results: dict[str, list[dict]] = {case: [] for case in cases}
    rows = []
    for r in range(args.repeats):
        order = cases[r % len(cases):] + cases[: r % len(cases)]
        for case in order:
            results[case].append(timed_case(case, args.corpus, args.steps, args.core, nice))
        speed = {case: results[case][-1]["steps"] / results[case][-1]["seconds"] for case in cases}
        rows.append([r + 1, " ".join(order)] + [f"{speed[c]:.1f}" for c in cases]
                    + [f"{speed[c] / speed['bare']:.2f}" for c in cases[1:]])
    print("Wall clock, round by round:")
    print_table(["round", "order"] + [f"{c} steps/s" for c in cases] + [f"{c}/bare" for c in cases[1:]], rows)
    summary = []
    for case in cases:
        for clock, key in (("wall", "seconds"), ("cpu", "cpu")):
            speeds = Stats([res["steps"] / res[key] for res in results[case]])
            ratio = Stats([b[key] / res[key] for res, b in zip(results[case], results["bare"])])
            summary.append([f"{case} ({clock})", speeds.fmt(1), ratio.fmt(2) if case != "bare" else "1"])
    print("Medians (min-max); cpu: steps per CPU second of the case's processes (the app: its child and the "
          "process that started it), steadier where other work shares the core:")
    print_table(["case", "steps/s", "ratio to bare, round by round"], summary)


if __name__ == "__main__":
    main()
