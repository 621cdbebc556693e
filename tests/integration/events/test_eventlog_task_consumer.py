"""The per-architecture task consumer that runners share: filtering, attempts and redelivery."""

from __future__ import annotations

from typing import Any

import nats.errors
import pytest
from nats.js.api import AckPolicy, ConsumerConfig

from kz_events.eventlog import EventLog
from kz_events.events import decode_event
from kz_events.subjects import EVENTS_STREAM, consumer_name, submitted_filter, task_filters

pytestmark = pytest.mark.integration


async def test_runners_get_their_architecture_s_tasks_with_attempts(
    build: Any, event_log: EventLog
) -> None:
    """An sm90 runner fetches only sm90 tasks; a nak redelivers it, without a bound: the log,
    not the delivery counter, counts attempts, so no delivery count drops an unfinished task."""
    other = build.submitted(kernel_id="sm80/A/B/fp16/k")
    mine = build.submitted()
    await event_log.append(other)
    await event_log.append(mine)
    name = await event_log.ensure_task_consumer("sm90", lease_s=30, max_attempts=2)
    assert name == "runners-sm90"
    assert await event_log.ensure_task_consumer("sm90", lease_s=30, max_attempts=2) == name
    runner = await event_log.js.pull_subscribe_bind(durable=name, stream=EVENTS_STREAM)
    try:
        [msg] = await runner.fetch(1, timeout=5)
        assert decode_event(msg.data) == mine
        assert msg.metadata.num_delivered == 1
        await msg.nak()
        [again] = await runner.fetch(1, timeout=5)
        assert again.metadata.num_delivered == 2
        await again.nak()
        [third] = await runner.fetch(1, timeout=5)
        assert third.metadata.num_delivered == 3 and decode_event(third.data) == mine
        await third.ack_sync()
        with pytest.raises(nats.errors.TimeoutError):
            await runner.fetch(1, timeout=1)
    finally:
        # A pull subscription left with an expired request makes a later drain wait its timeout.
        await runner.unsubscribe()


async def test_acked_tasks_are_not_redelivered(build: Any, event_log: EventLog) -> None:
    """Once a runner acks a task, no other runner of the architecture gets it."""
    await event_log.append(build.submitted())
    name = await event_log.ensure_task_consumer("sm90")
    first = await event_log.js.pull_subscribe_bind(durable=name, stream=EVENTS_STREAM)
    second = await event_log.js.pull_subscribe_bind(durable=name, stream=EVENTS_STREAM)
    try:
        [msg] = await first.fetch(1, timeout=5)
        await msg.ack_sync()
        with pytest.raises(nats.errors.TimeoutError):
            await second.fetch(1, timeout=1)
    finally:
        await first.unsubscribe()
        await second.unsubscribe()


async def test_a_consumer_made_before_retries_is_updated_to_deliver_them(
    build: Any, event_log: EventLog
) -> None:
    """A task consumer made by an older build (filtered to `submitted` alone) is updated in
    place: a pull subscription would not change its filter, and retries would never come."""
    name = consumer_name("sm90")
    old = ConsumerConfig(
        durable_name=name,
        name=name,
        filter_subject=submitted_filter("sm90"),
        ack_policy=AckPolicy.EXPLICIT,
        max_deliver=-1,
    )
    await event_log.js.add_consumer(EVENTS_STREAM, old)
    assert await event_log.ensure_task_consumer("sm90") == name
    info = await event_log.js.consumer_info(EVENTS_STREAM, name)
    assert sorted(info.config.filter_subjects or []) == sorted(task_filters("sm90"))
    assert not info.config.filter_subject
