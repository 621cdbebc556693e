"""Reading the real log back: replay in order (also after a restart), load, subscribe."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kz_events.eventlog import EventLog, LogOptions, Stored
from kz_events.events import SubmissionSubmitted, UnknownEvent, encode_event, subject_of
from kz_events.server import EmbeddedServer
from kz_events.subjects import EVENTS_STREAM, aggregate_filter, submitted_filter

pytestmark = pytest.mark.integration


async def _collect(items: AsyncIterator[Stored]) -> list[Stored]:
    return [item async for item in items]


async def test_replay_after_restart_returns_every_event_in_order(
    build: Any,
    nats_server: EmbeddedServer,
) -> None:
    """Events appended before a server restart replay in order, all of them, from the same store."""
    elog = await EventLog.connect(nats_server.url, LogOptions(retry_fast=True))
    await elog.ensure()
    appended = [build.submitted() for _ in range(300)]
    seqs = [await elog.append(event, expect=0) for event in appended]
    await elog.close()
    nats_server.stop()

    with EmbeddedServer(nats_server.store_dir) as restarted:
        again = await EventLog.connect(restarted.url, LogOptions(retry_fast=True))
        try:
            await again.ensure()
            replayed = await _collect(again.replay())
            assert replayed == list(zip(seqs, appended, strict=True))
            assert seqs == list(range(1, 301))
            assert await again.last_seq() == 300
        finally:
            await again.close()


async def test_replay_windows(build: Any, event_log: EventLog) -> None:
    """`from_seq`, `upto`, a subject filter and small batches select exactly the right events."""
    events = [build.submitted() for _ in range(40)]
    for event in events:
        await event_log.append(event)
    everything = await _collect(event_log.replay(batch=7))
    assert [seq for seq, _ in everything] == list(range(1, 41))
    assert [e for _, e in everything] == events
    assert await _collect(event_log.replay(35)) == everything[34:]
    assert await _collect(event_log.replay(5, upto=9, batch=2)) == everything[4:9]
    one = events[12]
    only = aggregate_filter("submission", "sm90", one.submission_id)
    assert await _collect(event_log.replay(subject_filter=only)) == [(13, one)]
    assert await _collect(event_log.replay(41)) == []


async def test_replay_filters_by_architecture(build: Any, event_log: EventLog) -> None:
    """A filter on one architecture's submitted events skips other architectures."""
    mine = build.submitted(kernel_id="sm_9.0/A/B/fp16/k")
    await event_log.append(build.submitted())
    await event_log.append(mine)
    assert await _collect(event_log.replay(subject_filter=submitted_filter("sm_9.0"))) == [
        (2, mine)
    ]


async def test_replay_of_an_empty_log_stops_at_once(event_log: EventLog) -> None:
    """Replaying a log with no events yields nothing and returns."""
    assert await _collect(event_log.replay()) == []
    assert await event_log.load("kz.ev.>") == []


async def test_unknown_event_types_are_surfaced(build: Any, event_log: EventLog) -> None:
    """An event of a type this build does not know comes back as UnknownEvent, in its place."""
    first = build.submitted()
    await event_log.append(first)
    raw = json.dumps({"type": "teleported", "event_id": "x", "where": "mars"}).encode()
    await event_log.js.publish("kz.ev.submission.sm90.x.teleported", raw, stream=EVENTS_STREAM)
    last = build.submitted()
    await event_log.append(last)
    replayed = await _collect(event_log.replay())
    assert replayed[0] == (1, first)
    assert replayed[1] == (2, UnknownEvent(type="teleported", raw=raw))
    assert replayed[2] == (3, last)


async def test_misfiled_event_is_not_folded(build: Any, event_log: EventLog) -> None:
    """A known event body stored on a subject that is not its own replays as UnknownEvent."""
    event = build.submitted()
    wrong = subject_of(event).replace(".submitted", ".claimed")
    await event_log.js.publish(wrong, encode_event(event), stream=EVENTS_STREAM)
    [(_, replayed)] = await _collect(event_log.replay())
    assert isinstance(replayed, UnknownEvent)
    assert replayed.type.startswith("misfiled")


async def test_subscribe_follows_new_events_live(build: Any, event_log: EventLog) -> None:
    """`subscribe` yields the stored events, then events appended afterwards, in order."""
    before = [build.submitted() for _ in range(3)]
    for event in before:
        await event_log.append(event)
    received: list[Stored] = []
    got_all = asyncio.Event()

    async def follow() -> None:
        async for item in event_log.subscribe(from_seq=2):
            received.append(item)
            if len(received) == 7:
                got_all.set()

    follower = asyncio.create_task(follow())
    after = [build.submitted() for _ in range(5)]
    for event in after:
        await event_log.append(event)
    await asyncio.wait_for(got_all.wait(), timeout=20)
    follower.cancel()
    with pytest.raises(asyncio.CancelledError):
        await follower
    assert received == list(zip(range(2, 9), before[1:] + after, strict=True))


async def test_subscribe_with_a_filter(build: Any, event_log: EventLog) -> None:
    """A filtered subscription sees only its aggregate's events."""
    mine = build.submitted()
    others = [build.submitted() for _ in range(3)]
    only = aggregate_filter("submission", "sm90", mine.submission_id)
    received: list[Stored] = []
    arrived = asyncio.Event()

    async def follow() -> None:
        async for item in event_log.subscribe(only):
            received.append(item)
            arrived.set()

    follower = asyncio.create_task(follow())
    for event in [*others[:2], mine, others[2]]:
        await event_log.append(event)
    await asyncio.wait_for(arrived.wait(), timeout=20)
    follower.cancel()
    with pytest.raises(asyncio.CancelledError):
        await follower
    assert received == [(3, mine)]


async def test_load_rebuilds_one_aggregate(build: Any, event_log: EventLog) -> None:
    """`load` returns exactly one aggregate's events with their sequences."""
    mine = build.submitted()
    await event_log.append(build.submitted())
    await event_log.append(mine)
    await event_log.append(build.submitted())
    loaded = await event_log.load(aggregate_filter("submission", "sm90", mine.submission_id))
    assert loaded == [(2, mine)]
    assert isinstance(loaded[0][1], SubmissionSubmitted)
