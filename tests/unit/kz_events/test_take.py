"""`take`, the follower's wait for its next item: a cancel is never lost.

CPython 3.11's `asyncio.wait_for` returns the inner result when the inner awaitable finished in
the same loop pass as the cancel, dropping the cancel; a follow loop built on it then never
stops, and whatever awaits it (a service shutting its parts down) waits forever.
"""

from __future__ import annotations

import asyncio

import pytest

from kz_events.eventlog import take

pytestmark = pytest.mark.unit


async def test_a_cancel_that_meets_an_arriving_item_stops_the_loop() -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    taken: list[int] = []

    async def follow() -> None:
        while True:
            taken.append(await take(queue, 10.0))

    task = asyncio.create_task(follow())
    await asyncio.sleep(0)  # the loop now waits inside take
    queue.put_nowait(1)  # the item and the cancel land in the same pass
    task.cancel()

    done, _ = await asyncio.wait([task], timeout=1.0)

    assert task in done and task.cancelled()
    assert taken == [] and queue.qsize() == 1  # the item stays for whoever follows next


async def test_an_item_already_waiting_is_taken_and_silence_times_out() -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    queue.put_nowait(7)
    assert await take(queue, 0.01) == 7
    with pytest.raises(TimeoutError):
        await take(queue, 0.01)
