"""The lease service on the in-memory log: claims, results, hand-backs and the one rule by which
a runner settles its delivery."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from kz_events.errors import RuleViolation
from kz_events.events import (
    SubmissionRequeued,
    SubmissionResult,
    SubmissionSubmitted,
    TaskHeartbeat,
)
from kz_events.leasing import (
    AVOID_DELAY_S,
    AVOID_DELIVERIES,
    LeaseService,
    ResultReport,
    settle_rule,
)
from kz_events.lifecycle import RELEASED_PHASE, Status, SubmissionState
from kz_events.memlog import MemoryLog
from kz_events.port import Settle
from kz_events.subjects import LOGS_BUCKET, live_subject

pytestmark = pytest.mark.unit

KID = "cpu/Norm/RMSNorm/fp32/numpy_ref"
REPORT = ResultReport(
    outcome="timed_out", result=None, environment={}, duration_s=1.0, log=b"ran", timings={}
)


async def queued(log: MemoryLog, avoid_runner: str | None = None) -> str:
    sid = str(uuid.uuid4())
    await log.append(
        SubmissionSubmitted(
            event_id=str(uuid.uuid4()),
            occurred_at=datetime.now(UTC),
            actor="alice",
            submission_id=sid,
            kernel_id=KID,
            submitter_id="alice",
            package_digest="d" * 64,
            package_size=10,
            confirms=None if avoid_runner is None else "confirmed-sid",
            avoid_runner=avoid_runner,
        )
    )
    return sid


@pytest.mark.parametrize(
    ("state", "settle"),
    [
        (SubmissionState(status=Status.CANCELLED, lease_id="mine"), Settle.ACK),
        (SubmissionState(status=Status.ACCEPTED, lease_id="mine"), Settle.ACK),
        (SubmissionState(status=Status.RUNNING, lease_id="mine", result_seq=4), Settle.ACK),
        (SubmissionState(status=Status.RUNNING, lease_id="mine"), Settle.NAK),
        (SubmissionState(status=Status.RUNNING, lease_id="theirs"), None),
    ],
)
def test_the_settle_rule(state: SubmissionState, settle: Settle | None) -> None:
    """Ended work or a stored result is acknowledged, a current lease handed back, and another
    runner's delivery left alone."""
    assert settle_rule(state, "mine") is settle


async def test_a_result_stores_its_log_and_acknowledges_the_task() -> None:
    """A reported result is appended with its log, and the task leaves the queue."""
    log = MemoryLog()
    service = LeaseService(log, lease_s=30)
    sid = await queued(log)
    lease = await service.claim("r1", ["cpu"], 1)
    assert lease is not None and lease.attempt == 1
    state = await service.report(lease, REPORT)
    assert state.result_seq is not None
    assert await log.get_object_bytes(LOGS_BUCKET, f"{sid}-1") == b"ran"
    assert await log.task_ack_floor("cpu") == 1


async def test_a_late_result_of_a_lost_lease_is_refused_and_leaves_the_delivery() -> None:
    """After a hand-back and another runner's claim, the first lease's result is refused,
    stores no log, and its delivery is the new holder's to settle."""
    log = MemoryLog()
    service = LeaseService(log, lease_s=30)
    sid = await queued(log)
    first = await service.claim("r1", ["cpu"], 1)
    assert first is not None
    await service.hand_back(first)
    beat = await log.last_live(live_subject("task", "cpu", sid))
    assert isinstance(beat, TaskHeartbeat) and beat.phase == RELEASED_PHASE
    second = await service.claim("r2", ["cpu"], 1)  # released: taken over at once
    assert second is not None and second.attempt == 2
    with pytest.raises(RuleViolation) as refused:
        await service.report(first, REPORT)
    assert refused.value.code == "stale_lease"
    assert not await log.has_object(LOGS_BUCKET, f"{sid}-1")
    assert await log.task_ack_floor("cpu") == 0
    with pytest.raises(RuleViolation, match="not the submission's current claim"):
        await service.heartbeat(first, "run")
    assert await service.heartbeat(second, "run") is False


async def test_a_confirmation_run_goes_to_another_runner_else_comes_back_later() -> None:
    """The runner of the result being confirmed hands its confirmation run back (a few times,
    with a delay); another runner takes it at once; alone, the first takes it in the end."""
    log = MemoryLog()
    service = LeaseService(log, lease_s=30)
    sid = await queued(log, avoid_runner="r1")
    assert await service.claim("r1", ["cpu"], 0.2) is None
    other = await service.claim("r2", ["cpu"], 5)
    assert other is not None and other.submission_id == sid

    alone = await queued(log, avoid_runner="r1")
    lease = None
    for _ in range(AVOID_DELIVERIES + 1):
        lease = lease or await service.claim("r1", ["cpu"], AVOID_DELAY_S + 1)
    assert lease is not None and lease.submission_id == alone


async def _requeue(log: MemoryLog, sid: str, runner: str) -> int:
    """What the referee appends when it sets a result aside for a retry."""
    return await log.append(
        SubmissionRequeued(
            event_id=str(uuid.uuid4()),
            occurred_at=datetime.now(UTC),
            actor="referee",
            submission_id=sid,
            kernel_id=KID,
            code="unsettled",
            reason="the host was too noisy to tell",
            result_seq=3,
            attempt=1,
            avoid_runner=runner,
        )
    )


async def test_a_retry_is_claimed_again_by_another_runner_as_the_next_attempt() -> None:
    """A `requeued` event is a task again: another runner takes it (the one that measured is
    avoided) as attempt 2, with the package its submission names."""
    log = MemoryLog()
    service = LeaseService(log, lease_s=30)
    sid = await queued(log)
    first = await service.claim("r1", ["cpu"], 1)
    assert first is not None
    rejected = ResultReport(
        outcome="rejected", result=None, environment={}, duration_s=1.0, log=b"", timings={}
    )
    await service.report(first, rejected)
    await _requeue(log, sid, "r1")
    assert await service.claim("r1", ["cpu"], 0.2) is None  # handed on
    retry = await service.claim("r2", ["cpu"], AVOID_DELAY_S + 1)
    assert retry is not None and (retry.submission_id, retry.attempt) == (sid, 2)
    assert retry.package_digest == "d" * 64 and retry.runner_id == "r2"


async def test_a_delivery_a_retry_superseded_is_acknowledged() -> None:
    """The first delivery of a submission, never acknowledged (its runner died after its result
    was stored), comes back after the retry queued it again: it is acknowledged, and only the
    retry's delivery is claimed."""
    log = MemoryLog()
    service = LeaseService(log, lease_s=30)
    sid = await queued(log)
    first = await service.claim("r1", ["cpu"], 1)
    assert first is not None
    await log.append(
        SubmissionResult(
            event_id=str(uuid.uuid4()),
            occurred_at=datetime.now(UTC),
            actor="r1",
            submission_id=sid,
            kernel_id=KID,
            runner_id="r1",
            attempt=1,
            lease_id=first.lease_id,
            outcome="rejected",
        )
    )  # stored, but the delivery never settled
    retry_seq = await _requeue(log, sid, "r9")
    await log.settle_task(first.reply, Settle.NAK)  # the first delivery comes back at once
    lease = await service.claim("r2", ["cpu"], 2)
    assert lease is not None and lease.attempt == 2 and lease.reply.endswith(f".{retry_seq}.1")
    assert await log.task_ack_floor("cpu") == 1  # the stale first delivery is done
