"""minigpt/lab/scaling.py: the √d_k experiment against the numbers the reference demo prints.

    pytest tests/minigpt/lab/test_scaling.py
"""
import pytest

from helpers.maths import DEMO_SCALING
from minigpt.lab.scaling import DEMO_D_KS, scaling_experiment


def test_scaling_experiment_reproduces_the_demo_numbers():
    table = scaling_experiment()
    assert table["d_k"].tolist() == list(DEMO_D_KS)
    for _, row in table.iterrows():
        expected = DEMO_SCALING[int(row["d_k"])]
        got = (row["entropy_unscaled"], row["max_weight_unscaled"], row["entropy_scaled"], row["max_weight_scaled"])
        assert got == pytest.approx(expected, abs=5e-5)


def test_unscaled_score_spread_grows_like_sqrt_d_k():
    table = scaling_experiment(d_ks=[4, 64, 1024], num_samples=32)
    ratio = table["score_std_unscaled"] / table["d_k"] ** 0.5
    assert ratio.between(0.85, 1.15).all()
    assert table["score_std_scaled"].between(0.85, 1.15).all()


def test_scaling_experiment_rejects_bad_settings():
    with pytest.raises(ValueError):
        scaling_experiment(d_ks=[0])
    with pytest.raises(ValueError):
        scaling_experiment(seq_len=0)
