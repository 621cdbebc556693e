"""The log port's contract, run against the real `nats-server` (`EventLog`) and `MemoryLog`:
what the platform relies on holds in both, so tests on the in-memory log test the real thing."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kz_events.errors import ConcurrencyConflict, ObjectNotFound
from kz_events.eventlog import EventLog, LogOptions
from kz_events.events import (
    SubmissionClaimed,
    SubmissionRequeued,
    SubmissionSubmitted,
    encode_event,
    subject_of,
)
from kz_events.lifecycle import Claim, decide, fold
from kz_events.memlog import MemoryLog
from kz_events.port import LogPort, Settle, subject_matches
from kz_events.server import EmbeddedServer
from kz_events.subjects import LIVE_STREAM, PACKAGES_BUCKET, aggregate_filter, live_subject

pytestmark = pytest.mark.integration

ARCH = "sm90"


@pytest.fixture(params=["nats", "memory"])
async def log(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[LogPort]:
    """The NATS adapter on a fresh server, or the in-memory log."""
    if request.param == "memory":
        memory = MemoryLog()
        yield memory
        await memory.close()
        return
    server = EmbeddedServer(tmp_path / "nats-store")
    server.start()
    try:
        elog = await EventLog.connect(server.url, LogOptions(retry_fast=True))
        await elog.ensure()
        yield elog
        await elog.close()
    finally:
        server.stop()


def _filter(event: SubmissionSubmitted) -> str:
    return aggregate_filter("submission", ARCH, event.submission_id)


def _claim(build: Any, submitted: SubmissionSubmitted, seq: int, runner: str) -> SubmissionClaimed:
    state = fold([(seq, submitted)])
    command = Claim(meta=build.meta(runner), runner_id=runner, lease_id=runner, attempt=1)
    [event] = decide(state, command)
    assert isinstance(event, SubmissionClaimed)
    return event


async def test_sequences_count_the_whole_stream_from_one(build: Any, log: LogPort) -> None:
    """Sequences start at 1 and grow by one per event whatever its aggregate."""
    assert await log.last_seq() == 0
    a, b = build.submitted(), build.submitted()
    assert [await log.append(a), await log.append(b)] == [1, 2]
    assert await log.last_seq() == 2
    assert await log.event_at(2) == (2, b)
    assert await log.event_at(3) is None


async def test_an_aggregate_that_moved_is_a_conflict(build: Any, log: LogPort) -> None:
    """An append expecting an older last sequence of its aggregate raises ConcurrencyConflict;
    other aggregates' events do not count."""
    submitted = build.submitted()
    seq = await log.append(submitted, expect=0)
    await log.append(build.submitted(), expect=0)  # another aggregate moves the stream only
    first = _claim(build, submitted, seq, "r1")
    assert await log.append(first, expect=seq) == 3
    with pytest.raises(ConcurrencyConflict) as conflict:
        await log.append(_claim(build, submitted, seq, "r2"), expect=seq)
    assert conflict.value.code == "conflict"
    assert conflict.value.details == {"expected": seq, "subject": _filter(submitted)}
    with pytest.raises(ConcurrencyConflict):
        await log.append(build.submitted(submitted.submission_id), expect=0)


async def test_a_retried_append_is_stored_once(build: Any, log: LogPort) -> None:
    """The same event appended again, with or without an expectation, answers its first
    sequence and is stored once."""
    submitted = build.submitted()
    seq = await log.append(submitted, expect=0)
    assert await log.append(submitted, expect=0) == seq
    assert await log.append(submitted) == seq
    assert [s for s, _ in await log.load(_filter(submitted))] == [seq]


async def test_expect_on_names_the_filter_checked(build: Any, log: LogPort) -> None:
    """`expect_on` checks the last sequence of any subject the filter matches."""
    a, b = build.submitted(), build.submitted()
    everything = "kz.ev.submission.*.*.submitted"
    await log.append(a, expect=0, expect_on=everything)
    with pytest.raises(ConcurrencyConflict):
        await log.append(b, expect=0, expect_on=everything)
    assert await log.append(b, expect=1, expect_on=everything) == 2


async def test_load_last_event_and_replay_read_by_filter(build: Any, log: LogPort) -> None:
    """Loads and replays give the events of a filter in order; `last_event` reads one subject."""
    a, b = build.submitted(), build.submitted()
    await log.append(a)
    await log.append(b)
    claimed = _claim(build, a, 1, "r1")
    await log.append(claimed, expect=1)
    assert await log.load(_filter(a)) == [(1, a), (3, claimed)]
    assert await log.last_event(subject_of(claimed)) == (3, claimed)
    assert await log.last_event(subject_of(claimed).replace(".claimed", ".result")) is None
    assert [item async for item in log.replay()] == [(1, a), (2, b), (3, claimed)]
    assert [item async for item in log.replay(2, upto=2)] == [(2, b)]
    only_a = [item async for item in log.replay(subject_filter=_filter(a))]
    assert only_a == [(1, a), (3, claimed)]
    raw = [item async for item in log.replay_raw(3)]
    assert raw == [(3, subject_of(claimed), encode_event(claimed))]


async def test_subscribe_follows_what_is_appended_later(build: Any, log: LogPort) -> None:
    """A follow hands over what is stored, then what is appended after it started."""
    first, later = build.submitted(), build.submitted()
    await log.append(first)
    follow = log.subscribe(from_seq=1)
    try:
        async with asyncio.timeout(10):
            assert await anext(follow) == (1, first)
            await log.append(later)
            assert await anext(follow) == (2, later)
    finally:
        await follow.aclose()


async def test_heartbeats_keep_the_newest_per_subject(build: Any, log: LogPort) -> None:
    """The live stream answers the newest heartbeat of a subject, apart from the events."""
    sid = build.submitted().submission_id
    await log.publish_live(build.heartbeat(sid, "build"))
    newest = build.heartbeat(sid, "benchmark")
    await log.publish_live(newest)
    assert await log.last_live(live_subject("task", ARCH, sid)) == newest
    assert await log.last_live(live_subject("task", ARCH, "nobody")) is None
    assert await log.last_seq(LIVE_STREAM) == 2
    assert await log.last_seq() == 0


async def test_objects_are_kept_by_key(log: LogPort) -> None:
    """Objects come back as stored; a missing one is ObjectNotFound."""
    assert await log.put_object(PACKAGES_BUCKET, "k", b"bytes") == 5
    assert await log.has_object(PACKAGES_BUCKET, "k")
    assert await log.get_object_bytes(PACKAGES_BUCKET, "k") == b"bytes"
    sink = io.BytesIO()
    assert await log.get_object(PACKAGES_BUCKET, "k", sink) == 5 and sink.getvalue() == b"bytes"
    assert not await log.has_object(PACKAGES_BUCKET, "nothing")
    with pytest.raises(ObjectNotFound):
        await log.get_object_bytes(PACKAGES_BUCKET, "nothing")


async def test_the_task_queue_delivers_until_acked(build: Any, log: LogPort) -> None:
    """An architecture's queue delivers its `submitted` events; a nak hands one back (counted
    as a new delivery), an ack or term ends it, and the ack floor moves past what ended."""
    await log.ensure_task_consumer(ARCH, lease_s=30)
    await log.ensure_task_consumer("cpu", lease_s=30)
    first = build.submitted()
    await log.append(first)
    await log.append(build.submitted(kernel_id="cpu/Norm/RMSNorm/fp32/x"))
    await log.append(build.submitted())
    task = await log.next_task(ARCH, 5)
    assert task is not None and (task.seq, task.deliveries) == (1, 1)
    assert task.data == encode_event(first) and task.subject == subject_of(first)
    nxt = await log.next_task(ARCH, 5)
    assert nxt is not None and nxt.seq == 3
    await log.settle_task(task.reply, Settle.NAK)
    again = await log.next_task(ARCH, 5)
    assert again is not None and (again.seq, again.deliveries) == (1, 2)
    await log.settle_task(again.reply, Settle.IN_PROGRESS)
    await log.settle_task(again.reply, Settle.ACK)
    await log.settle_task(nxt.reply, Settle.TERM)
    assert await log.next_task(ARCH, 0.2) is None
    for _ in range(50):  # the server applies acknowledgements asynchronously
        if await log.task_ack_floor(ARCH) == 3:
            break
        await asyncio.sleep(0.05)
    assert await log.task_ack_floor(ARCH) == 3
    assert await log.task_ack_floor("gfx942") is None


async def test_an_unanswered_delivery_comes_again_after_its_lease(build: Any, log: LogPort) -> None:
    """A delivery nobody answers is delivered again once the lease (the ack wait) passes."""
    await log.ensure_task_consumer(ARCH, lease_s=1)
    await log.append(build.submitted())
    task = await log.next_task(ARCH, 5)
    assert task is not None and task.deliveries == 1
    assert await log.next_task(ARCH, 0.3) is None
    again = await log.next_task(ARCH, 5)
    assert again is not None and (again.seq, again.deliveries) == (1, 2)


async def test_the_task_queue_delivers_a_retry_too(build: Any, log: LogPort) -> None:
    """A `requeued` event queues its submission again: the queue delivers it like a
    `submitted` one, in log order, and nothing else of the submission."""
    await log.ensure_task_consumer(ARCH, lease_s=30)
    submitted = build.submitted()
    await log.append(submitted)
    first = await log.next_task(ARCH, 5)
    assert first is not None
    await log.settle_task(first.reply, Settle.ACK)
    claimed = _claim(build, submitted, first.seq, "r1")
    await log.append(claimed)
    requeued = SubmissionRequeued(
        **build.meta("referee").fields(),
        submission_id=submitted.submission_id,
        kernel_id=submitted.kernel_id,
        code="unsettled",
        reason="the host was too noisy to tell",
        result_seq=2,
        attempt=1,
        avoid_runner="r1",
    )
    seq = await log.append(requeued)
    task = await log.next_task(ARCH, 5)
    assert task is not None and (task.seq, task.deliveries) == (seq, 1)
    assert task.subject == subject_of(requeued) and task.data == encode_event(requeued)
    await log.settle_task(task.reply, Settle.ACK)
    assert await log.next_task(ARCH, 0.2) is None


@pytest.mark.parametrize(
    ("pattern", "subject", "matches"),
    [
        ("kz.ev.>", "kz.ev.submission.sm90.x.submitted", True),
        ("kz.ev.>", "kz.ev", False),
        ("kz.ev.submission.*.*.submitted", "kz.ev.submission.sm90.x.submitted", True),
        ("kz.ev.submission.*.*.submitted", "kz.ev.submission.sm90.x.claimed", False),
        ("kz.ev.submission.sm90.x.*", "kz.ev.submission.sm90.x.claimed", True),
        ("kz.ev.submission.sm90.x.*", "kz.ev.submission.sm90.x.claimed.more", False),
    ],
)
def test_subject_filters_match_as_nats_does(pattern: str, subject: str, matches: bool) -> None:
    """`*` matches one token and `>` one or more at the end."""
    assert subject_matches(pattern, subject) is matches
