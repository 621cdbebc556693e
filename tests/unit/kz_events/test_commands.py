"""The one command path on the in-memory log: load, decide, append with the check, and the one
conflict policy (retry on a moved aggregate, ask a refusal of a stale view again)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kz_events.commands import ATTEMPTS, Kernel, Submission, execute
from kz_events.errors import ConcurrencyConflict, RuleViolation
from kz_events.events import Event, EventMeta, KernelClaimed
from kz_events.lifecycle import (
    Admission,
    Cancel,
    Claim,
    ClaimKernel,
    Commit,
    KernelLease,
    ReleaseKernel,
    Status,
    SubmissionState,
    Submit,
    admit,
)
from kz_events.memlog import MemoryLog

pytestmark = pytest.mark.unit

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
KID = "sm90/Attention/MHA/fp16/flash_v3"


def meta(actor: str = "svc", at: datetime = T0) -> EventMeta:
    return EventMeta(event_id=str(uuid.uuid4()), occurred_at=at, actor=actor)


def submit(sid: str, **admission: Any) -> Submit:
    return Submit(
        meta=meta("alice"),
        submission_id=sid,
        kernel_id=KID,
        submitter_id="alice",
        package_digest="d" * 64,
        package_size=10,
        admission=Admission(**admission),
    )


def claim(runner: str) -> Any:
    """A claim made from the state it is decided on (the attempt after the state's)."""

    def made(state: SubmissionState) -> Claim:
        return Claim(
            meta=meta(runner),
            runner_id=runner,
            lease_id=runner,
            attempt=state.attempt + 1,
            lease_s=60,
        )

    return made


async def submitted(log: MemoryLog) -> Submission:
    sid = str(uuid.uuid4())
    await execute(log, Submission.of(KID, sid), submit(sid), expected=SubmissionState())
    return Submission.of(KID, sid)


async def test_a_command_is_decided_on_the_stored_aggregate_and_appended() -> None:
    """Without a view of its own the caller's command is decided on what the log holds."""
    log = MemoryLog()
    sub = await submitted(log)
    done = await execute(log, sub, claim("r1"))
    assert done.state.status is Status.RUNNING and done.state.attempt == 1
    assert done.seq == 2 == done.state.version and [e.type for e in done.events] == ["claimed"]


async def test_a_stale_view_that_conflicts_is_decided_again_on_the_log() -> None:
    """A second claimer holding the queued state conflicts, reloads, and is refused: the first
    claim's lease is live."""
    log = MemoryLog()
    sub = await submitted(log)
    queued = sub.fold(await log.load(sub.subject_filter))
    await execute(log, sub, claim("r1"), expected=queued)
    with pytest.raises(RuleViolation) as refused:
        await execute(log, sub, claim("r2"), expected=queued)
    assert refused.value.code == "stale_lease" and refused.value.details["why"] == "lease_live"


async def test_a_refusal_of_a_stale_view_is_asked_again() -> None:
    """A view that refuses (a cancelled submission it thinks running) is not the answer: the
    stored aggregate is, and there the command goes through."""
    log = MemoryLog()
    sub = await submitted(log)
    stale = SubmissionState(status=Status.CANCELLED, version=1)
    done = await execute(log, sub, Cancel(meta=meta()), expected=stale)
    assert done.state.status is Status.CANCELLED and done.seq == 2


async def test_a_refusal_of_the_stored_aggregate_is_raised() -> None:
    """The rules' refusal on what the log holds reaches the caller and appends nothing."""
    log = MemoryLog()
    sub = await submitted(log)
    await execute(log, sub, Cancel(meta=meta()))
    with pytest.raises(RuleViolation, match="only queued or running"):
        await execute(log, sub, Cancel(meta=meta()))
    assert await log.last_seq() == 2


async def test_an_idempotent_command_met_by_its_result_appends_nothing() -> None:
    """A commit announced already decides no event: nothing is appended, nothing raised."""
    log = MemoryLog()
    sub = await submitted(log)
    state = SubmissionState(status=Status.COMMITTED, source_commit="abc", version=1)
    command = Commit(meta=meta(), source_commit="abc", bench_result_commit="def", accepted_seq=1)
    done = await execute(log, sub, command, expected=state)
    assert done.events == [] and done.seq == 0


async def test_before_append_runs_once_and_only_for_a_command_the_rules_take() -> None:
    """The hook runs before the first append try, not again on a retry, not on a refusal of
    the stored aggregate."""
    log = MemoryLog()
    sub = await submitted(log)
    seen: list[list[Event]] = []

    async def hook(events: list[Event]) -> None:
        seen.append(events)

    queued = sub.fold(await log.load(sub.subject_filter))
    await execute(log, sub, Cancel(meta=meta()), expected=queued, before_append=hook)
    assert [[e.type for e in batch] for batch in seen] == [["cancelled"]]
    with pytest.raises(RuleViolation):
        await execute(log, sub, Cancel(meta=meta()), before_append=hook)
    assert len(seen) == 1


class MovingLog(MemoryLog):
    """A log whose aggregates always moved since the caller looked."""

    async def append(
        self, event: Event, *, expect: int | None = None, expect_on: str | None = None
    ) -> int:
        if expect is not None and event.type != "submitted":
            raise ConcurrencyConflict("moved", details={"expected": expect})
        return await super().append(event, expect=expect, expect_on=expect_on)


async def test_an_aggregate_that_keeps_moving_is_a_conflict_after_the_attempts() -> None:
    """Conflict after conflict, the command gives up after `ATTEMPTS` decisions."""
    log = MovingLog()
    sub = await submitted(log)
    loads = 0
    load = log.load

    async def counted(subject_filter: str, **kw: Any) -> Any:
        nonlocal loads
        loads += 1
        return await load(subject_filter, **kw)

    log.load = counted  # type: ignore[method-assign]
    with pytest.raises(ConcurrencyConflict, match="kept changing") as conflict:
        await execute(log, sub, Cancel(meta=meta()))
    assert conflict.value.details["attempts"] == ATTEMPTS and loads == ATTEMPTS


async def test_a_kernel_lease_goes_through_the_same_path() -> None:
    """A kernel's optimisation lease is claimed and released by `execute` too, and a claim by
    another while it is held is claim_held."""
    log = MemoryLog()
    kernel = Kernel(KID)
    command = ClaimKernel(meta=meta("bob"), kernel_id=KID, holder="bob", lease_id="L", ttl_s=600)
    held = await execute(log, kernel, command)
    assert isinstance(held.events[0], KernelClaimed) and held.state.holder == "bob"
    other = ClaimKernel(meta=meta("amy"), kernel_id=KID, holder="amy", lease_id="M", ttl_s=60)
    with pytest.raises(RuleViolation, match="bob holds"):
        await execute(log, kernel, other)
    released = await execute(
        log, kernel, ReleaseKernel(meta=meta("bob"), kernel_id=KID, holder="bob")
    )
    assert released.state.holder is None and released.seq == 2


LEASE = KernelLease(kernel_id=KID, holder="bob", lease_id="L", expires_at=T0 + timedelta(hours=1))


@pytest.mark.parametrize(
    ("facts", "code"),
    [
        ({}, None),
        ({"kernel_lease": LEASE}, "claim_held"),
        ({"open_submissions": 3, "max_open_submissions": 3}, "quota_exceeded"),
        ({"open_submissions": 2, "max_open_submissions": 3}, None),
        ({"open_twin": "s-1"}, "duplicate_package"),
        ({"judge_changes": ["benchmark.py"]}, "harness_change_forbidden"),
        (
            {"judge_changes": ["benchmark.py"], "board_judge": "sm90/A/B/c/d"},
            "harness_change_forbidden",
        ),
        ({"judge_changes": ["benchmark.py"], "maintainer": True}, None),
    ],
)
def test_admission_rules_are_rules_over_the_facts(facts: dict[str, Any], code: str | None) -> None:
    """Lease held by another, quota, an open twin and a judge change refuse a submission; a
    maintainer may change a judge."""
    if code is None:
        admit(KID, "alice", Admission(**facts), T0)
        return
    with pytest.raises(RuleViolation) as refused:
        admit(KID, "alice", Admission(**facts), T0)
    assert refused.value.code == code


def test_the_lease_holder_and_an_expired_lease_do_not_block() -> None:
    """The lease rule is one: its holder may submit, and nobody is held up once it expired."""
    admit(KID, "bob", Admission(kernel_lease=LEASE), T0)
    admit(KID, "alice", Admission(kernel_lease=LEASE), T0 + timedelta(hours=2))


async def test_submit_decides_the_admission_rules_and_stores_no_facts() -> None:
    """`decide(Submit)` refuses by the admission rules; the event it appends carries no facts."""
    log = MemoryLog()
    sid = str(uuid.uuid4())
    with pytest.raises(RuleViolation) as refused:
        await execute(log, Submission.of(KID, sid), submit(sid, open_twin="s-1"))
    assert refused.value.code == "duplicate_package" and await log.last_seq() == 0
    done = await execute(log, Submission.of(KID, sid), submit(sid))
    assert "admission" not in type(done.events[0]).__struct_fields__
