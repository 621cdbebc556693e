"""When the judge stops sampling: the side-by-side stop rule over per-round log-ratios, the
validity gate's word on a workload, and the CPU account of a worker read from outside it."""

from __future__ import annotations

import math
import random

import pytest

from kz_harness.sidebyside import speedup_interval
from kz_harness.stoprule import settled, unsettled
from kz_harness.task import cpu_account

pytestmark = pytest.mark.unit


def _rounds(speedup: float, noise: float, n: int = 12, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [-math.log(speedup) + rng.gauss(0.0, noise) for _ in range(n)]


def test_a_clearly_slower_challenger_stops_at_once_a_faster_one_once_narrow() -> None:
    """Not faster: stop, whatever the width; faster: only once the interval is narrower than
    the margin; a straddling interval never stops."""
    assert settled({"incumbent": _rounds(0.5, 0.3)}, 0.05)
    assert not settled({"incumbent": _rounds(1.6, 0.15)}, 0.05)
    assert settled({"incumbent": _rounds(1.6, 0.005)}, 0.05)
    assert not settled({"incumbent": _rounds(1.05, 0.05)}, 0.05)


def test_the_score_must_be_narrow_and_a_confirmation_waits_for_it_alone() -> None:
    """Beside the reference the score's interval must be narrower than the margin; a
    confirmation run's incumbent (the same source) does not stop it."""
    narrow, wide = _rounds(2.0, 0.005), _rounds(2.0, 0.2)
    assert settled({"reference": narrow}, 0.05) and not settled({"reference": wide}, 0.05)
    tie = _rounds(1.0, 0.3)
    assert not settled({"incumbent": tie, "reference": narrow}, 0.05)  # a tie: sample on
    assert not settled({"incumbent": tie, "reference": wide}, 0.05, confirming=True)
    assert settled({"incumbent": tie, "reference": narrow}, 0.05, confirming=True)
    assert not settled({"reference": [0.1]}, 0.05) and not settled({}, 0.05)


def test_the_gate_asks_for_more_only_when_more_can_help() -> None:
    """Measured but wide: sample on; far within ten resolutions: more cannot help; settled:
    done."""
    candidate = [100.0 * (1 + 0.3 * ((i % 5) - 2)) for i in range(12)]
    noisy = {"reference": _rounds(2.0, 0.3)}
    assert unsettled("w", [1.0] * 5, candidate, {"reference": [200.0] * 12}, noisy)
    assert not unsettled("w", [50.0] * 5, candidate, {"reference": [200.0] * 12}, noisy)
    calm = {"reference": _rounds(2.0, 0.002)}
    assert not unsettled("w", [1.0] * 5, candidate, {"reference": [200.0] * 12}, calm)


def test_one_workload_of_several_is_settled_enough_at_the_combined_width() -> None:
    """The gate settles the mean over the workloads, about sqrt(k) narrower than each: a
    workload 11 % wide samples on alone, and is done as one of two (its bound 1.1 ** 1.13)."""
    candidate = [100.0] * 20
    wide = {"reference": _rounds(2.0, 0.11, n=20)}
    spread = speedup_interval([wide["reference"]])
    assert 1.10 < spread[2] / spread[1] < 1.1 ** (0.8 * math.sqrt(2))
    assert unsettled("w", [1.0] * 5, candidate, {"reference": [200.0] * 20}, wide)
    assert not unsettled("w", [1.0] * 5, candidate, {"reference": [200.0] * 20}, wide, workloads=2)
    wider = {"reference": _rounds(2.0, 0.3, n=20)}
    assert unsettled("w", [1.0] * 5, candidate, {"reference": [200.0] * 20}, wider, workloads=2)


def test_cpu_outside_the_windows_or_off_the_serving_thread_is_read_as_a_fault() -> None:
    """The runner's readings before and after: a serving thread busier than its windows, or
    CPU spent by anything else, beyond two clock ticks."""
    before = {"main_cpu_ns": 0, "cpu_ns": 0}
    quiet, faults = cpu_account(
        before, {"main_cpu_ns": 90_000_000, "cpu_ns": 91_000_000}, 100_000_000
    )
    assert faults == [] and quiet == {
        "main_cpu_ns": 90_000_000,
        "other_cpu_ns": 1_000_000,
        "windows_ns": 100_000_000,
    }
    _, faults = cpu_account(
        before, {"main_cpu_ns": 200_000_000, "cpu_ns": 260_000_000}, 100_000_000
    )
    assert [code for code, _ in faults] == ["work_outside_window", "background_work"]
