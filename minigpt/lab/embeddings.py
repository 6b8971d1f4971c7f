"""What the model's tables hold: how alike the position encodings are (`position_similarity`), the
embedding table on its principal axes (`embedding_pca`), and a character's nearest neighbours in it
(`nearest_rows`). Plain numpy: the app hands in the tables."""
from __future__ import annotations

import numpy as np


def position_similarity(pe: np.ndarray) -> np.ndarray:
    """(T, T) cosine similarity between the position vectors: nearby positions look alike."""
    pe = np.asarray(pe, dtype=np.float64)
    unit = pe / np.linalg.norm(pe, axis=1, keepdims=True)
    return unit @ unit.T


def embedding_pca(embeddings: np.ndarray, components: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """The rows of an embedding table (V, d_model) on their `components` principal axes, and the
    share of the variance each axis holds (numpy's SVD of the centred table)."""
    centred = np.asarray(embeddings, dtype=np.float64)
    centred = centred - centred.mean(axis=0)
    _u, s, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:components].T, (s**2 / (s**2).sum())[:components]


def nearest_rows(embeddings: np.ndarray, row: int, k: int = 5) -> list[int]:
    """The k rows of an embedding table (V, d_model) most alike row `row` (cosine similarity in all
    d_model dimensions, not in a 2-D picture of them), most alike first; never the row itself."""
    table = np.asarray(embeddings, dtype=np.float64)
    unit = table / np.clip(np.linalg.norm(table, axis=1, keepdims=True), 1e-12, None)
    similarity = unit @ unit[row]
    similarity[row] = -np.inf
    return [int(i) for i in np.argsort(-similarity, kind="stable")[:k]]
