"""Benchmarks for MiniGPT Lab: run each as `python -m bench.<name>` from the repository root."""
