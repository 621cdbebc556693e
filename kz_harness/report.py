"""The judge's result document (version 3) from what the workloads measured.

Per workload: the candidate's per-call figures (one per timed window), the resolution (the
trusted no-op's per-call figure by the same method), the calls per window (`batch`), the
channel's one round trip (information), each rival's figures and the speed-up over it. At the
top: the verdict and its reason, the flags (the candidate's only), what became of each rival
offered (`rivals`), the candidate's own failure when it failed (`failure`, and then no
headline value), the judge's reading of the validity gate (`validity`, informational: the
platform re-derives it) and how the calls were timed (`timing`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kz_harness.ceilings import SUSPECT_SHARE, Ceilings, floor_s
from kz_harness.checks import Check
from kz_harness.result import build_result
from kz_harness.sidebyside import (
    Comparison,
    compare_side_by_side,
    reference_score,
    speedup_interval,
)
from kz_harness.stats import UNITS, below_physical_floor
from kz_harness.task import Flags, Measured, Task
from kz_harness.validity import validity
from kz_harness.verdict import baseline_best, geomean, verdict

if TYPE_CHECKING:
    from kz_harness.judge import Benchmark, Workload

__all__ = ["judge_document"]

METHODS = {"cpu": "batched_window", "cuda": "cuda_events_bounded"}
CLOCKS = {
    "cpu": "time.perf_counter_ns around each window of calls; a call's figure is the window "
    "over its calls (the channel's round trip amortised, never subtracted)",
    "cuda": "CUDA events around each call, bounded by the judge's perf_counter_ns around each "
    "window of calls",
}


def judge_document(
    bench: Benchmark,
    np: Any,
    cpu: int,
    measured: list[tuple[Workload, Measured]],
    failure: Mapping[str, str] | None,
    task: Task,
    ceilings: Ceilings | None,
) -> dict[str, Any]:
    """The result document of one task."""
    for _, m in measured:  # a voided rival's comparison is dropped from every workload
        m.beside = {n: b for n, b in m.beside.items() if not task.book.voided(n)}
    unit = bench.time_unit
    checks = [check for _, m in measured for check in m.checks]
    if failure is not None:
        checks.append(Check("candidate", math.inf, math.inf, 0.0, 0.0, False, failure["error"]))
    workloads = [
        {
            "name": w.name,
            "value": m.stats.median,
            "stats": m.stats,
            "resolution": _in(m.resolution_ns, unit),
            "batch": m.batch,
            "channel_overhead": _in(m.round_trip_ns, unit),
            **_beside(m),
            **_floor(bench, w, m, ceilings, task.flags),
        }
        for w, m in measured
    ]
    complete = failure is None and len(measured) == len(bench.workloads)
    passed = complete and bool(checks) and all(c.passed for c in checks)
    value = geomean(max(m.stats.median, 1e-9) for _, m in measured) if complete else None
    comparison = _comparison(bench, measured) if passed else None
    accepted, reason = _verdict(bench, checks, failure, comparison, value if passed else None)
    document = build_result(
        accepted=accepted,
        reason=reason,
        metric={**bench.metric, "value": value if value is not None else 0.0},
        workloads=workloads,
        checks=checks,
        environment=_environment(np, bench.device),
    )
    if value is None:
        document["metric"]["value"] = None
    document["flags"] = task.flags.to_list()
    if failure is not None:
        document["failure"] = dict(failure)
    document["rivals"] = task.book.to_dict()
    if ceilings is not None:
        document["ceilings"] = ceilings.to_dict()
    _side_by_side(document, measured, comparison, task, passed)
    document["timing"] = _timing(bench, cpu, measured)
    gate = validity(document)
    document["validity"] = {
        "measured": gate.measured,
        "settled": gate.settled,
        "spread": gate.spread,
        "reason": gate.reason,
    }
    return document


def _verdict(
    bench: Benchmark,
    checks: list[Check],
    failure: Mapping[str, str] | None,
    comparison: Comparison | None,
    value: float | None,
) -> tuple[bool, str]:
    """The judge's own verdict: side by side against the incumbent when it was measured, else
    against main's best (a first result when there is none); the platform re-derives it."""
    if failure is not None:
        return False, failure["error"]
    best = baseline_best()
    if comparison is not None and best is not None:
        return comparison.faster, comparison.reason
    if value is not None:
        return verdict(
            True, value, best, better=bench.metric["better"], margin=bench.margin,
            unit=bench.metric["unit"],
        )  # fmt: skip
    bad = next((c for c in checks if not c.passed), None)
    return False, f"{bad.name}: {bad.reason}" if bad else "nothing could be measured"


def _side_by_side(
    document: dict[str, Any],
    measured: list[tuple[Workload, Measured]],
    comparison: Comparison | None,
    task: Task,
    passed: bool,
) -> None:
    """The comparison against the incumbent and the score against the reference, or why
    there is none."""
    book = task.book
    if comparison is not None:
        document["comparison"] = comparison.to_dict()
    elif "incumbent" in book.offered and book.voided("incumbent"):
        document["comparison"] = {"against": None, "reason": book.reason("incumbent")}
    score = _ratios(measured, "reference") if passed else None
    if score is not None:
        document["score"] = reference_score(score)
    elif "reference" in book.offered and book.voided("reference"):
        document["score"] = {"against": None, "reason": book.reason("reference")}


def _timing(
    bench: Benchmark, cpu: int, measured: list[tuple[Workload, Measured]]
) -> dict[str, Any]:
    unit = bench.time_unit
    return {
        "method": METHODS[bench.device],
        "clock": CLOCKS[bench.device],
        "cpu": cpu,
        "resolution": {w.name: _in(m.resolution_ns, unit) for w, m in measured},
        "resolution_unit": unit,
        "batch": {w.name: m.batch for w, m in measured},
        "channel_overhead": {w.name: m.round_trip_ns for w, m in measured},
        "channel_overhead_unit": "ns",
        "worker_cpu": {w.name: m.cpu for w, m in measured},
    }


def _comparison(bench: Benchmark, measured: list[tuple[Workload, Measured]]) -> Comparison | None:
    """The side-by-side verdict when the incumbent was measured beside the candidate."""
    ratios = _ratios(measured, "incumbent")
    return None if ratios is None else compare_side_by_side(ratios, bench.margin)


def _floor(
    bench: Benchmark, workload: Workload, measured: Measured, ceilings: Ceilings | None,
    flags: Flags,
) -> dict[str, Any]:  # fmt: skip
    """The workload's physical floor against the measured ceilings, and how near the
    median came to it; a median under `SUSPECT_SHARE` of it is flagged."""
    if ceilings is None or not (workload.bytes_moved or workload.flops):
        return {}
    seconds, bound = floor_s(ceilings, bytes_moved=workload.bytes_moved, flops=workload.flops)
    unit = bench.time_unit
    value = seconds / UNITS[unit]
    median = measured.stats.median
    if below_physical_floor(measured.stats, SUSPECT_SHARE * seconds):
        flags.add(
            "below_physical_floor",
            f"{workload.name}: a median of {median:.4g} {unit} is under the physical floor of "
            f"{value:.4g} {unit} ({bound}-bound at the measured ceilings): the work was not "
            "all measured, or is less than declared",
        )
    return {
        "floor": {
            "value": value,
            "bound": bound,
            "bytes_moved": workload.bytes_moved,
            "flops": workload.flops,
            "attained": value / median if median > 0 else None,
        }
    }


def _ratios(measured: list[tuple[Workload, Measured]], rival: str) -> list[list[float]] | None:
    """Every workload's log-ratios against `rival`; None unless each has an interval."""
    ratios = [m.beside[rival].log_ratios for _, m in measured if rival in m.beside]
    if not measured or len(ratios) != len(measured) or any(len(r) < 2 for r in ratios):
        return None
    return ratios


def _beside(measured: Measured) -> dict[str, Any]:
    """A workload's side-by-side figures: each rival's stats, and the speed-up over it with
    the per-round log-ratios it comes from (`speedup` is over the incumbent,
    `reference_speedup` over the reference)."""
    out: dict[str, Any] = {}
    for name, rival in measured.beside.items():
        if len(rival.log_ratios) < 2:
            continue
        speedup, low, high = speedup_interval([rival.log_ratios])
        out[name] = rival.stats.to_dict()
        out["speedup" if name == "incumbent" else f"{name}_speedup"] = {
            "value": speedup,
            "interval": [low, high],
            "blocks": len(rival.log_ratios),
            "log_ratios": list(rival.log_ratios),
        }
    return out


def _in(ns: float, unit: str) -> float:
    return ns * UNITS["ns"] / UNITS[unit]


def _environment(np: Any, device: str = "cpu") -> dict[str, str]:
    import platform
    import sys

    found = {
        "device": device,
        "machine": platform.machine(),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    torch = sys.modules.get("torch")  # a torch board's judge loaded it
    if torch is not None:
        found["torch"] = str(getattr(torch, "__version__", "?"))
    return found
