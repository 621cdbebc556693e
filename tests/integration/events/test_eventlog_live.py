"""Heartbeats on KZ_LIVE: one message kept per subject, the newest one readable at once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from kz_events.eventlog import EventLog
from kz_events.events import RunnerHeartbeat, TaskHeartbeat
from kz_events.subjects import EVENTS_STREAM, LIVE_STREAM, live_subject

pytestmark = pytest.mark.integration


async def test_heartbeats_keep_one_message_per_subject(build: Any, event_log: EventLog) -> None:
    """Many heartbeats per task and runner leave exactly one message per subject: the newest."""
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    for phase in ["build", "benchmark", "upload"]:
        await event_log.publish_live(build.heartbeat(first, phase))
    await event_log.publish_live(build.heartbeat(second, "build"))
    for n in range(4):
        await event_log.publish_live(
            RunnerHeartbeat(
                event_id=str(uuid.uuid4()),
                occurred_at=datetime.now(UTC),
                actor="runner-1",
                runner_id="runner-1",
                arches=["sm90"],
                busy_with=str(n),
            )
        )
    info = await event_log.js.stream_info(LIVE_STREAM)
    assert info.state.messages == 3
    newest = await event_log.last_live(live_subject("task", "sm90", first))
    assert isinstance(newest, TaskHeartbeat)
    assert newest.phase == "upload"
    runner = await event_log.last_live(live_subject("runner", "sm90", "runner-1"))
    assert isinstance(runner, RunnerHeartbeat)
    assert runner.busy_with == "3"


async def test_heartbeats_stay_out_of_the_permanent_log(build: Any, event_log: EventLog) -> None:
    """Heartbeats never land in KZ_EVENTS."""
    await event_log.publish_live(build.heartbeat(str(uuid.uuid4()), "build"))
    assert (await event_log.js.stream_info(EVENTS_STREAM)).state.messages == 0


async def test_no_heartbeat_yet(event_log: EventLog) -> None:
    """Asking for the heartbeat of a task that never sent one answers None."""
    assert await event_log.last_live(live_subject("task", "sm90", str(uuid.uuid4()))) is None
