"""`SharedFollow`: one subscription, many readers, each as if it followed the log alone."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from kz_events.eventlog import EventLog, Stored
from kz_events.events import KernelImported
from kz_events.fanout import SharedFollow

pytestmark = pytest.mark.integration


def _imported(n: int) -> KernelImported:
    return KernelImported(
        event_id=str(uuid.uuid4()),
        occurred_at=datetime.now(UTC),
        actor="test",
        kernel_id=f"cpu/Norm/RMSNorm/fp32/k{n}",
        package_digest="0" * 64,
        submitter_id="test",
    )


async def _take(events: AsyncIterator[Stored], n: int) -> list[int]:
    return [(await anext(events))[0] for _ in range(n)]


async def test_readers_at_different_positions_each_get_their_suffix(event_log: EventLog) -> None:
    """A reader that joins behind the shared follow replays the gap, then follows live; one
    ahead of it skips to its own position; all see the same events in log order."""
    seqs = [await event_log.append(_imported(n)) for n in range(6)]
    shared = SharedFollow(event_log)
    first = shared.subscribe(from_seq=seqs[3])
    assert await _take(first, 3) == seqs[3:]
    behind = shared.subscribe(from_seq=seqs[0])  # joins behind: replays 0..5 from the log
    ahead = shared.subscribe(from_seq=seqs[-1] + 2)  # wants the second event still to come
    assert await _take(behind, 6) == seqs
    later = [await event_log.append(_imported(n)) for n in range(6, 9)]
    assert await _take(first, 3) == later
    assert await _take(behind, 3) == later
    assert await _take(ahead, 2) == later[1:]
    for events in (first, behind, ahead):
        await events.aclose()  # type: ignore[attr-defined]
    assert shared._pump is None  # the last reader gone, the subscription is dropped


async def test_events_appended_while_a_reader_joins_are_neither_lost_nor_repeated(
    event_log: EventLog,
) -> None:
    """Appends racing a reader's replay of the gap reach it exactly once, in order."""
    await event_log.append(_imported(0))
    shared = SharedFollow(event_log)
    leader = shared.subscribe(from_seq=1)
    await _take(leader, 1)

    async def append_more() -> list[int]:
        return [await event_log.append(_imported(n)) for n in range(1, 40)]

    writer = asyncio.create_task(append_more())
    await asyncio.sleep(0.01)
    late = shared.subscribe(from_seq=1)
    got = await _take(late, 40)
    written = await writer
    assert got == sorted(set(got)) and got[1:] == written
    await _take(leader, 39)
    await late.aclose()  # type: ignore[attr-defined]
    await leader.aclose()  # type: ignore[attr-defined]


async def test_raw_readers_get_the_stored_bytes_beside_decoded_readers(
    event_log: EventLog,
) -> None:
    """`subscribe_raw` hands out each event's subject and exact stored bytes, from the gap
    replay and from the live follow alike, next to a decoded reader of the same follow."""
    seqs = [await event_log.append(_imported(n)) for n in range(3)]
    shared = SharedFollow(event_log)
    decoded = shared.subscribe(from_seq=seqs[1])
    assert await _take(decoded, 2) == seqs[1:]
    raw = shared.subscribe_raw(from_seq=seqs[0])  # joins behind: the gap comes from a replay
    later = [await event_log.append(_imported(n)) for n in range(3, 5)]
    records = [await anext(raw) for _ in range(5)]
    assert [seq for seq, _, _ in records] == seqs + later
    stored = {seq: (subject, data) async for seq, subject, data in event_log.replay_raw()}
    assert all(stored[seq] == (subject, data) for seq, subject, data in records)
    assert [seq for seq, _ in [await anext(decoded) for _ in range(2)]] == later
    for events in (decoded, raw):
        await events.aclose()  # type: ignore[attr-defined]
