"""How repeatable is the harness's CPU timing? Time fixed workloads five times each.

Two workloads: a pure-Python loop (the interpreter alone) and a 128x128 numpy matmul (BLAS).
For each, prints every run's median and the spread of the five medians ((max - min) / min);
the target is within 2 %. On a shared virtual machine the BLAS figure also carries the
library's own variance (threading, kernel choice) and the host's frequency changes.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core: other threads add noise

from collections.abc import Callable

import numpy as np

from kz_harness.timing import bench_cpu

RUNS = 5
SIZE = 128


def python_loop() -> int:
    total = 0
    for i in range(20_000):
        total += i * i
    return total


def make_matrices() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((SIZE, SIZE)), rng.standard_normal((SIZE, SIZE))


def spread_of(
    name: str, fn: Callable[..., object], make: Callable[[], tuple[object, ...]]
) -> float:
    medians = []
    for run in range(RUNS):
        stats = bench_cpu(fn, make, warmup_s=0.2, budget_s=2.0)
        medians.append(stats.median)
        print(
            f"{name} run {run + 1}: median {stats.median:.2f} us, n={stats.n}, "
            f"rel_sem={stats.rel_sem:.4%}, stop={stats.stop}"
        )
    spread = (max(medians) - min(medians)) / min(medians)
    print(f"{name}: median-to-median spread over {RUNS} runs: {spread:.2%}")
    return spread


def main() -> None:
    python = spread_of("python loop", python_loop, tuple)
    blas = spread_of("numpy matmul", np.matmul, make_matrices)
    print(f"python loop spread: {python:.2%}")
    print(f"numpy matmul spread: {blas:.2%}")
    print(f"median-to-median spread over {RUNS} runs: {python:.2%} (target < 2%)")


if __name__ == "__main__":
    main()
