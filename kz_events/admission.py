"""The admission rules of a submission, as one pure function: `admit(kernel_id, submitter_id,
facts, now)` raises `RuleViolation` when a rule refuses it.

`decide(Submit)` applies them; the API also asks before it reads the package, with the facts it
has by then, so a refused upload costs no validation and leaves no trace. In order: another
submitter's optimisation lease (`claim_held`), the open-submission quota (`quota_exceeded`), the
resubmission rate (`rate_limited`), an identical package still open (`duplicate_package`), and a
changed judge (`harness_change_forbidden`).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import msgspec

from kz_events.errors import RuleViolation
from kz_events.kernel_lease import KernelLease, held_by_another

__all__ = ["DEFAULT_RESUBMIT_LIMIT", "DEFAULT_RESUBMIT_WINDOW_S", "Admission", "admit"]

DEFAULT_RESUBMIT_LIMIT = 6  # submissions of one kernel by one submitter per window
DEFAULT_RESUBMIT_WINDOW_S = 3600.0


class Admission(msgspec.Struct, frozen=True, kw_only=True):
    """The facts the admission rules of a submission weigh, gathered by the shell (the API's
    read models and its package check). The defaults admit anything."""

    kernel_lease: KernelLease | None = None  # the kernel's optimisation lease, if any
    open_submissions: int = 0  # the submitter's submissions still queued or running
    max_open_submissions: int | None = None  # None: no quota
    open_twin: str | None = None  # an open submission of this kernel with the same package
    judge_changes: list[str] = msgspec.field(default_factory=list)  # judge files it changes
    board_judge: str | None = None  # compared with the board's judge: that judge's kernel
    maintainer: bool = False  # maintainers may change a judge
    # When this submitter submitted this kernel before (confirmation runs and retries are not
    # submissions of theirs), and how many the rate allows per window (None: no limit).
    recent_submissions: list[datetime] = msgspec.field(default_factory=list)
    resubmit_limit: int | None = None
    resubmit_window_s: float = DEFAULT_RESUBMIT_WINDOW_S


def _refuse(code: str, message: str, **details: Any) -> RuleViolation:
    return RuleViolation(message, code=code, details=details)


def admit(kernel_id: str, submitter_id: str, facts: Admission, now: datetime) -> None:
    """The admission rules, in the module docstring's order."""
    lease = facts.kernel_lease
    if lease is not None and held_by_another(lease, submitter_id, now):
        until = lease.expires_at.isoformat() if lease.expires_at else None
        raise _refuse(
            "claim_held",
            f"{lease.holder} holds the optimisation lease on {kernel_id} until {until}",
            holder=lease.holder,
            expires_at=until,
        )
    limit = facts.max_open_submissions
    if limit is not None and facts.open_submissions >= limit:
        raise _refuse(
            "quota_exceeded",
            f"at most {limit} open submissions per submitter, {submitter_id} has "
            f"{facts.open_submissions}",
            limit=limit,
        )
    _check_rate(kernel_id, submitter_id, facts, now)
    if facts.open_twin is not None:
        raise _refuse(
            "duplicate_package",
            f"an identical package for {kernel_id} is still open as submission {facts.open_twin}",
            submission_id=facts.open_twin,
        )
    if facts.judge_changes and not facts.maintainer:
        _refuse_judge_change(kernel_id, facts)


def _check_rate(kernel_id: str, submitter_id: str, facts: Admission, now: datetime) -> None:
    """At most `resubmit_limit` submissions of one kernel by one submitter within any window
    of `resubmit_window_s`: the next is refused until the oldest in the window ages out (a
    resubmission fishing for a lucky timing gets a few tries an hour, not hundreds)."""
    limit = facts.resubmit_limit
    if limit is None:
        return
    window = timedelta(seconds=facts.resubmit_window_s)
    recent = sorted(t for t in facts.recent_submissions if t > now - window)
    if len(recent) < limit:
        return
    frees_at = recent[len(recent) - limit] + window
    retry_after = max(1, math.ceil((frees_at - now).total_seconds()))
    raise _refuse(
        "rate_limited",
        f"at most {limit} submissions of {kernel_id} per {_duration(window)} by one submitter; "
        f"{submitter_id} made {len(recent)} in the last {_duration(window)}: retry in "
        f"{_duration(timedelta(seconds=retry_after))}",
        limit=limit,
        window_s=facts.resubmit_window_s,
        retry_after_s=retry_after,
        retry_at=frees_at.isoformat(),
    )


def _duration(span: timedelta) -> str:
    seconds = round(span.total_seconds())
    if seconds % 3600 == 0 and seconds >= 3600:
        hours = seconds // 3600
        return "hour" if hours == 1 else f"{hours} hours"
    if seconds >= 120:
        return f"{math.ceil(seconds / 60)} min"
    return f"{seconds} s"


def _refuse_judge_change(kernel_id: str, facts: Admission) -> None:
    changed = list(facts.judge_changes)
    if facts.board_judge is not None:
        board = kernel_id.rsplit("/", 1)[0]
        raise _refuse(
            "harness_change_forbidden",
            f"a new kernel on board {board} must carry the board's judge (that of "
            f"{facts.board_judge}); these differ: {', '.join(changed)}",
            changed=changed,
            board=board,
            board_judge=facts.board_judge,
        )
    raise _refuse(
        "harness_change_forbidden",
        f"only maintainers may change the judge of {kernel_id}: {', '.join(changed)}",
        changed=changed,
    )
