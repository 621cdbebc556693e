"""Summary statistics of timing samples, the tie rule, and the physical-floor check.

Percentiles use linear interpolation between order statistics (numpy's default), so p50 of
an even-sized sample is the mean of the two middle values, like the median.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kz_harness.errors import HarnessError

__all__ = [
    "UNITS",
    "Stats",
    "below_physical_floor",
    "percentile",
    "physical_floor",
    "tie",
]

UNITS: dict[str, float] = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) of already sorted values, linearly interpolated."""
    if not sorted_values:
        raise HarnessError("percentile needs at least one value, got none")
    if not 0.0 <= q <= 1.0:
        raise HarnessError(f"percentile q must be within [0, 1], got {q}")
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def _outliers(values: Sequence[float], ordered: Sequence[float]) -> list[float]:
    q1, q3 = percentile(ordered, 0.25), percentile(ordered, 0.75)
    fence = 1.5 * (q3 - q1)
    return [v for v in values if v < q1 - fence or v > q3 + fence]


def _unit_factor(unit: str) -> float:
    if unit not in UNITS:
        raise HarnessError(f"unit must be one of {sorted(UNITS)}, got {unit!r}")
    return UNITS[unit]


@dataclass(frozen=True, slots=True)
class Stats:
    """Every sample of a timing run and its summary, in one unit.

    `sem` is the standard error of the mean (stdev / sqrt(n)); `outliers` are the samples
    outside [Q1 - 1.5 IQR, Q3 + 1.5 IQR], kept in `samples` too; `stop` says why sampling
    ended (converged, budget, max_samples, or given when built from samples directly).
    """

    samples: tuple[float, ...]
    unit: str
    median: float
    mean: float
    stdev: float
    min: float
    max: float
    p10: float
    p90: float
    sem: float
    outliers: tuple[float, ...]
    stop: str = "given"
    notes: tuple[str, ...] = field(default=())

    @classmethod
    def from_samples(
        cls,
        samples: Sequence[float],
        *,
        unit: str = "us",
        stop: str = "given",
        notes: Sequence[str] = (),
    ) -> Stats:
        """Summarise samples; a single sample has stdev, sem and outliers of zero/none."""
        _unit_factor(unit)
        values = tuple(float(v) for v in samples)
        if not values:
            raise HarnessError("Stats need at least one sample, got none")
        if not all(math.isfinite(v) for v in values):
            raise HarnessError("timing samples must be finite numbers, got NaN or Inf")
        ordered = sorted(values)
        stdev = statistics.stdev(values) if len(values) > 1 else 0.0
        return cls(
            samples=values,
            unit=unit,
            median=statistics.median(ordered),
            mean=statistics.fmean(values),
            stdev=stdev,
            min=ordered[0],
            max=ordered[-1],
            p10=percentile(ordered, 0.10),
            p90=percentile(ordered, 0.90),
            sem=stdev / math.sqrt(len(values)),
            outliers=tuple(_outliers(values, ordered)),
            stop=stop,
            notes=tuple(notes),
        )

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def rel_sem(self) -> float:
        """SEM as a fraction of the mean (0.001 is 0.1 %)."""
        return self.sem / self.mean if self.mean else math.inf

    def to_unit(self, unit: str) -> Stats:
        """The same run expressed in another time unit."""
        scale = _unit_factor(self.unit) / _unit_factor(unit)
        return Stats.from_samples(
            [v * scale for v in self.samples], unit=unit, stop=self.stop, notes=self.notes
        )

    def to_dict(self) -> dict[str, Any]:
        """The `stats` object of a result document's workload, with every sample."""
        return {
            "median": self.median,
            "mean": self.mean,
            "stdev": self.stdev,
            "min": self.min,
            "max": self.max,
            "p10": self.p10,
            "p90": self.p90,
            "sem": self.sem,
            "n": self.n,
            "unit": self.unit,
            "stop": self.stop,
            "outliers": list(self.outliers),
            "samples": list(self.samples),
            "notes": list(self.notes),
        }


def tie(a: Stats, b: Stats) -> bool:
    """True when the p10-p90 spreads of two runs overlap: neither is shown as faster."""
    b = b.to_unit(a.unit) if b.unit != a.unit else b
    return a.p10 <= b.p90 and b.p10 <= a.p90


def physical_floor(
    *,
    bytes_moved: float = 0.0,
    flops: float = 0.0,
    peak_bytes_per_s: float | None = None,
    peak_flops_per_s: float | None = None,
) -> float:
    """The least time in seconds the work can take: memory traffic or math at peak rate."""
    floors = [0.0]
    if bytes_moved and peak_bytes_per_s:
        floors.append(bytes_moved / peak_bytes_per_s)
    if flops and peak_flops_per_s:
        floors.append(flops / peak_flops_per_s)
    if len(floors) == 1:
        raise HarnessError(
            "physical_floor needs bytes_moved with peak_bytes_per_s or flops with "
            "peak_flops_per_s, got neither pair"
        )
    return max(floors)


def below_physical_floor(stats: Stats, floor_s: float) -> bool:
    """True when the median is faster than physics allows: flag the result, do not trust it."""
    return stats.median * _unit_factor(stats.unit) < floor_s
