"""One follow of the log shared by the readers of one process.

The projector runs several parts that each follow the whole log. With a subscription each,
every event crosses the connection once per part and is decoded once per part; here it is
received and decoded once and handed to every reader, decoded (`subscribe`) or as stored
(`subscribe_raw`, for the archive). Each reader still sees what the same call on `EventLog`
would give it: every event from its own position, in order. A reader that starts behind the
shared follow first replays the gap from the log.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Protocol

from kz_events.events import Event, UnknownEvent, checked_event
from kz_events.port import LogPort, Record, Stored
from kz_events.screen import Screen

__all__ = ["Follower", "RawFollower", "SharedFollow"]

_Item = tuple[Record, Event | UnknownEvent | None]
"""An event as stored, and decoded when the shared follow decoded it already."""


class Follower(Protocol):
    """What a projection needs to follow the log: `EventLog` itself, or a `SharedFollow`."""

    def subscribe(
        self, *, from_seq: int, screen: Screen | None = None
    ) -> AsyncGenerator[Stored, None]: ...


class RawFollower(Protocol):
    """What the archive needs to follow the log as stored: `EventLog`, or a `SharedFollow`."""

    def subscribe_raw(self, *, from_seq: int) -> AsyncGenerator[Record, None]: ...


class SharedFollow:
    """Hands every event of one `EventLog.subscribe_raw` to each reader of `subscribe` and
    `subscribe_raw`."""

    def __init__(self, elog: LogPort, *, queue_size: int = 10_000) -> None:
        self.elog = elog
        self.queue_size = queue_size
        self._readers: set[asyncio.Queue[_Item | BaseException]] = set()
        self._next = 1  # the sequence the shared follow hands out next
        self._pump: asyncio.Task[None] | None = None

    async def subscribe(
        self, *, from_seq: int, screen: Screen | None = None
    ) -> AsyncGenerator[Stored, None]:
        """Every event from `from_seq` on, decoded and passed through the reader's `screen`
        (kz_events.screen), in order, forever; stop by closing the iterator."""
        screen = screen or Screen("follow")
        async with contextlib.aclosing(self._follow(from_seq)) as items:
            async for (seq, subject, data), event in items:
                decoded = event if event is not None else checked_event(subject, data)
                yield seq, screen.admit(seq, decoded, subject)

    async def subscribe_raw(self, *, from_seq: int) -> AsyncGenerator[Record, None]:
        """Every event from `from_seq` on as stored, in order, forever."""
        async with contextlib.aclosing(self._follow(from_seq)) as items:
            async for record, _ in items:
                yield record

    async def _follow(self, from_seq: int) -> AsyncGenerator[_Item, None]:
        from_seq = max(1, from_seq)
        queue: asyncio.Queue[_Item | BaseException] = asyncio.Queue(self.queue_size)
        if self._pump is None or self._pump.done():
            self._next = from_seq
            self._pump = asyncio.create_task(self._run(from_seq), name="shared-follow")
        # From here on the pump puts every event from `joined` on into the queue: `_next`
        # moves before an event is handed out, and the readers are read per event.
        joined = self._next
        self._readers.add(queue)
        try:
            if from_seq < joined:
                async for record in self.elog.replay_raw(from_seq, upto=joined - 1):
                    yield record, None
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                if item[0][0] >= from_seq:
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
            async for record in self.elog.subscribe_raw(from_seq=from_seq):
                self._next = record[0] + 1
                item = (record, checked_event(record[1], record[2]))
                for queue in list(self._readers):
                    await queue.put(item)
        except Exception as exc:  # the follow failed past its retries: every reader fails
            for queue in list(self._readers):
                await queue.put(exc)
            raise
