"""Rows from the GPU check's figures: the probe's, the clocks read during the run, the
verdicts' and the repeatability pair's. Pure functions, so the rules are unit-tested."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from kz_testing.gpucheck.report import FAIL, PASS, Row

__all__ = [
    "BOUND_FLAGS",
    "REPEAT_FAST",
    "REPEAT_JUDGE",
    "REPEAT_SLOW",
    "REPEAT_SPREAD",
    "bound_row",
    "clock_row",
    "floors_of",
    "judged_side_by_side",
    "probe_rows",
    "repeat_row",
    "speedup_of",
]

BOUND_FLAGS = ("timing_bound_broken", "work_outside_events", "below_physical_floor")
REPEAT_SPREAD = 0.02  # (max - min) / median of the 5 tasks' speed-ups, the CPU bench's target
RESOLUTION_US = 1.0
FLUSH_RATIO = 1.05

# Two fixed kernels measured side by side in 5 separate tasks: one pass against three.
REPEAT_JUDGE = """
import numpy as np
from kz_harness import Benchmark, Timing, Workload

def make_inputs(workload, rng):
    return (rng.standard_normal((workload["rows"], workload["cols"]), dtype=np.float32),)

def reference(x):
    return x.astype(np.float64) * 2.0

BENCHMARK = Benchmark(
    entry="kernel:double",
    workloads=[Workload("r2048_c1024", {"rows": 2048, "cols": 1024})],
    make_inputs=make_inputs, reference=reference, dtype="fp32", device="cuda",
    timing=Timing(warmup_s=0.05, budget_s=0.5, calibration_calls=50),
)
raise SystemExit(BENCHMARK.main())
"""
REPEAT_FAST = "def double(x):\n    return x * 2.0\n"
REPEAT_SLOW = "def double(x):\n    y = x.clone()\n    y.add_(x)\n    return y.clone()\n"
REPEAT_BASELINE = (
    "schema_version: 1\nkernel_id: sm90/Check/GPU/fp32/gpu_check\nbest:\n  value: 1.0\n"
)


def _error(part: Any) -> str | None:
    if not isinstance(part, dict):
        return "not measured"
    error = part.get("error")
    return str(error).strip().splitlines()[-1] if error else None


def probe_rows(figures: dict[str, Any]) -> list[Row]:
    """sandbox-cuda, event-timer, l2-flush, l2-persist-reset and triton rows."""
    device = figures.get("device")
    if not isinstance(device, dict):
        reason = _error(figures) or "no device figures"
        return [Row("sandbox-cuda", FAIL, reason)]
    capability = ".".join(str(c) for c in device.get("capability", []))
    rows = [
        Row(
            "sandbox-cuda",
            PASS,
            f"{device.get('name')} (sm {capability}), torch {device.get('torch')}, "
            f"CUDA {device.get('cuda')}, in the worker's sandbox",
        )
    ]
    timer = figures.get("event_timer")
    if (problem := _error(timer)) is not None:
        rows.append(Row("event-timer", FAIL, problem))
    else:
        assert isinstance(timer, dict)
        ok = 0 < timer["resolution_us"] <= RESOLUTION_US
        rows.append(
            Row(
                "event-timer",
                PASS if ok else FAIL,
                f"resolution {timer['resolution_us']:.3f} us, empty pair {timer['overhead_us']:.2f}"
                f" us (max {timer['max_empty_us']:.2f})",
            )
        )
    flush = figures.get("l2_flush")
    if (problem := _error(flush)) is not None:
        rows.append(Row("l2-flush", FAIL, problem))
    else:
        assert isinstance(flush, dict)
        ok = flush["ratio"] >= FLUSH_RATIO
        rows.append(
            Row(
                "l2-flush",
                PASS if ok else FAIL,
                f"half-L2 read {flush['flushed_us']:.2f} us flushed vs {flush['warm_us']:.2f} us "
                f"warm: {flush['ratio']:.2f}x",
            )
        )
    reset = figures.get("persisting_l2")
    if (problem := _error(reset)) is not None:
        rows.append(Row("l2-persist-reset", FAIL, problem))
    else:
        assert isinstance(reset, dict)
        ok = bool(reset["found"] and reset["ran"] and reset["device_reset"])
        ok = ok and bool(reset["device_output_ok"])
        rows.append(
            Row(
                "l2-persist-reset",
                PASS if ok else FAIL,
                f"cudaCtxResetPersistingL2Cache {'ran' if reset['ran'] else 'NOT found'}; the "
                f"worker's Device timed a call at {reset['device_call_ns'] / 1e3:.1f} us",
            )
        )
    triton = figures.get("triton")
    if (problem := _error(triton)) is not None:
        rows.append(Row("triton", FAIL, problem))
    else:
        assert isinstance(triton, dict)
        ok = bool(triton["ok"])
        rows.append(
            Row("triton", PASS if ok else FAIL, f"triton {triton['version']} compiled and ran")
        )
    return rows


def _floats(values: Sequence[str]) -> list[float]:
    out = []
    for value in values:
        try:
            out.append(float(value.strip()))
        except ValueError:
            continue
    return out


def clock_row(csv_text: str) -> tuple[Row, dict[str, Any]]:
    """The clocks seen while the check ran (nvidia-smi's csv,noheader,nounits lines of
    timestamp, clocks.sm, clocks.mem, temperature.gpu, power.draw)."""
    rows = [line.split(",") for line in csv_text.splitlines() if line.count(",") >= 4]
    if not rows:
        return Row("clocks", FAIL, "nvidia-smi gave no readings"), {}
    columns = {name: _floats([r[i] for r in rows]) for i, name in enumerate(
        ("timestamp", "sm_mhz", "mem_mhz", "temp_c", "power_w")) if i > 0}  # fmt: skip
    summary: dict[str, Any] = {
        name: {"min": min(v), "median": statistics.median(v), "max": max(v)}
        for name, v in columns.items()
        if v
    }
    summary["samples"] = len(rows)
    sm, temp = summary.get("sm_mhz"), summary.get("temp_c")
    figure = (
        f"SM {sm['min']:.0f}-{sm['max']:.0f} MHz (median {sm['median']:.0f}), "
        if sm
        else "SM clock unread, "
    )
    mem = summary.get("mem_mhz")
    figure += f"mem {mem['median']:.0f} MHz, " if mem else ""
    figure += f"temp max {temp['max']:.0f} C, " if temp else ""
    power = summary.get("power_w")
    figure += f"power max {power['max']:.0f} W, " if power else ""
    figure += f"{len(rows)} readings (read only)"
    return Row("clocks", PASS if sm else FAIL, figure), summary


def speedup_of(document: dict[str, Any] | None) -> float | None:
    """The candidate's side-by-side speed-up over the incumbent in a result document."""
    if not document:
        return None
    comparison = document.get("comparison")
    if isinstance(comparison, dict) and isinstance(comparison.get("speedup"), int | float):
        return float(comparison["speedup"])
    speedups = [w["speedup"]["value"] for w in document.get("workloads", []) if "speedup" in w]
    return float(statistics.geometric_mean(speedups)) if speedups else None


def judged_side_by_side(document: dict[str, Any] | None) -> bool:
    """Whether a result is correct and carries a side-by-side comparison (any outcome)."""
    if not document or not (document.get("correctness") or {}).get("passed"):
        return False
    comparison = document.get("comparison")
    return isinstance(comparison, dict) and comparison.get("outcome") is not None


def floors_of(document: dict[str, Any] | None) -> str:
    """How near each workload's median came to its physical floor at the measured ceilings,
    e.g. "floor: t4096_h4096 61 % (memory), t16_h8192 8 % (memory)"; empty without floors."""
    if not document:
        return ""
    parts = []
    for workload in document.get("workloads", []):
        floor = workload.get("floor") if isinstance(workload, dict) else None
        if isinstance(floor, dict) and isinstance(attained := floor.get("attained"), int | float):
            parts.append(f"{workload.get('name')} {100 * attained:.0f} % ({floor.get('bound')})")
    return f"floor: {', '.join(parts)}" if parts else ""


def repeat_row(speedups: Sequence[float | None], tasks: int) -> tuple[Row, dict[str, Any]]:
    measured = [s for s in speedups if s is not None]
    if len(measured) < tasks:
        return Row("repeatability", FAIL, f"{len(measured)} of {tasks} tasks gave a speed-up"), {
            "speedups": list(speedups)
        }
    median = statistics.median(measured)
    spread = (max(measured) - min(measured)) / median
    figure = (
        f"speed-up {median:.3f}x over {tasks} tasks, spread (max-min)/median {100 * spread:.2f} %"
        f" (limit {100 * REPEAT_SPREAD:.0f} %)"
    )
    row = Row("repeatability", PASS if spread <= REPEAT_SPREAD else FAIL, figure)
    return row, {"speedups": measured, "median": median, "spread": spread}


def bound_row(documents: Sequence[dict[str, Any]]) -> Row:
    """The judge's bound on reported CUDA times held on every honest result."""
    if not documents:
        return Row("batch-bound", FAIL, "no honest result document to look at")
    methods = {str((d.get("timing") or {}).get("method")) for d in documents}
    flagged = [
        f["code"]
        for d in documents
        for f in d.get("flags") or []
        if isinstance(f, dict) and f.get("code") in BOUND_FLAGS
    ]
    ok = methods == {"cuda_events_bounded"} and not flagged
    figure = f"{len(documents)} honest results, method {'/'.join(sorted(methods))}"
    figure += f", flagged {', '.join(sorted(set(flagged)))}" if flagged else ", no bound flag"
    return Row("batch-bound", PASS if ok else FAIL, figure)
