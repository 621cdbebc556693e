"""Dense GEMM: the reference implementation, one output row at a time."""

import numpy as np


def gemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty((a.shape[0], b.shape[1]), dtype=np.float32)
    for i in range(a.shape[0]):
        out[i] = a[i] @ b
    return out
