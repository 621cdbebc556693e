"""Regression tests for the bugs the system tests found, each at the level where it lived."""

from __future__ import annotations

import asyncio
import io
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from nats.js.api import ObjectStoreConfig, StorageType
from system_packages import valid_package
from system_stack import Stack

from kz_events.eventlog import EventLog, LogOptions
from kz_events.events import KernelImported
from kz_events.objects import MESSAGE_GET_CHUNKS
from kz_events.server import EmbeddedServer
from kz_events.subjects import PACKAGES_BUCKET

pytestmark = [pytest.mark.system, pytest.mark.timeout(240)]


def imported(n: int) -> KernelImported:
    return KernelImported(
        event_id=str(uuid.uuid4()),
        occurred_at=datetime.now(UTC),
        actor="test",
        kernel_id=f"sm90/GEMM/dense/fp8/k{n}",
        package_digest="0" * 64,
        submitter_id="test",
    )


async def test_ensure_binds_to_a_bucket_made_with_other_settings(
    nats_server: EmbeddedServer,
) -> None:
    """A service whose settings differ from the bucket's creator (another replica count on a
    cluster) binds to the existing bucket instead of failing to start."""
    first = await EventLog.connect(nats_server.url)
    config = ObjectStoreConfig(
        bucket=PACKAGES_BUCKET, storage=StorageType.FILE, description="made by someone else"
    )
    await first.js.create_object_store(PACKAGES_BUCKET, config)
    await first.close()
    second = await EventLog.connect(nats_server.url)
    try:
        await second.ensure()
        await second.put_object(PACKAGES_BUCKET, "k", io.BytesIO(b"payload"))
        assert await second.get_object_bytes(PACKAGES_BUCKET, "k") == b"payload"
        info = await second.js.stream_info(f"OBJ_{PACKAGES_BUCKET}")
        assert info.config.description == "made by someone else"
    finally:
        await second.close()


async def test_object_read_that_stalls_is_tried_again(nats_server: EmbeddedServer) -> None:
    """A read whose chunks never arrive (a consumer on a node rejoining the cluster) gives up
    after its time limit and is tried again, instead of waiting forever. Only objects of more
    than MESSAGE_GET_CHUNKS chunks are read through a consumer; smaller ones are message gets,
    each bounded by the request timeout."""
    payload = bytes(range(256)) * (512 * (MESSAGE_GET_CHUNKS + 1))  # one 128 KiB chunk too many
    elog = await EventLog.connect(nats_server.url, LogOptions(object_get_timeout_s=0.5))
    try:
        await elog.ensure()
        await elog.put_object(PACKAGES_BUCKET, "k", io.BytesIO(payload))
        store = await elog.bucket(PACKAGES_BUCKET)
        real_get = store.get
        calls: list[int] = []

        async def stalls_once(*args: Any, **kw: Any) -> Any:
            calls.append(1)
            if len(calls) == 1:
                await asyncio.Event().wait()  # never delivers
            return await real_get(*args, **kw)

        store.get = stalls_once  # type: ignore[method-assign]
        sink = io.BytesIO()
        size = await asyncio.wait_for(elog.get_object(PACKAGES_BUCKET, "k", sink), 60)
        assert size == len(payload)
        assert sink.getvalue() == payload and len(calls) == 2
    finally:
        await elog.close()


async def test_follower_replaces_a_silent_consumer(
    nats_server: EmbeddedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """When its consumer vanishes while events keep coming, `subscribe` notices the stream is
    ahead of it and follows again from the next sequence, losing and repeating nothing."""
    elog = await EventLog.connect(nats_server.url)
    try:
        await elog.ensure()
        first = await elog.append(imported(1))
        follower = elog.subscribe(from_seq=1, stall_check_s=0.3)
        assert (await anext(follower))[0] == first
        for info in await elog.js.consumers_info("KZ_EVENTS"):
            await elog.js.delete_consumer("KZ_EVENTS", info.name)
        with caplog.at_level(logging.WARNING, logger="kz_events.eventlog"):
            second = await elog.append(imported(2))
            third = await elog.append(imported(3))
            got = [(await asyncio.wait_for(anext(follower), 60))[0] for _ in range(2)]
        assert got == [second, third]
        assert any("follower stalled" in r.message for r in caplog.records)
        await follower.aclose()
    finally:
        await elog.close()


def test_replicas_answer_for_each_others_writes(
    make_stack: Callable[..., Stack], tmp_path: Path
) -> None:
    """Behind a load balancer, a submission taken by one API process is at once visible on the
    other, and a retry there with the same Idempotency-Key returns it instead of a twin."""
    stack = make_stack(runners=())
    import httpx

    one, two = (httpx.Client(base_url=u, timeout=30) for u in stack.api_urls)
    try:
        for n in range(25):
            data = valid_package("sm90/Attention/MHA/fp16/replica", "accept", n + 1.0)
            key = uuid.uuid4().hex
            kw: dict[str, Any] = {
                "headers": {"X-Submitter-Id": "alice", "Idempotency-Key": key},
                "data": {"kernel_id": "sm90/Attention/MHA/fp16/replica"},
                "files": {"package": ("p.tar.gz", data, "application/gzip")},
            }
            first = one.post("/api/submissions", **kw)
            assert first.status_code == 202, first.text
            sid = first.json()["submission_id"]
            seen = two.get(f"/api/submissions/{sid}/status", headers={"X-Submitter-Id": "alice"})
            assert seen.status_code == 200, seen.text
            again = two.post("/api/submissions", **kw)
            assert again.status_code == 202 and again.json()["submission_id"] == sid
    finally:
        one.close()
        two.close()
