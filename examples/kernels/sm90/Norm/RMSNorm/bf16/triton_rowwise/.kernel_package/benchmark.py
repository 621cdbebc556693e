"""The judge of the board sm90/Norm/RMSNorm/bf16: every kernel on it is measured by this file.

The candidate gets bfloat16 CUDA tensors x (tokens x hidden) and w (hidden) and must return a
bfloat16 CUDA tensor of x's shape; it is checked against a float64 reference of the same
(bfloat16-rounded) inputs with bfloat16 tolerances. kz_harness runs the candidate in its own
worker, which times each call with CUDA events after an L2 flush; the judge bounds those times
with its own clock.
"""

import numpy as np

from kz_harness import Benchmark, Timing, Workload

EPS = 1e-6
BF16 = 2  # bytes per element on the device
FLOPS_PER_ELEMENT = 4  # x * x and its sum, then x * inv * w


def make_inputs(workload, rng):
    tokens, hidden = workload["tokens"], workload["hidden"]
    x = rng.standard_normal((tokens, hidden), dtype=np.float32)
    w = rng.uniform(0.5, 1.5, hidden).astype(np.float32)
    return x, w


def reference(x, w):
    x64 = x.astype(np.float64)
    return x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + EPS) * w


def rmsnorm_workload(name, tokens, hidden):
    """A workload: x and w read once, y written once."""
    return Workload(
        name,
        {"tokens": tokens, "hidden": hidden},
        bytes_moved=BF16 * (2 * tokens * hidden + hidden),
        flops=FLOPS_PER_ELEMENT * tokens * hidden,
    )


BENCHMARK = Benchmark(
    entry="rmsnorm_triton:rmsnorm",
    workloads=[
        rmsnorm_workload("t4096_h4096", 4096, 4096),
        rmsnorm_workload("t16_h8192", 16, 8192),
    ],
    make_inputs=make_inputs,
    reference=reference,
    dtype="bf16",
    device="cuda",
    device_dtype="bfloat16",
    margin=0.03,
    timing=Timing(budget_s=1.0, calibration_calls=100),
)

if __name__ == "__main__":
    raise SystemExit(BENCHMARK.main())
