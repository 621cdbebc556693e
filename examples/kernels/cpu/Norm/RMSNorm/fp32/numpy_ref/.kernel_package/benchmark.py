"""Benchmark of cpu/Norm/RMSNorm/fp32/numpy_ref.

Checks the kernel in src/ against a pristine float64 reference, times it, compares with the
current best and writes the result document to KZ_RESULT_PATH.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

import numpy as np

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PACKAGE_ROOT / "src"))

from rmsnorm import rmsnorm  # noqa: E402  (the kernel under test, from src/)

from kz_harness import (  # noqa: E402  (the trusted harness)
    baseline_best,
    bench_cpu,
    compare,
    geomean,
    verdict,
    write_result,
)

METRIC = {"name": "latency", "unit": "us", "better": "lower"}
MARGIN = 0.05  # a new result must beat the current best by 5 % to be accepted
# Must match desc.yaml's workloads.
WORKLOADS = {'r16_c1024': (16, 1024), 'r64_c2048': (64, 2048)}

EPS = 1e-6


def make_inputs(shape, seed):
    rng = np.random.default_rng(seed)
    rows, cols = shape
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    w = rng.uniform(0.5, 1.5, cols).astype(np.float32)
    return x, w


def reference(x, w):
    x64 = x.astype(np.float64)
    return x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + EPS) * w.astype(np.float64)


def main() -> int:
    checks, workloads = [], []
    for index, (name, shape) in enumerate(WORKLOADS.items()):
        inputs = make_inputs(shape, seed=index)
        pristine = [a.copy() for a in inputs]
        out = rmsnorm(*inputs)
        checks.append(compare(out, reference(*pristine), dtype="fp32", name=name,
                              inputs_before=pristine, inputs_after=list(inputs)))
        stats = bench_cpu(rmsnorm, lambda s=shape, i=index: make_inputs(s, seed=100 + i),
                          warmup_s=0.05, budget_s=0.3, unit="us")
        workloads.append({"name": name, "value": stats.median, "stats": stats})
    value = geomean(w["value"] for w in workloads)
    accepted, reason = verdict(all(c.passed for c in checks), value, baseline_best(),
                               better=METRIC["better"], unit=METRIC["unit"], margin=MARGIN)
    environment = {"device": "cpu", "machine": platform.machine(),
                   "python": platform.python_version(), "numpy": np.__version__}
    write_result(os.environ.get("KZ_RESULT_PATH", "result.json"), accepted=accepted,
                 reason=reason, metric={**METRIC, "value": value}, workloads=workloads,
                 checks=checks, environment=environment)
    print(reason)
    return 0


if __name__ == "__main__":
    sys.exit(main())
