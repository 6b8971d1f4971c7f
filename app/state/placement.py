"""Where this server's runs train: on its own box (the default), or on a Ray cluster of the school's
machines (minigpt.serve.runs.cluster), chosen by the server's settings (docs/cluster.md):

- `MINIGPT_RUNS_ON=ray`, with the head's address in `RAY_ADDRESS` (Ray's own variable) or in
  `.streamlit/secrets.toml` as `[cluster] address = "host:port"`;
- `MINIGPT_RUN_GPU`, a share of a GPU each run takes (0.25: four runs per GPU); unset, runs train on
  the machines' CPUs.

A cluster that cannot be used (Ray not installed, unreachable, other versions) never stops the app:
Train says why, and runs train on this box, in its own slots. The dashboard connects once per
process, as it starts; Ray's own ports and dashboard are the cluster's, never shown to learners.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

import streamlit as st

from minigpt.messages import Message
from minigpt.serve.runs.cluster import Cluster, ClusterError, Size, connect, unusable

from app.chrome.i18n import _, error_text

RUNS_ON_ENV, RUNS_ON_CHOICES, DEFAULT_RUNS_ON = "MINIGPT_RUNS_ON", ("box", "ray"), "box"
ADDRESS_ENV = "RAY_ADDRESS"   # Ray's own setting for the head's address
GPU_ENV = "MINIGPT_RUN_GPU"   # the share of a GPU each run takes on the cluster; 0: its CPUs
SECRETS_SECTION = "cluster"   # [cluster] address = "host:port" in .streamlit/secrets.toml


@dataclass
class Placement:
    """The cluster runs train on, or None (this box), why not where one was asked for, and its size
    as last seen (kept up to date by minigpt.serve.runs.cluster.watch)."""

    cluster: Cluster | None
    problem: Message | ClusterError | None = None
    size: Size | None = None
    stop: threading.Event = field(default_factory=threading.Event)


def runs_on() -> str:
    value = os.environ.get(RUNS_ON_ENV, DEFAULT_RUNS_ON).strip().lower()
    return value if value in RUNS_ON_CHOICES else DEFAULT_RUNS_ON


def address() -> str | None:
    """The head's address: the environment's, else the secrets'."""
    if os.environ.get(ADDRESS_ENV):
        return os.environ[ADDRESS_ENV]
    try:
        section = st.secrets.get(SECRETS_SECTION) or {}
        return str(section["address"]) if "address" in section else None
    except Exception:  # noqa: BLE001 - no secrets.toml, or one that cannot be read
        return None


def gpu_per_run() -> float:
    try:
        share = float(os.environ.get(GPU_ENV, 0))
    except ValueError:
        return 0.0
    return share if 0 < share <= 1 else 0.0


def _release(placed: Placement) -> None:
    placed.stop.set()
    if placed.cluster is not None:
        placed.cluster.shrink()


@st.cache_resource(show_spinner=False, on_release=_release)
def placement() -> Placement:
    """Connect once per process, where the settings ask for a cluster."""
    if runs_on() != "ray":
        return Placement(None)
    where = address()
    if not where:
        return Placement(None, Message("Runs are set to train on a Ray cluster ({setting}=ray), but no address is set: "
                                       "put the head's host:port in {address}, or in the secrets under [cluster].",
                                       setting=RUNS_ON_ENV, address=ADDRESS_ENV))
    try:
        cluster = connect(where, gpu_per_run())
        return Placement(cluster, size=cluster.size())
    except ClusterError as err:
        return Placement(None, err)
    except Exception as err:  # noqa: BLE001 - whatever else Ray raises: said, and the box trains
        return Placement(None, unusable(where, err))


def on_cluster() -> Cluster | None:
    return placement().cluster


def run_device() -> str | None:
    """The device a new run trains on where that is the cluster's GPUs ("cuda"), else None."""
    cluster = on_cluster()
    return "cuda" if cluster is not None and cluster.gpu_per_run > 0 else None


def watch(resize) -> None:
    """Have `resize(slots)` told whenever machines join or leave the cluster."""
    placed = placement()
    if placed.cluster is None:
        return
    from minigpt.serve.runs.cluster import watch as watch_cluster

    def resized(slots: int, size: Size) -> None:
        placed.size = size
        resize(slots)

    watch_cluster(placed.cluster, resized, stop=placed.stop)


def cluster_warning() -> None:
    """On Train: runs were to train on a cluster, and why they train on this machine instead."""
    problem = placement().problem
    if problem is not None:
        st.warning(_("Runs train on this machine, not on the cluster: {reason}", reason=error_text(problem)))
