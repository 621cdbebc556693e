"""Faults: a server lost mid-append surfaces as LogUnavailable after bounded retries, not a hang."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from kz_events.errors import LogUnavailable
from kz_events.eventlog import EventLog, LogOptions
from kz_events.server import EmbeddedServer, free_port

pytestmark = pytest.mark.integration

IMPATIENT = LogOptions(retry_attempts=3, retry_total_s=10, request_timeout_s=0.5, retry_fast=True)


async def test_lost_server_mid_append_surfaces_log_unavailable(
    build: Any, nats_server: EmbeddedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """With the server killed, an append retries a bounded number of times, logs, then raises."""
    elog = await EventLog.connect(nats_server.url, IMPATIENT)
    try:
        await elog.ensure()
        await elog.append(build.submitted())
        nats_server.kill()
        with (
            caplog.at_level(logging.WARNING, logger="kz_events.eventlog"),
            pytest.raises(LogUnavailable, match="did not answer"),
        ):
            await asyncio.wait_for(elog.append(build.submitted()), timeout=60)
        retries = [r for r in caplog.records if "retrying" in r.getMessage()]
        assert len(retries) == IMPATIENT.retry_attempts - 1
    finally:
        await elog.close()
    assert elog.nc.is_closed


async def test_reads_also_fail_bounded(build: Any, nats_server: EmbeddedServer) -> None:
    """Replay and last_seq against a lost server raise LogUnavailable instead of waiting forever."""
    elog = await EventLog.connect(nats_server.url, IMPATIENT)
    try:
        await elog.ensure()
        await elog.append(build.submitted())
        nats_server.kill()
        with pytest.raises(LogUnavailable):
            await asyncio.wait_for(elog.last_seq(), timeout=60)
        with pytest.raises(LogUnavailable):
            await asyncio.wait_for(_drain(elog), timeout=60)
    finally:
        await elog.close()


async def _drain(elog: EventLog) -> None:
    async for _ in elog.replay():
        pass


async def test_retrying_a_lost_append_stores_it_once(build: Any, tmp_path: Path) -> None:
    """An append that failed while the server was away may land later; a retry stores it once."""
    store, port = tmp_path / "store", free_port()
    first = EmbeddedServer(store, port=port).start()
    elog = await EventLog.connect(first.url, IMPATIENT)
    try:
        await elog.ensure()
        before = build.submitted()
        await elog.append(before)
        first.kill()
        lost = build.submitted()
        with pytest.raises(LogUnavailable):
            await asyncio.wait_for(elog.append(lost), timeout=60)
        with EmbeddedServer(store, port=port):
            patient = EventLog(
                elog.nc, LogOptions(retry_attempts=40, retry_total_s=30, request_timeout_s=1)
            )
            seq = await asyncio.wait_for(patient.append(lost), timeout=60)
            assert await patient.load("kz.ev.>") == [(1, before), (seq, lost)]
            await elog.close()
    finally:
        first.stop()


async def test_unreachable_server_at_connect() -> None:
    """Connecting where nothing listens raises LogUnavailable naming the address, bounded."""
    url = f"nats://127.0.0.1:{free_port()}"
    with pytest.raises(LogUnavailable, match=f"cannot reach NATS at {url}"):
        await asyncio.wait_for(
            EventLog.connect(url, IMPATIENT, max_reconnect_attempts=1), timeout=60
        )
