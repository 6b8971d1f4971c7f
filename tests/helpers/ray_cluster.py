"""A real Ray cluster of two machines for the tests of runs on a cluster (minigpt/serve/runs/cluster.py),
made by the tests themselves, inside a network namespace of their own.

Left to itself, Ray binds to and connects through the machine's outward address. In a network
namespace with only loopback, everything it opens is on 127.0.0.1: nothing of it is reachable from
outside, and nothing of the machine's own network is touched. The test process's main thread enters
a new namespace (`unshare(CLONE_NEWNET)`, which needs root: CI runs as root), brings loopback up,
and starts the cluster there with `ray.cluster_utils.Cluster`: a head and a second node, each with
1 CPU, each a real raylet with its own processes, as `ray start --head` and `ray start --address=...`
make them. What the main thread starts from then on (Ray's driver, the runs' threads) is in the
namespace too; when the session ends the cluster stops and the thread goes back.

Without root, or without Ray (`pip install -r requirements-cluster.txt`), the tests skip and say
why; in CI (CI=true) they fail instead, as the browser and PostgreSQL tests do.

Fixtures: `ray_cluster` (the session's cluster, started on first use, its driver connected; the
test's thread inside its namespace while the test runs).
"""
from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
from dataclasses import dataclass
from typing import Any

import pytest

CLONE_NEWNET = 0x40000000              # <sched.h>
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1  # <linux/sockios.h>, <net/if.h>
OBJECT_STORE_BYTES = 100 * 2**20       # each node's object store: Ray's floor is 75 MB, and runs' weights are small


@dataclass
class TestCluster:
    """The session's cluster: Ray's Cluster (add_node, remove_node), its address, and ours (cluster.Cluster)."""

    nodes: Any
    address: str
    cluster: Any
    namespace: "Namespace"


def _skip_or_fail(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"CI runs the cluster tests: {reason}")
    pytest.skip(reason)


def _loopback_up() -> None:
    """`ip link set lo up`, without needing iproute2: the flag, set by ioctl on a socket of this namespace."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh14s", b"lo", 0, b"")
        flags = struct.unpack("16sh14s", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sh14s", b"lo", flags | IFF_UP, b""))


class Namespace:
    """A network namespace of the tests' own with only loopback, entered and left by this thread."""

    def __init__(self):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        if self.libc.unshare(CLONE_NEWNET) != 0:
            why = os.strerror(ctypes.get_errno())
            os.close(self.home)
            _skip_or_fail(f"a network namespace of the tests' own needs root (unshare: {why})")
        _loopback_up()
        self.own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)

    def enter(self) -> None:
        self._set(self.own)

    def leave(self) -> None:
        self._set(self.home)

    def _set(self, fd: int) -> None:
        if self.libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns")


@pytest.fixture(scope="session")
def _ray_session():
    """The cluster, started once, in its namespace; the test thread goes back home between tests."""
    try:
        import ray
        from ray.cluster_utils import Cluster as RayCluster
    except ImportError:
        _skip_or_fail("Ray is not installed: pip install -r requirements-cluster.txt")
    from minigpt.serve.runs.cluster import connect

    namespace = Namespace()  # entered: Ray's processes and the driver's threads start in it
    nodes = None
    try:
        nodes = RayCluster(initialize_head=True, head_node_args={"num_cpus": 1,
                                                                  "object_store_memory": OBJECT_STORE_BYTES})
        nodes.add_node(num_cpus=1, object_store_memory=OBJECT_STORE_BYTES)
        nodes.wait_for_nodes()
        made = TestCluster(nodes, nodes.address, connect(nodes.address), namespace)
        namespace.leave()
        yield made
        namespace.enter()
    finally:
        ray.shutdown()
        if nodes is not None:
            nodes.shutdown()
        namespace.leave()


@pytest.fixture
def ray_cluster(_ray_session):
    """The session's cluster, with this test's thread inside its namespace until the test ends."""
    _ray_session.namespace.enter()
    try:
        yield _ray_session
    finally:
        _ray_session.cluster.shrink()  # the warm actors a test left: the next one starts with every CPU free
        _ray_session.namespace.leave()
