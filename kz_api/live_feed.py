"""The live event feed behind `GET /api/events`, with bounded memory whatever the clients do.

The API's own fold already reads every event once; `EventHub` keeps the last of them, each
rendered once as a Server-Sent Event, in a ring shared by every stream. A stream that resumes
from before the ring, or falls behind it because its client reads slowly, reads the log in
small batches at its client's pace instead of queueing: a stream holds at most one batch, the
ring holds at most `capacity` events and `max_bytes`, and the number of streams is capped.
A client that stops reading altogether is dropped by the server's write-stall timeout.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
from collections.abc import AsyncGenerator

import msgspec
from litestar.response import ServerSentEventMessage

from kz_events.events import UnknownEvent, encode_event
from kz_events.port import LogPort

__all__ = ["CATCH_UP_BATCH", "KEEPALIVE_S", "EventHub", "event_stream"]

KEEPALIVE_S = 15.0
CATCH_UP_BATCH = 32  # events a stream reads from the log at a time when behind the ring
RING_EVENTS = 1024
RING_BYTES = 16 * 1024 * 1024


class _TypeOnly(msgspec.Struct):
    type: str = ""


def message_of(seq: int, event: object) -> ServerSentEventMessage:
    """The Server-Sent Event of a folded event: id the stream sequence, event its type."""
    if isinstance(event, UnknownEvent):
        return ServerSentEventMessage(id=str(seq), event=event.type, data=event.raw.decode())
    data = encode_event(event).decode()  # type: ignore[arg-type]
    return ServerSentEventMessage(id=str(seq), event=str(getattr(event, "type", "")), data=data)


def raw_message(seq: int, raw: bytes) -> ServerSentEventMessage:
    """The Server-Sent Event of a stored event read as bytes (one that does not decode too)."""
    try:
        kind = msgspec.json.decode(raw, type=_TypeOnly).type or "unknown"
    except msgspec.DecodeError:
        kind = "undecodable"
    return ServerSentEventMessage(id=str(seq), event=kind, data=raw.decode(errors="replace"))


class EventHub:
    """The last events the fold saw, as messages, covering sequences (`floor`, `last`]."""

    def __init__(
        self,
        start: int = 0,
        *,
        capacity: int = RING_EVENTS,
        max_bytes: int = RING_BYTES,
        max_streams: int = 200,
    ) -> None:
        self.floor = self.last = start
        self.capacity, self.max_bytes, self.max_streams = capacity, max_bytes, max_streams
        self.streams = 0
        self.bytes = 0
        self._seqs: list[int] = []
        self._msgs: list[tuple[ServerSentEventMessage, int]] = []
        self._head = 0  # index of the oldest live entry in the lists above
        self._wake = asyncio.Event()

    def __len__(self) -> int:
        return len(self._seqs) - self._head

    @property
    def full(self) -> bool:
        return self.streams >= self.max_streams

    def push(self, seq: int, event: object) -> None:
        """Add the fold's next event and wake the streams waiting for it. With no stream open
        nothing is kept: a stream that opens later reads what it missed from the log."""
        if self.streams == 0:
            if self._seqs:
                self._seqs, self._msgs, self._head, self.bytes = [], [], 0, 0
            self.floor = self.last = seq
            return
        message = message_of(seq, event)
        size = len(str(message.data or "")) + 64
        self._seqs.append(seq)
        self._msgs.append((message, size))
        self.bytes += size
        self.last = seq
        while len(self) > 1 and (len(self) > self.capacity or self.bytes > self.max_bytes):
            self.floor = self._seqs[self._head]
            self.bytes -= self._msgs[self._head][1]
            self._head += 1
        if self._head > self.capacity:  # compact now and then: amortised O(1) a push
            del self._seqs[: self._head], self._msgs[: self._head]
            self._head = 0
        self._wake.set()
        self._wake = asyncio.Event()

    def since(self, cursor: int) -> list[tuple[int, ServerSentEventMessage]] | None:
        """The messages after `cursor`; None when the ring no longer reaches back to it."""
        if cursor < self.floor:
            return None
        start = bisect.bisect_right(self._seqs, cursor, lo=self._head)
        return [
            (seq, msg) for seq, (msg, _) in zip(self._seqs[start:], self._msgs[start:], strict=True)
        ]

    async def wait_past(self, cursor: int, timeout_s: float) -> bool:
        """Wait until an event after `cursor` arrives; False after `timeout_s` without one."""
        if self.last > cursor:
            return True
        wake = self._wake
        try:
            async with asyncio.timeout(timeout_s):
                await wake.wait()
        except TimeoutError:
            return False
        return True


async def _from_log(
    log: LogPort, cursor: int, upto: int
) -> AsyncGenerator[tuple[int, ServerSentEventMessage], None]:
    records = log.replay_raw(cursor + 1, upto=upto, batch=CATCH_UP_BATCH)
    async with contextlib.aclosing(records):
        async for seq, _subject, raw in records:
            yield seq, raw_message(seq, raw)


async def _pending(
    hub: EventHub, log: LogPort, cursor: int
) -> AsyncGenerator[tuple[int, ServerSentEventMessage], None]:
    """What follows `cursor` now: from the ring, or from the log when the ring is past it."""
    ring = hub.since(cursor)
    if ring is not None:
        for item in ring:
            yield item
        return
    floor, moved = hub.floor, False
    async for item in _from_log(log, cursor, floor):
        moved = True
        yield item
    if not moved:  # nothing stored between the cursor and the ring: skip to the ring
        yield floor, ServerSentEventMessage(comment="resumed")


async def event_stream(
    hub: EventHub, log: LogPort, after: int, limit: int | None
) -> AsyncGenerator[ServerSentEventMessage, None]:
    """Events after `after` (at most `limit`), then keep-alive comments while none come."""
    hub.streams += 1
    cursor, sent = after, 0
    try:
        while limit is None or sent < limit:
            progressed = False
            async with contextlib.aclosing(_pending(hub, log, cursor)) as pending:
                async for seq, message in pending:
                    cursor, progressed = seq, True
                    if message.comment is None:
                        yield message
                        sent += 1
                        if limit is not None and sent >= limit:
                            return
            if not progressed and not await hub.wait_past(cursor, KEEPALIVE_S):
                yield ServerSentEventMessage(comment="keep-alive")
    finally:
        hub.streams -= 1
