"""The lifecycle rules as pure functions: `decide(state, command)` and `evolve(state, event)`.

A submission goes `queued → running(attempt) → accepted → committed`, or ends `rejected`,
`failed` or `cancelled`. A kernel's optimisation lease is claimed, renewed, released or expires.
Nothing here reads a clock, the environment, the network or the disk: time comes from events.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum
from typing import Any

import msgspec

from kz_events.admission import Admission, admit
from kz_events.errors import RuleViolation
from kz_events.events import (
    Event,
    EventMeta,
    PackageSummary,
    SubmissionAccepted,
    SubmissionCancelled,
    SubmissionClaimed,
    SubmissionCommitted,
    SubmissionConfirmed,
    SubmissionDisputed,
    SubmissionDisqualified,
    SubmissionFailed,
    SubmissionRejected,
    SubmissionRequeued,
    SubmissionResult,
    SubmissionSubmitted,
    SubmissionSuspectCleared,
    SubmissionSuspected,
    SuspectReason,
    TripwireHit,
    UnknownEvent,
)
from kz_events.kernel_lease import (
    ClaimKernel,
    KernelLease,
    ReleaseKernel,
    decide_lease,
    evolve_lease,
    fold_lease,
    held_by_another,
)
from kz_events.provenance import Provenance
from kz_events.result import ResultDocument, result_flags
from kz_events.ruling import FAILURE_OUTCOMES, Facts, MetricSpec, Ruling, Verdict, rule

__all__ = [
    "FAILURE_OUTCOMES",
    "HOLDER_GONE_AFTER",
    "OPEN",
    "RELEASED_PHASE",
    "TERMINAL",
    "Admission",
    "Cancel",
    "Claim",
    "ClaimKernel",
    "ClearSuspect",
    "Commit",
    "Disqualify",
    "Fail",
    "FlagRival",
    "Judge",
    "KernelLease",
    "MarkSuspect",
    "MetricSpec",
    "ReleaseKernel",
    "ReportResult",
    "Status",
    "SubmissionState",
    "Submit",
    "admit",
    "decide",
    "decide_lease",
    "evolve",
    "evolve_lease",
    "fold",
    "fold_lease",
    "held_by_another",
    "lease_lapsed",
    "suspect_reasons",
]


class Status(StrEnum):
    NEW = "new"
    QUEUED = "queued"
    RUNNING = "running"
    ACCEPTED = "accepted"
    COMMITTED = "committed"
    REJECTED = "rejected"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CONFIRMED = "confirmed"  # a confirmation run that agreed with the result it confirms
    DISPUTED = "disputed"  # one that did not


TERMINAL = frozenset(
    {
        Status.COMMITTED,
        Status.REJECTED,
        Status.FAILED,
        Status.CANCELLED,
        Status.CONFIRMED,
        Status.DISPUTED,
    }
)
OPEN = frozenset({Status.QUEUED, Status.RUNNING})


class SubmissionState(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the rules need to know about one submission, folded from its events."""

    status: Status = Status.NEW
    submission_id: str = ""
    kernel_id: str = ""
    submitter_id: str = ""
    package_digest: str = ""
    attempt: int = 0
    max_attempts: int = 3
    runner_id: str | None = None
    lease_id: str | None = None
    result_seq: int | None = None
    outcome: str | None = None
    result: dict[str, Any] | None = None
    source_commit: str | None = None
    bench_result_commit: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    disqualified: str | None = None
    tripwire: list[TripwireHit] = msgspec.field(default_factory=list)
    suspect: list[SuspectReason] | None = None  # None: never marked suspect
    suspect_seq: int | None = None  # the result the mark is about
    suspect_cleared: str | None = None  # the maintainer's reason, once cleared
    version: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None
    claimed_at: datetime | None = None  # when the current claim was made
    first_claimed_at: datetime | None = None
    confirms: str | None = None  # a confirmation run: the accepted submission it runs again
    # Retries (`requeued`): their codes, the latest one's reason, the attempt the current round
    # of attempts starts after, and the stream sequence of the message that queued the task.
    requeues: list[str] = msgspec.field(default_factory=list)
    requeue_reason: str | None = None
    round_start: int = 0
    task_seq: int = 0
    avoid_runner: str | None = None

    @property
    def last_attempt(self) -> int:
        """The last attempt the current round allows: `max_attempts` after its start."""
        return self.round_start + self.max_attempts


# --- commands -------------------------------------------------------------------------------


class Submit(msgspec.Struct, frozen=True, kw_only=True):
    meta: EventMeta
    submission_id: str
    kernel_id: str
    submitter_id: str
    package_digest: str
    package_size: int
    base_commit: str | None = None
    message: str = ""
    idempotency_key: str | None = None
    new_kernel: bool = False
    max_attempts: int = 3
    summary: PackageSummary | None = None
    tripwire: list[TripwireHit] = msgspec.field(default_factory=list)
    confirms: str | None = None
    avoid_runner: str | None = None
    provenance: Provenance | None = None
    admission: Admission = msgspec.field(default_factory=lambda: Admission())


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    """Take the task. `attempt` is the next one the log counts (`state.attempt + 1`), never a
    delivery counter, which restarts when the server loses its consumer state. With `lease_s`,
    a claim of a running task needs its current lease to have lapsed: no claim or heartbeat
    (`holder_seen_at`, the newest heartbeat of the current lease) within `lease_s`."""

    meta: EventMeta
    runner_id: str
    lease_id: str
    attempt: int
    holder_seen_at: datetime | None = None
    holder_released: bool = False  # the current lease's runner handed the task back
    lease_s: float = 0.0


class ReportResult(msgspec.Struct, frozen=True, kw_only=True):
    meta: EventMeta
    runner_id: str
    lease_id: str
    outcome: str
    result: dict[str, Any] | None = None
    log_key: str | None = None
    environment: dict[str, str] = msgspec.field(default_factory=dict)
    duration_s: float = 0.0
    timings: dict[str, float] = msgspec.field(default_factory=dict)


class Judge(msgspec.Struct, frozen=True, kw_only=True):
    """The referee's command: turn the current result into a verdict."""

    meta: EventMeta
    result_seq: int
    result_event: SubmissionResult
    metric: MetricSpec | None = None
    message: str = ""
    # Main's scoreboard of the kernel holds no best yet: the result is its first, taken as
    # the judge gave it (no rule over side-by-side samples applies).
    first_result: bool = False
    # A confirmation run: the score (speed-up, low, high) of the result it confirms.
    confirming: list[float] | None = None
    # The kernel's incumbent as it stands on its board, for a challenger whose incumbent was
    # voided (kz_events.ruling.versus_standing): its score over the board's reference (speed-up,
    # low, high), and main's scoreboard value of the kernel.
    standing: list[float] | None = None
    standing_value: float | None = None


class Fail(msgspec.Struct, frozen=True, kw_only=True):
    meta: EventMeta
    code: str
    reason: str


class Cancel(msgspec.Struct, frozen=True, kw_only=True):
    meta: EventMeta
    reason: str = ""


class Commit(msgspec.Struct, frozen=True, kw_only=True):
    meta: EventMeta
    source_commit: str
    bench_result_commit: str
    accepted_seq: int


class Disqualify(msgspec.Struct, frozen=True, kw_only=True):
    meta: EventMeta
    reason: str


class MarkSuspect(msgspec.Struct, frozen=True, kw_only=True):
    """The referee's command: mark the current result suspect before its verdict is appended."""

    meta: EventMeta
    result_seq: int
    reasons: list[SuspectReason]


class FlagRival(msgspec.Struct, frozen=True, kw_only=True):
    """The referee's command: mark main's source of a kernel (the accepted submission that put
    it there) suspect, because it was voided as a rival in another submission's run."""

    meta: EventMeta
    reason: SuspectReason


class ClearSuspect(msgspec.Struct, frozen=True, kw_only=True):
    meta: EventMeta
    reason: str = ""


Command = (
    Submit
    | Claim
    | ReportResult
    | Judge
    | Fail
    | Cancel
    | Commit
    | Disqualify
    | MarkSuspect
    | FlagRival
    | ClearSuspect
)


def _refuse(code: str, message: str, **details: Any) -> RuleViolation:
    return RuleViolation(message, code=code, details=details)


def _ids(state: SubmissionState, meta: EventMeta) -> dict[str, Any]:
    return {
        "event_id": meta.event_id,
        "occurred_at": meta.occurred_at,
        "actor": meta.actor,
        "submission_id": state.submission_id,
        "kernel_id": state.kernel_id,
    }


# --- decide ---------------------------------------------------------------------------------


def decide(state: SubmissionState, command: Command) -> list[Event]:
    """The events `command` causes in `state`, or `RuleViolation` when the rules refuse it."""
    if isinstance(command, Submit):
        return _decide_submit(state, command)
    if state.status is Status.NEW:
        raise _refuse("unknown_submission", "no such submission")
    handlers = {
        Claim: _decide_claim,
        ReportResult: _decide_result,
        Judge: _decide_judge,
        Fail: _decide_fail,
        Cancel: _decide_cancel,
        Commit: _decide_commit,
        Disqualify: _decide_disqualify,
        MarkSuspect: _decide_mark_suspect,
        FlagRival: _decide_flag_rival,
        ClearSuspect: _decide_clear_suspect,
    }
    events: list[Event] = handlers[type(command)](state, command)  # type: ignore[operator]
    return events


def _decide_submit(state: SubmissionState, cmd: Submit) -> list[Event]:
    if state.status is not Status.NEW:
        raise _refuse("duplicate_submission", f"submission {cmd.submission_id} exists already")
    admit(cmd.kernel_id, cmd.submitter_id, cmd.admission, cmd.meta.occurred_at)
    body = msgspec.structs.asdict(cmd)
    meta = body.pop("meta")
    body.pop("admission")
    return [SubmissionSubmitted(**msgspec.structs.asdict(meta), **body)]


def _decide_claim(state: SubmissionState, cmd: Claim) -> list[Event]:
    if state.status not in OPEN:
        raise _refuse("not_claimable", f"submission is {state.status}, not queued or running")
    if cmd.attempt <= state.attempt:
        raise _refuse(
            "stale_lease",
            f"attempt {cmd.attempt} is not newer than the current attempt {state.attempt}",
        )
    if state.status is Status.RUNNING and not lease_lapsed(
        state,
        cmd.holder_seen_at,
        cmd.meta.occurred_at,
        cmd.lease_s,
        released=cmd.holder_released,
    ):
        raise _refuse(
            "stale_lease",
            f"runner {state.runner_id} holds a live lease on attempt {state.attempt}",
            why="lease_live",
        )
    if cmd.attempt > state.last_attempt:
        raise _refuse("attempts_exhausted", f"attempt {cmd.attempt} > {state.last_attempt}")
    return [
        SubmissionClaimed(
            **_ids(state, cmd.meta),
            runner_id=cmd.runner_id,
            attempt=cmd.attempt,
            lease_id=cmd.lease_id,
        )
    ]


# A runner claiming a running task passes `Claim.lease_s` = this fraction of the lease: JetStream
# redelivers a full lease after the holder's last heartbeat, so a lost runner's task is taken
# over at once, while a live holder beats every heartbeat interval, well inside half a lease,
# and a redelivery it did not cause (the server lost its consumer state) is handed back.
HOLDER_GONE_AFTER = 0.5
RELEASED_PHASE = "released"  # a task heartbeat's phase when its runner hands the task back


def lease_lapsed(
    state: SubmissionState,
    holder_seen_at: datetime | None,
    now: datetime,
    lease_s: float,
    *,
    released: bool = False,
) -> bool:
    """Whether the current claim showed no sign of life (its claim, or `holder_seen_at`, the
    newest heartbeat of its lease) for longer than `lease_s` at `now`; a lease of 0 s, or one
    its runner `released`, always has. Only a running submission holds a lease."""
    if state.status is not Status.RUNNING:
        return False
    if lease_s <= 0 or released:
        return True
    signs = [t for t in (state.claimed_at, holder_seen_at) if t is not None]
    if not signs:
        return True
    return (now - max(signs)).total_seconds() > lease_s


def _check_lease(state: SubmissionState, runner_id: str, lease_id: str) -> None:
    if state.status is not Status.RUNNING or state.lease_id != lease_id:
        raise _refuse("stale_lease", "this lease is not the submission's current claim")
    if state.runner_id != runner_id:
        raise _refuse("stale_lease", f"the current claim belongs to runner {state.runner_id}")


def _decide_result(state: SubmissionState, cmd: ReportResult) -> list[Event]:
    _check_lease(state, cmd.runner_id, cmd.lease_id)
    if state.result_seq is not None:
        raise _refuse("duplicate_result", "a result was already reported for this lease")
    return [
        SubmissionResult(
            **_ids(state, cmd.meta),
            runner_id=cmd.runner_id,
            attempt=state.attempt,
            lease_id=cmd.lease_id,
            outcome=cmd.outcome,  # type: ignore[arg-type]
            result=cmd.result,
            log_key=cmd.log_key,
            environment=cmd.environment,
            duration_s=cmd.duration_s,
            timings=cmd.timings,
        )
    ]


def _decide_judge(state: SubmissionState, cmd: Judge) -> list[Event]:
    """The referee's verdict on the current result, by the rules' order (`kz_events.ruling`)."""
    res = cmd.result_event
    if state.status is not Status.RUNNING or state.result_seq != cmd.result_seq:
        raise _refuse("stale_result", "the result is not the current claim's result")
    facts = Facts(
        metric=cmd.metric,
        first_result=cmd.first_result,
        confirmation=state.confirms is not None,
        confirming=cmd.confirming,
        retried=frozenset(state.requeues),
        standing=cmd.standing,
        standing_value=cmd.standing_value,
    )
    return _verdict_events(state, cmd, rule(res.outcome, res.result, facts))


def _verdict_events(state: SubmissionState, cmd: Judge, ruling: Ruling) -> list[Event]:
    res, ids = cmd.result_event, _ids(state, cmd.meta)
    match ruling.verdict:
        case Verdict.FAILED:
            return [
                SubmissionFailed(
                    **ids,
                    code=ruling.code,
                    reason=ruling.reason,
                    attempt=res.attempt,
                    log_key=res.log_key,
                )
            ]
        case Verdict.CANCELLED:
            return [SubmissionCancelled(**ids, reason=ruling.reason)]
        case Verdict.RETRY:
            return [
                SubmissionRequeued(
                    **ids,
                    code=ruling.code,
                    reason=ruling.reason,
                    result_seq=cmd.result_seq,
                    attempt=res.attempt,
                    avoid_runner=res.runner_id,
                )
            ]
        case Verdict.REJECTED:
            return [
                SubmissionRejected(
                    **ids, reason=ruling.reason, code=ruling.code, result=ruling.document
                )
            ]
        case Verdict.CONFIRMED | Verdict.DISPUTED:
            assert state.confirms is not None
            confirmed = ruling.verdict is Verdict.CONFIRMED
            kind = SubmissionConfirmed if confirmed else SubmissionDisputed
            return [
                kind(**ids, confirms=state.confirms, reason=ruling.reason, result=ruling.document)
            ]
    assert ruling.document is not None
    return [
        SubmissionAccepted(
            **ids,
            submitter_id=state.submitter_id,
            runner_id=res.runner_id,
            attempt=res.attempt,
            package_digest=state.package_digest,
            message=cmd.message,
            result=ruling.document,
            result_seq=cmd.result_seq,
            environment=res.environment,
        )
    ]


def _decide_fail(state: SubmissionState, cmd: Fail) -> list[Event]:
    if state.status not in OPEN:
        raise _refuse("not_open", f"submission is {state.status}; only open ones can fail")
    return [
        SubmissionFailed(
            **_ids(state, cmd.meta), code=cmd.code, reason=cmd.reason, attempt=state.attempt
        )
    ]


def _decide_cancel(state: SubmissionState, cmd: Cancel) -> list[Event]:
    if state.status not in OPEN:
        raise _refuse(
            "not_open",
            f"submission is {state.status}; only queued or running ones can be cancelled",
        )
    return [SubmissionCancelled(**_ids(state, cmd.meta), reason=cmd.reason)]


def _decide_commit(state: SubmissionState, cmd: Commit) -> list[Event]:
    if state.status is Status.COMMITTED and state.source_commit == cmd.source_commit:
        return []  # already announced: idempotent
    if state.status is not Status.ACCEPTED:
        raise _refuse(
            "not_accepted", f"submission is {state.status}; only accepted ones are committed"
        )
    return [
        SubmissionCommitted(
            **_ids(state, cmd.meta),
            source_commit=cmd.source_commit,
            bench_result_commit=cmd.bench_result_commit,
            accepted_seq=cmd.accepted_seq,
        )
    ]


def _decide_disqualify(state: SubmissionState, cmd: Disqualify) -> list[Event]:
    if state.status not in (Status.ACCEPTED, Status.COMMITTED):
        raise _refuse(
            "not_accepted", f"submission is {state.status}; only accepted ones can be disqualified"
        )
    if state.disqualified is not None:
        raise _refuse("already_disqualified", "submission is disqualified already")
    return [SubmissionDisqualified(**_ids(state, cmd.meta), reason=cmd.reason)]


def suspect_reasons(
    tripwire: Iterable[TripwireHit], result: ResultDocument | dict[str, Any] | None
) -> list[SuspectReason]:
    """Why a result is suspect: the package's tripwire hits, then the judge's runtime `flags`
    (a document without them has none; a malformed flag is skipped). Empty: not suspect."""
    reasons = [
        SuspectReason(source="tripwire", code=h.code, message=h.message, path=h.path, line=h.line)
        for h in tripwire
    ]
    reasons += [
        SuspectReason(source="runtime", code=flag.code[:64], message=flag.message[:500])
        for flag in result_flags(result)
    ]
    return reasons


def _decide_mark_suspect(state: SubmissionState, cmd: MarkSuspect) -> list[Event]:
    if state.status is not Status.RUNNING or state.result_seq != cmd.result_seq:
        raise _refuse("stale_result", "the result is not the current claim's result")
    if (state.suspect is not None and state.suspect_seq == cmd.result_seq) or not cmd.reasons:
        return []  # this result is marked already (a retried judgement), or nothing to mark
    return [
        SubmissionSuspected(
            **_ids(state, cmd.meta), result_seq=cmd.result_seq, reasons=list(cmd.reasons)
        )
    ]


def _decide_flag_rival(state: SubmissionState, cmd: FlagRival) -> list[Event]:
    if state.status not in (Status.ACCEPTED, Status.COMMITTED) or state.result_seq is None:
        raise _refuse(
            "not_accepted", f"submission is {state.status}; only main's sources are flagged"
        )
    if cmd.reason in (state.suspect or []):
        return []  # flagged already (a replay, or a retried append)
    standing = state.suspect if state.suspect is not None and state.suspect_cleared is None else []
    return [
        SubmissionSuspected(
            **_ids(state, cmd.meta), result_seq=state.result_seq, reasons=[*standing, cmd.reason]
        )
    ]


def _decide_clear_suspect(state: SubmissionState, cmd: ClearSuspect) -> list[Event]:
    if state.suspect is None:
        raise _refuse("not_suspect", f"submission is not marked suspect (it is {state.status})")
    if state.suspect_cleared is not None:
        raise _refuse("already_cleared", "the suspect mark was cleared already")
    return [SubmissionSuspectCleared(**_ids(state, cmd.meta), reason=cmd.reason)]


# --- evolve ---------------------------------------------------------------------------------


def evolve(state: SubmissionState, event: Event | UnknownEvent, seq: int = 0) -> SubmissionState:
    """The state after `event` (stored at `seq`); events of other aggregates change nothing."""
    change = _changes(state, event, seq)
    if change is None:
        return state
    stamp: dict[str, Any] = {"version": seq or state.version}
    occurred = getattr(event, "occurred_at", None)
    if occurred is not None:
        stamp["updated_at"] = occurred
    return msgspec.structs.replace(state, **change, **stamp)


def _ended(
    event: SubmissionRejected
    | SubmissionFailed
    | SubmissionCancelled
    | SubmissionConfirmed
    | SubmissionDisputed,
) -> dict[str, Any]:
    """What an ending other than a commit changes."""
    match event:
        case SubmissionRejected():  # the document as judged: the platform's verdict in it
            recorded = {"result": event.result} if event.result is not None else {}
            return {
                "status": Status.REJECTED,
                "error_code": event.code,
                "error_message": event.reason,
                **recorded,
            }
        case SubmissionFailed():
            return {
                "status": Status.FAILED,
                "error_code": event.code,
                "error_message": event.reason,
            }
        case SubmissionConfirmed() | SubmissionDisputed():
            confirmed = isinstance(event, SubmissionConfirmed)
            return {
                "status": Status.CONFIRMED if confirmed else Status.DISPUTED,
                "result": event.result,
            }
        case SubmissionCancelled():
            return {
                "status": Status.CANCELLED,
                "error_code": "cancelled",
                "error_message": event.reason,
            }
    raise AssertionError(f"not an ending: {event.type}")


def _changes(
    state: SubmissionState, event: Event | UnknownEvent, seq: int
) -> dict[str, Any] | None:
    match event:
        case SubmissionSubmitted():
            return {
                "status": Status.QUEUED,
                "submission_id": event.submission_id,
                "kernel_id": event.kernel_id,
                "submitter_id": event.submitter_id,
                "package_digest": event.package_digest,
                "max_attempts": event.max_attempts,
                "created_at": event.occurred_at,
                "tripwire": list(event.tripwire),
                "confirms": event.confirms,
                "task_seq": seq,
                "avoid_runner": event.avoid_runner,
            }
        case SubmissionRequeued():
            return {
                "status": Status.QUEUED,
                "runner_id": None,
                "lease_id": None,
                "result_seq": None,
                "outcome": None,
                "result": None,
                "claimed_at": None,
                "first_claimed_at": None,
                "requeues": [*state.requeues, event.code],
                "requeue_reason": event.reason,
                "round_start": state.attempt,
                "task_seq": seq,
                "avoid_runner": event.avoid_runner,
            }
        case SubmissionClaimed():
            return {
                "status": Status.RUNNING,
                "attempt": event.attempt,
                "runner_id": event.runner_id,
                "lease_id": event.lease_id,
                "result_seq": None,
                "outcome": None,
                "result": None,
                "claimed_at": event.occurred_at,
                "first_claimed_at": state.first_claimed_at or event.occurred_at,
            }
        case SubmissionResult():
            return {"result_seq": seq, "outcome": event.outcome, "result": event.result}
        case SubmissionAccepted():
            return {"status": Status.ACCEPTED, "result": event.result}
        case (
            SubmissionRejected()
            | SubmissionFailed()
            | SubmissionCancelled()
            | SubmissionConfirmed()
            | SubmissionDisputed()
        ):
            return _ended(event)
        case SubmissionCommitted():
            return {
                "status": Status.COMMITTED,
                "source_commit": event.source_commit,
                "bench_result_commit": event.bench_result_commit,
            }
        case SubmissionDisqualified():
            return {"disqualified": event.reason}
        case SubmissionSuspected():
            return {
                "suspect": list(event.reasons),
                "suspect_seq": event.result_seq,
                "suspect_cleared": None,
            }
        case SubmissionSuspectCleared():
            return {"suspect_cleared": event.reason or f"cleared by {event.actor}"}
    return None


def fold(events: Iterable[tuple[int, Event | UnknownEvent]]) -> SubmissionState:
    """One aggregate's state from its events. A skipped message (kz_events.screen) changes
    nothing but `version`: it is the aggregate's newest sequence, which the next append's
    concurrency check names."""
    state = SubmissionState()
    for seq, event in events:
        state = evolve(state, event, seq)
        if seq > state.version:
            state = msgspec.structs.replace(state, version=seq)
    return state
