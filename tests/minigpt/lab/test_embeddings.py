"""minigpt/lab/embeddings.py: how alike the positions are, the embedding table's principal axes and a
character's nearest neighbours, each against a formula written out here.

    pytest tests/minigpt/lab/test_embeddings.py
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from helpers.maths import hand_positions
from minigpt.lab.embeddings import embedding_pca, nearest_rows, position_similarity


def test_position_similarity_depends_only_on_the_distance_as_the_cosines_say():
    d_model, T = 16, 24
    pe = hand_positions(T, d_model).numpy()
    sim = position_similarity(pe)
    freqs = [1 / 10000 ** (i / d_model) for i in range(0, d_model, 2)]
    for p, q in ((0, 1), (3, 10), (5, 23)):  # PE(p)·PE(q) = Σ cos((p − q) ω_i), and |PE|² = d_model / 2
        assert sim[p, q] == pytest.approx(sum(math.cos((p - q) * w) for w in freqs) / (d_model / 2), abs=1e-9)
    assert np.allclose(np.diag(sim), 1) and np.allclose(sim, sim.T)
    assert sim[0, 1] > sim[0, 4] > sim[0, 12]  # nearby positions look more alike


def test_embedding_pca_finds_the_axes_an_eigendecomposition_finds():
    rng = np.random.default_rng(0)
    direction = np.array([3.0, 4.0, 0.0]) / 5
    table = np.outer(rng.normal(size=50), direction) * 4 + rng.normal(size=(50, 3)) * 0.1
    coords, share = embedding_pca(table)
    centred = table - table.mean(axis=0)
    values, vectors = np.linalg.eigh(centred.T @ centred)  # ascending
    top = vectors[:, ::-1][:, :2]
    np.testing.assert_allclose(np.abs(coords), np.abs(centred @ top), atol=1e-9)  # up to each axis's sign
    np.testing.assert_allclose(share, values[::-1][:2] / values.sum(), atol=1e-12)
    assert share[0] > 0.99


def test_the_nearest_characters_are_the_rows_with_the_largest_cosine_by_hand():
    rng = np.random.default_rng(0)
    table = rng.normal(size=(40, 8))
    table[7] = 3 * table[3] + 0.01 * rng.normal(size=8)  # the same direction as row 3, three times as long
    near = nearest_rows(table, 3, k=4)
    by_hand = sorted((i for i in range(40) if i != 3), key=lambda i: -float(
        table[i] @ table[3] / math.sqrt(float(table[i] @ table[i]) * float(table[3] @ table[3]))))[:4]
    assert near == by_hand and near[0] == 7 and 3 not in near
