"""Whether a result's figures are measurements: the validity gate (JUDGING.md item 8).

A figure counts only where the method could measure it, and a score only once its interval
has settled. Both rules are functions of the result document alone, so the judge (to know
when to sample longer), the referee (to commit, retry or call a run inconclusive), the index
(to rank and tie) and the confirmation rule apply the same ones, and a replay re-derives them.

- **Measured**: every workload's median, the candidate's and each rival's, is at least
  `RESOLVED_FACTOR` times the workload's `resolution` (what a call that does no work measures
  as by the same method). Below that the figure is mostly the harness's own cost.
- **Settled**: the 95 % interval the verdict rests on is narrower than `SETTLED_FACTOR`
  (high <= low x SETTLED_FACTOR): the score's (the speed-up over the board's reference), or,
  where no reference was measured, the candidate's own headline over its timed windows; and,
  beside an incumbent, the comparison's too, unless its whole interval lies below 1 (clearly
  slower: nothing is recorded, so there is nothing to settle).

A document from before resolutions were recorded (version 2 and older) is judged on what it
has: its figures count as measured (nothing says otherwise) and its stored intervals decide
whether it is settled.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kz_harness.sidebyside import speedup_interval

__all__ = [
    "RESOLVED_FACTOR",
    "SETTLED_FACTOR",
    "Validity",
    "agree",
    "is_settled",
    "validity",
]

RESOLVED_FACTOR = 10.0
SETTLED_FACTOR = 1.10
_RIVALS = ("incumbent", "reference")
_MAX_OWN_SAMPLES = 400


@dataclass(frozen=True, slots=True)
class Validity:
    """What the gate says of a document: whether its figures are measurements and its
    intervals settled; `spread` is the deciding interval's high over low less 1 (None when
    it has none) and `reason` one plain sentence when the document fails the gate."""

    measured: bool
    settled: bool
    spread: float | None = None
    reason: str = ""

    @property
    def valid(self) -> bool:
        return self.measured and self.settled


def is_settled(low: float, high: float) -> bool:
    """Whether an interval (of a positive ratio) is narrow enough to rank and record."""
    return 0 < low <= high <= low * SETTLED_FACTOR


def agree(a: Sequence[float], b: Sequence[float]) -> bool:
    """Whether two (estimate, low, high) measurements of one thing agree: each estimate lies
    inside the other's interval."""
    return a[1] <= b[0] <= a[2] and b[1] <= a[0] <= b[2]


def validity(document: Mapping[str, Any]) -> Validity:
    """The gate's answer for one result document (any version)."""
    workloads = [w for w in _list(document.get("workloads")) if isinstance(w, Mapping)]
    unmeasured = _unmeasured(workloads, _unit(document))
    if unmeasured:
        return Validity(False, False, None, unmeasured)
    decisive = _deciding_intervals(document, workloads)
    if not decisive:
        return Validity(True, False, None, "nothing was measured that gives an interval")
    spread = max(high / low - 1 for _, low, high in decisive)
    settled = all(is_settled(low, high) for _, low, high in decisive)
    reason = (
        ""
        if settled
        else f"the host was too noisy to tell: spread {spread:.0%}, where a settled result "
        f"is within {SETTLED_FACTOR - 1:.0%}"
    )
    return Validity(True, settled, spread, reason)


def _unmeasured(workloads: Sequence[Mapping[str, Any]], unit: str) -> str:
    """Why some figure is not a measurement ("" when every one is, or none says)."""
    for workload in workloads:
        resolution = _positive(workload.get("resolution"))
        if resolution is None:
            continue
        for who in ("candidate", *_RIVALS):
            stats = workload.get("stats" if who == "candidate" else who)
            median = _positive(stats.get("median")) if isinstance(stats, Mapping) else None
            if stats is None or (median is None and who != "candidate"):
                continue
            if median is None or median < RESOLVED_FACTOR * resolution:
                shown = "no figure" if median is None else f"{median:.4g} {unit}"
                return (
                    f"{workload.get('name')}: the {who}'s figure ({shown}) is within "
                    f"{RESOLVED_FACTOR:g}x of what this runner can resolve "
                    f"({resolution:.3g} {unit}): the workload is too small to measure here"
                )
    return ""


def _deciding_intervals(
    document: Mapping[str, Any], workloads: Sequence[Mapping[str, Any]]
) -> list[tuple[float, float, float]]:
    """The (estimate, low, high) intervals the verdict and the board rest on."""
    found = []
    score = _recomputed(workloads, "reference_speedup") or _stored(document.get("score"))
    if score is None:
        score = _own_interval(workloads)
    if score is not None:
        found.append(score)
    comparison = document.get("comparison")
    if isinstance(comparison, Mapping) and comparison.get("against") == "incumbent":
        against = _recomputed(workloads, "speedup") or _stored(comparison)
        if against is not None and against[2] >= 1:  # a clearly slower one settles nothing
            found.append(against)
    return found


def _recomputed(
    workloads: Sequence[Mapping[str, Any]], field: str
) -> tuple[float, float, float] | None:
    """The interval from every workload's block log-ratios under `field`, as the verdict
    derives it; None unless each workload has two or more."""
    groups = []
    for workload in workloads:
        figures = workload.get(field)
        ratios = figures.get("log_ratios") if isinstance(figures, Mapping) else None
        values = [r for r in _list(ratios) if _finite(r)]
        if len(values) < 2 or len(values) != len(_list(ratios)):
            return None
        groups.append([float(r) for r in values])
    return speedup_interval(groups) if groups else None


def _own_interval(workloads: Sequence[Mapping[str, Any]]) -> tuple[float, float, float] | None:
    """The candidate's headline interval over its timed windows (log figures resampled per
    workload), for a result with no rival to be a ratio over; None without samples."""
    groups = []
    for workload in workloads:
        stats = workload.get("stats")
        samples = stats.get("samples") if isinstance(stats, Mapping) else None
        values = [math.log(s) for s in _list(samples) if _finite(s) and s > 0]
        if len(values) < 2:
            return None
        step = math.ceil(len(values) / _MAX_OWN_SAMPLES)  # per-call samples of old documents
        groups.append(values[::step])
    return speedup_interval(groups) if groups else None


def _stored(figures: object) -> tuple[float, float, float] | None:
    """A stored (speed-up, [low, high]) as an interval, when all three are positive."""
    if not isinstance(figures, Mapping):
        return None
    interval = _list(figures.get("interval"))
    values = (figures.get("speedup"), *interval)
    if len(values) != 3 or not all(_finite(v) and v > 0 for v in values):
        return None
    return float(values[0]), float(values[1]), float(values[2])


def _unit(document: Mapping[str, Any]) -> str:
    metric = document.get("metric")
    return str(metric.get("unit", "")) if isinstance(metric, Mapping) else ""


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _positive(value: object) -> float | None:
    return float(value) if _finite(value) and float(value) > 0 else None  # type: ignore[arg-type]
