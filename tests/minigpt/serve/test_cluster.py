"""minigpt/serve/runs/cluster.py: runs as Ray actors on a real 2-node cluster the tests start in a network
namespace of their own (tests/helpers/ray_cluster.py). The run interface suite runs on RayRun too
(test_run_interface.py); here, what only a cluster does: the same losses as on the box, a machine
that leaves mid-run, an actor that fails, the slots, and the faults of connecting; and, with the actor
stood in for, a status that arrives late dropped for the newer one.

    pytest tests/minigpt/serve/test_cluster.py
"""
import contextlib
import functools
import queue
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace

import pytest
import torch

from helpers.tiny import TEXT, tiny_config, tiny_tokenizer
from helpers.waiting import wait_until
from minigpt import CorpusError, TrainConfig, build_model
from minigpt.serve.runs import cluster as cluster_module
from minigpt.serve.runs.cluster import ClusterError, RayRun, Size, connect, differences
from minigpt.serve.line.registry import RunRegistry
from minigpt.serve.runs.process import ProcessRun
from minigpt.serve.runs.recipe import RunSpec

STEPS, EVAL = 120, 40


def _spec(run_id: str, max_steps: int = STEPS, **train) -> RunSpec:
    tok = tiny_tokenizer()
    model = tiny_config(vocab_size=tok.vocab_size, dropout=0.1).validate()
    cfg = TrainConfig(batch_size=4, block_size=8, max_steps=max_steps, warmup_steps=2, eval_interval=EVAL,
                      eval_iters=2, device="cpu", **train).validate(model)
    return RunSpec(run_id, model, cfg, tuple(tok.chars), TEXT, probe_text="the cat", sample_prompt="the",
                   log_interval=1, nice=0)


@contextlib.contextmanager
def _training(spec: RunSpec, cluster) -> Iterator[RayRun]:
    """A run on the cluster, started; closed (its actor handed back) when the block ends."""
    run = RayRun(spec, cluster)
    try:
        run.start()
        yield run
    finally:
        run.close()


def _finished(run) -> list[float]:
    wait_until(lambda: run.state in ("finished", "error") and not run.is_alive(), "the run to end", timeout=120)
    snap = run.snapshot()
    assert snap.error is None and snap.state == "finished"
    return [event.train_loss for event in snap.history]


# -- pure: no cluster --------------------------------------------------------------------------------
def test_slots_are_one_per_cpu_or_as_many_gpu_shares_as_the_gpus_hold():
    assert Size(3, 12.0, 0.0).slots() == 12
    assert Size(1, 16.0, 1.0).slots(gpu_per_run=0.25) == 4   # a GPU machine: 4 runs share its one GPU
    assert Size(2, 2.0, 2.0).slots(gpu_per_run=0.25) == 2    # still a CPU each
    assert Size(1, 8.0, 0.0).slots(gpu_per_run=0.5) == 0     # runs that want a GPU, on a cluster with none
    assert Size(0, 0.0, 0.0).slots() == 0


def test_differences_are_each_version_that_differs():
    ours = {"Python": "3.11.7", "Ray": "2.60.0", "torch": "2.13.0", "minigpt": "abc"}
    assert differences(ours, dict(ours)) == []
    assert differences(ours, dict(ours, Ray="2.59.0", Python="3.12.1")) == [("Python", "3.11.7", "3.12.1"),
                                                                             ("Ray", "2.60.0", "2.59.0")]


def test_without_ray_installed_the_message_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(ClusterError, match="pip install -r requirements-cluster.txt"):
        connect("127.0.0.1:6379")


def test_an_unreachable_cluster_is_said_at_once():
    pytest.importorskip("ray")
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens on it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ClusterError, match=r"cannot be reached \(nothing answers on that port\)") as refused:
        connect(f"127.0.0.1:{port}", timeout=2.0)
    assert str(port) not in str(refused.value)  # a learner's page shows it: Ray's address stays in the server's log
    with pytest.raises(ClusterError, match="is not host:port"):
        connect("head-node")


def test_the_cluster_versions_are_read_from_rays_own_mismatch_error():
    said = ("Version mismatch: The cluster was started with:\n    Ray: 2.59.0\n    Python: 3.10.12\n"
            "This process on node 10.0.0.5 was started with:\n    Ray: 2.60.0\n    Python: 3.11.7\n")
    assert cluster_module._cluster_versions(said) == ("2.59.0", "3.10.12")
    assert cluster_module._cluster_versions("something else") is None


# -- the dashboard's copy of a run, its actor stood in for: no cluster ----------------------------------
class _Remote:
    """An actor's method as the dashboard calls it: `.remote(...)` gives what `ray.get` (patched) answers."""

    def __init__(self, method) -> None:
        self._method = method

    def options(self, **_options):
        return self

    def remote(self, *args):
        return functools.partial(self._method, *args)


class _StandIn:
    """An actor whose statuses the test writes: a command is answered with `answer`, a call for news
    with the next item the test hands it (else Ray's "not yet"); `calls` counts the calls for news."""

    def __init__(self) -> None:
        self.answer: dict = {}
        self.news_items: queue.SimpleQueue = queue.SimpleQueue()
        self.calls = 0
        self.command, self.news = _Remote(self._command), _Remote(self._news)

    def _command(self, op: str, number: int, *args):
        return (True if op == "close" else None), dict(self.answer, done=number)

    def _news(self, *cursor):
        import ray

        self.calls += 1
        try:
            return self.news_items.get(timeout=0.05)
        except queue.Empty:
            raise ray.exceptions.GetTimeoutError("nothing new") from None


class _StandInCluster:
    """Places every run on one stand-in actor."""

    def __init__(self, actor: _StandIn, facts: dict) -> None:
        self.actor, self.facts = actor, facts

    def place(self, spec) -> tuple[_StandIn, dict]:
        return self.actor, dict(self.facts)

    def give_back(self, actor) -> None:
        pass


def _look(stamp: int, step: int, state: str) -> dict:
    """A status as the actor stamps it (cluster.RunActor._status), before any command was done."""
    return {"state": state, "step": step, "elapsed": step / 10, "stopped_early": False, "error": None,
            "alive": state in ("running", "paused"), "best_val": None, "last_val_loss": None, "done": 0,
            "stamp": stamp}


def test_an_older_status_arriving_after_a_newer_one_is_dropped(monkeypatch):
    """The news channel's look, taken before a command's answer but arriving after it, changes nothing."""
    ray = pytest.importorskip("ray")
    real_get = ray.get  # what a real cluster's threads, if any are still about, get meanwhile
    monkeypatch.setattr(ray, "get", lambda ref, timeout=None: ref() if isinstance(ref, functools.partial)
                        else real_get(ref, timeout=timeout))
    spec = _spec("late")
    actor = _StandIn()
    facts = {"cfg": spec.train, "model_config": spec.model, "model_params": 1, "device": "cpu", "node": "n1",
             **_look(1, 0, "idle")}
    run = RayRun(spec, _StandInCluster(actor, facts))
    try:
        older = _look(2, 5, "running")  # taken while it trained, before it had done the steps command
        actor.answer = _look(3, 8, "paused")  # its answer to the steps: it trained 8 and paused
        run.run_steps(8)
        assert run.state == "paused" and run.snapshot().step == 8
        asked = actor.calls
        actor.news_items.put({"history": [], "evals": [], "checkpoints": [], "version": 1, "status": older})
        wait_until(lambda: actor.calls >= asked + 2, "the news thread to take the late look and ask again")
        assert run.state == "paused" and run.snapshot().step == 8
    finally:
        run.close()
        for thread in threading.enumerate():  # the run's threads end before Ray's own get is back
            if thread.name.endswith(f"-{spec.run_id}"):
                thread.join(10)


# -- on the cluster ----------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.trains
def test_a_run_on_the_cluster_has_the_losses_of_the_same_run_in_a_child_process(ray_cluster):
    remote = RayRun(_spec("on-ray"), ray_cluster.cluster)
    local = ProcessRun(_spec("on-box"))
    try:
        remote.start()
        local.start()
        ray_losses, box_losses = _finished(remote), _finished(local)
        assert len(ray_losses) == STEPS + 1
        assert ray_losses == pytest.approx(box_losses, rel=0, abs=1e-6)
        assert [r.step for r in remote.snapshot().evals] == [0, EVAL, 2 * EVAL, 3 * EVAL]
        assert remote.trainer.device.type == "cpu"
    finally:
        remote.close()
        local.close()


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.trains
def test_the_cluster_size_and_a_machine_that_joins(ray_cluster):
    cluster = ray_cluster.cluster
    assert cluster.size() == Size(2, 2.0, 0.0) and cluster.slots() == 2
    seen = []
    stop = threading.Event()
    cluster_module.watch(cluster, lambda slots, size: seen.append((slots, size.machines)), every=0.2, stop=stop)
    try:
        wait_until(lambda: seen and seen[-1] == (2, 2), "the watcher's first look")
        node = ray_cluster.nodes.add_node(num_cpus=1, object_store_memory=100 * 2**20)
        wait_until(lambda: seen[-1] == (3, 3), "the new machine's slot")
        ray_cluster.nodes.remove_node(node)
        wait_until(lambda: seen[-1] == (2, 2), "the slot to go with its machine")
    finally:
        stop.set()


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.trains
def test_a_run_whose_machine_leaves_goes_on_elsewhere_to_the_same_final_loss(ray_cluster):
    """The head's CPU is held, so the run lands on the second machine; a third joins, the second is
    removed mid-run: the run goes on from its checkpoint on the third and ends as a run that was never
    interrupted, step for step."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    class Holder:  # holds a CPU of the machine it is put on (a local class: Ray ships it by value)
        def ready(self) -> bool:
            return True

    nodes = ray_cluster.nodes
    head = nodes.head_node.node_id
    holder = ray.remote(num_cpus=1)(Holder).options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(head, soft=False)).remote()
    ray.get(holder.ready.remote())
    second = next(node for node in nodes.worker_nodes)
    third = None
    checkpoints = []
    run = RayRun(_spec("moves", max_steps=300), ray_cluster.cluster)
    try:
        assert run._status["node"] == second.node_id
        run.on_checkpoint = lambda step, files: checkpoints.append(step)
        run.start()
        wait_until(lambda: run.snapshot().step >= EVAL + 5 and EVAL in checkpoints, "a checkpoint and a few steps more")
        run.pause()  # a tiny run would finish before a machine has joined: it moves paused, and stays so
        third = nodes.add_node(num_cpus=1, object_store_memory=100 * 2**20)
        nodes.wait_for_nodes()
        nodes.remove_node(second)
        wait_until(lambda: run.snapshot().notice is not None or run.state == "error", "the run to move", timeout=150)
        assert run.snapshot().notice is not None, run.snapshot().error
        wait_until(lambda: run._status["node"] == third.node_id and run._status["done"] >= run._sent,
                   "the new actor to have the run, paused")
        assert run.state == "paused" and run.snapshot().step == EVAL  # back at its checkpoint, not running
        run.resume()
        moved = _finished(run)
        assert run._status["node"] == third.node_id
        notice = run.snapshot().notice
        assert notice.params["step"] in checkpoints and notice.params["lost"] >= EVAL + 5
        assert [e.step for e in run.snapshot().history] == list(range(301))  # every step once
    finally:
        run.close()
        ray.kill(holder)
    alone = ProcessRun(_spec("never-moved", max_steps=300))
    try:
        alone.start()
        assert moved == pytest.approx(_finished(alone), rel=0, abs=1e-6)
    finally:
        alone.close()
        if third is not None:  # the cluster as it was: head and one more, for the next test
            nodes.add_node(num_cpus=1, object_store_memory=100 * 2**20)
            nodes.remove_node(third)
            nodes.wait_for_nodes()


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.trains
def test_an_actor_that_dies_on_a_machine_that_stays_fails_its_run_and_the_next_run_trains(ray_cluster):
    import ray

    with _training(_spec("killed", max_steps=100_000), ray_cluster.cluster) as run:
        wait_until(lambda: run.snapshot().step >= 3, "three steps")
        ray.kill(run._actor)  # as the out-of-memory killer ends it
        wait_until(lambda: run.state == "error", "the run to fail")
        snap = run.snapshot()
        assert "the cluster lost this run at step" in str(snap.error) and not run.is_alive()
        assert snap.notice is None  # not moved: its machine is still there
    with _training(_spec("after"), ray_cluster.cluster) as after:
        _finished(after)


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.trains
def test_a_run_that_diverges_on_the_cluster_fails_with_the_same_sentence(ray_cluster):
    with _training(_spec("diverges", lr=1e6), ray_cluster.cluster) as run:
        wait_until(lambda: run.state == "error", "the run to fail")
        assert "Try a lower learning rate" in str(run.snapshot().error)


@pytest.mark.slow
@pytest.mark.cluster
def test_a_machine_with_other_versions_is_named_with_both(ray_cluster):
    ours = cluster_module.versions()
    ray_cluster.cluster.check_versions()  # the real cluster: the same everywhere
    with pytest.raises(ClusterError, match=r"A machine of the cluster runs Ray 2\.[0-9.]+, and this dashboard Ray 2\.0\.0"):
        ray_cluster.cluster.check_versions(ours=dict(ours, Ray="2.0.0"))


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.trains
def test_settings_the_trainer_refuses_are_raised_to_the_caller_and_its_actor_serves_the_next_runs(ray_cluster):
    cluster = ray_cluster.cluster
    bad = replace(_spec("bad"), text=TEXT[:6])  # too short a corpus for its windows
    with pytest.raises(CorpusError, match="fewer than block_size"):
        RayRun(bad, cluster)
    runs = [RayRun(_spec(f"after-{i}"), cluster) for i in range(2)]  # both CPUs: the refused run's actor is free
    try:
        for run in runs:
            run.start()
        assert _finished(runs[0]) == _finished(runs[1])
    finally:
        for run in runs:
            run.close()


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.trains
def test_a_closed_runs_actor_trains_the_next_run_warm_and_leaves_nothing_behind(ray_cluster):
    """A run's actor is kept warm for the next run: the next one starts in the same process, and trains
    exactly as a run in a new actor does (nothing of the last run is left in it)."""
    cluster = ray_cluster.cluster
    with _training(_spec("first", max_steps=30), cluster) as first:
        _finished(first)
        actor = first._actor
        wait_until(lambda: cluster._idle == [actor], "a run that ended to hand its actor back, unclosed")
        kept = first.inference_model().state_dict()  # from the dashboard's copy of its weights
        untrained = build_model(first.spec.model, first.spec.train.seed).state_dict()
        assert kept.keys() == untrained.keys() and not all(torch.equal(kept[k], untrained[k]) for k in kept)
    assert cluster._idle == [actor]
    with _training(_spec("second", max_steps=40, lr=3e-3), cluster) as second:
        assert second._actor is actor and not cluster._idle
        reused = _finished(second)
    cluster.shrink()
    with _training(_spec("fresh", max_steps=40, lr=3e-3), cluster) as fresh:
        assert fresh._actor is not actor
        assert reused == _finished(fresh)


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.trains
def test_a_line_longer_than_the_slots_trains_through_the_registry(ray_cluster):
    """Four Starts on the cluster's 2 slots: a run that ends hands its CPU back at once, so the line
    moves on without waiting for anything to close the ended run."""
    cluster = ray_cluster.cluster
    spec = _spec("", max_steps=20)
    registry = RunRegistry(max_runs=cluster.slots(), max_waiting=10)
    try:
        entries = [registry.submit(spec, corpus="tiny", build=lambda run_id: RayRun(replace(spec, run_id=run_id), cluster))
                   for _ in range(4)]
        wait_until(lambda: all(e.run.state == "finished" for e in entries), "all four runs to finish", timeout=120)
    finally:
        registry.stop_all()
