"""A Plotly figure's arrays as numbers, however plotly serialised them."""
from __future__ import annotations

import base64

import numpy as np


def plotly_array(value) -> np.ndarray:
    """A figure's array as plotly serialises it: a list, or base64 'bdata' with its dtype."""
    if isinstance(value, dict) and "bdata" in value:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if isinstance(shape, str):  # "14, 14"
            shape = [int(n) for n in shape.split(",")]
        return array.reshape(shape) if shape else array
    return np.array(value, dtype=float)
