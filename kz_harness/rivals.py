"""What became of each rival the runner offered: measured beside the candidate, or voided.

A rival (the kernel's incumbent, main's `src/`, or the board's pinned reference) is untrusted
code like the candidate. When it fails to load, raises or dies in a call, returns a wrong or
mistyped output, changes its inputs, or leaves processes, threads or CPU work running, it is
*voided*: its comparison is dropped for the task, the candidate goes on measured against the
rivals that remain, and nothing the rival did lands on the candidate (no flag, no failed
check). The document's `rivals` records the fact with a snake_case `code`; the platform
decides what follows (a retry, a flag on main's source for the board's maintainers).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "ABSENT",
    "MEASURED",
    "RIVALS",
    "VOIDED",
    "RivalBook",
    "RivalStatus",
    "void_code",
]

# What a runner can start beside the candidate: the kernel's incumbent (the verdict is against
# it) and the board's pinned reference (the board's score is against it).
RIVALS = ("incumbent", "reference")
MEASURED = "measured"
VOIDED = "voided"
ABSENT = "absent"

# The candidate's flag for a fault, and the rival's void code for the same fault.
_CODES = {
    "extra_processes": "work_left_running",
    "extra_threads": "work_left_running",
    "background_work": "work_left_running",
    "work_outside_window": "work_left_running",
    "late_output": "late_output",
    "inputs_changed": "inputs_changed",
    "timing_bound_broken": "timing_bound_broken",
    "work_outside_events": "timing_bound_broken",
}
_STAGES = {"load": "load_failed", "call": "call_failed", "output": "mistyped_output"}
_MAX_REASON = 2000  # what a result document's reasons hold


def void_code(*, flag: str = "", stage: str = "") -> str:
    """The void code of a rival's fault: from the flag a candidate would get for it, or from
    the step its worker failed in."""
    if flag:
        return _CODES.get(flag, flag)
    return _STAGES.get(stage, "call_failed")


@dataclass(frozen=True, slots=True)
class RivalStatus:
    """One rival's fate in a task."""

    status: str
    code: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"status": self.status, "code": self.code, "reason": self.reason}


class RivalBook:
    """The status of every rival the runner offered; a voided one stays voided."""

    def __init__(self, offered: Iterable[str]) -> None:
        self.offered = [name for name in RIVALS if name in set(offered)]
        self._voided: dict[str, RivalStatus] = {}
        self._measured: set[str] = set()

    def void(self, name: str, code: str, reason: str) -> None:
        """Void `name` (the first cause is kept)."""
        if name not in self._voided:
            self._voided[name] = RivalStatus(VOIDED, code, reason[:_MAX_REASON])

    def voided(self, name: str) -> bool:
        return name in self._voided

    def measured(self, name: str) -> None:
        """`name` has figures beside the candidate (unless it is voided later)."""
        self._measured.add(name)

    def live(self, names: Iterable[str]) -> list[str]:
        """Those of `names` not voided."""
        return [name for name in names if name not in self._voided]

    def reason(self, name: str) -> str:
        found = self._voided.get(name)
        return found.reason if found is not None else ""

    def to_dict(self) -> dict[str, dict[str, str]]:
        """The document's `rivals`: one entry per rival offered."""
        out = {}
        for name in self.offered:
            if name in self._voided:
                status = self._voided[name]
            elif name in self._measured:
                status = RivalStatus(MEASURED, MEASURED, "measured beside the candidate")
            else:
                status = RivalStatus(
                    ABSENT, "not_measured", "the task ended before it could be measured"
                )
            out[name] = status.to_dict()
        return out
