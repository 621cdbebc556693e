"""Every statistic of `Stats` on samples whose answers are known by hand."""

from __future__ import annotations

import math

import pytest

from kz_harness.errors import HarnessError
from kz_harness.stats import Stats, below_physical_floor, percentile, physical_floor, tie

pytestmark = pytest.mark.unit

SAMPLES = [10.0, 12.0, 11.0, 13.0, 14.0, 10.0, 11.0, 12.0, 13.0, 50.0]


def test_every_statistic_matches_a_hand_computation() -> None:
    """Median, mean, stdev, min, max, p10, p90, sem and outliers of a known sample."""
    stats = Stats.from_samples(SAMPLES, unit="us")
    assert stats.median == 12.0
    assert stats.mean == pytest.approx(15.6)
    expected_stdev = math.sqrt(sum((v - 15.6) ** 2 for v in SAMPLES) / 9)
    assert stats.stdev == pytest.approx(expected_stdev)
    assert (stats.min, stats.max) == (10.0, 50.0)
    assert stats.p10 == pytest.approx(10.0)  # position 0.9 between 10 and 10
    assert stats.p90 == pytest.approx(14.0 + 0.1 * 36.0)  # position 8.1 between 14 and 50
    assert stats.sem == pytest.approx(expected_stdev / math.sqrt(10))
    assert stats.outliers == (50.0,)  # Q1 = 11, Q3 = 13, fences 8 and 16
    assert stats.samples == tuple(SAMPLES)
    assert stats.n == 10


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [([1.0], 0.5, 1.0), ([1.0, 2.0], 0.5, 1.5), ([1.0, 2.0, 3.0, 4.0, 5.0], 0.1, 1.4),
     ([1.0, 2.0, 3.0, 4.0, 5.0], 0.9, 4.6), ([0.0, 10.0], 0.25, 2.5), ([3.0, 4.0], 1.0, 4.0)],
)  # fmt: skip
def test_percentiles_interpolate_linearly(values: list[float], q: float, expected: float) -> None:
    """Percentiles interpolate between order statistics like numpy's default."""
    assert percentile(values, q) == pytest.approx(expected)


def test_a_single_sample_has_no_spread() -> None:
    """One sample gives zero stdev and sem and no outliers."""
    stats = Stats.from_samples([5.0])
    assert (stats.stdev, stats.sem, stats.outliers, stats.median, stats.p90) == (
        0.0,
        0.0,
        (),
        5.0,
        5.0,
    )


@pytest.mark.parametrize("bad", [[], [1.0, math.nan], [math.inf]])
def test_empty_or_non_finite_samples_are_refused(bad: list[float]) -> None:
    """Stats refuse no samples and NaN or Inf samples."""
    with pytest.raises(HarnessError):
        Stats.from_samples(bad)


def test_unit_conversion_scales_every_statistic() -> None:
    """Converting microseconds to milliseconds divides every figure by 1000."""
    stats = Stats.from_samples(SAMPLES, unit="us").to_unit("ms")
    assert stats.unit == "ms"
    assert stats.median == pytest.approx(0.012)
    assert stats.samples[-1] == pytest.approx(0.05)


def test_to_dict_carries_the_contract_fields_and_every_sample() -> None:
    """The dict has the result document's stats fields plus sem, n, unit and outliers."""
    document = Stats.from_samples(SAMPLES).to_dict()
    for key in (
        "median",
        "mean",
        "stdev",
        "min",
        "max",
        "p10",
        "p90",
        "samples",
        "sem",
        "outliers",
    ):
        assert key in document
    assert document["samples"] == SAMPLES
    assert document["outliers"] == [50.0]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [([10.0, 11.0, 12.0], [11.5, 12.5, 13.0], True),
     ([10.0, 10.5, 11.0], [20.0, 21.0, 22.0], False),
     ([1.0, 2.0, 4.0], [3.0, 4.0, 5.0], True)],
)  # fmt: skip
def test_overlapping_spreads_are_a_tie(a: list[float], b: list[float], expected: bool) -> None:
    """Two runs tie when their p10-p90 spreads overlap, in either order."""
    sa, sb = Stats.from_samples(a), Stats.from_samples(b)
    assert tie(sa, sb) is expected and tie(sb, sa) is expected


def test_tie_compares_across_units() -> None:
    """A run in ms and the same run in us tie."""
    stats = Stats.from_samples([1.0, 2.0, 3.0], unit="ms")
    assert tie(stats, stats.to_unit("us"))


def test_the_physical_floor_is_the_slower_of_memory_and_math() -> None:
    """The floor is the max of bytes/bandwidth and flops/peak, and faster medians are flagged."""
    floor = physical_floor(
        bytes_moved=4e9, flops=1e12, peak_bytes_per_s=4e12, peak_flops_per_s=1e15
    )
    assert floor == pytest.approx(1e-3)
    assert below_physical_floor(Stats.from_samples([500.0], unit="us"), floor)
    assert not below_physical_floor(Stats.from_samples([2.0], unit="ms"), floor)
    with pytest.raises(HarnessError):
        physical_floor(bytes_moved=1.0)
