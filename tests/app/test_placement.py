"""app/state/serving.py and minigpt/serve/server.py: where the server's runs train, and what Train
says when a cluster was asked for and cannot be used. The cluster itself is tested in
tests/minigpt/serve/test_cluster.py, and the pages on a run that trained there in test_train_page.py
(its "ray" case)."""
from __future__ import annotations

import socket
import sys

import pytest

from app.chrome.site import TRAIN
from app.state import runs, serving
from helpers.apptest import home, own_run, page, start_tiny_run, wait_for_step
from helpers.language import assert_chinese
from minigpt.serve import server as face


def _free_port() -> int:
    with socket.socket() as sock:  # free a moment ago: nothing listens on it
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _warnings(at) -> list[str]:
    return [w.value for w in at.warning]


def test_unset_runs_train_on_this_box_and_nothing_is_said(monkeypatch):
    monkeypatch.delenv(face.RUNS_ON_ENV, raising=False)
    monkeypatch.delenv(face.TRAIN_IN_ENV, raising=False)
    at = page(home(), TRAIN.script)
    assert not at.exception and not any("cluster" in w for w in _warnings(at))
    assert serving.placement().cluster is None
    assert any("training slots on this server" in c.value or "training slot on this server" in c.value
               for c in at.caption)


@pytest.mark.trains
@pytest.mark.slow
def test_an_unreachable_cluster_is_said_on_train_and_runs_train_here(monkeypatch):
    pytest.importorskip("ray")
    port = _free_port()
    monkeypatch.setenv(face.TRAIN_IN_ENV, "ray")
    monkeypatch.setenv(face.ADDRESS_ENV, f"127.0.0.1:{port}")
    at = start_tiny_run()  # 20,000 steps: still training when it is looked at
    said = [w for w in _warnings(at) if "not on the cluster" in w]
    assert said and "The Ray cluster cannot be reached" in said[0] and str(port) not in said[0]  # no address to learners
    assert runs.registry().max_runs >= 1  # the box's own slots
    wait_for_step(at, 10)
    entry = runs.registry().get(*own_run(at))
    # read while it trains: once a run has ended, the registry's dispatcher swaps it for its small form
    # (a KeptRun), whichever machine trained it
    box = "ProcessRun" if face.DEFAULT_TRAIN_IN == "process" else "TrainingRun"  # where this box trains by default
    assert entry.run.state == "running" and type(entry.run).__name__ == box


def test_without_ray_installed_train_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.setenv(face.RUNS_ON_ENV, "ray")
    monkeypatch.setenv(face.ADDRESS_ENV, "127.0.0.1:6379")
    at = page(home(), TRAIN.script)
    assert any("pip install -r requirements-cluster.txt" in w for w in _warnings(at))
    assert serving.placement().cluster is None


def test_ray_without_an_address_says_where_to_put_one(monkeypatch):
    monkeypatch.setenv(face.RUNS_ON_ENV, "ray")
    monkeypatch.delenv(face.ADDRESS_ENV, raising=False)
    at = page(home(), TRAIN.script)
    assert any("no address is set" in w and "RAY_ADDRESS" in w for w in _warnings(at))


def test_the_fallback_is_said_in_chinese(monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setenv(face.RUNS_ON_ENV, "ray")
    monkeypatch.setenv(face.ADDRESS_ENV, f"127.0.0.1:{_free_port()}")
    at = page(home("zh"), TRAIN.script)
    assert _warnings(at)
    assert_chinese(at, "Train, its cluster unreachable", besides=[face.ADDRESS_ENV])
