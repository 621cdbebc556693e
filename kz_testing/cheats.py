"""The cheating suite's shared parts: a small RMSNorm board's judge and its honest candidate.

The sandbox suite (tests/integration/sandbox/test_judge_cheats.py) and the container suite
(tests/integration/docker/test_docker_judge_isolation.py) attempt the same families against the
same judge.
"""

from __future__ import annotations

__all__ = ["BUSY_THREAD", "FORK_PER_CALL", "HONEST", "JUDGE"]

JUDGE = """
import numpy as np
from kz_harness import Benchmark, Timing, Workload

def make_inputs(workload, rng):
    x = rng.standard_normal((workload["rows"], workload["cols"]), dtype=np.float32)
    w = rng.uniform(0.5, 1.5, workload["cols"]).astype(np.float32)
    return x, w

def reference(x, w):
    x64 = x.astype(np.float64)
    return x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + 1e-6) * w

BENCHMARK = Benchmark(
    entry="kernel:rmsnorm",
    workloads=[Workload("r8_c256", {"rows": 8, "cols": 256}),
               Workload("r32_c512", {"rows": 32, "cols": 512})],
    make_inputs=make_inputs, reference=reference, dtype="fp32",
    timing=Timing(warmup_s=0.02, budget_s=0.15, min_samples=20, calibration_calls=40),
)
raise SystemExit(BENCHMARK.main())
"""

HONEST = """
import numpy as np

def rmsnorm(x, w):
    out = np.empty_like(x)
    for _ in range(4):  # work well above the channel's cost, so its calibration's error is small
        for i in range(x.shape[0]):
            row = x[i]
            out[i] = row / np.sqrt(np.mean(row * row) + 1e-6) * w
    return out
"""

# An honest kernel beside a thread that spins all the time (flagged: extra_threads,
# background_work).
BUSY_THREAD = (
    HONEST
    + """
import threading
def _spin():
    while True:
        sum(range(1000))
threading.Thread(target=_spin, daemon=True).start()
print("TRIED busy_thread", flush=True)
"""
)

# An honest kernel that leaves a child running after every call (flagged: extra_processes).
FORK_PER_CALL = (
    HONEST
    + """
import os, time
def rmsnorm(x, w, _honest=rmsnorm):
    if os.fork() == 0:
        time.sleep(30)
        os._exit(0)
    print("TRIED fork_per_call", flush=True)
    return _honest(x, w)
"""
)
