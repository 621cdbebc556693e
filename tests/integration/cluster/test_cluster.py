"""A three-node JetStream cluster on loopback: it forms, and an R3 `KZ_EVENTS` stream keeps
every acknowledged event through the loss of its leader's server."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy, StorageType, StreamConfig

from kz_events.cluster import LocalCluster
from kz_events.errors import ConcurrencyConflict
from kz_events.eventlog import EventLog, LogOptions
from kz_events.events import SubmissionCancelled
from kz_events.subjects import EVENTS_STREAM, EVENTS_SUBJECTS, aggregate_filter

pytestmark = pytest.mark.integration

T = TypeVar("T")

RETRYABLE = (
    nats.errors.TimeoutError,
    nats.errors.NoRespondersError,
    nats.errors.ConnectionClosedError,
    nats.js.errors.ServiceUnavailableError,
    nats.js.errors.NoStreamResponseError,
    asyncio.TimeoutError,
)


async def connect(urls: list[str]) -> Client:
    return await nats.connect(
        servers=urls, reconnect_time_wait=0.1, max_reconnect_attempts=-1, connect_timeout=2
    )


async def publish_once(js: JetStreamContext, subject: str, body: bytes, msg_id: str) -> int:
    """Publish until acknowledged; `Nats-Msg-Id` makes the retries store the event once."""
    deadline = time.monotonic() + 30
    while True:
        try:
            ack = await js.publish(subject, body, timeout=1, headers={"Nats-Msg-Id": msg_id})
            return int(ack.seq)
        except RETRYABLE:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def until_answered(call: Callable[[], Awaitable[T]]) -> T:
    """Retry a JetStream API call while the cluster elects new leaders (bounded: 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return await call()
        except RETRYABLE:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def read_all(js: JetStreamContext, expected: int) -> list[tuple[int, str, bytes]]:
    sub = await until_answered(
        lambda: js.subscribe(
            EVENTS_SUBJECTS,
            stream=EVENTS_STREAM,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.ALL,
        )
    )
    try:
        got = []
        for _ in range(expected):
            msg = await sub.next_msg(timeout=10)
            got.append((int(msg.metadata.sequence.stream), msg.subject, msg.data))
        return got
    finally:
        await sub.unsubscribe()


def local_messages(cluster: LocalCluster, i: int) -> int:
    """How many messages node `i` itself holds for `KZ_EVENTS` (its replica, not the leader's)."""
    url = cluster.monitor_url(i) + "/jsz?streams=true"
    with urllib.request.urlopen(url, timeout=2) as response:
        jsz = json.load(response)
    for account in jsz.get("account_details", []):
        for stream in account.get("stream_detail", []):
            if stream["name"] == EVENTS_STREAM:
                return int(stream["state"]["messages"])
    return 0


def wait_for_replica(cluster: LocalCluster, i: int, count: int, timeout_s: float = 20) -> int:
    """Poll node `i` until its replica holds `count` messages or the time is up; the count."""
    deadline = time.monotonic() + timeout_s
    while (held := local_messages(cluster, i)) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    return held


def event(i: int) -> tuple[str, bytes, str]:
    sid = f"00000000-0000-4000-8000-{i:012d}"
    body = json.dumps({"type": "submitted", "n": i}).encode()
    return f"kz.ev.submission.sm90.{sid}.submitted", body, f"event-{i}"


async def test_cluster_forms_with_one_meta_leader(cluster: LocalCluster) -> None:
    """Three nodes agree on one JetStream meta leader and every node serves JetStream."""
    leader = cluster.meta_leader()
    assert leader in {server.server_name for server in cluster.servers}
    for url in cluster.urls:
        nc = await nats.connect(url)
        try:
            info = await nc.jetstream().account_info()
            assert info.streams == 0
        finally:
            await nc.close()


async def test_r3_stream_keeps_every_acknowledged_event_when_its_leader_dies(
    cluster: LocalCluster,
) -> None:
    """Events acknowledged before and after the stream leader's server is killed all read back
    once, in order, and the restarted node catches up to the same count."""
    nc = await connect(cluster.urls)
    try:
        js = nc.jetstream(timeout=5)
        await js.add_stream(
            StreamConfig(
                name=EVENTS_STREAM,
                subjects=[EVENTS_SUBJECTS],
                storage=StorageType.FILE,
                num_replicas=3,
                duplicate_window=120,
                deny_delete=True,
                deny_purge=True,
            )
        )
        before, after = 40, 40
        for i in range(before):
            assert await publish_once(js, *event(i)) == i + 1

        info = await js.stream_info(EVENTS_STREAM)
        assert info.cluster is not None and info.cluster.leader
        victim = cluster.index_of(info.cluster.leader)
        cluster.kill(victim)

        for i in range(before, before + after):
            await publish_once(js, *event(i))

        info = await until_answered(lambda: js.stream_info(EVENTS_STREAM))
        assert info.cluster is not None
        assert info.cluster.leader != cluster.servers[victim].server_name
        assert info.state.messages == before + after
        stored = await read_all(js, before + after)
        assert [seq for seq, _, _ in stored] == list(range(1, before + after + 1))
        assert [(subject, body) for _, subject, body in stored] == [
            event(i)[:2] for i in range(before + after)
        ]

        cluster.restart(victim)
        caught_up = await asyncio.to_thread(wait_for_replica, cluster, victim, before + after)
        assert caught_up == before + after
    finally:
        await nc.close()


async def test_racing_appends_to_one_aggregate_end_in_one_event_and_conflicts(
    cluster: LocalCluster,
) -> None:
    """On an R3 stream the leader refuses an expected-sequence append while another one on the
    same aggregate is still replicating (JetStream error 10164, not the 10071 a single server
    gives). Racing appends must still end as on one server: exactly one stored, every other
    a `ConcurrencyConflict` — never a raw API error."""
    elog = await EventLog.connect(",".join(cluster.urls), LogOptions(replicas=3))
    try:
        await until_answered(elog.ensure)
        for round_ in range(5):
            sid = str(uuid.uuid4())
            events = [
                SubmissionCancelled(
                    event_id=str(uuid.uuid4()),
                    occurred_at=datetime.now(UTC),
                    actor=f"racer-{i}",
                    submission_id=sid,
                    kernel_id="sm90/Norm/RMSNorm/fp16/race",
                    reason=f"round {round_}",
                )
                for i in range(12)
            ]
            answers = await asyncio.gather(
                *(elog.append(event, expect=0) for event in events), return_exceptions=True
            )
            stored = [a for a in answers if isinstance(a, int)]
            assert len(stored) == 1, answers
            assert all(isinstance(a, ConcurrencyConflict) for a in answers if a not in stored)
            assert len(await elog.load(aggregate_filter("submission", "sm90", sid))) == 1
    finally:
        await elog.close()
