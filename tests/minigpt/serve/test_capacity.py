"""minigpt/serve/host/capacity.py: the CPUs and memory a process may use, read from fake cgroup v1, v2
and no-cgroup trees under tmp_path (the tightest limit on the way to the root wins, malformed
files count as no limit), and the slots, threads and kept runs that follow from them.

    pytest tests/minigpt/serve/test_capacity.py
"""
from __future__ import annotations

from pathlib import Path

import pytest

from minigpt.serve.host.capacity import Capacity, kept_runs_for, read_capacity, slots_for, threads_per_run

MB = 1_000_000
GIB = 2**30
V1_NO_LIMIT = "9223372036854771712"  # what cgroup v1 shows in memory.limit_in_bytes when nothing is set


def put(root: Path, relative: str, text: str | bytes) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())


def v2_tree(root: Path, files: dict[str, str], group: str = "/app/run") -> Path:
    """A cgroup v2 host: the process in `group`; `files` maps paths under sys/fs/cgroup to contents."""
    put(root, "proc/self/cgroup", f"0::{group}\n")
    (root / "sys/fs/cgroup" / group.strip("/")).mkdir(parents=True, exist_ok=True)
    for relative, text in files.items():
        put(root, f"sys/fs/cgroup/{relative}", text)
    return root


def v1_tree(root: Path, files: dict[str, str], cpu_line: str = "cpu,cpuacct", cpu_dir: str = "cpu,cpuacct") -> Path:
    """A hybrid v1 host like most Docker ones: cpu and memory in v1 hierarchies, group /job in both;
    the cpu hierarchy is named `cpu_line` in /proc/self/cgroup and mounted at `cpu_dir`."""
    put(root, "proc/self/cgroup", f"9:name=systemd:/\n4:memory:/job\n3:{cpu_line}:/job\n0::/\n")
    for directory in (f"sys/fs/cgroup/{cpu_dir}/job", "sys/fs/cgroup/memory/job"):
        (root / directory).mkdir(parents=True, exist_ok=True)
    for relative, text in files.items():
        put(root, f"sys/fs/cgroup/{relative}", text)
    return root


def meminfo(root: Path, available_kb: int) -> None:
    put(root, "proc/meminfo", f"MemTotal:       99999999 kB\nMemFree:         1 kB\nMemAvailable:   {available_kb} kB\n")


# CPUs

def test_v2_parent_quota_tighter_than_own_gives_the_parents(tmp_path):
    root = v2_tree(tmp_path, {"app/run/cpu.max": "150000 100000", "app/cpu.max": "50000 100000"})
    capacity = read_capacity(root, affinity=8)
    assert capacity.cpus == 0.5
    assert capacity.source == "cgroup v2"
    assert slots_for(capacity, run_bytes=MB, reserve_bytes=0) == 1


def test_v2_own_quota_below_an_unlimited_parent_counts(tmp_path):
    root = v2_tree(tmp_path, {"app/run/cpu.max": "150000 100000", "app/cpu.max": "max 100000"})
    assert read_capacity(root, affinity=8).cpus == 1.5


def test_v2_max_quota_leaves_the_affinity_count(tmp_path):
    root = v2_tree(tmp_path, {"app/run/cpu.max": "max 100000"})
    assert read_capacity(root, affinity=6).cpus == 6


def test_quota_above_the_affinity_count_leaves_the_affinity_count(tmp_path):
    root = v2_tree(tmp_path, {"app/run/cpu.max": "800000 100000"})
    assert read_capacity(root, affinity=2).cpus == 2


def test_v2_container_at_its_namespace_root_reads_the_mount_itself(tmp_path):
    root = v2_tree(tmp_path, {"cpu.max": "200000 100000"}, group="/")
    assert read_capacity(root, affinity=8).cpus == 2


def test_host_path_without_a_cgroup_namespace_falls_back_to_the_mount(tmp_path):
    root = v2_tree(tmp_path, {"cpu.max": "100000 100000"}, group="/")
    put(root, "proc/self/cgroup", "0::/system.slice/docker-abc.scope\n")  # a path not mounted in here
    assert read_capacity(root, affinity=8).cpus == 1


def test_path_above_the_namespace_root_never_leaves_the_mount(tmp_path):
    root = v2_tree(tmp_path, {"cpu.max": "100000 100000"}, group="/")
    put(root, "proc/self/cgroup", "0::/../../outside\n")  # how a process outside our namespace shows
    put(root, "sys/outside/cpu.max", "50000 100000")  # where sys/fs/cgroup/../../outside would lead
    assert read_capacity(root, affinity=8).cpus == 1


@pytest.mark.parametrize("cpu_line, cpu_dir", [("cpu,cpuacct", "cpu,cpuacct"), ("cpu", "cpu"), ("cpu,cpuacct", "cpu")])
def test_v1_quota_over_period_caps_the_cpus(tmp_path, cpu_line, cpu_dir):
    files = {f"{cpu_dir}/job/cpu.cfs_quota_us": "250000", f"{cpu_dir}/job/cpu.cfs_period_us": "100000",
             f"{cpu_dir}/cpu.cfs_quota_us": "-1", f"{cpu_dir}/cpu.cfs_period_us": "100000"}
    root = v1_tree(tmp_path, files, cpu_line=cpu_line, cpu_dir=cpu_dir)
    capacity = read_capacity(root, affinity=8)
    assert capacity.cpus == 2.5
    assert capacity.source == "cgroup v1"


def test_v1_quota_of_minus_one_leaves_the_affinity_count(tmp_path):
    root = v1_tree(tmp_path, {"cpu,cpuacct/job/cpu.cfs_quota_us": "-1", "cpu,cpuacct/job/cpu.cfs_period_us": "100000"})
    assert read_capacity(root, affinity=3).cpus == 3


def test_no_control_group_gives_affinity_and_mem_available(tmp_path):
    meminfo(tmp_path, available_kb=2048)
    capacity = read_capacity(tmp_path, affinity=4)
    assert capacity == Capacity(cpus=4, memory_bytes=2048 * 1024, source="no control group")


def test_nothing_readable_leaves_memory_unknown(tmp_path):
    assert read_capacity(tmp_path, affinity=1).memory_bytes is None


# memory

def test_v2_memory_max_of_max_gives_mem_available(tmp_path):
    root = v2_tree(tmp_path, {"app/run/memory.max": "max", "app/run/memory.current": "5000"})
    meminfo(root, available_kb=1000)
    assert read_capacity(root, affinity=1).memory_bytes == 1000 * 1024


def test_v2_memory_limit_minus_current_usage(tmp_path):
    root = v2_tree(tmp_path, {"app/run/memory.max": str(1000 * MB), "app/run/memory.current": str(300 * MB)})
    meminfo(root, available_kb=64 * GIB // 1024)
    assert read_capacity(root, affinity=1).memory_bytes == 700 * MB


def test_v2_parent_memory_headroom_tighter_than_own_gives_the_parents(tmp_path):
    root = v2_tree(tmp_path, {"app/run/memory.max": str(1000 * MB), "app/run/memory.current": str(100 * MB),
                              "app/memory.max": str(800 * MB), "app/memory.current": str(500 * MB)})
    meminfo(root, available_kb=64 * GIB // 1024)
    assert read_capacity(root, affinity=1).memory_bytes == 300 * MB


def test_mem_available_below_the_cgroup_headroom_bounds_it(tmp_path):
    root = v2_tree(tmp_path, {"app/run/memory.max": str(8 * GIB), "app/run/memory.current": "0"})
    meminfo(root, available_kb=1024 * 1024)  # the host has 1 GiB free although the group allows 8
    assert read_capacity(root, affinity=1).memory_bytes == GIB


def test_v1_huge_memory_limit_means_no_limit(tmp_path):
    root = v1_tree(tmp_path, {"memory/job/memory.limit_in_bytes": V1_NO_LIMIT, "memory/job/memory.usage_in_bytes": "4096"})
    assert read_capacity(root, affinity=1).memory_bytes is None  # not 9.2 EB of headroom
    meminfo(root, available_kb=5000)
    assert read_capacity(root, affinity=1).memory_bytes == 5000 * 1024


def test_v1_memory_limit_minus_usage(tmp_path):
    root = v1_tree(tmp_path, {"memory/job/memory.limit_in_bytes": str(2 * GIB),
                              "memory/job/memory.usage_in_bytes": str(GIB // 2),
                              "memory/memory.limit_in_bytes": V1_NO_LIMIT})
    meminfo(root, available_kb=64 * GIB // 1024)
    assert read_capacity(root, affinity=1).memory_bytes == GIB + GIB // 2


def test_usage_over_the_limit_leaves_zero_not_a_negative(tmp_path):
    root = v2_tree(tmp_path, {"app/run/memory.max": str(100 * MB), "app/run/memory.current": str(120 * MB)})
    assert read_capacity(root, affinity=1).memory_bytes == 0


# malformed files

@pytest.mark.parametrize("text", ["", "garbage", "max max", "150000 0", "-1 100000", "1 2 3", b"\xff\xfe\x00"])
def test_malformed_cpu_max_counts_as_no_limit(tmp_path, text):
    root = v2_tree(tmp_path, {})
    put(root, "sys/fs/cgroup/app/run/cpu.max", text)
    assert read_capacity(root, affinity=5).cpus == 5


@pytest.mark.parametrize("quota, period", [("abc", "100000"), ("", ""), ("200000", "0"), ("200000", "soon")])
def test_malformed_v1_quota_counts_as_no_limit(tmp_path, quota, period):
    root = v1_tree(tmp_path, {"cpu,cpuacct/job/cpu.cfs_quota_us": quota, "cpu,cpuacct/job/cpu.cfs_period_us": period})
    assert read_capacity(root, affinity=5).cpus == 5


@pytest.mark.parametrize("text", ["", "lots", "-5", "12.5", b"\xff\xfe"])
def test_malformed_memory_max_counts_as_no_limit(tmp_path, text):
    root = v2_tree(tmp_path, {"app/run/memory.current": "7"})
    put(root, "sys/fs/cgroup/app/run/memory.max", text)
    meminfo(root, available_kb=3000)
    assert read_capacity(root, affinity=1).memory_bytes == 3000 * 1024


def test_malformed_usage_counts_as_none_used(tmp_path):
    root = v2_tree(tmp_path, {"app/run/memory.max": str(500 * MB), "app/run/memory.current": "busy"})
    assert read_capacity(root, affinity=1).memory_bytes == 500 * MB


@pytest.mark.parametrize("text", ["nonsense\n", "", "3:cpu\n", "0::relative/path\n", b"\xff\n"])
def test_malformed_proc_self_cgroup_means_no_control_group(tmp_path, text):
    put(tmp_path, "proc/self/cgroup", text)
    put(tmp_path, "sys/fs/cgroup/cpu.max", "100000 100000")
    assert read_capacity(tmp_path, affinity=2) == Capacity(cpus=2, memory_bytes=None, source="no control group")


@pytest.mark.parametrize("text", ["", "MemAvailable: lots kB\n", "MemAvailable: 12\n", b"\x00\xff"])
def test_malformed_meminfo_leaves_memory_unknown(tmp_path, text):
    put(tmp_path, "proc/meminfo", text)
    assert read_capacity(tmp_path, affinity=1).memory_bytes is None


def test_this_machine_reads_at_least_one_cpu():
    capacity = read_capacity(Path("/"))
    assert capacity.cpus >= 1
    assert capacity.memory_bytes is None or capacity.memory_bytes > 0


# slots, threads, kept runs

def test_memory_limits_slots_below_the_cpus():
    run, reserve = 150 * MB, 100 * MB
    assert slots_for(Capacity(4, 700 * MB, "t"), run, reserve) == 4  # (700 - 100) // 150 = 4
    assert slots_for(Capacity(4, 400 * MB, "t"), run, reserve) == 2  # (400 - 100) // 150 = 2


def test_slots_never_exceed_the_whole_cpus():
    assert slots_for(Capacity(3.9, 100 * GIB, "t"), run_bytes=MB, reserve_bytes=0) == 3
    assert slots_for(Capacity(6, None, "t"), run_bytes=MB, reserve_bytes=0) == 6


@pytest.mark.parametrize("capacity", [Capacity(0.5, 100 * GIB, "t"), Capacity(8, 50 * MB, "t"), Capacity(8, 0, "t")])
def test_slots_never_fall_below_one(capacity):
    assert slots_for(capacity, run_bytes=150 * MB, reserve_bytes=100 * MB) == 1


@pytest.mark.parametrize("cpus, slots, threads", [(2, 2, 1), (8, 2, 4), (1.5, 1, 1), (7, 2, 3), (0.5, 1, 1), (4, 8, 1)])
def test_threads_per_run_share_the_cpus_without_oversubscribing(cpus, slots, threads):
    assert threads_per_run(Capacity(cpus, None, "t"), slots) == threads


@pytest.mark.parametrize("memory, kept", [(1000 * MB, 5), (700 * MB, 5), (550 * MB, 3), (250 * MB, 2), (None, 5)])
def test_kept_runs_fill_the_memory_between_floor_and_ceiling(memory, kept):
    # (memory - 200 MB) // 100 MB: 8 -> ceiling 5, 5, 3, 0 -> floor 2; unknown memory -> ceiling
    capacity = Capacity(4, memory, "t")
    assert kept_runs_for(capacity, kept_run_bytes=100 * MB, reserve_bytes=200 * MB, floor=2, ceiling=5) == kept
