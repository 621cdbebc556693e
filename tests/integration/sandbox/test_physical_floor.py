"""The physical floor through the real sandbox: the trusted calibration worker measures the
device's ceilings, each workload that declares its work gets a floor on the result, and a
median under it marks the result suspect."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kz_runner.execute import TaskOutcome

pytestmark = pytest.mark.integration

JudgePackage = Callable[..., TaskOutcome]

# A row scan of float32: each input read once, the output written once, one add per element.
JUDGE = """
import numpy as np
from kz_harness import Benchmark, Timing, Workload

ROWS = 256

def make_inputs(workload, rng):
    return (rng.standard_normal((ROWS, 256), dtype=np.float32),)

def reference(x):
    return np.cumsum(x.astype(np.float64), axis=1)

BENCHMARK = Benchmark(
    entry="kernel:scan",
    workloads=[Workload("r256", {}, bytes_moved={bytes_moved}, flops=ROWS * 256)],
    make_inputs=make_inputs, reference=reference, dtype="fp32",
    timing=Timing(warmup_s=0.02, budget_s=0.2, calibration_calls=40),
)
raise SystemExit(BENCHMARK.main())
"""

KERNEL = """
import numpy as np

def scan(x):
    return np.cumsum(x, axis=1, dtype=np.float32)
"""

HONEST_BYTES = 2 * 256 * 256 * 4


def _flags(outcome: TaskOutcome) -> set[str]:
    assert outcome.result is not None, outcome.log.decode()[-3000:]
    return {flag["code"] for flag in outcome.result.get("flags", [])}


def test_each_declared_workload_shows_its_floor_against_measured_ceilings(
    judge_package: JudgePackage,
) -> None:
    """An honest scan: ceilings measured on this CPU, a memory-bound floor under the median,
    nothing flagged."""
    outcome = judge_package(
        JUDGE.replace("{bytes_moved}", str(HONEST_BYTES)), {"kernel.py": KERNEL}
    )
    assert outcome.reason == "accepted", outcome.log.decode()[-3000:]
    assert outcome.result is not None
    ceilings = outcome.result["ceilings"]
    assert ceilings["device"] == "cpu" and ceilings["dtype"] == "float32"
    assert ceilings["bytes_per_s"] > 1e8 and ceilings["flops_per_s"] > 1e7
    (workload,) = outcome.result["workloads"]
    floor = workload["floor"]
    assert floor["bound"] == "memory" and floor["bytes_moved"] == HONEST_BYTES
    expected_us = HONEST_BYTES / ceilings["bytes_per_s"] * 1e6
    assert floor["value"] == pytest.approx(expected_us)
    assert 0 < floor["attained"] == pytest.approx(floor["value"] / workload["value"])
    assert floor["attained"] < 1 / 0.75
    assert "below_physical_floor" not in _flags(outcome)


def test_a_median_under_the_floor_marks_the_result_suspect(judge_package: JudgePackage) -> None:
    """Work declared a thousand times larger than the call does: the median is far under the
    floor, so the judge flags it (the referee marks a flagged result suspect)."""
    outcome = judge_package(
        JUDGE.replace("{bytes_moved}", str(HONEST_BYTES * 1000)), {"kernel.py": KERNEL}
    )
    assert outcome.result is not None, outcome.log.decode()[-3000:]
    assert "below_physical_floor" in _flags(outcome)
    (workload,) = outcome.result["workloads"]
    assert workload["floor"]["attained"] > 1 / 0.75


def test_a_board_that_declares_no_work_measures_no_ceilings(judge_package: JudgePackage) -> None:
    outcome = judge_package(
        JUDGE.replace("bytes_moved={bytes_moved}, flops=ROWS * 256", ""), {"kernel.py": KERNEL}
    )
    assert outcome.result is not None, outcome.log.decode()[-3000:]
    assert "ceilings" not in outcome.result
    assert "floor" not in outcome.result["workloads"][0]
