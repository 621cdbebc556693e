"""Softmax over the last axis, vectorised over all rows, computed in place in one buffer."""

import numpy as np


def softmax(x: np.ndarray) -> np.ndarray:
    out = x - x.max(axis=-1, keepdims=True)
    np.exp(out, out=out)
    out /= out.sum(axis=-1, keepdims=True)
    return out
