"""What the referee remembers of the boards (`Records`): which result needs a confirmation run,
where a kernel's incumbent stands, and which of main's sources a voided rival flags."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from kz_events.events import (
    ReferencePinned,
    SubmissionAccepted,
    SubmissionCommitted,
    SubmissionDisputed,
    SubmissionRequeued,
    SubmissionSuspected,
)
from kz_projector.records import Records

pytestmark = pytest.mark.unit

BOARD = "cpu/Norm/RMSNorm/fp32"


def _meta() -> dict[str, Any]:
    return {"event_id": str(uuid.uuid4()), "occurred_at": datetime.now(UTC), "actor": "referee"}


def _accepted(name: str, sid: str, score: tuple[float, float, float] | None, **doc: Any) -> Any:
    result: dict[str, Any] = {"accepted": True, **doc}
    if score is not None:
        result["score"] = {"against": "reference", "speedup": score[0], "interval": list(score[1:])}
    return SubmissionAccepted(
        **_meta(),
        submission_id=sid,
        kernel_id=f"{BOARD}/{name}",
        submitter_id="alice",
        runner_id="r1",
        attempt=1,
        package_digest="d" * 64,
        result=result,
        result_seq=1,
    )


def test_a_boards_first_scored_result_above_the_reference_is_confirmed() -> None:
    """Rank 1 is above the reference's exactly 1 and every other standing score; no other
    scored kernel is needed, and an unsettled or slower score takes no rank 1."""
    records = Records()
    records.track(_accepted("ref", "s0", None))
    records.track(_accepted("slow", "s1", (0.8, 0.79, 0.81)))
    records.track(_accepted("noise", "s2", (9.0, 0.5, 40.0)))
    assert records.awaiting() == []
    records.track(_accepted("fast", "s3", (1.5, 1.48, 1.52)))
    assert [a.submission_id for a in records.awaiting()] == ["s3"]


def test_a_kernels_standing_is_its_newest_undisputed_settled_score() -> None:
    records = Records()
    kernel = f"{BOARD}/k"
    records.track(_accepted("k", "s1", (1.2, 1.18, 1.22)))
    records.track(_accepted("k", "s2", (2.0, 1.96, 2.04)))
    assert records.standing(kernel) == (2.0, 1.96, 2.04)
    records.track(
        SubmissionDisputed(
            **_meta(), submission_id="c2", kernel_id=kernel, confirms="s2", reason="disagrees"
        )
    )
    assert records.standing(kernel) == (1.2, 1.18, 1.22)


VOIDED = {"rivals": {"incumbent": {"status": "voided", "reason": "it raised KeyError"}}}


def _requeued(name: str, sid: str) -> SubmissionRequeued:
    return SubmissionRequeued(
        **_meta(),
        submission_id=sid,
        kernel_id=f"{BOARD}/{name}",
        code="rival_voided",
        reason="the incumbent was voided",
        result_seq=2,
        attempt=1,
        avoid_runner="r1",
    )


def test_a_rival_voided_after_its_retry_flags_main_s_source_once() -> None:
    """The incumbent's current accepted submission is flagged, named after the challenger; a
    verdict folded twice (appended, then delivered by the log) flags it once, and a flag the
    log already holds is not asked for again."""
    records = Records()
    records.track(_accepted("k", "main", (1.2, 1.18, 1.22)))
    records.track(_requeued("k", "challenger"))
    verdict = _accepted("k", "challenger", (1.5, 1.48, 1.52), **VOIDED)
    records.track(verdict)  # as the referee appends it
    records.track(verdict)  # and as the log delivers it
    [flag] = records.pending_flags()
    assert (flag.kernel_id, flag.submission_id) == (f"{BOARD}/k", "main")
    assert flag.reason.source == "rival" and flag.reason.code == "incumbent_voided"
    assert "challenger" in flag.reason.message and "it raised KeyError" in flag.reason.message
    records.track(
        SubmissionSuspected(
            **_meta(),
            submission_id="main",
            kernel_id=f"{BOARD}/k",
            result_seq=1,
            reasons=[flag.reason],
        )
    )
    assert records.pending_flags() == []


def test_a_voided_rival_without_its_retry_flags_nothing() -> None:
    """A verdict reached before the rival's retry (the candidate failed first) says nothing of
    the rival's fault."""
    records = Records()
    records.track(_accepted("k", "main", (1.2, 1.18, 1.22)))
    records.track(_accepted("k", "challenger", (1.5, 1.48, 1.52), **VOIDED))
    assert records.pending_flags() == []


def test_a_voided_reference_flags_the_submission_that_committed_it() -> None:
    records = Records()
    records.track(_accepted("ref", "r-sid", None))
    records.track(
        SubmissionCommitted(
            **_meta(),
            submission_id="r-sid",
            kernel_id=f"{BOARD}/ref",
            source_commit="c" * 40,
            bench_result_commit="b" * 40,
            accepted_seq=1,
        )
    )
    records.track(_requeued("k", "challenger"))
    voided = {"rivals": {"reference": {"status": "voided", "reason": "wrong outputs"}}}
    records.track(_accepted("k", "challenger", (1.5, 1.48, 1.52), **voided))
    [flag] = records.pending_flags()
    assert (flag.submission_id, flag.reason.code) == ("r-sid", "reference_voided")


def test_a_voided_reference_flags_the_pinned_one_once_a_maintainer_pinned_another() -> None:
    records = Records()
    for name, sid, commit in (("ref", "r-sid", "c" * 40), ("other", "o-sid", "d" * 40)):
        records.track(_accepted(name, sid, None))
        records.track(
            SubmissionCommitted(
                **_meta(),
                submission_id=sid,
                kernel_id=f"{BOARD}/{name}",
                source_commit=commit,
                bench_result_commit="b" * 40,
                accepted_seq=1,
            )
        )
    records.track(
        ReferencePinned(
            event_id=str(uuid.uuid4()),
            occurred_at=datetime.now(UTC),
            actor="maint",
            kernel_id=f"{BOARD}/other",
            commit="d" * 40,
        )
    )
    records.track(_requeued("k", "challenger"))
    voided = {"rivals": {"reference": {"status": "voided", "reason": "wrong outputs"}}}
    records.track(_accepted("k", "challenger", (1.5, 1.48, 1.52), **voided))
    [flag] = records.pending_flags()
    assert (flag.kernel_id, flag.submission_id) == (f"{BOARD}/other", "o-sid")
