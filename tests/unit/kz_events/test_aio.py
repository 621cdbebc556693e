"""`stop_tasks` ends tasks that lose a cancel, as CPython 3.11's `wait_for` can make them."""

from __future__ import annotations

import asyncio

import pytest

from kz_events.aio import stop_tasks

pytestmark = pytest.mark.unit


async def _loses_first_cancels(losses: int, ended: list[str]) -> None:
    """A loop whose inner wait swallows its first `losses` cancels, then one that obeys."""
    for _ in range(losses):
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            continue  # the cancel lost, as a wait_for racing its own result loses it
    try:
        await asyncio.sleep(3600)
    finally:
        ended.append("stopped")


async def _fails() -> None:
    raise ValueError("boom")


async def test_a_task_that_loses_cancels_is_stopped_all_the_same() -> None:
    ended: list[str] = []
    task = asyncio.create_task(_loses_first_cancels(2, ended))
    await asyncio.sleep(0)
    async with asyncio.timeout(10):
        await stop_tasks(task)
    assert task.cancelled() and ended == ["stopped"]


async def test_done_failed_and_missing_tasks_are_accepted_quietly() -> None:
    failed = asyncio.create_task(_fails())
    await asyncio.sleep(0)
    done = asyncio.create_task(asyncio.sleep(0))
    await done
    await stop_tasks(failed, done, None)
    assert failed.done() and done.done()
