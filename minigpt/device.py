"""Device choice: cuda, then mps, then cpu, unless the caller names one; and its free memory."""
from __future__ import annotations

import os

import torch

from .messages import LabError


class DeviceError(LabError, RuntimeError):
    """An explicitly requested device is not available on this machine."""


def available_devices() -> list[str]:
    """Device kinds usable here, best first."""
    kinds = []
    if torch.cuda.is_available():
        kinds.append("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        kinds.append("mps")
    kinds.append("cpu")
    return kinds


def resolve_device(name: str | None = "auto") -> torch.device:
    """'auto' (or None) picks the best available; anything else must exist or DeviceError."""
    if name in (None, "", "auto"):
        return torch.device(available_devices()[0])
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise DeviceError("{name!r} is not a device name; use auto, cpu, cuda, cuda:N or mps.", name=name) from None
    if device.type not in available_devices():
        have = ", ".join(available_devices())
        raise DeviceError("device {name!r} was requested but is not available here (available: {have}).",
                          name=name, have=have)
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise DeviceError("{name!r} was requested but only {count} CUDA device(s) exist.", name=name,
                          count=torch.cuda.device_count())
    return device


def cpu_has_amx() -> bool:
    """This CPU has AMX tiles (Intel Xeon since Sapphire Rapids), where bf16 matmuls run several
    times faster than float32. AVX512-BF16 alone is not enough: without AMX, `python -m bench.mfu`
    measured bf16 matmuls slower than float32 (bench/RESULTS.md)."""
    return bool(getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)())


def available_memory_bytes(device: torch.device) -> int | None:
    """Memory a new run can still take on `device`: CUDA's free memory, or the RAM the OS
    reports available for the CPU; None where nothing tells (mps)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    if device.type != "cpu":
        return None
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None
