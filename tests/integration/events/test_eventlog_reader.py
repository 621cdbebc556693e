"""The batch reader under faults: a lost batch resumes where it left off, never skipping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nats.errors
import pytest

from kz_events.eventlog import EventLog, LogOptions
from kz_events.events import decode_event
from kz_events.reader import BatchReader
from kz_events.server import EmbeddedServer, free_port
from kz_events.subjects import EVENTS_STREAM

pytestmark = pytest.mark.integration


async def test_lost_batch_resumes_from_the_next_sequence(build: Any, tmp_path: Path) -> None:
    """After a batch times out with the server gone, the next batch restarts at the unread event."""
    store, port = tmp_path / "store", free_port()
    first = EmbeddedServer(store, port=port).start()
    elog = await EventLog.connect(first.url, LogOptions(retry_fast=True))
    events = [build.submitted() for _ in range(3)]
    try:
        await elog.ensure()
        for event in events:
            await elog.append(event)
        reader = BatchReader(elog.nc, elog.js, EVENTS_STREAM, "kz.ev.>", 1, timeout_s=0.5)
        [(seq, _, data)] = await reader.next_batch(1)
        assert (seq, decode_event(data)) == (1, events[0])
        first.kill()
        with pytest.raises(nats.errors.TimeoutError):
            await reader.next_batch(1)
        assert not reader.drained
        with EmbeddedServer(store, port=port):
            reader = _patient(reader)
            rest = []
            while not reader.drained:
                rest += await _eventually(reader)
            assert [(s, decode_event(d)) for s, _, d in rest] == [(2, events[1]), (3, events[2])]
            await reader.close()
            await elog.close()
    finally:
        first.stop()


def _patient(reader: BatchReader) -> BatchReader:
    reader._timeout_s = 2.0
    return reader


async def _eventually(reader: BatchReader) -> list[tuple[int, str, bytes]]:
    """The next batch, retrying while the client reconnects to the restarted server."""
    for _ in range(30):
        try:
            return await reader.next_batch(10)
        except nats.errors.TimeoutError:
            continue
    raise AssertionError("the reader never recovered")


async def test_a_vanished_consumer_is_not_mistaken_for_the_end(
    build: Any, event_log: EventLog
) -> None:
    """When the reader's consumer disappears mid-replay, the reader resumes instead of stopping."""
    events = [build.submitted() for _ in range(5)]
    for event in events:
        await event_log.append(event)
    reader = BatchReader(event_log.nc, event_log.js, EVENTS_STREAM, "kz.ev.>", 1, timeout_s=5)
    try:
        records = await reader.next_batch(2)
        assert reader._consumer is not None
        await event_log.js.delete_consumer(EVENTS_STREAM, reader._consumer)
        while not reader.drained:
            records += await reader.next_batch(2)
    finally:
        await reader.close()
    assert [(s, decode_event(d)) for s, _, d in records] == list(
        zip(range(1, 6), events, strict=True)
    )


async def test_a_new_consumer_that_gives_nothing_is_not_the_end(
    build: Any, event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consumer made on a cluster replica still catching up can count events it cannot yet
    deliver. The reader must not take its empty first batch for the end of the stream (a
    restarted projector then replayed too little and left results unjudged): it fails the
    batch as lost, and the next try reads everything."""
    events = [build.submitted() for _ in range(3)]
    for event in events:
        await event_log.append(event)
    reader = BatchReader(event_log.nc, event_log.js, EVENTS_STREAM, "kz.ev.>", 1, timeout_s=5)
    real_open = BatchReader._open
    lagging = [True]

    async def open_on_a_lagging_replica(self: BatchReader) -> str:
        if not lagging:
            return await real_open(self)
        lagging.clear()
        wanted, self._filter = self._filter, "kz.ev.nothing.yet"
        try:
            name = await real_open(self)  # a consumer that delivers nothing...
        finally:
            self._filter = wanted
        self.pending = 3  # ...while it counts three to come
        return name

    monkeypatch.setattr(BatchReader, "_open", open_on_a_lagging_replica)
    try:
        with pytest.raises(nats.errors.TimeoutError):
            await reader.next_batch(10)
        assert not reader.drained
        records = await reader.next_batch(10)
    finally:
        await reader.close()
    assert [(s, decode_event(d)) for s, _, d in records] == list(
        zip(range(1, 4), events, strict=True)
    )
