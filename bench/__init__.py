"""Benchmarks for MiniGPT Lab: run each as `python -m bench.<name>` from the repository root."""
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]  # the repository root: the checkout the benches measure
