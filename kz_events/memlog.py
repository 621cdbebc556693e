"""`MemoryLog`: the event log in one process's memory, for tests of the rules around it.

It keeps the semantics the platform relies on, as the contract suite shows against a real
`nats-server`: sequences from 1 shared by the whole stream, subject filters with `*` and `>`,
the per-aggregate expected-last-sequence check raising `ConcurrencyConflict` (a retried append
that was stored answers with its first sequence), de-duplication by `event_id`, readers screened
by `kz_events.screen`, a heartbeat stream keeping the newest per subject, objects, and a task
queue per architecture with explicit acknowledgement and redelivery after the lease.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from kz_events.errors import ConcurrencyConflict, ObjectNotFound
from kz_events.events import Event, UnknownEvent, checked_event, encode_event, subject_of
from kz_events.port import Record, Settle, Stored, TaskMessage, subject_matches
from kz_events.screen import Screen
from kz_events.subjects import (
    EVENTS_STREAM,
    EVENTS_SUBJECTS,
    LIVE_STREAM,
    task_filters,
)

__all__ = ["MemoryLog"]

POLL_S = 0.01  # how often a waiting task fetch looks for a delivery whose delay ran out


@dataclass(slots=True)
class _Queue:
    """One architecture's task queue: what it delivered, when it may deliver it again."""

    ack_wait_s: float
    deliveries: dict[int, int] = field(default_factory=dict)
    due: dict[int, float] = field(default_factory=dict)  # seq → when it may be delivered again
    done: set[int] = field(default_factory=set)


def _is_task(arch: str, subject: str) -> bool:
    """Whether `subject` is one `arch`'s task queue delivers (kz_events.subjects.task_filters)."""
    return any(subject_matches(wanted, subject) for wanted in task_filters(arch))


class MemoryLog:
    """The `LogPort` in memory; `EventLog`'s behaviour without a server."""

    def __init__(self) -> None:
        self._events: list[Record] = []
        self._ids: dict[str, int] = {}
        self._live: dict[str, Record] = {}
        self._live_seq = 0
        self._objects: dict[tuple[str, str], bytes] = {}
        self._queues: dict[str, _Queue] = {}
        self._wakeup = asyncio.Event()
        self._closed = False

    # --- connection ---------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return not self._closed

    async def ensure(self) -> None:
        """Nothing to create: the streams exist from the start."""

    async def close(self) -> None:
        self._closed = True

    def _moved(self) -> None:
        wakeup, self._wakeup = self._wakeup, asyncio.Event()
        wakeup.set()

    # --- appending ----------------------------------------------------------------------

    async def append(
        self, event: Event, *, expect: int | None = None, expect_on: str | None = None
    ) -> int:
        subject = subject_of(event)
        if expect is not None:
            expect_on = expect_on or subject.rsplit(".", 1)[0] + ".*"
            last = max(
                (seq for seq, subj, _ in self._events if subject_matches(expect_on, subj)),
                default=0,
            )
            if last != expect:
                for seq, stored in await self.load(expect_on):
                    if getattr(stored, "event_id", None) == event.event_id:
                        return seq  # a retry of an append that was stored
                raise ConcurrencyConflict(
                    f"{subject}: the aggregate moved past sequence {expect}",
                    details={"expected": expect, "subject": expect_on},
                )
        if event.event_id in self._ids:
            return self._ids[event.event_id]
        seq = len(self._events) + 1
        self._events.append((seq, subject, encode_event(event)))
        self._ids[event.event_id] = seq
        self._moved()
        return seq

    async def publish_live(self, event: Event) -> int:
        self._live_seq += 1
        subject = subject_of(event)
        self._live[subject] = (self._live_seq, subject, encode_event(event))
        self._moved()
        return self._live_seq

    async def last_live(self, subject: str) -> Event | UnknownEvent | None:
        stored = self._live.get(subject)
        return None if stored is None else checked_event(subject, stored[2])

    # --- reading ------------------------------------------------------------------------

    def _records(self, stream: str) -> list[Record]:
        if stream == LIVE_STREAM:
            return sorted(self._live.values())
        return self._events

    async def last_event(self, subject: str) -> Stored | None:
        for seq, subj, data in reversed(self._events):
            if subj == subject:
                return seq, checked_event(subject, data)
        return None

    async def event_at(self, seq: int) -> Stored | None:
        if not 1 <= seq <= len(self._events):
            return None
        _, subject, data = self._events[seq - 1]
        return seq, checked_event(subject, data)

    async def last_seq(self, stream: str = EVENTS_STREAM) -> int:
        return self._live_seq if stream == LIVE_STREAM else len(self._events)

    async def load(self, subject_filter: str, *, screen: Screen | None = None) -> list[Stored]:
        screen = screen or Screen("load", quiet=True)
        return [
            (seq, screen.read(seq, subject, data))
            for seq, subject, data in self._events
            if subject_matches(subject_filter, subject)
        ]

    async def replay(
        self,
        from_seq: int = 1,
        *,
        subject_filter: str = EVENTS_SUBJECTS,
        upto: int | None = None,
        stream: str = EVENTS_STREAM,
        batch: int = 1000,
        screen: Screen | None = None,
    ) -> AsyncGenerator[Stored, None]:
        screen = screen or Screen("replay")
        async for seq, subject, data in self.replay_raw(
            from_seq, subject_filter=subject_filter, upto=upto, stream=stream
        ):
            yield seq, screen.read(seq, subject, data)

    async def replay_raw(
        self,
        from_seq: int = 1,
        *,
        subject_filter: str = EVENTS_SUBJECTS,
        upto: int | None = None,
        stream: str = EVENTS_STREAM,
        batch: int = 1000,
    ) -> AsyncGenerator[Record, None]:
        end = await self.last_seq(stream) if upto is None else upto
        for record in list(self._records(stream)):
            if from_seq <= record[0] <= end and subject_matches(subject_filter, record[1]):
                yield record

    async def subscribe(
        self,
        subject_filter: str = EVENTS_SUBJECTS,
        from_seq: int = 1,
        *,
        stream: str = EVENTS_STREAM,
        stall_check_s: float = 5.0,
        screen: Screen | None = None,
    ) -> AsyncGenerator[Stored, None]:
        screen = screen or Screen("follow", repeats=stream != LIVE_STREAM)
        async for seq, subject, data in self.subscribe_raw(subject_filter, from_seq, stream=stream):
            yield seq, screen.read(seq, subject, data)

    async def subscribe_raw(
        self,
        subject_filter: str = EVENTS_SUBJECTS,
        from_seq: int = 1,
        *,
        stream: str = EVENTS_STREAM,
        stall_check_s: float = 5.0,
    ) -> AsyncGenerator[Record, None]:
        next_seq = max(1, from_seq)
        while True:
            wakeup = self._wakeup
            for record in list(self._records(stream)):
                if record[0] >= next_seq:
                    next_seq = record[0] + 1
                    if subject_matches(subject_filter, record[1]):
                        yield record
            await wakeup.wait()

    # --- the per-architecture task queue ------------------------------------------------

    async def ensure_task_consumer(
        self, arch: str, *, lease_s: float = 15.0, max_attempts: int = 3
    ) -> str:
        queue = self._queues.setdefault(arch, _Queue(lease_s))
        queue.ack_wait_s = lease_s
        return f"memory-{arch}"

    def _deliverable(self, arch: str, now: float) -> Record | None:
        queue = self._queues[arch]
        for record in self._events:
            seq = record[0]
            if seq in queue.done or not _is_task(arch, record[1]):
                continue
            if queue.due.get(seq, now) <= now:
                return record
        return None

    async def next_task(self, arch: str, wait_s: float) -> TaskMessage | None:
        if arch not in self._queues:
            await asyncio.sleep(max(wait_s, 0.0))
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            wakeup = self._wakeup
            now = loop.time()
            record = self._deliverable(arch, now)
            if record is not None:
                queue, seq = self._queues[arch], record[0]
                queue.deliveries[seq] = queue.deliveries.get(seq, 0) + 1
                queue.due[seq] = now + queue.ack_wait_s
                count = queue.deliveries[seq]
                reply = f"$MEM.ACK.{arch}.{seq}.{count}"
                return TaskMessage(seq, record[1], record[2], count, reply)
            if now >= deadline:
                return None
            try:
                async with asyncio.timeout(min(POLL_S, deadline - now)):
                    await wakeup.wait()
            except TimeoutError:
                pass

    async def settle_task(self, reply: str, how: Settle, *, delay_s: float = 0.0) -> None:
        _, _, arch, seq_text, _ = reply.split(".")
        queue, seq = self._queues[arch], int(seq_text)
        now = asyncio.get_running_loop().time()
        if how in (Settle.ACK, Settle.TERM):
            queue.done.add(seq)
            queue.due.pop(seq, None)
        elif how is Settle.NAK:
            queue.due[seq] = now + max(delay_s, 0.0)
        elif seq not in queue.done:
            queue.due[seq] = now + queue.ack_wait_s
        self._moved()

    async def task_ack_floor(self, arch: str) -> int | None:
        queue = self._queues.get(arch)
        if queue is None:
            return None
        floor = 0
        for seq, subject, _ in self._events:
            if not _is_task(arch, subject):
                continue
            if seq not in queue.done:
                break
            floor = seq
        return floor

    async def exhausted_tasks(self) -> AsyncGenerator[int, None]:
        """Deliveries are unbounded here (as the task consumers are configured): nothing
        ever runs out of them."""
        await asyncio.Event().wait()
        yield 0  # pragma: no cover

    # --- objects ------------------------------------------------------------------------

    async def put_object(
        self, bucket: str, key: str, source: Path | IO[bytes] | bytes, *, replacing: bool = False
    ) -> int:
        if isinstance(source, Path):
            data = source.read_bytes()
        elif isinstance(source, bytes):
            data = source
        else:
            data = source.read()
        self._objects[bucket, key] = data
        return len(data)

    async def has_object(self, bucket: str, key: str) -> bool:
        return (bucket, key) in self._objects

    async def get_object(self, bucket: str, key: str, sink: IO[bytes]) -> int:
        data = await self.get_object_bytes(bucket, key)
        sink.write(data)
        return len(data)

    async def get_object_bytes(self, bucket: str, key: str) -> bytes:
        try:
            return self._objects[bucket, key]
        except KeyError:
            raise ObjectNotFound(f"no object {key!r} in {bucket}") from None
