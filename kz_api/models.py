"""Request and response bodies of the HTTP API: msgspec Structs, inputs forbid unknown fields."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from kz_events.provenance import Provenance

__all__ = [
    "MAX_LABELS",
    "MAX_LOG_CHARS",
    "MAX_RESULT_DOCUMENT_BYTES",
    "RUNNER_ID_PATTERN",
    "BenchHistory",
    "BoardDoc",
    "BoardList",
    "CancelBody",
    "ClaimBody",
    "ClaimTaskBody",
    "ClearSuspectBody",
    "CommitChange",
    "CommitDoc",
    "CommitRow",
    "Commits",
    "ConfirmationDoc",
    "ConfirmationMark",
    "DisqualifyBody",
    "ErrorInfo",
    "EventRow",
    "FileEntry",
    "FoldDoc",
    "HealthDoc",
    "HeartbeatAnswer",
    "HeartbeatBody",
    "HistoryRow",
    "KernelDetail",
    "KernelList",
    "LeaseDoc",
    "NatsDoc",
    "PinReferenceBody",
    "QueueDepth",
    "RebaseAnswer",
    "RegisterAnswer",
    "RegisterBody",
    "ResultAnswer",
    "ResultBody",
    "ResultSummary",
    "ReviewBoardBody",
    "RunnerDoc",
    "RunnerList",
    "SkippedDoc",
    "SkippedEventDoc",
    "StatusDoc",
    "SubmissionDetail",
    "SubmissionList",
    "SubmitAnswer",
    "SuspectDoc",
    "SuspectReasonDoc",
    "TaskOffer",
]

RUNNER_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@+\-]{0,127}$"
RunnerId = Annotated[str, Meta(pattern=RUNNER_ID_PATTERN)]
ArchName = Annotated[str, Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+\-]{0,63}$")]
Reason = Annotated[str, Meta(max_length=2000)]

# Bounds on what runners send (CONTRACTS.md: every field a client sends has a limit). Each is
# far above what a real runner needs and keeps one event well under NATS' 8 MB payload.
MAX_LABELS = 64
MAX_LOG_CHARS = 4 * 1024 * 1024  # the runner keeps the last 1 MiB of a task's output
MAX_RESULT_DOCUMENT_BYTES = 2 * 1024 * 1024  # the result document, encoded as JSON
Key = Annotated[str, Meta(min_length=1, max_length=128)]
LabelValue = Annotated[str, Meta(max_length=1024)]
EnvironmentValue = Annotated[str, Meta(max_length=4096)]
Seconds = Annotated[float, Meta(ge=0, le=10**7)]
Outcome = Literal[
    "accepted",
    "rejected",
    "build_failed",
    "benchmark_error",
    "invalid_result",
    "timed_out",
    "cancelled",
]


class _In(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class _Out(msgspec.Struct, frozen=True, kw_only=True):
    pass


# --- submissions ----------------------------------------------------------------------------


class SubmitAnswer(_Out, frozen=True, kw_only=True):
    submission_id: str
    kernel_id: str
    status: str
    status_url: str
    version: int
    queue_position: int | None = None
    new_kernel: bool = False


class ResultSummary(_Out, frozen=True, kw_only=True):
    accepted: bool | None = None
    reason: str | None = None
    metric_value: float | None = None
    outcome: str | None = None


class Commits(_Out, frozen=True, kw_only=True):
    source: str
    bench_result: str


class ErrorInfo(_Out, frozen=True, kw_only=True):
    code: str
    message: str


ConfirmationMark = Literal["unconfirmed", "confirmed", "disputed"]


class ConfirmationDoc(_Out, frozen=True, kw_only=True):
    """The confirmation run of an accepted result that took rank 1 on its board: its id and
    status, the mark it gives the result (as index.json has it: `unconfirmed` while the run is
    open or when it failed, then `confirmed` or `disputed`) and its verdict's sentence."""

    submission_id: str
    status: str
    mark: ConfirmationMark
    reason: str | None = None


class StatusDoc(_Out, frozen=True, kw_only=True):
    submission_id: str
    kernel_id: str
    submitter_id: str
    status: str
    version: int
    attempt: int
    runner_id: str | None
    result: ResultSummary | None
    commits: Commits | None
    error: ErrorInfo | None
    created_at: datetime | None
    updated_at: datetime | None
    changed: bool
    queue_position: int | None = None
    disqualified: str | None = None
    suspect: SuspectDoc | None = None
    # A confirmation run: the accepted submission it measures again.
    confirms: str | None = None
    # An accepted result that was run again: its confirmation run and what it found.
    confirmation: ConfirmationDoc | None = None
    # Who made it (agent, model, tokens, cost, transcript link), when the submitter said.
    provenance: Provenance | None = None


class EventRow(_Out, frozen=True, kw_only=True):
    seq: int
    type: str
    occurred_at: datetime
    actor: str


class SubmissionDetail(_Out, frozen=True, kw_only=True):
    submission: StatusDoc
    events: list[EventRow]
    result_document: dict[str, Any] | None
    log_url: str | None
    package_digest: str
    package_size: int
    message: str
    base_commit: str | None
    new_kernel: bool


class SubmissionList(_Out, frozen=True, kw_only=True):
    items: list[StatusDoc]
    total: int
    limit: int
    offset: int


class CancelBody(_In, frozen=True, kw_only=True):
    reason: Reason = ""


class DisqualifyBody(_In, frozen=True, kw_only=True):
    reason: Annotated[str, Meta(min_length=1, max_length=2000)]


# --- kernels --------------------------------------------------------------------------------


class KernelList(_Out, frozen=True, kw_only=True):
    items: list[dict[str, Any]]
    total: int
    limit: int
    offset: int
    log_seq: int


class FileEntry(_Out, frozen=True, kw_only=True):
    path: str
    size: int


class CommitRow(_Out, frozen=True, kw_only=True):
    id: str
    message: str
    author: str
    at: datetime


class CommitChange(_Out, frozen=True, kw_only=True):
    path: str
    change: Literal["added", "modified", "deleted"]


class CommitDoc(_Out, frozen=True, kw_only=True):
    """A commit of the kernel repo: message, author, committer, parents, the trailers
    (`Kz-Submission`, `Kz-Event-Seq`), the submission it records and the paths it changed."""

    id: str
    message: str
    author: str
    committer: str
    authored_at: datetime
    committed_at: datetime
    parents: list[str]
    trailers: dict[str, str]
    submission_id: str | None
    kernel_id: str | None
    changes: list[CommitChange]


class LeaseDoc(_Out, frozen=True, kw_only=True):
    kernel_id: str
    holder: str | None
    lease_id: str | None
    expires_at: datetime | None


class KernelDetail(_Out, frozen=True, kw_only=True):
    kernel_id: str
    arch: str
    op_class: str
    sub_class: str
    quant: str
    name: str
    source: Literal["repo", "read_model", "submission"]  # submission: not on main yet
    head_commit: str | None
    desc: dict[str, Any] | None
    scoreboard: dict[str, Any] | None
    files: list[FileEntry]
    commits: list[CommitRow]
    summary: dict[str, Any] | None
    lease: LeaseDoc | None
    board: BoardDoc | None = None


class HistoryRow(_Out, frozen=True, kw_only=True):
    value: float | None
    at: datetime
    commit: str | None
    bench_result_commit: str | None
    submission_id: str
    submitter_id: str
    disqualified: str | None = None
    suspect: bool = False
    provenance: Provenance | None = None


class BenchHistory(_Out, frozen=True, kw_only=True):
    kernel_id: str
    metric: dict[str, Any] | None
    best: HistoryRow | None
    current: HistoryRow | None
    history: list[HistoryRow]


class ClaimBody(_In, frozen=True, kw_only=True):
    ttl_s: Annotated[float, Meta(ge=1, le=7 * 24 * 3600)] = 3600.0


# --- runners --------------------------------------------------------------------------------


class RegisterBody(_In, frozen=True, kw_only=True):
    runner_id: RunnerId
    arches: Annotated[list[ArchName], Meta(min_length=1, max_length=64)]
    device: Annotated[str, Meta(max_length=500)] = ""
    backend: Annotated[str, Meta(max_length=64)] = ""
    labels: Annotated[dict[Key, LabelValue], Meta(max_length=MAX_LABELS)] = msgspec.field(
        default_factory=dict
    )


class RegisterAnswer(_Out, frozen=True, kw_only=True):
    runner_id: str
    heartbeat_s: float
    lease_s: float
    task_timeout_s: float
    step_timeout_s: float


class ClaimTaskBody(_In, frozen=True, kw_only=True):
    runner_id: RunnerId
    wait_s: Annotated[float, Meta(ge=0, le=30)] = 0.0


class TaskOffer(_Out, frozen=True, kw_only=True):
    submission_id: str
    kernel_id: str
    arch: str
    attempt: int
    lease_id: str
    lease_token: str
    package_url: str
    package_digest: str
    package_size: int
    judge_url: str | None
    heartbeat_s: float
    task_timeout_s: float
    step_timeout_s: float
    confirms: str | None = None  # a confirmation run of this accepted submission


class HeartbeatBody(_In, frozen=True, kw_only=True):
    lease_token: Annotated[str, Meta(min_length=1, max_length=4096)]
    phase: Annotated[str, Meta(max_length=64)] = ""


class HeartbeatAnswer(_Out, frozen=True, kw_only=True):
    cancelled: bool


class ResultBody(_In, frozen=True, kw_only=True):
    lease_token: Annotated[str, Meta(min_length=1, max_length=4096)]
    outcome: Outcome
    result: dict[str, Any] | None = None
    environment: Annotated[dict[Key, EnvironmentValue], Meta(max_length=64)] = msgspec.field(
        default_factory=dict
    )
    duration_s: Seconds = 0.0
    timings: Annotated[dict[Key, Seconds], Meta(max_length=64)] = msgspec.field(
        default_factory=dict
    )
    log: Annotated[str, Meta(max_length=MAX_LOG_CHARS)] = ""


class ResultAnswer(_Out, frozen=True, kw_only=True):
    status: str
    version: int


class RunnerDoc(_Out, frozen=True, kw_only=True):
    runner_id: str
    arches: list[str]
    device: str
    backend: str
    labels: dict[str, str]
    registered_at: datetime | None
    last_heartbeat: datetime | None
    busy_with: str | None
    state: str


class RunnerList(_Out, frozen=True, kw_only=True):
    items: list[RunnerDoc]


# --- edits, health --------------------------------------------------------------------------


class RebaseAnswer(_Out, frozen=True, kw_only=True):
    kernel_id: str
    base_commit: str
    package_sha256: str
    package_base64: str
    changed_paths: list[str]


class NatsDoc(_Out, frozen=True, kw_only=True):
    connected: bool
    stream_seq: int | None


class FoldDoc(_Out, frozen=True, kw_only=True):
    seq: int
    lag: int | None
    caught_up: bool


class QueueDepth(_Out, frozen=True, kw_only=True):
    queued: int
    running: int


class SkippedEventDoc(_Out, frozen=True, kw_only=True):
    seq: int
    subject: str
    kind: str
    reason: str


class SkippedDoc(_Out, frozen=True, kw_only=True):
    """Stored messages the read models skipped: undecodable, misfiled, repeated event_id, or
    of a type this build does not know (kz_events.screen); `recent` holds the latest few."""

    total: int = 0
    by_kind: dict[str, int] = msgspec.field(default_factory=dict)
    recent: list[SkippedEventDoc] = msgspec.field(default_factory=list)


class HealthDoc(_Out, frozen=True, kw_only=True):
    status: Literal["ok", "unavailable"]
    nats: NatsDoc
    fold: FoldDoc
    projector_lag: int
    queue: dict[str, QueueDepth]
    runners: int
    skipped_events: SkippedDoc = msgspec.field(default_factory=SkippedDoc)


# --- review: boards and suspect results (docs/review.md) -----------------------------------


class SuspectReasonDoc(_Out, frozen=True, kw_only=True):
    source: Literal["tripwire", "runtime"]
    code: str
    message: str
    path: str | None = None
    line: int | None = None


class SuspectDoc(_Out, frozen=True, kw_only=True):
    """Why a result is marked suspect, and whether a maintainer cleared the mark."""

    reasons: list[SuspectReasonDoc]
    cleared: bool
    cleared_reason: str | None = None


class ClearSuspectBody(_In, frozen=True, kw_only=True):
    reason: Annotated[str, Meta(min_length=1, max_length=2000)]


class BoardReference(_Out, frozen=True, kw_only=True):
    kernel_id: str
    commit: str | None


class BoardDoc(_Out, frozen=True, kw_only=True):
    """A board (`arch/op_class/sub_class/quant`): whether a maintainer accepted its judge,
    which kernel's judge that is, and its kernels in the order they reached main."""

    board: str
    arch: str
    op_class: str
    sub_class: str
    quant: str
    reviewed: bool
    reviewed_by: str | None
    reviewed_at: str | None
    judge_kernel: str | None
    kernels: list[str]
    # The pinned reference every kernel's score is a speed-up over: the board's first kernel,
    # with the commit that pinned it (null where the log does not name it, e.g. an import).
    reference: BoardReference | None = None
    # On the board detail only: kernels whose benchmark.py or build_test_env.py differ from
    # the board's judge (null: not compared, e.g. in listings or past 100 kernels).
    other_judges: list[str] | None = None


class BoardList(_Out, frozen=True, kw_only=True):
    items: list[BoardDoc]
    total: int


class ReviewBoardBody(_In, frozen=True, kw_only=True):
    judge_kernel: Annotated[str, Meta(min_length=1, max_length=400)] | None = None
    message: Reason = ""


class PinReferenceBody(_In, frozen=True, kw_only=True):
    """A maintainer's new pinned reference for a board: a kernel of it, at one of its commits
    on main (default: its newest)."""

    kernel_id: Annotated[str, Meta(min_length=1, max_length=400)]
    commit: Annotated[str, Meta(pattern=r"^[0-9a-f]{40}$")] | None = None
    message: Reason = ""
