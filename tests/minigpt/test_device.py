"""minigpt/device.py: the best available device, and a clear refusal of one that is missing.

    pytest tests/minigpt/test_device.py
"""
import pytest
import torch

from minigpt import available_devices
from minigpt.device import DeviceError, resolve_device


def test_auto_device_is_the_best_available_and_cpu_always_works():
    assert resolve_device("auto") == torch.device(available_devices()[0])
    assert resolve_device("cpu") == torch.device("cpu")


def test_missing_explicit_device_fails_with_a_clear_message():
    missing = "cuda" if not torch.cuda.is_available() else "cuda:99"
    with pytest.raises(DeviceError, match="not available|CUDA device"):
        resolve_device(missing)
    with pytest.raises(DeviceError, match="not a device name"):
        resolve_device("tpu-ish")
