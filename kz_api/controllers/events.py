"""The live event feed as Server-Sent Events: `id` is the stream sequence, resumable with
`Last-Event-ID` (or `?after=`); `?limit=` ends the stream after that many events.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Annotated

from litestar import Controller, get
from litestar.params import HeaderParameter, QueryParameter
from litestar.response import ServerSentEvent, ServerSentEventMessage

from kz_api.context import Ctx
from kz_api.openapi import errors
from kz_events.eventlog import EventLog, Stored, take
from kz_events.events import UnknownEvent, encode_event
from kz_events.subjects import EVENTS_SUBJECTS

__all__ = ["EventsController"]

KEEPALIVE_S = 15.0


def _message(seq: int, event: object) -> ServerSentEventMessage:
    if isinstance(event, UnknownEvent):
        return ServerSentEventMessage(id=str(seq), event=event.type, data=event.raw.decode())
    data = encode_event(event).decode()  # type: ignore[arg-type]
    return ServerSentEventMessage(id=str(seq), event=str(getattr(event, "type", "")), data=data)


async def _pump(log: EventLog, after: int, queue: asyncio.Queue[Stored]) -> None:
    async for item in log.subscribe(EVENTS_SUBJECTS, after + 1):
        await queue.put(item)


async def _feed(
    log: EventLog, after: int, limit: int | None
) -> AsyncGenerator[ServerSentEventMessage, None]:
    queue: asyncio.Queue[Stored] = asyncio.Queue(maxsize=1000)
    pump = asyncio.create_task(_pump(log, after, queue))
    sent = 0
    try:
        while limit is None or sent < limit:
            try:
                seq, event = await take(queue, KEEPALIVE_S)
            except TimeoutError:
                yield ServerSentEventMessage(comment="keep-alive")
                continue
            yield _message(seq, event)
            sent += 1
    finally:
        pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump


class EventsController(Controller):
    path = "/api/events"
    tags = ["events"]

    @get("/", responses=errors(), summary="Server-Sent Events of the event log")
    async def events(
        self,
        ctx: Ctx,
        last_event_id: Annotated[
            int | None, HeaderParameter(name="Last-Event-ID", required=False, ge=0)
        ] = None,
        after: Annotated[int | None, QueryParameter(ge=0)] = None,
        limit: Annotated[int | None, QueryParameter(ge=1, le=100_000)] = None,
    ) -> ServerSentEvent:
        start = last_event_id if last_event_id is not None else (after or 0)
        return ServerSentEvent(_feed(ctx.log, start, limit))
