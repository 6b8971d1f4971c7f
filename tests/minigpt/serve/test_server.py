"""minigpt/serve/server.py, the face of the serving wing: the settings a server is built from (each
one's default, range and bad values), and what open_server builds, when.

    pytest tests/minigpt/serve/test_server.py
"""
import subprocess
import sys

import pytest

from helpers import ROOT
from minigpt.serve.server import DEFAULT_TRAIN_IN, ServerSettings
from minigpt.serve.store.retention import Retention


def test_unset_every_setting_is_its_default():
    settings = ServerSettings.from_env({})
    assert settings == ServerSettings()
    assert (settings.train_in, settings.max_runs, settings.nice, settings.gpu_per_run) == (DEFAULT_TRAIN_IN, None,
                                                                                            None, 0.0)
    assert settings.retention == Retention(class_days=140, run_days=7.0, checkpoints=1)  # a class lasts a term


@pytest.mark.parametrize(("value", "days"), [("30", 30.0), ("0.5", 0.5), ("0", 140), ("-3", 140), ("nan", 140),
                                             ("a term", 140)])
def test_a_class_lasts_the_days_the_server_sets_or_a_term(value, days):
    assert ServerSettings.from_env({"MINIGPT_CLASS_DAYS": value}).retention.class_days == days


def test_ray_is_asked_for_by_either_setting_and_the_box_keeps_its_own_way_to_train():
    """MINIGPT_RUNS_ON=ray, the older setting, still means ray; where the cluster cannot be used, runs
    train on this box as MINIGPT_TRAIN_IN says, and the warning names the setting that asked."""
    older = ServerSettings.from_env({"MINIGPT_RUNS_ON": " Ray ", "MINIGPT_TRAIN_IN": "thread"})
    assert (older.train_in, older.on_box, older.asked_by) == ("ray", "thread", "MINIGPT_RUNS_ON")
    newer = ServerSettings.from_env({"MINIGPT_TRAIN_IN": "ray"})
    assert (newer.train_in, newer.on_box, newer.asked_by) == ("ray", DEFAULT_TRAIN_IN, "MINIGPT_TRAIN_IN")
    assert ServerSettings.from_env({"MINIGPT_RUNS_ON": "box"}).train_in == DEFAULT_TRAIN_IN


@pytest.mark.parametrize("name, value, field, expected", [
    ("MINIGPT_RUN_GPU", "0.25", "gpu_per_run", 0.25),
    ("MINIGPT_RUN_GPU", "nan", "gpu_per_run", 0.0),   # NaN passes no comparison: it must not pass the range
    ("MINIGPT_RUN_GPU", "1.5", "gpu_per_run", 0.0),
    ("MINIGPT_RUN_GPU", "0", "gpu_per_run", 0.0),
    ("MINIGPT_TRAIN_NICE", "40", "nice", 19),         # over 19 counts as 19 (docs/deploying.md)
    ("MINIGPT_TRAIN_NICE", "-1", "nice", None),
    ("MINIGPT_MAX_RUNS", "0", "max_runs", 0),         # allowed: a cluster with no machine yet trains nothing
    ("MINIGPT_MAX_RUNS", "two", "max_runs", None),
    ("MINIGPT_MAX_WAITING", "0", "max_waiting", None),  # unset or out of range: the slots and classes say
    ("MINIGPT_MAX_WAITING", "500", "max_waiting", 500),
    ("MINIGPT_RUN_IDLE_SECONDS", "60", "idle_seconds", 60),
    ("MINIGPT_TRAIN_IN", "THREAD", "train_in", DEFAULT_TRAIN_IN),  # the values are written as documented
    ("MINIGPT_TRAIN_IN", "thread", "train_in", "thread"),
])
def test_a_value_out_of_range_or_not_a_number_leaves_the_default(name, value, field, expected):
    assert getattr(ServerSettings.from_env({name: value}), field) == expected


def test_retention_takes_both_settings_or_the_defaults_where_either_is_not_a_number():
    def retention(**env):
        return ServerSettings.from_env({f"MINIGPT_KEEP_{k.upper()}": v for k, v in env.items()}).retention

    assert retention(run_days="3", checkpoints="2") == Retention(run_days=3.0, checkpoints=2)
    assert retention(run_days="3", checkpoints="x") == Retention()
    assert retention(run_days="3", checkpoints="-1") == Retention(run_days=3.0)  # not above 0: its own default
    assert retention(run_days="nan") == Retention()


def test_a_server_opens_its_store_at_once_and_its_line_and_classes_on_first_use():
    """Home reads the store before torch has loaded: building the server loads no torch and connects to
    no cluster; the line, once asked for, does."""
    code = ("import sys\n"
            "from minigpt.serve.server import ServerSettings, open_server\n"
            "server = open_server(ServerSettings(train_in='thread', on_box='thread'))\n"
            "print(server.store is None, server._registry is None, server._placement is None, 'torch' in sys.modules)\n"
            "server.classes\n"
            "print('torch' in sys.modules)\n"
            "print(server.registry.max_runs >= 1, server.placement.cluster is None, 'torch' in sys.modules)\n"
            "server.close()\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "True", "True", "False", "False", "True", "True", "True"]
