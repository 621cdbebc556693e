"""Pure builders of response documents from the read models."""

from __future__ import annotations

from datetime import UTC, datetime

from kz_api.models import (
    Commits,
    ConfirmationDoc,
    ConfirmationMark,
    ErrorInfo,
    EventRow,
    HistoryRow,
    LeaseDoc,
    ResultSummary,
    RunnerDoc,
    StatusDoc,
    SubmissionDetail,
    SuspectDoc,
    SuspectReasonDoc,
)
from kz_api.readmodel import HistoryEntry, ReadModels, RunnerView, SubmissionView
from kz_events.lifecycle import KernelLease, Status, SubmissionState
from kz_events.result import ResultDocument, stored_result

__all__ = [
    "confirmation_doc",
    "detail_doc",
    "history_row",
    "is_suspect",
    "lease_doc",
    "runner_doc",
    "status_doc",
    "suspect_doc",
]


def _result(view: SubmissionView) -> ResultSummary | None:
    state = view.state
    if state.outcome is None and state.result is None:
        return None
    doc = stored_result(state.result) or ResultDocument()
    return ResultSummary(
        accepted=doc.accepted,
        reason=doc.reason,
        metric_value=doc.value,
        outcome=state.outcome,
    )


def is_suspect(state: SubmissionState) -> bool:
    """Marked suspect and not cleared by a maintainer."""
    return state.suspect is not None and state.suspect_cleared is None


def suspect_doc(state: SubmissionState) -> SuspectDoc | None:
    if state.suspect is None:
        return None
    reasons = [
        SuspectReasonDoc(source=r.source, code=r.code, message=r.message, path=r.path, line=r.line)
        for r in state.suspect
    ]
    cleared = state.suspect_cleared is not None
    return SuspectDoc(reasons=reasons, cleared=cleared, cleared_reason=state.suspect_cleared)


_MARKS: dict[Status, ConfirmationMark] = {
    Status.CONFIRMED: "confirmed",
    Status.DISPUTED: "disputed",
}


def confirmation_doc(view: SubmissionView, models: ReadModels) -> ConfirmationDoc | None:
    """The confirmation run of an accepted result, when one was opened: a run that has not
    ended, or failed, leaves the result unconfirmed; its verdict's sentence once it ended, or
    why it failed."""
    run_id = models.confirmations.get(view.id)
    run = models.submissions.get(run_id) if run_id is not None else None
    if run is None:
        return None
    status = run.state.status
    mark: ConfirmationMark = _MARKS.get(status, "unconfirmed")
    summary = _result(run) if mark != "unconfirmed" else None
    reason = summary.reason if summary is not None else run.state.error_message
    return ConfirmationDoc(
        submission_id=run.id,
        status=str(status),
        mark=mark,
        reason=reason,
    )


def status_doc(view: SubmissionView, models: ReadModels, *, changed: bool = True) -> StatusDoc:
    state = view.state
    commits = None
    if state.source_commit and state.bench_result_commit:
        commits = Commits(source=state.source_commit, bench_result=state.bench_result_commit)
    error = None
    if state.error_code:
        error = ErrorInfo(code=state.error_code, message=state.error_message or "")
    return StatusDoc(
        submission_id=state.submission_id,
        kernel_id=state.kernel_id,
        submitter_id=state.submitter_id,
        status=str(state.status),
        version=state.version,
        attempt=state.attempt,
        runner_id=state.runner_id,
        result=_result(view),
        commits=commits,
        error=error,
        created_at=state.created_at,
        updated_at=state.updated_at,
        changed=changed,
        queue_position=models.queue_position(view),
        disqualified=state.disqualified,
        suspect=suspect_doc(state),
        confirms=state.confirms,
        confirmation=confirmation_doc(view, models),
        provenance=view.submitted.provenance,
    )


def detail_doc(view: SubmissionView, models: ReadModels) -> SubmissionDetail:
    sid = view.id
    return SubmissionDetail(
        submission=status_doc(view, models),
        events=[EventRow(seq=s, type=t, occurred_at=at, actor=a) for s, t, at, a in view.events],
        result_document=view.state.result,
        log_url=f"/api/submissions/{sid}/logs" if view.log_key else None,
        package_digest=view.submitted.package_digest,
        package_size=view.submitted.package_size,
        message=view.submitted.message,
        base_commit=view.submitted.base_commit,
        new_kernel=view.submitted.new_kernel,
    )


def history_row(entry: HistoryEntry, models: ReadModels | None = None) -> HistoryRow:
    view = models.submissions.get(entry.submission_id) if models is not None else None
    return HistoryRow(
        value=entry.value,
        at=entry.at,
        commit=entry.commit,
        bench_result_commit=entry.bench_result_commit,
        submission_id=entry.submission_id,
        submitter_id=entry.submitter_id,
        disqualified=entry.disqualified,
        suspect=view is not None and is_suspect(view.state),
        provenance=view.submitted.provenance if view is not None else None,
    )


def lease_doc(lease: KernelLease) -> LeaseDoc:
    return LeaseDoc(
        kernel_id=lease.kernel_id,
        holder=lease.holder,
        lease_id=lease.lease_id,
        expires_at=lease.expires_at,
    )


def runner_doc(view: RunnerView, now: datetime | None = None) -> RunnerDoc:
    state = view.state_at(now or datetime.now(UTC))
    return RunnerDoc(
        runner_id=view.runner_id,
        arches=view.arches,
        device=view.device,
        backend=view.backend,
        labels=view.labels,
        registered_at=view.registered_at,
        last_heartbeat=view.last_heartbeat,
        busy_with=view.busy_with,
        state=state,
    )
