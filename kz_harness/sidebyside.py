"""The side-by-side verdict: a speed-up over the incumbent with a confidence interval.

The judge times the challenger and the incumbent in interleaved blocks on the same inputs;
each pair of blocks gives one log-ratio, log(median challenger / median incumbent). Per
workload the estimate is the 20 % trimmed mean of its log-ratios (a burst of host noise that
lands on one side of a pair moves it no more than any other block); across workloads, the mean
of those (the geometric mean of the ratios). The interval is a stratified percentile
bootstrap: blocks are resampled within each workload, so a workload with more blocks does not
weigh more. The bootstrap's generator is seeded from nothing but the samples, so the same
samples always give the same interval (a replay re-derives it).

Outcomes, with the speed-up S = incumbent time / challenger time and the board's margin m:
*faster* when the whole interval is above 1 + m, *not faster* when the whole interval is below
it, *inconclusive* otherwise (the judge samples more within its budget first).
"""

from __future__ import annotations

import hashlib
import math
import random
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist, fmean
from typing import Any

from kz_harness.errors import HarnessError

__all__ = [
    "FASTER",
    "INCONCLUSIVE",
    "NOT_FASTER",
    "Comparison",
    "compare_side_by_side",
    "decisive",
    "document_verdict",
    "reference_score",
    "small_sample_factor",
    "speedup_interval",
    "trimmed_mean",
]

FASTER = "faster"
NOT_FASTER = "not_faster"
INCONCLUSIVE = "inconclusive"
CONFIDENCE = 0.95
RESAMPLES = 2000
TRIM = 0.2  # the share of block log-ratios left out at each end of a workload's estimate


def trimmed_mean(values: Sequence[float], trim: float = TRIM) -> float:
    """The mean of `values` without the `trim` share at each end (none when too few)."""
    ordered = sorted(values)
    cut = int(trim * len(ordered))
    return fmean(ordered[cut : len(ordered) - cut])


def _seed(groups: Sequence[Sequence[float]]) -> int:
    digest = hashlib.sha256()
    for group in groups:
        digest.update(struct.pack(f"<{len(group) + 1}d", float(len(group)), *group))
    return int.from_bytes(digest.digest()[:8], "little")


def speedup_interval(
    log_ratios: Sequence[Sequence[float]],
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
) -> tuple[float, float, float]:
    """(speed-up, low, high) from per-workload lists of block log-ratios (challenger over
    incumbent, so a negative log-ratio is a speed-up)."""
    groups = [list(map(float, g)) for g in log_ratios]
    if not groups or any(len(g) < 2 for g in groups):
        raise HarnessError("each workload needs at least two block pairs for an interval")
    if not 0 < confidence < 1:
        raise HarnessError(f"confidence must be within (0, 1), got {confidence}")
    estimate = fmean([trimmed_mean(g) for g in groups])
    rng = random.Random(_seed(groups))
    draws = sorted(
        fmean([trimmed_mean(rng.choices(g, k=len(g))) for g in groups]) for _ in range(resamples)
    )
    tail = (1 - confidence) / 2
    widen = small_sample_factor(min(len(g) for g in groups), confidence)
    low = estimate - widen * (estimate - draws[int(tail * (resamples - 1))])
    high = estimate + widen * (draws[math.ceil((1 - tail) * (resamples - 1))] - estimate)
    # A smaller log-ratio is a bigger speed-up: the interval's ends swap.
    return math.exp(-estimate), math.exp(-high), math.exp(-low)


def small_sample_factor(n: int, confidence: float = CONFIDENCE) -> float:
    """How much wider a percentile bootstrap interval over `n` blocks must be to cover as a
    Student t interval does: the bootstrap's spread is the plug-in one, too narrow by
    sqrt(n / (n - 1)), and its tails are the normal's where the mean of n has t's with n - 1
    degrees of freedom. Early in adaptive sampling (6 blocks: x1.44) this is what keeps the
    looks after each block from deciding on luck; by 30 blocks it is x1.06."""
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    v = max(n - 1, 1)
    # Cornish-Fisher expansion of t's quantile (good to 1e-3 from 4 degrees of freedom).
    t = (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
    )
    return t / z * math.sqrt(n / v)


def reference_score(log_ratios: Sequence[Sequence[float]]) -> dict[str, object]:
    """The board's score of a challenger: its speed-up over the board's pinned reference,
    measured side by side, with the interval (the `score` of the result document)."""
    speedup, low, high = speedup_interval(log_ratios)
    return {
        "against": "reference",
        "speedup": speedup,
        "interval": [low, high],
        "confidence": CONFIDENCE,
        "blocks": sum(len(group) for group in log_ratios),
    }


def decisive(low: float, high: float, margin: float) -> bool:
    """Whether an interval clears the margin or falls short of it."""
    return low > 1 + margin or high < 1 + margin


@dataclass(frozen=True, slots=True)
class Comparison:
    """The verdict of a side-by-side run and its one-line reason."""

    outcome: str
    speedup: float
    low: float
    high: float
    margin: float
    reason: str

    @property
    def faster(self) -> bool:
        return self.outcome == FASTER

    def to_dict(self) -> dict[str, object]:
        return {
            "against": "incumbent",
            "outcome": self.outcome,
            "speedup": self.speedup,
            "interval": [self.low, self.high],
            "confidence": CONFIDENCE,
            "margin": self.margin,
            "reason": self.reason,
        }


def compare_side_by_side(log_ratios: Sequence[Sequence[float]], margin: float) -> Comparison:
    """The outcome for the challenger, its speed-up over the incumbent and the interval."""
    if not 0 <= margin < 1:
        raise HarnessError(f"margin must be a fraction in [0, 1), got {margin}")
    speedup, low, high = speedup_interval(log_ratios)
    figures = (
        f"{speedup:.3g}x the incumbent's speed, side by side "
        f"({CONFIDENCE:.0%} interval {low:.3g}-{high:.3g}x, margin {margin:.0%})"
    )
    if low > 1 + margin:
        return Comparison(FASTER, speedup, low, high, margin, f"faster: {figures}")
    if high < 1 + margin:
        return Comparison(NOT_FASTER, speedup, low, high, margin, f"not faster: {figures}")
    return Comparison(INCONCLUSIVE, speedup, low, high, margin, f"inconclusive: {figures}")


def _log_ratios(document: Mapping[str, Any], field: str) -> list[list[float]] | None:
    """Every workload's block log-ratios under `field`; None unless each has two or more."""
    workloads = document.get("workloads")
    if not isinstance(workloads, list) or not workloads:
        return None
    groups: list[list[float]] = []
    for workload in workloads:
        figures = workload.get(field) if isinstance(workload, dict) else None
        ratios = figures.get("log_ratios") if isinstance(figures, dict) else None
        if not isinstance(ratios, list) or len(ratios) < 2:
            return None
        if not all(isinstance(r, int | float) and math.isfinite(r) for r in ratios):
            return None
        groups.append([float(r) for r in ratios])
    return groups


def document_verdict(document: Mapping[str, Any]) -> tuple[bool, str] | None:
    """The platform's verdict on a result document that carries side-by-side samples against
    the incumbent: (accepted, reason), re-derived from the block log-ratios with the board's
    margin, whatever the document says of itself; None for a document without them (a first
    result, an incumbent that could not be measured, or a judge from before side-by-side
    verdicts), whose own verdict stands.

    A wrong output is never accepted; a correct one is accepted only when *faster*. The same
    samples give the same verdict (the bootstrap is seeded from them), so a replay of the log
    re-derives every verdict the referee appended.
    """
    comparison = document.get("comparison")
    if not isinstance(comparison, dict) or comparison.get("against") != "incumbent":
        return None
    ratios = _log_ratios(document, "speedup")
    margin = comparison.get("margin")
    if ratios is None or not isinstance(margin, int | float) or not 0 <= margin < 1:
        return None
    correctness = document.get("correctness")
    if not isinstance(correctness, dict) or correctness.get("passed") is not True:
        return False, str(document.get("reason") or "output does not match the reference")
    verdict = compare_side_by_side(ratios, float(margin))
    return verdict.faster, verdict.reason


def document_score(document: Mapping[str, Any]) -> tuple[float, float, float] | None:
    """(speed-up, low, high) of a result document's score against the board's reference."""
    score = document.get("score")
    if not isinstance(score, dict) or score.get("against") != "reference":
        return None
    speedup, interval = score.get("speedup"), score.get("interval")
    if not isinstance(interval, list) or len(interval) != 2:
        return None
    figures = (speedup, *interval)
    if not all(isinstance(x, int | float) and math.isfinite(x) and x > 0 for x in figures):
        return None
    return float(figures[0]), float(figures[1]), float(figures[2])


def confirmation_verdict(
    document: Mapping[str, Any], confirmed: Sequence[float] | None
) -> tuple[bool, str]:
    """(agrees, reason) of a confirmation run: a second, independent measurement of a result
    that took rank 1 on its board. It agrees when its output is correct and its score's
    interval overlaps the confirmed result's (`confirmed`: speed-up, low, high)."""
    correctness = document.get("correctness")
    if not isinstance(correctness, dict) or correctness.get("passed") is not True:
        return False, "disagrees: the confirmation run's output does not match the reference"
    score = document_score(document)
    if score is None:
        return False, "disagrees: the confirmation run has no score against the board's reference"
    if confirmed is None or len(confirmed) != 3:
        return False, "disagrees: the confirmed result has no score to compare with"
    speedup, low, high = score
    first, first_low, first_high = (float(x) for x in confirmed)
    agrees = low <= first_high and first_low <= high
    figures = (
        f"{speedup:.3g}x the reference ({low:.3g}-{high:.3g}x) on this run, "
        f"{first:.3g}x ({first_low:.3g}-{first_high:.3g}x) on the confirmed one"
    )
    return agrees, f"{'agrees' if agrees else 'disagrees'}: {figures}"
