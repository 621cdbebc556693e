"""How repeatable is the harness's CPU timing? Time fixed workloads five times each.

Two workloads: a pure-Python loop (the interpreter alone) and a 128x128 numpy matmul (BLAS).
For each, prints every run's median and the spread of the five medians ((max - min) / min);
the target is within 2 %. Side by side, the baseline: the same workload timed by a bare
`perf_counter_ns` loop (no harness, no cache flush, no statistics) for the same time, five
runs, and the same spread — what the machine itself gives. Where the baseline spreads as
much as the harness, the machine is the limit, not the harness; the thread-CPU-time column
tells the two apart (a pre-empted call costs wall time, a slower machine costs CPU time too).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core: other threads add noise

import statistics
import time
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


def _spread(values: list[float]) -> float:
    return (max(values) - min(values)) / min(values)


def bare_spread(
    name: str,
    fn: Callable[..., object],
    make: Callable[[], tuple[object, ...]],
    seconds: float = 2.0,
) -> tuple[float, float]:
    """Five runs of a bare timing loop: the spread of their wall and thread-CPU medians."""
    walls, cpus = [], []
    for _ in range(RUNS):
        wall, cpu = [], []
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            args = make()
            begin, begin_cpu = time.perf_counter_ns(), time.thread_time_ns()
            fn(*args)
            cpu.append(time.thread_time_ns() - begin_cpu)
            wall.append(time.perf_counter_ns() - begin)
        walls.append(statistics.median(wall) / 1000)
        cpus.append(statistics.median(cpu) / 1000)
    print(
        f"{name} bare loop medians (us): wall {[round(w) for w in walls]}, "
        f"thread CPU {[round(c) for c in cpus]}"
    )
    return _spread(walls), _spread(cpus)


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
    spread = _spread(medians)
    print(f"{name}: median-to-median spread over {RUNS} runs: {spread:.2%}")
    return spread


def main() -> None:
    python = spread_of("python loop", python_loop, tuple)
    bare_wall, bare_cpu = bare_spread("python loop", python_loop, tuple)
    blas = spread_of("numpy matmul", np.matmul, make_matrices)
    print(f"python loop spread: {python:.2%}")
    print(f"numpy matmul spread: {blas:.2%}")
    print(f"bare loop spread: wall {bare_wall:.2%}, thread CPU {bare_cpu:.2%}")
    print(f"median-to-median spread over {RUNS} runs: {python:.2%} (target < 2%)")


if __name__ == "__main__":
    main()
