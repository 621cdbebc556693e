"""Benchmark of cpu/Softmax/row/fp32/numpy_ref.

Checks the kernel in src/ against a pristine float64 reference, times it, compares with the
current best and writes the result document to KZ_RESULT_PATH.
"""

from __future__ import annotations

import math
import os
import platform
import sys
from pathlib import Path

import numpy as np
import yaml

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PACKAGE_ROOT / "src"))

from softmax import softmax  # noqa: E402  (the kernel under test, from src/)

# ---- FALLBACK-WITHOUT-HARNESS: begin. Delete this except branch once every runner ships
# kz_harness; it only keeps the example runnable where the harness is not importable.
try:
    from kz_harness import bench_cpu, compare, write_result
except ImportError:
    import json
    import statistics
    import time
    from types import SimpleNamespace

    def bench_cpu(fn, make_inputs, *, warmup_s=0.05, budget_s=0.3, unit="us", **_):
        fn(*make_inputs())
        samples, deadline = [], time.perf_counter() + warmup_s + budget_s
        while len(samples) < 3 or time.perf_counter() < deadline:
            args = make_inputs()
            begin = time.perf_counter_ns()
            fn(*args)
            samples.append((time.perf_counter_ns() - begin) / 1000.0)
        ordered = sorted(samples)
        stats = {
            "median": statistics.median(ordered), "mean": statistics.fmean(ordered),
            "stdev": statistics.stdev(ordered), "min": ordered[0], "max": ordered[-1],
            "p10": ordered[len(ordered) // 10], "p90": ordered[(9 * len(ordered)) // 10],
            "samples": samples,
        }
        return SimpleNamespace(median=stats["median"], to_dict=lambda: stats)

    def compare(out, ref, *, dtype, inputs_before=(), inputs_after=(), name="output", **_):
        atol = rtol = 1e-4
        err = np.abs(out.astype(np.float64) - ref)
        ok = bool(np.all(np.isfinite(out)) and np.all(err <= atol + rtol * np.abs(ref)))
        pairs = zip(inputs_before, inputs_after, strict=True)
        ok = ok and all(np.array_equal(a, b) for a, b in pairs)
        doc = {"name": name, "max_abs_err": float(err.max()), "atol": atol, "rtol": rtol,
               "max_rel_err": float((err / np.maximum(np.abs(ref), 1e-30)).max()), "passed": ok}
        return SimpleNamespace(passed=ok, reason="" if ok else "mismatch", to_dict=lambda: doc)

    def write_result(path=None, *, accepted, reason, metric, workloads, checks, environment):
        checks = [c.to_dict() for c in checks]
        doc = {
            "schema_version": 1, "accepted": accepted, "reason": reason, "metric": metric,
            "workloads": [{**w, "stats": w["stats"].to_dict()} for w in workloads],
            "correctness": {"passed": all(c["passed"] for c in checks), "checks": checks},
            "environment": environment,
        }
        Path(path or os.environ["KZ_RESULT_PATH"]).write_text(json.dumps(doc, indent=1))
        return doc
# ---- FALLBACK-WITHOUT-HARNESS: end.

METRIC = {"name": "latency", "unit": "us", "better": "lower"}
MARGIN = 0.05  # a new result must beat the current best by 5 % to be accepted
# Must match desc.yaml's workloads.
WORKLOADS = {'r16_c1024': (16, 1024), 'r64_c2048': (64, 2048)}

def make_inputs(shape, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape, dtype=np.float32) * 4,)


def reference(x):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def baseline_best() -> float | None:
    """The current best value from KZ_BASELINE_PATH (main's bench_result.yaml), if any."""
    path = os.environ.get("KZ_BASELINE_PATH")
    if not path or not Path(path).is_file():
        return None
    best = (yaml.safe_load(Path(path).read_text()) or {}).get("best") or {}
    value = best.get("value")
    return float(value) if isinstance(value, int | float) else None


def verdict(passed: bool, value: float, best: float | None) -> tuple[bool, str]:
    if not passed:
        return False, "output does not match the reference"
    if best is None:
        return True, f"first result for this kernel: {value:.2f} us"
    if value <= best * (1 - MARGIN):
        return True, f"{best / value:.2f}x faster than current best ({value:.2f} vs {best:.2f} us)"
    return False, f"not {MARGIN:.0%} faster than current best ({value:.2f} vs {best:.2f} us)"


def main() -> int:
    checks, workloads = [], []
    for index, (name, shape) in enumerate(WORKLOADS.items()):
        inputs = make_inputs(shape, seed=index)
        pristine = [a.copy() for a in inputs]
        out = softmax(*inputs)
        checks.append(compare(out, reference(*pristine), dtype="fp32", name=name,
                              inputs_before=pristine, inputs_after=list(inputs)))
        stats = bench_cpu(softmax, lambda s=shape, i=index: make_inputs(s, seed=100 + i),
                          warmup_s=0.05, budget_s=0.3, unit="us")
        workloads.append({"name": name, "value": stats.median, "stats": stats})
    value = math.exp(sum(math.log(w["value"]) for w in workloads) / len(workloads))
    accepted, reason = verdict(all(c.passed for c in checks), value, baseline_best())
    environment = {"device": "cpu", "machine": platform.machine(),
                   "python": platform.python_version(), "numpy": np.__version__}
    write_result(os.environ.get("KZ_RESULT_PATH", "result.json"), accepted=accepted,
                 reason=reason, metric={**METRIC, "value": value}, workloads=workloads,
                 checks=checks, environment=environment)
    print(reason)
    return 0


if __name__ == "__main__":
    sys.exit(main())
