"""The validity gate: figures near their resolution are not measurements; wide intervals are
not settled; two measurements agree when each estimate lies inside the other's interval."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from kz_harness.validity import SETTLED_FACTOR, agree, is_settled, validity

pytestmark = pytest.mark.unit


def _ratios(speedup: float, noise: float, n: int = 12, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [-math.log(speedup) + rng.gauss(0, noise) for _ in range(n)]


def _document(
    *,
    median: float = 100.0,
    resolution: float | None = 1.0,
    reference: dict[str, Any] | None = None,
    score_noise: float = 0.005,
    comparison: bool = False,
    comparison_speedup: float = 2.0,
) -> dict[str, Any]:
    workload: dict[str, Any] = {
        "name": "w",
        "value": median,
        "stats": {"median": median, "samples": [median * (1 + 0.001 * i) for i in range(10)]},
        "reference": reference or {"median": 2 * median},
        "reference_speedup": {"log_ratios": _ratios(2.0, score_noise)},
    }
    if resolution is not None:
        workload["resolution"] = resolution
    document: dict[str, Any] = {"metric": {"unit": "us"}, "workloads": [workload]}
    if comparison:
        workload["incumbent"] = {"median": median * comparison_speedup}
        workload["speedup"] = {"log_ratios": _ratios(comparison_speedup, 0.2, seed=3)}
        document["comparison"] = {"against": "incumbent"}
    return document


def test_a_figure_well_above_its_resolution_with_a_narrow_interval_is_valid() -> None:
    """A median 100x the resolution and a score interval of a few per cent pass the gate."""
    gate = validity(_document())
    assert gate.valid and gate.reason == ""
    assert gate.spread is not None and gate.spread < SETTLED_FACTOR - 1


@pytest.mark.parametrize(
    ("median", "reference"),
    [(5.0, None), (100.0, {"median": 3.0})],
    ids=["candidate", "reference"],
)
def test_a_figure_within_ten_resolutions_is_not_a_measurement(
    median: float, reference: dict[str, Any] | None
) -> None:
    """The candidate's or a rival's median under ten resolutions fails, naming who and where."""
    gate = validity(_document(median=median, reference=reference))
    assert not gate.measured and not gate.valid
    assert "too small to measure" in gate.reason and "w:" in gate.reason


def test_a_wide_score_interval_is_not_settled_and_says_how_wide() -> None:
    """Block log-ratios with 30 % noise give an interval far wider than 10 %."""
    gate = validity(_document(score_noise=0.3))
    assert gate.measured and not gate.settled
    assert gate.reason.startswith("the host was too noisy to tell: spread")


def test_a_wide_comparison_unsettles_unless_it_is_clearly_slower() -> None:
    """Beside an incumbent, the comparison's interval must settle too, unless wholly below 1."""
    assert not validity(_document(comparison=True, comparison_speedup=2.0)).settled
    assert validity(_document(comparison=True, comparison_speedup=0.2)).settled


def test_a_document_without_resolutions_or_rivals_uses_its_own_windows() -> None:
    """An old document counts as measured; with no score its own samples give the interval."""
    document = _document(resolution=None)
    del document["workloads"][0]["reference_speedup"]
    assert validity(document).valid
    document["workloads"][0]["stats"]["samples"] = [1.0, 50.0, 3.0, 90.0]
    assert not validity(document).settled


def test_nothing_to_give_an_interval_is_not_settled() -> None:
    """A document with no samples and no stored interval cannot be shown settled."""
    gate = validity({"metric": {"unit": "us"}, "workloads": [{"name": "w", "value": 3.0}]})
    assert gate.measured and not gate.settled


def test_a_stored_score_stands_in_when_the_log_ratios_are_absent() -> None:
    """A score with only its interval (an older document) decides by that interval."""
    document = {
        "workloads": [{"name": "w", "stats": {"median": 5.0}}],
        "score": {"against": "reference", "speedup": 1.5, "interval": [1.45, 1.55]},
    }
    assert validity(document).valid
    document["score"]["interval"] = [0.05, 27705.0]
    assert not validity(document).settled


def test_settled_and_agree() -> None:
    """The two small rules, at their edges."""
    assert is_settled(1.0, SETTLED_FACTOR) and not is_settled(1.0, SETTLED_FACTOR * 1.001)
    assert not is_settled(0.0, 0.0)
    assert agree((2.0, 1.9, 2.1), (2.05, 1.95, 2.15))
    assert not agree((2.0, 1.9, 2.1), (2.2, 2.15, 2.25))  # overlap alone is not agreement
