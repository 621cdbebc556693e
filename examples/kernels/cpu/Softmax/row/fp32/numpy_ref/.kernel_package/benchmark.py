"""The judge of the board cpu/Softmax/row/fp32: every kernel on it is measured by this file.

Softmax of each row of a float32 matrix, checked against a float64 reference. kz_harness runs
the candidate in its own sandboxed worker, times every call itself and writes the result.
"""

import numpy as np

from kz_harness import Benchmark, Workload


def make_inputs(workload, rng):
    return (rng.standard_normal((workload["rows"], workload["cols"]), dtype=np.float32) * 4,)


def reference(x):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


BENCHMARK = Benchmark(
    entry="softmax:softmax",
    workloads=[
        Workload("r128_c2048", {"rows": 128, "cols": 2048}),
        Workload("r32_c8192", {"rows": 32, "cols": 8192}),
    ],
    make_inputs=make_inputs,
    reference=reference,
    dtype="fp32",
)

if __name__ == "__main__":
    raise SystemExit(BENCHMARK.main())
