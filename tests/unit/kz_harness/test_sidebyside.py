"""The side-by-side verdict rule: intervals from block log-ratios, and the platform's verdict
on a result document, re-derived from its samples."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from kz_harness.errors import HarnessError
from kz_harness.sidebyside import (
    FASTER,
    INCONCLUSIVE,
    NOT_FASTER,
    compare_side_by_side,
    document_verdict,
    reference_score,
    small_sample_factor,
    speedup_interval,
)

pytestmark = pytest.mark.unit


def _blocks(speedup: float, noise: float, n: int, seed: int) -> list[float]:
    """Block log-ratios of a challenger `speedup` times faster, with log-normal noise."""
    rng = random.Random(seed)
    return [-math.log(speedup) + rng.gauss(0.0, noise) for _ in range(n)]


def test_the_interval_holds_the_true_speedup_and_narrows_with_more_blocks() -> None:
    few = speedup_interval([_blocks(1.3, 0.05, 8, 1), _blocks(1.3, 0.05, 8, 2)])
    many = speedup_interval([_blocks(1.3, 0.05, 200, 3), _blocks(1.3, 0.05, 200, 4)])
    for estimate, low, high in (few, many):
        assert low <= estimate <= high
        assert low <= 1.3 <= high
    assert many[2] - many[1] < few[2] - few[1]


def test_workloads_weigh_the_same_whatever_their_block_counts() -> None:
    """The estimate is the mean of per-workload means: a workload with more blocks does not
    pull the geometric mean toward itself."""
    estimate, _, _ = speedup_interval([[-math.log(2.0)] * 2 + [-math.log(2.0)], [0.0, 0.0]])
    assert estimate == pytest.approx(math.sqrt(2.0))
    estimate, _, _ = speedup_interval([[-math.log(2.0)] * 50, [0.0, 0.0]])
    assert estimate == pytest.approx(math.sqrt(2.0))


def test_the_same_samples_always_give_the_same_interval() -> None:
    groups = [_blocks(1.05, 0.03, 30, 5), _blocks(1.05, 0.03, 25, 6)]
    assert speedup_interval(groups) == speedup_interval([list(g) for g in groups])


@pytest.mark.parametrize(
    ("speedup", "noise", "outcome"),
    [
        (1.3, 0.02, FASTER),
        (1.0, 0.02, NOT_FASTER),
        (0.8, 0.02, NOT_FASTER),
        (1.05, 0.2, INCONCLUSIVE),
    ],
)
def test_three_outcomes_each_with_its_figures(speedup: float, noise: float, outcome: str) -> None:
    verdict = compare_side_by_side([_blocks(speedup, noise, 12, 7)], margin=0.05)
    assert verdict.outcome == outcome
    assert verdict.reason.startswith(outcome.replace("_", " "))
    assert f"{verdict.speedup:.3g}x" in verdict.reason and "interval" in verdict.reason


def test_too_few_blocks_or_a_bad_margin_are_refused() -> None:
    with pytest.raises(HarnessError, match="two block pairs"):
        speedup_interval([[0.1]])
    with pytest.raises(HarnessError, match="margin"):
        compare_side_by_side([[0.0, 0.1]], margin=1.5)


def _document(blocks: list[list[float]], *, accepted: bool, passed: bool = True) -> dict[str, Any]:
    return {
        "accepted": accepted,
        "reason": "what the judge said",
        "correctness": {"passed": passed, "checks": []},
        "workloads": [
            {"name": f"w{i}", "value": 1.0, "speedup": {"log_ratios": ratios}}
            for i, ratios in enumerate(blocks)
        ],
        "comparison": {"against": "incumbent", "margin": 0.05},
    }


def test_the_platform_rederives_the_verdict_from_the_samples() -> None:
    """The samples decide, not the document's own `accepted`: an identical kernel that claims
    acceptance is refused, a faster one the judge turned down is accepted."""
    same = _document([_blocks(1.0, 0.02, 12, 8), _blocks(1.0, 0.02, 12, 9)], accepted=True)
    faster = _document([_blocks(1.3, 0.02, 12, 10), _blocks(1.3, 0.02, 12, 11)], accepted=False)
    refused = document_verdict(same)
    assert refused is not None and refused[0] is False and "not faster" in refused[1]
    taken = document_verdict(faster)
    assert taken is not None and taken[0] is True and taken[1].startswith("faster")
    assert document_verdict(faster) == taken  # a replay re-derives it exactly


def test_a_wrong_output_is_never_accepted_and_a_document_without_samples_keeps_its_verdict() -> (
    None
):
    wrong = _document([_blocks(2.0, 0.02, 12, 12)], accepted=True, passed=False)
    assert document_verdict(wrong) == (False, "what the judge said")
    first = _document([_blocks(2.0, 0.02, 12, 13)], accepted=True)
    del first["comparison"]
    assert document_verdict(first) is None
    unmeasured = _document([[0.1]], accepted=True)  # one block: no interval to judge by
    assert document_verdict(unmeasured) is None
    nan = _document([[0.1, float("nan")]], accepted=True)
    assert document_verdict(nan) is None


def test_the_score_is_a_speedup_over_the_reference_with_its_interval() -> None:
    score = reference_score([_blocks(2.0, 0.02, 20, 14), _blocks(2.0, 0.02, 10, 15)])
    low, high = score["interval"]  # type: ignore[misc]
    assert score["against"] == "reference" and score["blocks"] == 30
    assert low <= 2.0 <= high and low <= score["speedup"] <= high  # type: ignore[operator]


@pytest.mark.parametrize(("n", "t_quantile"), [(6, 2.571), (11, 2.228), (31, 2.042)])
def test_the_small_sample_widening_is_students(n: int, t_quantile: float) -> None:
    """The factor is t(0.975, n-1) / z(0.975) times the plug-in correction sqrt(n / (n-1))."""
    assert small_sample_factor(n) == pytest.approx(t_quantile / 1.95996 * math.sqrt(n / (n - 1)),
                                                   rel=2e-3)  # fmt: skip


def test_six_blocks_cover_the_true_ratio_as_often_as_the_interval_says() -> None:
    """Few blocks are where adaptive sampling first looks: the interval must not be too
    narrow there, or a tie would be called faster by luck."""
    rng = random.Random(17)
    trials, covered = 300, 0
    for _ in range(trials):
        blocks = [rng.gauss(0.0, 0.03) for _ in range(6)]
        _, low, high = speedup_interval([blocks], resamples=400)
        covered += low <= 1.0 <= high
    assert covered / trials >= 0.93


def test_a_burst_on_one_block_does_not_move_the_estimate() -> None:
    """Host noise that lands on one side of a pair (a build starting beside the judge) gives
    one wild block; the trimmed mean leaves it out where a plain mean would move by 2 %."""
    steady = _blocks(1.05, 0.005, 20, 7)
    burst = [*steady[:-1], math.log(1.5)]  # the challenger's block ran with a burst beside it
    clean, _, _ = speedup_interval([steady])
    noisy, low, high = speedup_interval([burst])
    assert noisy == pytest.approx(clean, rel=0.005)
    assert low <= 1.05 <= high
