"""Appending to the real log: optimistic concurrency, de-duplication and an append-only stream."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import nats.js.errors
import pytest

from kz_events.errors import ConcurrencyConflict
from kz_events.eventlog import EventLog
from kz_events.events import SubmissionClaimed
from kz_events.lifecycle import Claim, Status, decide, fold
from kz_events.subjects import EVENTS_STREAM, LIVE_STREAM, aggregate_filter

pytestmark = pytest.mark.integration


async def test_fifty_concurrent_claimers_one_wins(build: Any, event_log: EventLog) -> None:
    """50 runners claiming one task at once: exactly one `claimed` is stored, 49 conflict."""
    submitted = build.submitted()
    await event_log.append(submitted, expect=0)
    stream_filter = aggregate_filter("submission", "sm90", submitted.submission_id)
    state = fold(await event_log.load(stream_filter))
    assert state.status is Status.QUEUED

    async def claimer(n: int) -> int | ConcurrencyConflict:
        [event] = decide(
            state, Claim(meta=build.meta(f"r{n}"), runner_id=f"r{n}", lease_id=f"L{n}", attempt=1)
        )
        try:
            return await event_log.append(event, expect=state.version)
        except ConcurrencyConflict as conflict:
            return conflict

    outcomes = await asyncio.gather(*(claimer(n) for n in range(50)))
    wins = [o for o in outcomes if isinstance(o, int)]
    conflicts = [o for o in outcomes if isinstance(o, ConcurrencyConflict)]
    assert len(wins) == 1
    assert len(conflicts) == 49
    assert all(c.code == "conflict" and c.details["expected"] == state.version for c in conflicts)
    stored = await event_log.load(stream_filter)
    claimed = [e for _, e in stored if isinstance(e, SubmissionClaimed)]
    assert len(claimed) == 1
    assert stored[-1][0] == wins[0]
    assert fold(stored).status is Status.RUNNING


@pytest.mark.parametrize("expect", [None, 0])
async def test_same_event_three_times_is_stored_once(
    build: Any, event_log: EventLog, expect: int | None
) -> None:
    """Appending one event three times (a retrying writer) stores it once at one sequence."""
    event = build.submitted()
    seqs = [await event_log.append(event, expect=expect) for _ in range(3)]
    assert seqs == [seqs[0]] * 3
    assert await event_log.last_seq() == seqs[0]
    stored = await event_log.load(aggregate_filter("submission", "sm90", event.submission_id))
    assert stored == [(seqs[0], event)]


async def test_stale_expectation_conflicts(build: Any, event_log: EventLog) -> None:
    """An append expecting an older aggregate sequence raises ConcurrencyConflict."""
    first = build.submitted()
    await event_log.append(first, expect=0)
    twin = build.submitted(submission_id=first.submission_id)
    with pytest.raises(ConcurrencyConflict) as caught:
        await event_log.append(twin, expect=0)
    assert caught.value.details["subject"].endswith(f".{first.submission_id}.*")


async def test_expectations_are_per_aggregate(build: Any, event_log: EventLog) -> None:
    """Appends to other aggregates do not disturb an aggregate's expected sequence."""
    mine = build.submitted()
    seq = await event_log.append(mine, expect=0)
    for _ in range(3):
        await event_log.append(build.submitted(), expect=0)
    claim = SubmissionClaimed(
        **_ids(build, mine.submission_id), runner_id="r", attempt=1, lease_id="L"
    )
    assert await event_log.append(claim, expect=seq) == seq + 4


def _ids(build: Any, submission_id: str) -> dict[str, object]:
    meta = build.meta()
    return {
        "event_id": meta.event_id,
        "occurred_at": meta.occurred_at,
        "actor": meta.actor,
        "submission_id": submission_id,
        "kernel_id": "sm90/Attention/MHA/fp16/flash_v3",
    }


async def test_purge_is_refused(build: Any, event_log: EventLog) -> None:
    """The server refuses to purge KZ_EVENTS, whole or by subject."""
    await event_log.append(build.submitted())
    with pytest.raises(nats.js.errors.APIError):
        await event_log.js.purge_stream(EVENTS_STREAM)
    with pytest.raises(nats.js.errors.APIError):
        await event_log.js.purge_stream(EVENTS_STREAM, subject="kz.ev.>")
    assert await event_log.last_seq() == 1
    assert len(await event_log.load("kz.ev.>")) == 1


async def test_message_delete_is_refused(build: Any, event_log: EventLog) -> None:
    """The server refuses to delete a message of KZ_EVENTS."""
    await event_log.append(build.submitted())
    with pytest.raises(nats.js.errors.APIError):
        await event_log.js.delete_msg(EVENTS_STREAM, 1)
    assert len(await event_log.load("kz.ev.>")) == 1


async def test_streams_are_configured_as_designed(event_log: EventLog) -> None:
    """KZ_EVENTS is file-backed, append-only and de-duplicating; KZ_LIVE keeps one per subject."""
    await event_log.ensure()  # a second ensure changes nothing
    events = (await event_log.js.stream_info(EVENTS_STREAM)).config
    assert (events.deny_delete, events.deny_purge) == (True, True)
    assert events.storage == "file"
    assert events.subjects == ["kz.ev.>"]
    assert events.duplicate_window == 120.0
    live = (await event_log.js.stream_info(LIVE_STREAM)).config
    assert live.max_msgs_per_subject == 1
    assert live.subjects == ["kz.live.>"]
    assert live.max_age == 600.0


async def test_ids_survive_the_wire(build: Any, event_log: EventLog) -> None:
    """An event read back equals the one appended, field for field."""
    event = build.submitted(submission_id=str(uuid.uuid4()))
    seq = await event_log.append(event)
    assert await event_log.load(aggregate_filter("submission", "sm90", event.submission_id)) == [
        (seq, event)
    ]
