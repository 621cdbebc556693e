"""`GET /api/index.json?at=<seq>`: the index as it was at a past log position, without letting
anonymous clients make the API fold the log once per request.

Built indexes are kept (the last `keep` positions); requests for a position being built wait
for that one build; one build runs at a time, and past `max_waiting` requests in line the
answer is 429 with Retry-After instead of one more fold.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from kz_api.errors import ApiError
from kz_api.index_cache import RenderedIndex

__all__ = ["TimeTravel"]

RETRY_AFTER_S = 5


class TimeTravel:
    """Past indexes by log position: kept, built one at a time, with a bounded line."""

    def __init__(self, *, keep: int = 16, max_waiting: int = 4) -> None:
        self.keep, self.max_waiting = keep, max_waiting
        self.builds = 0  # folds run so far
        self._kept: OrderedDict[int, RenderedIndex] = OrderedDict()
        self._building: dict[int, asyncio.Future[RenderedIndex]] = {}
        self._gate = asyncio.Lock()

    async def get(self, at: int, build: Callable[[int], Awaitable[RenderedIndex]]) -> RenderedIndex:
        if (kept := self._kept.get(at)) is not None:
            self._kept.move_to_end(at)
            return kept
        if (pending := self._building.get(at)) is not None:
            return await asyncio.shield(pending)
        if len(self._building) >= self.max_waiting:
            raise ApiError(
                429,
                "rate_limited",
                f"{len(self._building)} past indexes are being built; ask again in "
                f"{RETRY_AFTER_S} s, or ask for one of the positions just built",
                details={"retry_after_s": RETRY_AFTER_S},
            )
        return await self._build(at, build)

    async def _build(
        self, at: int, build: Callable[[int], Awaitable[RenderedIndex]]
    ) -> RenderedIndex:
        done: asyncio.Future[RenderedIndex] = asyncio.get_running_loop().create_future()
        done.add_done_callback(lambda f: f.cancelled() or f.exception())  # never unretrieved
        self._building[at] = done
        try:
            async with self._gate:
                self.builds += 1
                index = await build(at)
        except asyncio.CancelledError:
            done.set_exception(ApiError(503, "unavailable", "the build was interrupted; retry"))
            raise
        except Exception as exc:
            done.set_exception(exc)
            raise
        finally:
            del self._building[at]
        done.set_result(index)
        self._kept[at] = index
        while len(self._kept) > self.keep:
            self._kept.popitem(last=False)
        return index
