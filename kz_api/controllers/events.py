"""The live event feed as Server-Sent Events: `id` is the stream sequence, resumable with
`Last-Event-ID` (or `?after=`); `?limit=` ends the stream after that many events.

A cursor past the log's last sequence is refused (it would never deliver); the number of
streams open at once is capped; memory per stream is bounded (see `kz_api.live_feed`).
"""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, get
from litestar.params import HeaderParameter, QueryParameter
from litestar.response import ServerSentEvent

from kz_api.context import Ctx
from kz_api.errors import ApiError
from kz_api.live_feed import event_stream
from kz_api.openapi import errors

__all__ = ["MAX_SEQ", "EventsController"]

MAX_SEQ = 2**63 - 1  # a stream sequence is a uint64 that no log will reach


class EventsController(Controller):
    path = "/api/events"
    tags = ["events"]

    @get("/", responses=errors(400, 503), summary="Server-Sent Events of the event log")
    async def events(
        self,
        ctx: Ctx,
        last_event_id: Annotated[
            int | None, HeaderParameter(name="Last-Event-ID", required=False, ge=0, le=MAX_SEQ)
        ] = None,
        after: Annotated[int | None, QueryParameter(ge=0, le=MAX_SEQ)] = None,
        limit: Annotated[int | None, QueryParameter(ge=1, le=100_000)] = None,
    ) -> ServerSentEvent:
        start = last_event_id if last_event_id is not None else (after or 0)
        hub = ctx.event_hub
        if hub.full:
            raise ApiError(
                503,
                "too_many_streams",
                f"{hub.max_streams} event streams are open, the most this server serves; "
                "try again later",
                details={"limit": hub.max_streams, "retry_after_s": 5},
            )
        last = await ctx.log.last_seq()
        if start > last:
            raise ApiError(
                400,
                "invalid_cursor",
                f"Last-Event-ID (or after) must be at most the log's last sequence {last}, "
                f"got {start}",
                details={"last_seq": last},
            )
        return ServerSentEvent(event_stream(hub, ctx.log, start, limit))
