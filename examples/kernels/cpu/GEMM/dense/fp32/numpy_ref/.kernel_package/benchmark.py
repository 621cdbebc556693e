"""The judge of the board cpu/GEMM/dense/fp32: every kernel on it is measured by this file.

C = A @ B for float32 A (m x k) and B (k x n), checked against a float64 product. kz_harness
runs the candidate in its own sandboxed worker, times every call itself and writes the result.
"""

import numpy as np

from kz_harness import Benchmark, Output, Workload


def make_inputs(workload, rng):
    m, n, k = workload["m"], workload["n"], workload["k"]
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    return a, b


def reference(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def output(workload, inputs):
    return Output((workload["m"], workload["n"]), "float32")


BENCHMARK = Benchmark(
    entry="gemm:gemm",
    workloads=[
        Workload("m128_n128_k256", {"m": 128, "n": 128, "k": 256}),
        Workload("m256_n256_k256", {"m": 256, "n": 256, "k": 256}),
    ],
    make_inputs=make_inputs,
    reference=reference,
    output=output,
    dtype="fp32",
)

if __name__ == "__main__":
    raise SystemExit(BENCHMARK.main())
