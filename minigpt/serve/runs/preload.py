"""What the fork server imports before it forks a run's child (process.PRELOAD): the process module,
and with it torch, the model and the trainer, then a warm-up run (process.warm_up), so that every
child shares them. Only the fork server imports this module.

A warm-up that fails is printed to the server's log (this module's one job is to run at import,
in the fork server) and forgotten: an exception here would end the fork server, and every run
forks from it. Without the warm-up a child allocates torch's first-use memory itself. warm_up
joins its training thread whatever happens, so the fork server still forks with one thread."""
import sys
import traceback

from .process import warm_up

try:
    warm_up()
except Exception:  # any failure: an exception here would end the fork server
    print("MiniGPT Lab: the fork server's warm-up run failed; runs still train in processes, each "
          "with more memory of its own:", file=sys.stderr)
    traceback.print_exc()
