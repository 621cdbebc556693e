"""The verdict helpers benchmarks end with: main's best, the margin rule, the geometric mean."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kz_harness import HarnessError, baseline_best, geomean, verdict

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "best"),
    [
        ("schema_version: 1\nbest:\n  value: 12.5\n", 12.5),
        ("schema_version: 1\nbest: {value: 3}\n", 3.0),
        ("schema_version: 1\n", None),  # a kernel without a best yet
        ("schema_version: 1\nbest: {value: fast}\n", None),  # not a number
        ("schema_version: 1\nbest: {value: true}\n", None),  # a bool is not a value
        ("", None),
    ],
)
def test_baseline_best_reads_best_value(tmp_path: Path, text: str, best: float | None) -> None:
    """best.value of bench_result.yaml, or None when there is none to beat."""
    path = tmp_path / "bench_result.yaml"
    path.write_text(text)
    assert baseline_best(path) == best


def test_baseline_best_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a path it reads $KZ_BASELINE_PATH; a new kernel (unset or missing) has none."""
    monkeypatch.delenv("KZ_BASELINE_PATH", raising=False)
    assert baseline_best() is None
    path = tmp_path / "b.yaml"
    monkeypatch.setenv("KZ_BASELINE_PATH", str(path))
    assert baseline_best() is None
    path.write_text("best: {value: 2.0}\n")
    assert baseline_best() == 2.0


@pytest.mark.parametrize(
    ("args", "accepted", "start"),
    [
        ((False, 1.0, 10.0), False, "output does not match"),
        ((True, 9.0, None), True, "first result for this kernel"),
        ((True, 9.5, 10.0), True, "1.05x faster than current best"),  # exactly the margin
        ((True, 9.6, 10.0), False, "not 5% faster than current best"),
        ((True, 5.0, 10.0), True, "2.00x faster"),
    ],
)
def test_verdict_lower_is_better(
    args: tuple[bool, float, float | None], accepted: bool, start: str
) -> None:
    """Accepted when correct and at least `margin` below the best (or no best yet)."""
    ok, reason = verdict(*args)
    assert ok is accepted and reason.startswith(start)


def test_verdict_higher_is_better() -> None:
    """For throughput-like metrics the margin is measured upwards."""
    assert verdict(True, 105.0, 100.0, better="higher", unit="GB/s")[0]
    ok, reason = verdict(True, 104.0, 100.0, better="higher", unit="GB/s")
    assert not ok and reason.startswith("not 5% better than current best") and "GB/s" in reason
    assert verdict(True, 100.0, 100.0, margin=0.0)[0]


@pytest.mark.parametrize("kw", [{"better": "sideways"}, {"margin": 1.5}, {"margin": -0.1}])
def test_verdict_refuses_nonsense_settings(kw: dict[str, object]) -> None:
    with pytest.raises(HarnessError):
        verdict(True, 1.0, 2.0, **kw)  # type: ignore[arg-type]


def test_geomean() -> None:
    """Twice as fast on one workload and twice as slow on another cancel out."""
    assert math.isclose(geomean([2.0, 8.0]), 4.0)
    assert math.isclose(geomean([5.0]), 5.0)
    for bad in ([], [1.0, 0.0], [1.0, -2.0], [math.nan], [math.inf]):
        with pytest.raises(HarnessError):
            geomean(bad)
