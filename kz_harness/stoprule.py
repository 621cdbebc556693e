"""When the judge stops sampling a workload: the side-by-side stop rule after each round, and
the validity gate's word once the budget is spent.

The rule only decides when to stop; the verdict and the score are computed afterwards from
every round (`kz_harness.sidebyside`), and the platform re-derives them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from kz_harness.sidebyside import RESAMPLES, decisive, speedup_interval
from kz_harness.validity import SETTLED_FACTOR, validity

__all__ = ["settled", "unsettled"]

# A look after each round only decides whether to sample on: a coarser bootstrap will do (the
# verdict's interval, the judge's and the referee's, takes the full RESAMPLES).
LOOK_RESAMPLES = 500
# How much of the mean's room a workload may take: its bound is the mean's at 0.8 sqrt(k).
_SPARE = 0.8


def settled(
    log_ratios: Mapping[str, Sequence[float]], margin: float, *, confirming: bool = False
) -> bool:
    """Whether sampling can stop, from each live rival's per-round log-ratios: at once when
    the interval against the incumbent falls short of the margin (a result not faster goes on
    no board); when it clears the margin, once it is also narrower than the margin, since a
    faster result's speed-up is a figure the board and the commit show and must come out the
    same in another task; and once the interval against the reference, whose speed-up is the
    board's score, is narrower than the margin. A confirmation run measures as the run it
    confirms did, its incumbent being main's copy of the same source, and so waits for the
    score alone. Without an interval, never. A look takes a coarse bootstrap; a look that would
    stop is made again with the full one the result's intervals take, so a workload never
    stops on an interval its result does not show."""
    ratios = {name: r for name, r in log_ratios.items() if len(r) >= 2}
    if confirming:
        ratios.pop("incumbent", None)
    return _stops(ratios, margin, LOOK_RESAMPLES) and _stops(ratios, margin, RESAMPLES)


def _stops(log_ratios: Mapping[str, Sequence[float]], margin: float, resamples: int) -> bool:
    intervals = {
        name: speedup_interval([ratios], resamples=resamples)[1:]
        for name, ratios in log_ratios.items()
    }
    if "incumbent" in intervals:
        low, high = intervals["incumbent"]
        if not decisive(low, high, margin):
            return False
        if high < 1 + margin:
            return True
        if high > low * (1 + margin):
            return False
    if "reference" in intervals:
        low, high = intervals["reference"]
        return high <= low * (1 + margin)
    return bool(intervals)


def unsettled(
    name: str,
    resolution: Sequence[float],
    candidate: Sequence[float],
    rivals: Mapping[str, Sequence[float]],
    log_ratios: Mapping[str, Sequence[float]],
    *,
    workloads: int = 1,
) -> bool:
    """Whether the validity gate reads one workload's figures (per-call, one per window) as
    measured but not yet settled: sampling longer may settle them, it cannot make them
    measured. The gate settles the result's interval, the mean over its `workloads`, whose
    width is about one workload's over sqrt(workloads): one workload of several is settled
    enough a little short of that, at SETTLED_FACTOR ** (0.8 sqrt(workloads)) (1.114 for two,
    1.165 for four), which leaves the mean a fifth of its bound to spare."""
    entry: dict[str, Any] = {
        "name": name,
        "resolution": _median(resolution),
        "stats": {"median": _median(candidate), "samples": list(candidate)},
    }
    for rival, values in rivals.items():
        entry[rival] = {"median": _median(values)}
        key = "speedup" if rival == "incumbent" else f"{rival}_speedup"
        entry[key] = {"log_ratios": list(log_ratios.get(rival, ()))}
    document: dict[str, Any] = {"metric": {"unit": "ns"}, "workloads": [entry]}
    if "incumbent" in rivals:
        document["comparison"] = {"against": "incumbent"}
    gate = validity(document)
    if not gate.measured or gate.settled:
        return False
    if gate.spread is None:
        return True
    bound: float = SETTLED_FACTOR ** max(1.0, _SPARE * math.sqrt(workloads))
    return 1 + gate.spread > bound


def _median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None
