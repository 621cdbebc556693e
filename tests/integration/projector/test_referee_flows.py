"""The referee's rules end to end: real NATS, the projectors and two runners on the stub
backend, whose scripted documents the judge would send. Each flow ends in a state the
submitter sees, the board shows only what stands, and a replay makes the same commits."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from flow_helpers import BOARD, running
from projector_helpers import settings_for

from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.events import (
    SubmissionClaimed,
    SubmissionRejected,
    SubmissionRequeued,
    SubmissionSuspected,
    TripwireHit,
)
from kz_events.lifecycle import Status
from kz_projector.audit import run_audit
from kz_projector.referee import confirmation_id

pytestmark = pytest.mark.integration


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """A lease long enough that a busy host's late heartbeat loses no task."""
    return settings_for(tmp_path, KZ_LEASE_S=15)


def _now() -> datetime:
    return datetime.now(UTC)


def _kinds(events: list[object]) -> list[str]:
    return [str(getattr(e, "type", "")) for e in events]


async def test_an_unsettled_result_is_retried_on_the_other_runner_and_committed(
    event_log: EventLog, settings: Settings, tmp_path: Path
) -> None:
    """The first attempt's figures are noise: the referee requeues it, naming the runner that
    measured it; the other runner measures it again, settled, and it is committed. Nothing of
    the first attempt reaches the board, and a replay of the log makes the same commits."""
    async with running(event_log, settings, tmp_path) as platform:
        sid = await platform.submit(
            "steady", {"value": 40.0, "unsettled": True, "faulty_attempts": 1}
        )
        await platform.settled()
    events = await platform.events(sid)
    assert _kinds(events) == [
        "submitted", "claimed", "result", "requeued", "claimed", "result", "accepted", "committed",
    ]  # fmt: skip
    requeued = next(e for e in events if isinstance(e, SubmissionRequeued))
    first, second = (e for e in events if isinstance(e, SubmissionClaimed))
    assert requeued.code == "unsettled" and requeued.avoid_runner == first.runner_id
    assert "the host was too noisy to tell: spread" in requeued.reason
    assert second.runner_id != first.runner_id and second.attempt == 2
    state = await platform.state(sid)
    assert state.status is Status.COMMITTED and state.result is not None
    assert state.result["gate"]["settled"] is True
    report = await run_audit(settings, clock=_now, elog=event_log)
    assert report.ok, report.problems


async def test_an_unsettled_result_twice_is_rejected_inconclusive_and_never_on_the_board(
    event_log: EventLog, settings: Settings, tmp_path: Path
) -> None:
    async with running(event_log, settings, tmp_path) as platform:
        await platform.submit("ref", {"value": 50.0})
        sid = await platform.submit("noisy", {"value": 10.0, "reference": 50.0, "unsettled": True})
        await platform.settled()
    state = await platform.state(sid)
    assert state.status is Status.REJECTED and state.error_code == "inconclusive"
    assert state.requeues == ["unsettled"]
    assert (state.error_message or "").startswith("inconclusive: the host was too noisy to tell")
    assert [row["kernel_id"] for row in platform.board()] == [f"{BOARD}/ref"]
    assert f"{BOARD}/noisy" not in {k["id"] for k in platform.index()["kernels"]}


async def test_a_crashing_candidate_is_rejected_with_its_own_error(
    event_log: EventLog, settings: Settings, tmp_path: Path
) -> None:
    """The regression: a challenger that raised in a side-by-side run ended `failed:
    invalid_result: metric.value must be a finite number, got None`. It is rejected at once
    (no retry: its failure is its own) with its exception."""
    async with running(event_log, settings, tmp_path) as platform:
        await platform.submit("crashy", {"value": 20.0})
        await platform.settled()
        sid = await platform.submit("crashy", {"value": 10.0, "incumbent": 20.0, "crash": "call"})
        await platform.settled()
    events = await platform.events(sid)
    [rejected] = [e for e in events if isinstance(e, SubmissionRejected)]
    assert (rejected.code, rejected.reason) == (
        "candidate_error",
        "the candidate failed in a call: ZeroDivisionError: division by zero",
    )
    assert "requeued" not in _kinds(events)


async def test_a_voided_incumbent_is_retried_then_the_challenger_is_judged_against_its_standing(
    event_log: EventLog, settings: Settings, tmp_path: Path
) -> None:
    """The incumbent fails beside the challenger twice: the challenger is measured again once,
    then judged against the incumbent's standing score (0.75x the reference, settled) and,
    at 1.5x, accepted; main's source of the incumbent is marked suspect for the maintainers,
    naming the challenger. The incumbent's fault neither rejects nor fails the challenger."""
    async with running(event_log, settings, tmp_path) as platform:
        first = await platform.submit("held", {"value": 20.0, "reference": 15.0})
        await platform.settled()
        script = {"value": 10.0, "incumbent": 20.0, "reference": 15.0, "void": "incumbent"}
        sid = await platform.submit("held", script)
        await platform.settled()
    events = await platform.events(sid)
    assert _kinds(events)[:7] == [
        "submitted", "claimed", "result", "requeued", "claimed", "result", "accepted",
    ]  # fmt: skip
    assert next(e for e in events if isinstance(e, SubmissionRequeued)).code == "rival_voided"
    state = await platform.state(sid)
    assert state.status is Status.COMMITTED
    assert state.result is not None
    assert state.result["reason"].startswith(
        "faster than the incumbent's standing: 1.5x the reference"
    )
    flagged = [e for e in await platform.events(first) if isinstance(e, SubmissionSuspected)]
    assert len(flagged) == 1
    [reason] = flagged[0].reasons
    assert (reason.source, reason.code) == ("rival", "incumbent_voided")
    assert sid in reason.message
    report = await run_audit(settings, clock=_now, elog=event_log)
    assert report.ok, report.problems


async def test_the_first_scored_result_of_a_board_is_confirmed(
    event_log: EventLog, settings: Settings, tmp_path: Path
) -> None:
    """The board's first kernel is its reference (no score); the next kernel's result is the
    board's first scored one and takes rank 1 above the reference's 1: it is run again like
    any record, and confirmed."""
    async with running(event_log, settings, tmp_path) as platform:
        await platform.submit("ref", {"value": 30.0})
        await platform.settled()
        sid = await platform.submit("quick", {"value": 20.0, "reference": 30.0})
        await platform.settled()
    run = await platform.state(confirmation_id(sid))
    assert run.status is Status.CONFIRMED and run.confirms == sid
    rows = platform.board()
    assert [(r["kernel_id"].rsplit("/", 1)[1], r["rank"]) for r in rows] == [
        ("quick", 1),
        ("ref", 2),
    ]
    assert rows[0]["confirmation"] == "confirmed"


async def test_a_disputed_record_takes_no_rank_and_the_previous_result_stands(
    event_log: EventLog, settings: Settings, tmp_path: Path
) -> None:
    """A record whose confirmation run measures it far lower is disputed: the kernel's
    confirmed result before it ranks for it, and the board says which was held back."""
    async with running(event_log, settings, tmp_path) as platform:
        await platform.submit("ref", {"value": 30.0})
        await platform.settled()
        before = await platform.submit("fast", {"value": 25.0, "reference": 30.0})
        await platform.settled()
        script = {"value": 15.0, "reference": 30.0, "confirmation_reference": 18.0}
        lucky = await platform.submit("fast", script)
        await platform.settled()
    assert (await platform.state(confirmation_id(lucky))).status is Status.DISPUTED
    rows = platform.board()
    fast = rows[0]
    assert (fast["kernel_id"], fast["rank"], fast["submission"]) == (f"{BOARD}/fast", 1, before)
    assert fast["score"]["speedup"] == pytest.approx(1.2)
    assert fast["held_back"]["submission"] == lucky
    assert fast["held_back"]["reason"].startswith("disputed")


async def test_a_suspect_result_is_not_ranked_first(
    event_log: EventLog, settings: Settings, tmp_path: Path
) -> None:
    """A result whose package tripped the tripwire is committed and marked, but holds no rank
    until a maintainer clears it: the reference keeps rank 1 and it is never shown confirmed."""
    hit = TripwireHit(code="thread", path="src/kernel.py", line=1, message="imports threading")
    async with running(event_log, settings, tmp_path) as platform:
        await platform.submit("ref", {"value": 30.0})
        await platform.settled()
        sid = await platform.submit("sly", {"value": 10.0, "reference": 30.0}, tripwire=[hit])
        await platform.settled()
    assert (await platform.state(sid)).status is Status.COMMITTED
    rows = platform.board()
    assert [(r["kernel_id"].rsplit("/", 1)[1], r["rank"]) for r in rows] == [
        ("ref", 1),
        ("sly", None),
    ]
    assert rows[1]["suspect"] is True and rows[1].get("confirmation") != "confirmed"
    assert rows[1]["unranked"] == "suspect: held back until a maintainer clears it"
