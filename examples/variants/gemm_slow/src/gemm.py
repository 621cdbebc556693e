"""Dense GEMM as one dot product per output element: correct, and much slower."""

import numpy as np


def gemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    m, n = a.shape[0], b.shape[1]
    bt = np.ascontiguousarray(b.T)
    out = np.empty((m, n), dtype=np.float32)
    for i in range(m):
        for j in range(n):
            out[i, j] = np.dot(a[i], bt[j])
    return out
