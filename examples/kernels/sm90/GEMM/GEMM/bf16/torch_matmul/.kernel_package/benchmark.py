"""The judge of the board sm90/GEMM/GEMM/bf16: every kernel on it is measured by this file.

The candidate gets bfloat16 CUDA tensors a (m x k) and b (k x n) and must return their product
c = a @ b, a bfloat16 CUDA tensor (m x n). It is checked against a float64 product of the same
(bfloat16-rounded) inputs with bfloat16 tolerances (atol 2e-2, rtol 2e-2): an fp32 accumulation
rounded once to bfloat16 is within 4e-3 of it, a product that drops a slice of k is not.
kz_harness runs the candidate in its own worker, which times each call with CUDA events after
an L2 flush; the judge bounds those times with its own clock.
"""

import numpy as np

from kz_harness import Benchmark, Output, Timing, Workload

BF16 = 2  # bytes per element on the device


def make_inputs(workload, rng):
    m, n, k = workload["m"], workload["n"], workload["k"]
    # Uniform in [-1, 1): drawn several times faster than normals, and the judge draws new
    # inputs for every call.
    a = rng.random((m, k), dtype=np.float32) * 2 - 1
    b = rng.random((k, n), dtype=np.float32) * 2 - 1
    return a, b


def reference(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def output(workload, inputs):
    return Output((workload["m"], workload["n"]), "float32")


def gemm_workload(name, m, n, k):
    """A workload: a and b read once, c written once; 2mnk floating-point operations."""
    return Workload(
        name,
        {"m": m, "n": n, "k": k},
        bytes_moved=BF16 * (m * k + k * n + m * n),
        flops=2 * m * n * k,
    )


BENCHMARK = Benchmark(
    entry="gemm:gemm",
    workloads=[
        gemm_workload("m2048_n2048_k2048", 2048, 2048, 2048),
        gemm_workload("m16_n2048_k2048", 16, 2048, 2048),
    ],
    make_inputs=make_inputs,
    reference=reference,
    output=output,
    dtype="bf16",
    device="cuda",
    device_dtype="bfloat16",
    margin=0.03,
    timing=Timing(budget_s=1.0, calibration_calls=50, checked_calls=4),
)

if __name__ == "__main__":
    raise SystemExit(BENCHMARK.main())
