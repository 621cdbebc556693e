"""Softmax over the last axis: the reference implementation, one row at a time."""

import numpy as np


def softmax(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        e = np.exp(x[i] - x[i].max())
        out[i] = e / e.sum()
    return out
