"""Device choice: cuda, then mps, then cpu, unless the caller names one; and its free memory."""
from __future__ import annotations

import os

import torch


class DeviceError(RuntimeError):
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
        raise DeviceError(f"{name!r} is not a device name; use auto, cpu, cuda, cuda:N or mps.") from None
    if device.type not in available_devices():
        have = ", ".join(available_devices())
        raise DeviceError(f"device {name!r} was requested but is not available here (available: {have}).")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise DeviceError(f"{name!r} was requested but only {torch.cuda.device_count()} CUDA device(s) exist.")
    return device


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
