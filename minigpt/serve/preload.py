"""What the fork server imports before it forks a run's child (worker.PRELOAD): the worker module,
and with it torch, the model and the trainer, then a warm-up run (worker.warm_up), so that every
child shares them. Only the fork server imports this module."""
from .worker import warm_up

warm_up()
