"""The event vocabulary: every fact the system records, one frozen msgspec Struct each.

All events share `event_id`, `type` (the tag), `schema_version`, `occurred_at` and `actor`;
the rest is the typed body. One `Decoder` for the tagged union is built once. Unknown fields
from newer writers are ignored; an unknown `type` decodes to `UnknownEvent`, never dropped.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

import msgspec

from kz_events.errors import InvalidKernelId, UnknownEventType
from kz_events.ids import KernelId
from kz_events.provenance import Provenance
from kz_events.subjects import event_subject, live_subject

__all__ = [
    "ALL_EVENT_TYPES",
    "EVENT_CLASSES",
    "LIVE_EVENT_TYPES",
    "BoardReviewed",
    "Event",
    "EventMeta",
    "KernelClaimed",
    "KernelEvent",
    "KernelImported",
    "KernelReleased",
    "LiveEvent",
    "PackageSummary",
    "ReferencePinned",
    "RunnerDeregistered",
    "RunnerEvent",
    "RunnerHeartbeat",
    "RunnerRegistered",
    "SubmissionAccepted",
    "SubmissionCancelled",
    "SubmissionClaimed",
    "SubmissionCommitted",
    "SubmissionConfirmed",
    "SubmissionDisputed",
    "SubmissionDisqualified",
    "SubmissionEvent",
    "SubmissionFailed",
    "SubmissionRejected",
    "SubmissionRequeued",
    "SubmissionResult",
    "SubmissionSubmitted",
    "SubmissionSuspectCleared",
    "SubmissionSuspected",
    "SuspectReason",
    "TaskHeartbeat",
    "TripwireHit",
    "UnknownEvent",
    "checked_event",
    "decode_event",
    "encode_event",
    "subject_of",
]

SCHEMA_VERSION = 1

# Reason codes a task can end with; `accepted`/`rejected` are the benchmark's verdicts.
Outcome = Literal[
    "accepted",
    "rejected",
    "build_failed",
    "benchmark_error",
    "invalid_result",
    "timed_out",
    "cancelled",
]


class EventMeta(msgspec.Struct, frozen=True, kw_only=True):
    """What the writer of an event supplies: identity, time and who acted."""

    event_id: str
    occurred_at: datetime
    actor: str

    @classmethod
    def now(cls, actor: str) -> EventMeta:
        """A fresh event id and the current time: for the shells that append, never the rules."""
        return cls(event_id=str(uuid.uuid4()), occurred_at=datetime.now(UTC), actor=actor)

    def fields(self) -> dict[str, Any]:
        """The three fields, to spread into an event's constructor."""
        return {"event_id": self.event_id, "occurred_at": self.occurred_at, "actor": self.actor}


class _Base(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    event_id: str
    schema_version: int = SCHEMA_VERSION
    occurred_at: datetime
    actor: str

    aggregate: ClassVar[str] = ""

    @property
    def type(self) -> str:
        return str(type(self).__struct_config__.tag)


class PackageSummary(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the board shows of a package's desc.yaml, read once when the package is checked,
    so no projection has to fetch the package again to title a kernel."""

    title: str = ""
    language: str = "other"
    metric: dict[str, str] | None = None
    # A board imported from a problem set: desc.yaml's `x-problem` as the board shows it (the
    # set, the problem, its version, source and commit, the licence and its conditions).
    problem: dict[str, Any] | None = None


class TripwireHit(msgspec.Struct, frozen=True, kw_only=True):
    """One place in a package's `src/` that the static tripwire asks a maintainer to look at."""

    code: str
    path: str
    line: int = 0
    message: str = ""


class SuspectReason(msgspec.Struct, frozen=True, kw_only=True):
    """Why a result is suspect: a tripwire hit in the package, a flag the judge raised, or (for
    main's source of a kernel) a rival voided in another submission's side-by-side run."""

    source: Literal["tripwire", "runtime", "rival"]
    code: str
    message: str = ""
    path: str | None = None
    line: int | None = None


# --- submission aggregate -------------------------------------------------------------------


class _SubmissionBase(_Base, frozen=True, kw_only=True):
    submission_id: str
    kernel_id: str

    aggregate: ClassVar[str] = "submission"

    @property
    def kernel(self) -> KernelId:
        return KernelId.parse(self.kernel_id)


class SubmissionSubmitted(_SubmissionBase, frozen=True, kw_only=True, tag="submitted"):
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
    # A confirmation run: the referee's second run of an accepted result that took rank 1 on
    # its board (`confirms` names it), preferably on another runner than `avoid_runner`.
    confirms: str | None = None
    avoid_runner: str | None = None
    # Who made it (an agent, its model, tokens, cost, transcript): optional, checked by
    # `kz_events.provenance.parse_provenance` before it is recorded.
    provenance: Provenance | None = None


class SubmissionClaimed(_SubmissionBase, frozen=True, kw_only=True, tag="claimed"):
    runner_id: str
    attempt: int
    lease_id: str


class SubmissionResult(_SubmissionBase, frozen=True, kw_only=True, tag="result"):
    runner_id: str
    attempt: int
    lease_id: str
    outcome: Outcome
    result: dict[str, Any] | None = None
    log_key: str | None = None
    environment: dict[str, str] = msgspec.field(default_factory=dict)
    duration_s: float = 0.0
    timings: dict[str, float] = msgspec.field(default_factory=dict)


class SubmissionAccepted(_SubmissionBase, frozen=True, kw_only=True, tag="accepted"):
    submitter_id: str
    runner_id: str
    attempt: int
    package_digest: str
    message: str = ""
    result: dict[str, Any]
    result_seq: int
    environment: dict[str, str] = msgspec.field(default_factory=dict)


class SubmissionRejected(_SubmissionBase, frozen=True, kw_only=True, tag="rejected"):
    reason: str
    code: str = "rejected"
    result: dict[str, Any] | None = None


class SubmissionRequeued(_SubmissionBase, frozen=True, kw_only=True, tag="requeued"):
    """The referee set the result at `result_seq` aside and returned the submission to the
    queue for one more attempt: the result was not a measurement (`code` `unmeasured`), its
    interval had not settled (`unsettled`), or a rival measured beside it was voided
    (`rival_voided`). The task queue delivers this event as a task again; the runner that
    measured the result (`avoid_runner`) hands it on to another one where one serves the arch."""

    code: str
    reason: str
    result_seq: int
    attempt: int
    avoid_runner: str | None = None


class SubmissionFailed(_SubmissionBase, frozen=True, kw_only=True, tag="failed"):
    code: str
    reason: str
    attempt: int = 0
    log_key: str | None = None


class SubmissionConfirmed(_SubmissionBase, frozen=True, kw_only=True, tag="confirmed"):
    """A confirmation run agreed with the result it confirms (`confirms`): its speed-up over
    the board's reference lies within that result's interval, or theirs overlap."""

    confirms: str
    reason: str
    result: dict[str, Any] | None = None


class SubmissionDisputed(_SubmissionBase, frozen=True, kw_only=True, tag="disputed"):
    """A confirmation run did not agree with the result it confirms: that result is marked
    and not ranked first on its board."""

    confirms: str
    reason: str
    result: dict[str, Any] | None = None


class SubmissionCancelled(_SubmissionBase, frozen=True, kw_only=True, tag="cancelled"):
    reason: str = ""


class SubmissionCommitted(_SubmissionBase, frozen=True, kw_only=True, tag="committed"):
    source_commit: str
    bench_result_commit: str
    accepted_seq: int


class SubmissionDisqualified(_SubmissionBase, frozen=True, kw_only=True, tag="disqualified"):
    reason: str


class SubmissionSuspected(_SubmissionBase, frozen=True, kw_only=True, tag="suspect"):
    """The referee marked a result suspect for maintainers; it changes no verdict or commit."""

    result_seq: int
    reasons: list[SuspectReason]


class SubmissionSuspectCleared(_SubmissionBase, frozen=True, kw_only=True, tag="suspect_cleared"):
    """A maintainer looked at a suspect result and cleared it."""

    reason: str = ""


# --- kernel aggregate -----------------------------------------------------------------------


class _KernelBase(_Base, frozen=True, kw_only=True):
    kernel_id: str

    aggregate: ClassVar[str] = "kernel"

    @property
    def kernel(self) -> KernelId:
        return KernelId.parse(self.kernel_id)


class KernelImported(_KernelBase, frozen=True, kw_only=True, tag="imported"):
    package_digest: str
    submitter_id: str
    message: str = ""
    bench_result: dict[str, Any] | None = None
    summary: PackageSummary | None = None


class KernelClaimed(_KernelBase, frozen=True, kw_only=True, tag="kernel_claimed"):
    holder: str
    lease_id: str
    expires_at: datetime


class KernelReleased(_KernelBase, frozen=True, kw_only=True, tag="kernel_released"):
    holder: str
    lease_id: str


class BoardReviewed(_KernelBase, frozen=True, kw_only=True, tag="board_reviewed"):
    """A maintainer accepted the judge of `kernel_id` as its board's judge
    (`arch/op_class/sub_class/quant`): the board is reviewed and that judge is the one its new
    kernels must carry."""

    message: str = ""


class ReferencePinned(_KernelBase, frozen=True, kw_only=True, tag="reference_pinned"):
    """A maintainer pinned the `src/` of `kernel_id` as `commit` holds it as its board's
    reference, in place of the board's first kernel as first committed. Scores measured
    against the previous reference are shown as estimates from then on."""

    commit: str
    message: str = ""


# --- runner aggregate -----------------------------------------------------------------------


class _RunnerBase(_Base, frozen=True, kw_only=True):
    runner_id: str
    arches: list[str]

    aggregate: ClassVar[str] = "runner"


class RunnerRegistered(_RunnerBase, frozen=True, kw_only=True, tag="registered"):
    device: str = ""
    backend: str = ""
    labels: dict[str, str] = msgspec.field(default_factory=dict)


class RunnerDeregistered(_RunnerBase, frozen=True, kw_only=True, tag="deregistered"):
    reason: str = ""


# --- live (KZ_LIVE) -------------------------------------------------------------------------


class TaskHeartbeat(_SubmissionBase, frozen=True, kw_only=True, tag="task_heartbeat"):
    runner_id: str
    attempt: int
    lease_id: str
    phase: str = ""

    aggregate: ClassVar[str] = "task"


class RunnerHeartbeat(_RunnerBase, frozen=True, kw_only=True, tag="runner_heartbeat"):
    device: str = ""
    busy_with: str | None = None


class UnknownEvent(msgspec.Struct, frozen=True):
    """An event whose type this build does not know: kept whole, surfaced to the caller.

    Stored messages that no fold may apply come back as one too, with `skipped` saying why
    (`undecodable`, `misfiled`, `repeated`; see `kz_events.screen`) and `reason` in words.
    """

    type: str
    raw: bytes
    skipped: str = ""
    reason: str = ""


SubmissionEvent = (
    SubmissionSubmitted
    | SubmissionClaimed
    | SubmissionResult
    | SubmissionAccepted
    | SubmissionRejected
    | SubmissionRequeued
    | SubmissionFailed
    | SubmissionConfirmed
    | SubmissionDisputed
    | SubmissionCancelled
    | SubmissionCommitted
    | SubmissionDisqualified
    | SubmissionSuspected
    | SubmissionSuspectCleared
)
KernelEvent = KernelImported | KernelClaimed | KernelReleased | BoardReviewed | ReferencePinned
RunnerEvent = RunnerRegistered | RunnerDeregistered
LiveEvent = TaskHeartbeat | RunnerHeartbeat
Event = SubmissionEvent | KernelEvent | RunnerEvent | LiveEvent

EVENT_CLASSES: tuple[type[_Base], ...] = (
    SubmissionSubmitted,
    SubmissionClaimed,
    SubmissionResult,
    SubmissionAccepted,
    SubmissionRejected,
    SubmissionRequeued,
    SubmissionFailed,
    SubmissionConfirmed,
    SubmissionDisputed,
    SubmissionCancelled,
    SubmissionCommitted,
    SubmissionDisqualified,
    SubmissionSuspected,
    SubmissionSuspectCleared,
    KernelImported,
    KernelClaimed,
    KernelReleased,
    BoardReviewed,
    ReferencePinned,
    RunnerRegistered,
    RunnerDeregistered,
    TaskHeartbeat,
    RunnerHeartbeat,
)
ALL_EVENT_TYPES: tuple[str, ...] = tuple(str(c.__struct_config__.tag) for c in EVENT_CLASSES)
LIVE_EVENT_TYPES = ("task_heartbeat", "runner_heartbeat")

_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(Event)


class _TypeOnly(msgspec.Struct):
    type: str = ""


_TYPE_DECODER = msgspec.json.Decoder(_TypeOnly)


def encode_event(event: Event) -> bytes:
    return _ENCODER.encode(event)


def decode_event(data: bytes) -> Event | UnknownEvent:
    """Decode one stored event; an unknown type comes back as `UnknownEvent`."""
    try:
        return _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        kind = _TYPE_DECODER.decode(data).type
        if kind in ALL_EVENT_TYPES:
            raise
        if not kind:
            raise UnknownEventType(f"stored event has no type: {data[:200]!r}") from exc
        return UnknownEvent(type=kind, raw=data)


def _subject_type(event: Event) -> str:
    tag = event.type
    return tag.removeprefix("kernel_")


def subject_of(event: Event) -> str:
    """The subject an event is stored under."""
    if isinstance(event, TaskHeartbeat):
        return live_subject("task", event.kernel.arch, event.submission_id)
    if isinstance(event, RunnerHeartbeat):
        return live_subject("runner", event.arches[0] if event.arches else "any", event.runner_id)
    if isinstance(event, _SubmissionBase):
        arch = KernelId.parse(event.kernel_id).arch
        return event_subject("submission", arch, event.submission_id, _subject_type(event))
    if isinstance(event, _KernelBase):
        kid = KernelId.parse(event.kernel_id)
        return event_subject("kernel", kid.arch, str(kid), _subject_type(event))
    arch = event.arches[0] if event.arches else "any"
    return event_subject("runner", arch, event.runner_id, _subject_type(event))


def checked_event(subject: str, data: bytes) -> Event | UnknownEvent:
    """Decode an event read from `subject`; never raises: what no fold may apply comes back as
    an `UnknownEvent` with `skipped` set.

    A body that does not decode (`{}`, garbage, a known type missing fields, a time without a
    zone) is `undecodable`. Permissions are granted per subject, so a writer allowed one
    subject could put another event type's body on it; such a body is `misfiled`
    ("misfiled:<type>").
    """
    try:
        event = decode_event(data)
    except (msgspec.MsgspecError, UnknownEventType) as exc:
        return UnknownEvent(
            type="undecodable", raw=data, skipped="undecodable", reason=str(exc)[:300]
        )
    if isinstance(event, UnknownEvent):
        return event
    if event.occurred_at.tzinfo is None:
        return UnknownEvent(
            type="undecodable",
            raw=data,
            skipped="undecodable",
            reason=f"an event of type {event.type} whose occurred_at has no time zone",
        )
    try:
        expected = subject_of(event)
    except (ValueError, InvalidKernelId):
        expected = ""
    if expected != subject:
        return UnknownEvent(
            type=f"misfiled:{event.type}",
            raw=data,
            skipped="misfiled",
            reason=f"an event of type {event.type} stored under {subject}; it belongs under "
            f"{expected or 'no valid subject'}",
        )
    return event
