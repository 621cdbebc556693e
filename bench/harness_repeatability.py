"""How repeatable is the harness's CPU timing? Time one fixed numpy workload five times.

Prints each run's median and the spread of the five medians ((max - min) / min); the
target is within 2 %.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core: other threads add noise

import numpy as np

from kz_harness.timing import bench_cpu

RUNS = 5
SIZE = 128


def make_inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((SIZE, SIZE)), rng.standard_normal((SIZE, SIZE))


def main() -> None:
    medians = []
    for run in range(RUNS):
        stats = bench_cpu(np.matmul, make_inputs, warmup_s=0.2, budget_s=2.0)
        medians.append(stats.median)
        print(
            f"run {run + 1}: median {stats.median:.2f} us, n={stats.n}, "
            f"rel_sem={stats.rel_sem:.4%}, stop={stats.stop}"
        )
    spread = (max(medians) - min(medians)) / min(medians)
    print(f"median-to-median spread over {RUNS} runs: {spread:.2%} (target < 2%)")


if __name__ == "__main__":
    main()
