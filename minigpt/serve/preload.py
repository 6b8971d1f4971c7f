"""What the fork server imports before it forks a run's child (worker.PRELOAD): the worker module,
and with it torch, the model and the trainer, then a warm-up run (worker.warm_up), so that every
child shares them. Only the fork server imports this module.

A warm-up that fails is reported in the server's log and forgotten: the fork server must live
on, since every run forks from it, and without the warm-up a child only allocates what torch
needs on first use itself (about 100 MB more). warm_up joins its training thread before it
raises, so the fork server still forks with one thread."""
import sys
import traceback

from .worker import warm_up

try:
    warm_up()
except Exception:  # noqa: BLE001 - any failure: an exception here would end the fork server
    print("MiniGPT Lab: the fork server's warm-up run failed; runs still train in processes, each "
          "with more memory of its own:", file=sys.stderr)
    traceback.print_exc()
