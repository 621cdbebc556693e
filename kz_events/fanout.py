"""One follow of the log shared by the readers of one process.

The projector runs several parts that each follow the whole log. With a subscription each,
every event crosses the connection once per part and is decoded once per part; here it is
received and decoded once and handed to every reader. Each reader still sees what
`EventLog.subscribe(from_seq=...)` would give it: every event from its own position, in order.
A reader that starts behind the shared follow first replays the gap from the log.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Protocol

from kz_events.eventlog import EventLog, Stored

__all__ = ["Follower", "SharedFollow"]


class Follower(Protocol):
    """What a projection needs to follow the log: `EventLog` itself, or a `SharedFollow`."""

    def subscribe(self, *, from_seq: int) -> AsyncIterator[Stored]: ...


class SharedFollow:
    """Hands every event of one `EventLog.subscribe` to each reader of `subscribe`."""

    def __init__(self, elog: EventLog, *, queue_size: int = 10_000) -> None:
        self.elog = elog
        self.queue_size = queue_size
        self._readers: set[asyncio.Queue[Stored | BaseException]] = set()
        self._next = 1  # the sequence the shared follow hands out next
        self._pump: asyncio.Task[None] | None = None

    async def subscribe(self, *, from_seq: int) -> AsyncIterator[Stored]:
        """Every event from `from_seq` on, in order, forever; stop by closing the iterator."""
        from_seq = max(1, from_seq)
        queue: asyncio.Queue[Stored | BaseException] = asyncio.Queue(self.queue_size)
        if self._pump is None or self._pump.done():
            self._next = from_seq
            self._pump = asyncio.create_task(self._run(from_seq), name="shared-follow")
        # From here on the pump puts every event from `joined` on into the queue: `_next`
        # moves before an event is handed out, and the readers are read per event.
        joined = self._next
        self._readers.add(queue)
        try:
            if from_seq < joined:
                async for stored in self.elog.replay(from_seq, upto=joined - 1):
                    yield stored
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                if item[0] >= from_seq:
                    yield item
        finally:
            self._readers.discard(queue)
            if not self._readers and self._pump is not None:
                pump, self._pump = self._pump, None
                pump.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await pump  # a failure was handed to every reader already

    async def _run(self, from_seq: int) -> None:
        try:
            async for seq, event in self.elog.subscribe(from_seq=from_seq):
                self._next = seq + 1
                for queue in list(self._readers):
                    await queue.put((seq, event))
        except Exception as exc:  # the follow failed past its retries: every reader fails
            for queue in list(self._readers):
                await queue.put(exc)
            raise
