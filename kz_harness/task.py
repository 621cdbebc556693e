"""What a judge task shares across its workloads, and the judge's readings of a worker from
outside it: the candidate's flags, the rivals' fates, a workload's figures, what the runner
sees of a worker (its processes, threads and CPU time) and the checked calls' summary.

A fault is read the same way whoever made it (`check_alone`, `cpu_account`); what follows
depends on whose it is: the candidate's is a flag, a rival's voids the rival.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kz_harness.checks import Check
from kz_harness.errors import HarnessError
from kz_harness.link import Control, Link
from kz_harness.rivals import RivalBook
from kz_harness.stats import Stats

__all__ = [
    "Beside",
    "Flags",
    "Measured",
    "Task",
    "check_alone",
    "cpu_account",
    "summarised",
]

CPU_SLACK_NS = 25_000_000  # two 10 ms clock ticks, where CPU time is counted in ticks
CPU_RATIO = 1.05


@dataclass(slots=True)
class Flags:
    """What the judge saw of the candidate that asks a maintainer for a look."""

    items: dict[str, str] = field(default_factory=dict)

    def add(self, code: str, message: str) -> None:
        self.items.setdefault(code, message)

    def to_list(self) -> list[dict[str, str]]:
        return [{"code": code, "message": message} for code, message in self.items.items()]


@dataclass(slots=True)
class Task:
    """What every workload of one judge task shares: the workers, the secret streams, the
    candidate's flags and the rivals' fates."""

    np: Any
    control: Control
    calibration: Link
    candidate: Link
    rivals: dict[str, Link]  # the live ones; a voided rival is removed (and killed)
    book: RivalBook
    flags: Flags
    inputs_rng: Any
    pick_rng: Any
    baseline: Mapping[str, int]
    confirming: bool = False

    def void(self, name: str, code: str, reason: str) -> None:
        """Void rival `name`: its comparison is dropped for the task, its worker killed."""
        self.book.void(name, code, reason)
        link = self.rivals.pop(name, None)
        if link is not None:
            with contextlib.suppress(HarnessError):  # gone already: nothing of it is read again
                self.control.kill(link)


@dataclass(frozen=True, slots=True)
class Beside:
    """A rival measured beside the candidate: its figures, and one log-ratio (candidate over
    rival) per round."""

    stats: Stats
    log_ratios: list[float]


@dataclass(slots=True)
class Measured:
    """One workload's figures: the candidate's per-call figures (one per timed window), the
    resolution, the calls per window, the channel's round trip, the checks, the candidate's
    CPU account and each rival measured beside it."""

    stats: Stats
    resolution_ns: float
    batch: int
    round_trip_ns: float
    checks: list[Check]
    cpu: dict[str, int]
    beside: dict[str, Beside] = field(default_factory=dict)


def check_alone(
    control: Control, link: Link, baseline: Mapping[str, int], when: str
) -> list[tuple[str, str]]:
    """What the runner sees of a worker beyond what the trusted calibration worker, loaded
    the same way, has: one process, its serving thread and the threads the device's runtime
    starts (CUDA's, on a GPU). (code, message) per excess."""
    seen = control.inspect(link)
    found = []
    if seen["processes"] > 1:
        found.append(("extra_processes", f"the worker had {seen['processes']} processes {when}"))
    allowed = max(int(baseline["threads"]), 1) + seen["processes"] - 1
    if seen["threads"] > allowed:
        message = f"the worker had {seen['threads']} threads {when}, the trusted one {allowed}"
        found.append(("extra_threads", message))
    return found


def cpu_account(
    before: Mapping[str, int], after: Mapping[str, int], windows_ns: int
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A worker's CPU between two readings of the runner's, against the wall time of its
    windows: the account, and (code, message) for CPU spent outside the windows by its
    serving thread or in anything but that thread (another thread or process at work)."""
    main = max(after["main_cpu_ns"] - before["main_cpu_ns"], 0)
    other = max(after["cpu_ns"] - before["cpu_ns"] - main, 0)  # ticks can disagree by one
    found = []
    if main > windows_ns * CPU_RATIO + CPU_SLACK_NS:
        found.append((
            "work_outside_window",
            f"the worker's serving thread used {main / 1e6:.1f} ms of CPU in calls that took "
            f"{windows_ns / 1e6:.1f} ms",
        ))  # fmt: skip
    if other > CPU_SLACK_NS:
        found.append((
            "background_work",
            f"other threads or processes of the worker used {other / 1e6:.1f} ms of CPU while "
            "it was timed",
        ))  # fmt: skip
    return {"main_cpu_ns": main, "other_cpu_ns": other, "windows_ns": windows_ns}, found


def summarised(name: str, checks: list[Check]) -> list[Check]:
    """One check per workload: the worst of its checked calls (all of them must pass)."""
    if not checks:
        return []
    failed = [c for c in checks if not c.passed]
    if failed:
        worst = failed[0]
        reason = f"{len(failed)} of {len(checks)} checked calls failed: {worst.reason}"
        return [Check(name, worst.max_abs_err, worst.max_rel_err, worst.atol, worst.rtol, False,
                      reason)]  # fmt: skip
    worst_abs = max(c.max_abs_err for c in checks)
    worst_rel = max(c.max_rel_err for c in checks)
    first = checks[0]
    return [Check(name, worst_abs, worst_rel, first.atol, first.rtol, True)]
