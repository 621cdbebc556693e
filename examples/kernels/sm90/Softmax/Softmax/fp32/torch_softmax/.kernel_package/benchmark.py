"""The judge of the board sm90/Softmax/Softmax/fp32: every kernel on it is measured by this file.

The candidate gets a float32 CUDA tensor x (rows x cols) and must return softmax over each row,
a float32 CUDA tensor of x's shape. It is checked against a float64 softmax of the same inputs
with float32 tolerances made for softmax: rtol 1e-5 and atol 1e-9 (outputs are about 1/cols,
so the generic fp32 atol of 1e-4 would accept anything). A float32 kernel is within about 2e-6
of the reference, even with the approximate exponential GPUs have; one that computes in
bfloat16 (3.9e-3) or float16 (4.9e-4) is not, and is rejected. kz_harness runs the candidate
in its own worker, which times each call with CUDA events after an L2 flush; the judge bounds
those times with its own clock.
"""

import numpy as np

from kz_harness import Benchmark, Timing, Workload

FP32 = 4  # bytes per element
FLOPS_PER_ELEMENT = 4  # the row's max, x - max, the sum of exp, the division (exp not counted)


def make_inputs(workload, rng):
    # Uniform in [-4, 4): drawn several times faster than normals (the judge draws new inputs
    # for every call), and softmax's outputs span e^8 within a row.
    x = rng.random((workload["rows"], workload["cols"]), dtype=np.float32) * 8 - 4
    return (x,)


def reference(x):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_workload(name, rows, cols):
    """A workload: x read once, the result written once."""
    return Workload(
        name,
        {"rows": rows, "cols": cols},
        bytes_moved=2 * FP32 * rows * cols,
        flops=FLOPS_PER_ELEMENT * rows * cols,
    )


BENCHMARK = Benchmark(
    entry="softmax:softmax",
    workloads=[
        softmax_workload("r1024_c4096", 1024, 4096),
        softmax_workload("r16_c32768", 16, 32768),
    ],
    make_inputs=make_inputs,
    reference=reference,
    dtype="fp32",
    atol=1e-9,
    rtol=1e-5,
    device="cuda",
    margin=0.03,
    timing=Timing(budget_s=1.0, calibration_calls=100),
)

if __name__ == "__main__":
    raise SystemExit(BENCHMARK.main())
