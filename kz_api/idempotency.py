"""Locks per Idempotency-Key that exist only while a request holds or waits for them.

Two tries with one key must not both store a submission, so they take turns; once the last
of them is done the lock is dropped. What a key answered lives in the read models (the
`submitted` event carries it), not here, so nothing of this grows with the keys ever seen.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass, field

__all__ = ["KeyedLocks"]


@dataclass
class _Slot:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class KeyedLocks:
    """`async with locks.hold(key):` runs one holder of `key` at a time; used from one loop."""

    def __init__(self) -> None:
        self._slots: dict[Hashable, _Slot] = {}

    def __len__(self) -> int:
        """How many keys are held or waited for now."""
        return len(self._slots)

    @contextlib.asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        slot = self._slots.setdefault(key, _Slot())
        slot.users += 1
        try:
            async with slot.lock:
                yield
        finally:
            slot.users -= 1
            if slot.users == 0:
                del self._slots[key]
