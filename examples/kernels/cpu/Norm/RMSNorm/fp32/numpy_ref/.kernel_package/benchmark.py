"""The judge of the board cpu/Norm/RMSNorm/fp32: every kernel on it is measured by this file.

It names the candidate's entry point in src/, the workloads (they match desc.yaml), how to
draw inputs, the float64 reference and the tolerance; kz_harness runs the candidate in its own
sandboxed worker, times every call itself and writes the result.
"""

import numpy as np

from kz_harness import Benchmark, Workload

EPS = 1e-6


def make_inputs(workload, rng):
    rows, cols = workload["rows"], workload["cols"]
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    w = rng.uniform(0.5, 1.5, cols).astype(np.float32)
    return x, w


def reference(x, w):
    x64 = x.astype(np.float64)
    return x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + EPS) * w.astype(np.float64)


BENCHMARK = Benchmark(
    entry="rmsnorm:rmsnorm",
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
