"""Device choice: cuda, then mps, then cpu, unless the caller names one."""
from __future__ import annotations

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
