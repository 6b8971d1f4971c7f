"""Capacity: how many training runs this process can afford at once, from what it may really use.

`os.cpu_count()` and the machine's total memory say what the host has, not what a container may
use: a control group can cap the CPU time (a quota of 1.5 CPUs on a 64-core host) and the memory.
`read_capacity()` reads the process's CPU affinity, the cgroup v1 or v2 limits on the way from its
own control group up to the root, and /proc/meminfo, and the small functions below turn that
`Capacity` into the numbers the server needs: runs training at once, threads per run, finished
runs kept in memory.

    capacity = read_capacity()
    slots = slots_for(capacity, run_bytes=150 * 2**20, reserve_bytes=500 * 2**20)
    torch.set_num_threads(threads_per_run(capacity, slots))   # in each run's process

Every reader takes `root`, under which proc/ and sys/fs/cgroup/ are read, so tests build fake
trees. A missing or malformed file never raises: it counts as no limit.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

ROOT = Path("/")  # every reader takes `root` instead: tests point it at a fake tree
V1, V2 = "cgroup v1", "cgroup v2"  # also what Capacity.source says, for a log
NO_LIMIT_BYTES = 1 << 60  # v1 writes "no limit" as 2**63 rounded down to a page; nobody sets 1 EiB


@dataclass(frozen=True)
class Capacity:
    """What this process may use: `cpus` (a quota may make it fractional), `memory_bytes` still free
    to it (None when nothing was readable), and `source`, where the limits came from, for a log."""

    cpus: float
    memory_bytes: int | None
    source: str


def read_capacity(root: Path = ROOT, affinity: int | None = None) -> Capacity:
    """The CPUs and memory this process may use; `affinity` (a CPU count) stands in for the real mask."""
    # a taskset or a cpuset narrows the CPUs first, a quota then caps their time
    cpus = float(affinity if affinity is not None else _affinity_count())
    quota = _cpu_quota(root)
    # a cgroup limit can exceed what the machine still has free, and /proc/meminfo bounds it then
    memory = _smallest([_memory_headroom(root), _mem_available(root)])
    # both bind: 8 CPUs under a quota of 1.5 CPUs give 1.5 CPUs of time, a quota of 16 still only 8 CPUs
    return Capacity(min(cpus, quota) if quota is not None else cpus, memory, _source(root))


def slots_for(capacity: Capacity, run_bytes: int, reserve_bytes: int) -> int:
    """How many runs may train at once: one per whole CPU, as many as the memory left after
    `reserve_bytes` holds runs of `run_bytes` each, and never fewer than one."""
    slots = math.floor(capacity.cpus)  # a part of a CPU trains no run of its own: 1.5 CPUs is one slot
    if capacity.memory_bytes is not None:
        # what the server itself still grows by (its sessions, a class's views) is set aside before any run
        slots = min(slots, (capacity.memory_bytes - reserve_bytes) // run_bytes)
    return max(1, slots)  # even on a box too small, one run trains: slowly rather than never


def threads_per_run(capacity: Capacity, slots: int) -> int:
    """Intra-op threads for each run's process, so that `slots` runs never oversubscribe the CPUs."""
    return max(1, math.floor(capacity.cpus / max(1, slots)))  # rounded down: a spare part-CPU is left to the server


def kept_runs_for(capacity: Capacity, kept_run_bytes: int, reserve_bytes: int, floor: int, ceiling: int) -> int:
    """How many finished runs the server may keep in memory, between `floor` and `ceiling`."""
    if capacity.memory_bytes is None:  # nothing readable (macOS, Windows): no limit is known, the ceiling holds
        return ceiling
    fits = (capacity.memory_bytes - reserve_bytes) // kept_run_bytes
    return min(ceiling, max(floor, fits))


def _affinity_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def _cpu_quota(root: Path) -> float | None:
    """The smallest CPU quota from the process's own group up to the root, in CPUs; None if none."""
    found = _cgroup_chain(root, "cpu")
    if found is None:
        return None
    version, chain = found
    limit = _v2_cpu_limit if version == V2 else _v1_cpu_limit
    return _smallest([limit(directory) for directory in chain])  # a parent's quota binds its children too


def _v2_cpu_limit(directory: Path) -> float | None:
    fields = (_read_text(directory / "cpu.max") or "").split()  # "150000 100000" or "max 100000"
    if len(fields) != 2:
        return None
    return _ratio(_parse_int(fields[0]), _parse_int(fields[1]))


def _v1_cpu_limit(directory: Path) -> float | None:
    return _ratio(_read_int(directory / "cpu.cfs_quota_us"), _read_int(directory / "cpu.cfs_period_us"))


def _ratio(quota: int | None, period: int | None) -> float | None:
    if quota is None or period is None or quota <= 0 or period <= 0:  # v1 writes -1 for no quota
        return None
    return quota / period


def _memory_headroom(root: Path) -> int | None:
    """Bytes the control groups still let this process allocate: the least of limit minus usage
    from its own group up to the root; None when no group sets a limit."""
    found = _cgroup_chain(root, "memory")
    if found is None:
        return None
    version, chain = found
    # the same two numbers, limit and usage, under each version's own names
    names = ("memory.max", "memory.current") if version == V2 else ("memory.limit_in_bytes", "memory.usage_in_bytes")
    return _smallest([_headroom(directory, *names) for directory in chain])


def _headroom(directory: Path, limit_name: str, usage_name: str) -> int | None:
    limit = _read_int(directory / limit_name)  # v2's "max" reads as None
    if limit is None or limit < 0 or limit >= NO_LIMIT_BYTES:
        return None
    usage = _read_int(directory / usage_name)
    # usage read just after the limit may already pass it: no room left, never a negative room
    return max(0, limit - max(0, usage or 0))


def _mem_available(root: Path) -> int | None:
    """MemAvailable from /proc/meminfo in bytes: what the kernel can give without swapping."""
    for line in (_read_text(root / "proc/meminfo") or "").splitlines():
        fields = line.split()  # "MemAvailable:   23622700 kB"
        if len(fields) == 3 and fields[0] == "MemAvailable:" and fields[2] == "kB":
            kilobytes = _parse_int(fields[1])
            return kilobytes * 1024 if kilobytes is not None and kilobytes >= 0 else None  # "kB" is KiB
    return None


def _source(root: Path) -> str:
    versions = {found[0] for found in (_cgroup_chain(root, "cpu"), _cgroup_chain(root, "memory")) if found}
    return " + ".join(sorted(versions)) or "no control group"  # a hybrid host may give both, one per controller


def _memberships(root: Path) -> dict[str, tuple[str, str]]:
    """Controller -> (its hierarchy's controller list, the process's path there) from
    /proc/self/cgroup; the key "" stands for the v2 line `0::/path`."""
    memberships = {}
    for line in (_read_text(root / "proc/self/cgroup") or "").splitlines():
        fields = line.split(":", 2)  # "3:cpu,cpuacct:/job", "0::/job"
        if len(fields) != 3 or not fields[2].startswith("/"):
            continue
        controllers, path = fields[1], fields[2]
        for name in controllers.split(",") if controllers else [""]:  # "cpu,cpuacct" is one hierarchy, two names
            memberships[name] = (controllers, path)
    return memberships


def _cgroup_chain(root: Path, controller: str) -> tuple[str, list[Path]] | None:
    """The cgroup version holding `controller` for this process, and the directories from its own
    group up to that hierarchy's root; None when the process is in no control group."""
    memberships = _memberships(root)
    mounts = root / "sys/fs/cgroup"
    if controller in memberships:  # a v1 hierarchy wins: on hybrid hosts the v2 one has no controllers
        controllers, path = memberships[controller]
        mount = mounts / controllers
        if not mount.is_dir():  # "cpu,cpuacct" may be mounted as plain "cpu"
            mount = mounts / controller
        return V1, _ancestors(mount, path)
    if "" in memberships:
        return V2, _ancestors(mounts, memberships[""][1])
    return None


def _ancestors(mount: Path, path: str) -> list[Path]:
    """`mount/path` and each parent up to `mount`, own group first."""
    parts = PurePosixPath(path).parts[1:]  # the leading "/" dropped: relative to the mount
    if ".." in parts or not mount.joinpath(*parts).is_dir():
        # without a cgroup namespace the path is the host's, and the mount is the process's own group
        return [mount]
    return [mount.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]  # depth 0: the mount itself


def _smallest(values: list) -> int | float | None:
    known = [value for value in values if value is not None]  # None is "no limit here", not a limit of nothing
    return min(known) if known else None


def _read_int(path: Path) -> int | None:
    return _parse_int((_read_text(path) or "").strip())


def _parse_int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, ValueError):  # ValueError: bytes that are not text
        return None
