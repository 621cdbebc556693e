"""The pure parts of batched timing: how many calls a window holds, what one window says per
call, which calls are checked, and the judge's bound on the device times a worker reports.

A timed window is N calls back to back, each on its own freshly drawn inputs in its own slot;
the judge times the whole window with its own clock and the per-call figure is the window
over N (on a GPU, the mean of the N device times the worker reports, bounded by the window).
The channel's one round trip is paid once per window, so it is amortised rather than
subtracted: nothing is taken away from a figure, and a call that does nothing still measures
as what it costs (the workload's resolution).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

__all__ = [
    "LONGEST_WINDOW_BLOCKS",
    "MIN_CALL_NS",
    "Reservoir",
    "choose_batch",
    "device_time_problems",
    "median_spread",
    "per_call_ns",
    "window_time_problems",
]

MIN_CALL_NS = 500.0  # no call is taken as cheaper than this when sizing a window
# The slowest implementation's window may last this many block times (a second at 20 ms): a
# rival far slower than the candidate must not make every round take many seconds, and a
# tighter cap would leave the fast one's window too short to measure against the resolution.
LONGEST_WINDOW_BLOCKS = 50
_GAP_SPREADS = 4
_GAP_SHARE = 0.1
_GAP_SLACK_NS = 20_000


def choose_batch(
    per_call: Sequence[float], *, block_ns: float, capacity: int, longest_ns: float
) -> int:
    """Calls per window, the same for every implementation: enough that the fastest one's
    window lasts about `block_ns` (the channel's round trip is then a few per cent of it),
    few enough that the slowest one's stays within `longest_ns`, at most `capacity` (the
    slots' memory budget), at least one. `per_call` are the implementations' estimated
    per-call times in ns."""
    if not per_call:
        raise ValueError("choose_batch needs at least one implementation's per-call time")
    fastest = max(min(per_call), MIN_CALL_NS)
    slowest = max(max(per_call), MIN_CALL_NS)
    count = math.ceil(block_ns / fastest)
    count = min(count, max(1, int(longest_ns // slowest)))
    return max(1, min(count, capacity))


def per_call_ns(wall_ns: int, count: int, devices: Sequence[int] | None) -> float:
    """A window's per-call figure: its wall time over its calls on a CPU, the mean of the
    reported device times on a GPU."""
    if devices is not None:
        return sum(devices) / max(len(devices), 1)
    return wall_ns / max(count, 1)


def median_spread(values: Sequence[float]) -> tuple[float, float]:
    """The median and the median absolute deviation from it."""
    middle = statistics.median(values)
    return float(middle), float(statistics.median(abs(v - middle) for v in values))


class Reservoir:
    """The calls kept for the reference check: after each window, every call seen so far is
    equally likely to be among the `room` kept (reservoir sampling), so which calls are
    checked is decided after their windows, among all of them."""

    def __init__(self, room: int, rng: Any) -> None:
        self.room = room
        self.rng = rng
        self.seen = 0
        self.filled = 0

    def places(self, count: int) -> list[tuple[int, int]]:
        """For a window of `count` calls: (call in the window, place among the kept) for each
        call to keep, in order (a later call may take an earlier one's place)."""
        out = []
        for index in range(count):
            self.seen += 1
            if self.filled < self.room:
                out.append((index, self.filled))
                self.filled += 1
                continue
            place = int(self.rng.integers(0, self.seen))
            if place < self.room:
                out.append((index, place))
        return out


def device_time_problems(
    pairs: Sequence[tuple[float, float]], gap_ns: float, spread_ns: float = 0.0
) -> list[tuple[str, str]]:
    """(code, message) for each way reported device times break the judge's bound.

    `pairs` are (judge's wall ns, reported device ns) per timed call (a window's, per call);
    `gap_ns` is the wall time a no-op's events leave uncovered per call (its median over its
    windows) and `spread_ns` that time's median absolute deviation. The calls' median gap
    may exceed the no-op's by four deviations or a tenth of it, whichever is more, and 20 us:
    a worker that under-reports its device time by more shows it in the gap.
    """
    problems = []
    over = sum(1 for wall, device in pairs if device > wall)
    if over or sum(d for _, d in pairs) > sum(w for w, _ in pairs):
        problems.append(("timing_bound_broken", f"{over} calls reported more device time than "
                         "the judge's clock saw"))  # fmt: skip
    gaps = sorted(wall - device for wall, device in pairs)
    median_gap = gaps[len(gaps) // 2] if gaps else 0
    if median_gap > gap_ns + max(_GAP_SPREADS * spread_ns, _GAP_SHARE * gap_ns) + _GAP_SLACK_NS:
        problems.append(("work_outside_events", f"calls took {median_gap / 1e3:.1f} us more than "
                         f"their device events (a no-op: {gap_ns / 1e3:.1f} us): work ran on "
                         "another stream or after the end event"))  # fmt: skip
    return problems


def window_time_problems(
    windows: Sequence[tuple[int, Sequence[int]]], gap_ns: float, spread_ns: float = 0.0
) -> list[tuple[str, str]]:
    """The bound on a batch's device times: (window wall ns, each call's device ns) per
    window. No call, and no window's calls together, may report more than the window the
    judge saw; per call, the window left uncovered may exceed the no-op's only a little."""
    pairs: list[tuple[float, float]] = []
    single_over = 0
    for wall, devices in windows:
        count = max(len(devices), 1)
        single_over += sum(1 for device in devices if device > wall)
        pairs.append((wall / count, sum(devices) / count))
    problems = device_time_problems(pairs, gap_ns, spread_ns)
    if single_over and not any(code == "timing_bound_broken" for code, _ in problems):
        problems.insert(0, ("timing_bound_broken", f"{single_over} calls reported more device "
                            "time than their whole window took"))  # fmt: skip
    return problems
