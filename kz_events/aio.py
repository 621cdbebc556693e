"""Small asyncio helpers every long-running part shares."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["stop_tasks"]

RECANCEL_S = 0.5


async def stop_tasks(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel `tasks` and return once every one has ended; what they raised is dropped.

    The cancel is repeated until a task ends: on CPython 3.11 a library that waits with
    `asyncio.wait_for` (nats-py's requests do) loses a cancel that arrives in the loop pass
    its own result lands in, and the task goes on as if never asked to stop. A shutdown that
    cancelled once and awaited would wait on it for good.
    """
    pending = {task for task in tasks if task is not None and not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=RECANCEL_S)
    for ended in tasks:
        if ended is not None and not ended.cancelled():
            ended.exception()  # retrieved, so asyncio does not log it as never retrieved
