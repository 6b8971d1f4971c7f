"""Runs as Ray actors against runs in child processes of the server, on the same cores (issue 52).

It starts a local Ray cluster as the tests do (a head and a second node with 1 CPU each, as
`ray start --head` and `ray start --address=...` make them) and measures, side by side:

- `speed`: one run of the Train page's default preset, alone, as a Ray actor and as a child process
  (the box's default), A B A B: its steps/s from its first step to its last, and the seconds from
  Start (building the run included: forking a child, or placing an actor) to its first step. The
  first actor is new (a process starts, imports torch); later runs reuse it warm, as a class's do;
- `class`: a class of N learners who all press Start at once, through the registry with its line:
  on the box (its 2 slots, child processes) and on the 2-node cluster (its 2 slots, actors); the
  time until every run has finished. On a 2-core machine this is Ray's overhead, not a speed-up;
- `overhead`: Ray's own processes on the head, idle: their memory (PSS: shared pages counted once)
  and CPU;
- `dashboard`: this process (the dashboard's side of RayRun: its threads and its copy of the runs'
  news) while 4 runs train on the cluster (2 more 1-CPU nodes join for it): its memory and CPU.

Ray binds to the machine's outward address; run it in a network namespace of its own so that
everything stays on loopback (root):

    unshare -n sh -c 'ip link set lo up && .venv/bin/python -m bench.cluster --learners 30 --steps 100'
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from minigpt import demo_prompts, probe_text

from .bare_loop import SAMPLE_CHARS
from .common import cpu_seconds, print_header, print_table, rss_kb, run_settings

CORPUS = "demo-zh"
OBJECT_STORE_BYTES = 100 * 2**20


def spec(run_id: str, steps: int):
    from minigpt.serve.runs.recipe import CHILD_NICE, RunSpec

    text, tokenizer, model, train = run_settings(CORPUS, steps)
    probe = probe_text(tokenizer, text)[: train.block_size]
    return RunSpec(run_id, model, train, tuple(tokenizer.chars), text, CORPUS, probe,
                   next(iter(demo_prompts(tokenizer)), ""), SAMPLE_CHARS, nice=CHILD_NICE, threads=1)


def build(where: str, run_spec, cluster):
    from minigpt.serve.runs.process import ProcessRun

    return cluster.run(run_spec) if where == "ray" else ProcessRun(run_spec)


def one_run(where: str, steps: int, cluster) -> dict:
    """Start to first step, and steps/s from the first step to the last, of one run alone."""
    started = time.perf_counter()
    run = build(where, spec(f"{where}-alone", steps), cluster)
    run.start()
    while run.snapshot().step < 1:
        time.sleep(0.002)
    first = time.perf_counter()
    while run.state not in ("finished", "error", "stopped"):
        time.sleep(0.005)
    ended = time.perf_counter()
    snap = run.snapshot()
    run.close()
    if snap.state != "finished":
        raise SystemExit(f"the {where} run ended {snap.state}: {snap.error}")
    return {"to_first": first - started, "steps_per_s": (snap.step - 1) / (ended - first)}


def a_class(where: str, learners: int, steps: int, cluster) -> float:
    """Seconds from `learners` Starts at once until every run has finished, through the registry's line."""
    from minigpt.serve.line.registry import RunRegistry

    registry = RunRegistry(max_runs=cluster.slots() if where == "ray" else 2, max_waiting=learners)
    text, tokenizer, model, train = run_settings(CORPUS, steps)
    started = time.perf_counter()
    entries = [registry.submit(spec("", steps), corpus=CORPUS, build=lambda run_id: build(where, spec(run_id, steps), cluster)) for _ in range(learners)]
    while any(entry.run.state not in ("finished", "error", "stopped") for entry in entries):
        time.sleep(0.05)
    seconds = time.perf_counter() - started
    failed = [entry.run.snapshot().error for entry in entries if entry.run.state != "finished"]
    registry.stop_all()
    if failed:
        raise SystemExit(f"{len(failed)} runs on {where} did not finish: {failed[0]}")
    return seconds


def descendants(pid: int) -> list[int]:
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def pss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def ray_idle(ray_pids: list[int], seconds: float) -> None:
    """Ray's own processes, with nothing to run: their memory and their CPU over `seconds`."""
    cpu0, t0 = cpu_seconds(ray_pids), time.perf_counter()
    time.sleep(seconds)
    idle_cpu = (cpu_seconds(ray_pids) - cpu0) / (time.perf_counter() - t0)
    print(f"Ray idle, 2 nodes: {len(ray_pids)} processes, {pss_mb(ray_pids):.0f} MB PSS, "
          f"{100 * idle_cpu:.1f}% of one core")


def one_run_rounds(args: argparse.Namespace, cluster) -> None:
    """One run alone, on the box and on the cluster in turn (A B A B): steps/s and Start to step 1."""
    rows, figures = [], {"box": [], "ray": []}
    for round_ in range(args.rounds):
        for where in ("box", "ray"):
            result = one_run(where, args.steps, cluster)
            figures[where].append(result)
            actor = "" if where == "box" else "new" if round_ == 0 else "warm"  # actors outlive their run
            rows.append([round_ + 1, where, actor, f"{result['steps_per_s']:.1f}", f"{result['to_first']:.2f}"])
    print_table(["round", "where", "actor", "steps/s", "Start to step 1 (s)"], rows)
    ratios = [r["steps_per_s"] / b["steps_per_s"] for r, b in zip(figures["ray"], figures["box"])]
    warm = [r["to_first"] for r in figures["ray"][1:]]
    print(f"one run: ray/box steps/s, median of {args.rounds} rounds: {statistics.median(ratios):.3f} "
          f"(rounds {', '.join(f'{x:.3f}' for x in ratios)}); Start to step 1: box "
          f"{statistics.median(r['to_first'] for r in figures['box']):.2f} s, ray on a new actor "
          f"{figures['ray'][0]['to_first']:.2f} s"
          + (f", on a warm one {statistics.median(warm):.2f} s" if warm else ""))


def class_rounds(args: argparse.Namespace, cluster) -> None:
    """A class pressing Start at once, through the registry's line, on the box and on the cluster."""
    seconds = {}
    for where in ("box", "ray"):
        cluster.shrink()  # the class starts as on a fresh server: no warm actor yet
        seconds[where] = a_class(where, args.learners, args.class_steps, cluster)
        print(f"a class of {args.learners}, {args.class_steps} steps each, on {where}: {seconds[where]:.1f} s")
    print(f"class: ray/box time {seconds['ray'] / seconds['box']:.3f}")


def dashboard_beside(nodes, cluster, seconds: float) -> None:
    """This process, the dashboard's stand-in, while 4 runs train on 2 more nodes: its RSS and CPU."""
    extra = [nodes.add_node(num_cpus=1, object_store_memory=OBJECT_STORE_BYTES) for _ in range(2)]
    nodes.wait_for_nodes()
    rss_idle = rss_kb([os.getpid()]) / 1024
    runs = [cluster.run(spec(f"four-{i}", 100_000)) for i in range(4)]  # long enough to outlast the stretch
    for run in runs:
        run.start()
    while min(run.snapshot().step for run in runs) < 5:  # all four past their start-up
        time.sleep(0.05)
    cpu0, t0 = cpu_seconds([os.getpid()]), time.perf_counter()
    time.sleep(seconds)
    busy = (cpu_seconds([os.getpid()]) - cpu0) / (time.perf_counter() - t0)
    steps = sum(run.snapshot().step for run in runs)
    print(f"dashboard with 4 runs training on the cluster ({steps} steps so far): "
          f"RSS {rss_kb([os.getpid()]) / 1024:.0f} MB ({rss_idle:.0f} MB before they started), "
          f"{100 * busy:.1f}% of one core")
    for run in runs:
        run.close()
    for node in extra:
        nodes.remove_node(node)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="A B rounds of the one-run comparison")
    parser.add_argument("--steps", type=int, default=300, help="steps of each run alone")
    parser.add_argument("--learners", type=int, default=30)
    parser.add_argument("--class-steps", type=int, default=100, help="steps of each learner's run")
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    args = parser.parse_args()

    import ray  # here: the rest of bench/ runs where Ray is not installed
    from ray.cluster_utils import Cluster as RayCluster

    from minigpt.serve.runs.cluster import connect
    from minigpt.serve.runs.process import start_fork_server

    print_header("Runs as Ray actors against runs in child processes (bench/cluster.py)")
    start_fork_server()
    before = set(descendants(os.getpid()))  # the fork server's: not Ray's
    nodes = RayCluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": OBJECT_STORE_BYTES})
    nodes.add_node(num_cpus=1, object_store_memory=OBJECT_STORE_BYTES)
    nodes.wait_for_nodes()
    cluster = connect(nodes.address)
    try:
        time.sleep(2.0)  # the cluster's start-up work done
        ray_idle([pid for pid in descendants(os.getpid()) if pid not in before], args.idle_seconds)
        one_run_rounds(args, cluster)
        class_rounds(args, cluster)
        dashboard_beside(nodes, cluster, args.idle_seconds)
    finally:
        ray.shutdown()
        nodes.shutdown()


if __name__ == "__main__":
    main()
