"""The sweeper's and the git projector's rules on the in-memory log (kz_events.memlog), which the
log contract suite holds to the real one: no server, milliseconds."""

from __future__ import annotations

import hashlib
import itertools
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kz_events.commands import Submission, execute
from kz_events.config import load_settings
from kz_events.events import (
    Event,
    EventMeta,
    SubmissionCommitted,
    SubmissionResult,
    UnknownEvent,
)
from kz_events.lifecycle import (
    Cancel,
    Claim,
    Judge,
    ReportResult,
    Status,
    SubmissionState,
    Submit,
)
from kz_events.memlog import MemoryLog
from kz_events.port import Settle
from kz_events.subjects import PACKAGES_BUCKET
from kz_projector.gitproj import GitProjector
from kz_projector.gitstore import MAIN, open_repo, ref_value
from kz_projector.packages import ObjectStorePackages
from kz_projector.sweeper import Sweeper
from kz_testing.packages import package_files, package_tarball

pytestmark = pytest.mark.unit

KID = "cpu/Norm/RMSNorm/fp32/memory"
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
LEASE_S = 10.0


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _meta(clock: Clock, actor: str) -> EventMeta:
    return EventMeta(event_id=str(uuid.uuid4()), occurred_at=clock(), actor=actor)


async def _claimed(
    log: MemoryLog, clock: Clock, *, max_attempts: int, digest: str = "d" * 64
) -> str:
    sid = str(uuid.uuid4())
    submit = Submit(
        meta=_meta(clock, "alice"),
        submission_id=sid,
        kernel_id=KID,
        submitter_id="alice",
        package_digest=digest,
        package_size=1,
        max_attempts=max_attempts,
    )
    sub = Submission.of(KID, sid)
    await execute(log, sub, submit, expected=SubmissionState())
    claim = Claim(meta=_meta(clock, "r1"), runner_id="r1", lease_id="L1", attempt=1)
    await execute(log, sub, claim)
    return sid


def _sweeper(log: MemoryLog, clock: Clock) -> Sweeper:
    ids = (f"sweep-{n}" for n in itertools.count())
    return Sweeper(
        log, lease_s=LEASE_S, grace_s=0, clock=clock, new_id=lambda: next(ids), task_timeout_s=60
    )


async def _status(log: MemoryLog, sid: str) -> tuple[Status, str | None]:
    sub = Submission.of(KID, sid)
    state = sub.fold(await log.load(sub.subject_filter))
    return state.status, state.error_code


async def test_the_sweeper_fails_a_lost_last_attempt_and_leaves_one_to_be_redelivered() -> None:
    """Past its lease, a quiet task on its last attempt fails `runner_lost`; one with attempts
    left whose message the queue still holds is left for its redelivery."""
    log, clock = MemoryLog(), Clock()
    await log.ensure_task_consumer("cpu", lease_s=LEASE_S)
    last = await _claimed(log, clock, max_attempts=1)
    retried = await _claimed(log, clock, max_attempts=3)
    clock.now += timedelta(seconds=LEASE_S + 1)
    assert await _sweeper(log, clock).sweep() == [last]
    assert await _status(log, last) == (Status.FAILED, "runner_lost")
    assert await _status(log, retried) == (Status.RUNNING, None)


async def test_the_sweeper_fails_a_lost_task_the_queue_no_longer_holds() -> None:
    """A quiet task with attempts left whose message was acknowledged (the ack floor passed
    it) would never be offered again: it fails `runner_lost`."""
    log, clock = MemoryLog(), Clock()
    await log.ensure_task_consumer("cpu", lease_s=LEASE_S)
    sid = await _claimed(log, clock, max_attempts=3)
    task = await log.next_task("cpu", 0.1)
    assert task is not None
    await log.settle_task(task.reply, Settle.ACK)
    clock.now += timedelta(seconds=LEASE_S + 1)
    assert await _sweeper(log, clock).sweep() == [sid]
    assert await _status(log, sid) == (Status.FAILED, "runner_lost")


async def test_the_sweeper_times_out_whatever_stays_open_past_its_limit() -> None:
    """Heartbeats or not, a task open past max_attempts times (timeout + 2 leases) is timed out."""
    log, clock = MemoryLog(), Clock()
    sid = await _claimed(log, clock, max_attempts=2)
    clock.now += timedelta(seconds=2 * (60 + 2 * LEASE_S) + 1)
    assert await _sweeper(log, clock).sweep() == [sid]
    assert await _status(log, sid) == (Status.FAILED, "timed_out")


async def test_the_sweeper_leaves_a_task_that_ended_after_its_fold() -> None:
    """A task cancelled after the sweeper folded it is not failed: its view is asked again on
    the log, which refuses."""
    log, clock = MemoryLog(), Clock()
    sid = await _claimed(log, clock, max_attempts=1)
    sweeper = _sweeper(log, clock)
    await sweeper.catch_up()
    await execute(log, Submission.of(KID, sid), Cancel(meta=_meta(clock, "alice")))
    clock.now += timedelta(seconds=LEASE_S + 1)
    assert await sweeper.fail(sid, "lost") is False
    assert await _status(log, sid) == (Status.CANCELLED, "cancelled")


class InterleavedLog(MemoryLog):
    """A memory log that runs `between` once, inside the next heartbeat lookup: what the
    sweeper's follow does while a pass awaits the live stream, made to happen at one point."""

    def __init__(self) -> None:
        super().__init__()
        self.between: Callable[[], Awaitable[None]] | None = None

    async def last_live(self, subject: str) -> Event | UnknownEvent | None:
        between, self.between = self.between, None
        if between is not None:
            await between()
        return await super().last_live(subject)


async def test_a_sweep_survives_submissions_ending_during_its_awaits() -> None:
    """A lapsed task that ends while the pass awaits another's heartbeat (the follow drops it
    from the tracked set) is neither a crash nor failed; the other lapsed task is."""
    log, clock = InterleavedLog(), Clock()
    first = await _claimed(log, clock, max_attempts=1)
    second = await _claimed(log, clock, max_attempts=1)
    sweeper = _sweeper(log, clock)
    await sweeper.catch_up()

    async def cancel_second() -> None:
        await execute(log, Submission.of(KID, second), Cancel(meta=_meta(clock, "alice")))
        await sweeper.catch_up()  # the follow tracks it: the submission leaves `subs`

    log.between = cancel_second
    clock.now += timedelta(seconds=LEASE_S + 1)
    assert await sweeper.sweep() == [first]
    assert second not in sweeper.subs
    assert await _status(log, first) == (Status.FAILED, "runner_lost")
    assert await _status(log, second) == (Status.CANCELLED, "cancelled")


async def test_a_sweep_leaves_a_task_claimed_again_during_its_awaits() -> None:
    """An ending judged on one lease is not applied to the next one: a task its runner lost
    and another runner claimed while the pass looked at heartbeats stays running."""
    log, clock = InterleavedLog(), Clock()
    await log.ensure_task_consumer("cpu", lease_s=LEASE_S)
    sid = await _claimed(log, clock, max_attempts=3)
    task = await log.next_task("cpu", 0.1)
    assert task is not None
    await log.settle_task(task.reply, Settle.ACK)  # the queue no longer holds it: it would end
    sweeper = _sweeper(log, clock)
    clock.now += timedelta(seconds=LEASE_S + 1)

    async def claim_again() -> None:
        claim = Claim(meta=_meta(clock, "r2"), runner_id="r2", lease_id="L2", attempt=2)
        await execute(log, Submission.of(KID, sid), claim)

    await sweeper.catch_up()
    log.between = claim_again
    assert await sweeper.sweep() == []
    sub = Submission.of(KID, sid)
    state = sub.fold(await log.load(sub.subject_filter))
    assert (state.status, state.lease_id, state.attempt) == (Status.RUNNING, "L2", 2)


def _result_doc(value: float) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "accepted": True,
        "reason": "faster",
        "metric": {"name": "latency", "unit": "us", "better": "lower", "value": value},
        "workloads": [
            {"name": "w", "value": value, "stats": {"median": value, "samples": [value, value]}}
        ],
        "correctness": {"passed": True, "checks": []},
        "environment": {"device": "cpu"},
    }


async def _accepted(log: MemoryLog, clock: Clock, digest: str, value: float) -> str:
    sid = await _claimed(log, clock, max_attempts=1, digest=digest)
    sub = Submission.of(KID, sid)
    report = ReportResult(
        meta=_meta(clock, "r1"),
        runner_id="r1",
        lease_id="L1",
        outcome="accepted",
        result=_result_doc(value),
    )
    done = await execute(log, sub, report)
    [result] = done.events
    assert isinstance(result, SubmissionResult)
    judge = Judge(meta=_meta(clock, "referee"), result_seq=done.seq, result_event=result)
    await execute(log, sub, judge)
    return sid


async def test_the_git_projector_commits_each_accepted_result_and_announces_it_once(
    tmp_path: Path,
) -> None:
    """Two accepted results make four commits on main and one `committed` each; a second
    projector folding the same log makes the same commits and announces nothing new."""
    log, clock = MemoryLog(), Clock()
    tarball = package_tarball(package_files(KID))
    digest = hashlib.sha256(tarball).hexdigest()
    await log.put_object(PACKAGES_BUCKET, digest, tarball)
    sids = [await _accepted(log, clock, digest, v) for v in (5.0, 3.0)]
    settings = load_settings({"KZ_DATA_DIR": str(tmp_path), "KZ_KERNEL_REPO_PATH": str(tmp_path)})
    heads = []
    for _ in range(2):
        repo = open_repo(None)
        projector = GitProjector(
            log, settings, repo=repo, packages=ObjectStorePackages(log), clock=clock
        )
        await projector.catch_up()
        heads.append(ref_value(repo, MAIN))
    assert heads[0] is not None and heads[0] == heads[1]
    committed = [e for _, e in await log.load("kz.ev.submission.*.*.committed")]
    assert sorted(e.submission_id for e in committed if isinstance(e, SubmissionCommitted)) == (
        sorted(sids)
    )
