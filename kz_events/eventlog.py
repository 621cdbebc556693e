"""`EventLog`: the one client of the event log that the other packages use.

It ensures the streams and object stores, appends events with de-duplication and per-aggregate
optimistic concurrency, rebuilds aggregates, replays and follows the log, publishes heartbeats,
and streams package and log objects. NATS errors are translated here, once, into `KzError`s.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import io
import json
import logging
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    ObjectStoreConfig,
    StorageType,
    StreamConfig,
)
from nats.js.object_store import ObjectStore
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
    wait_none,
)

from kz_events.errors import ConcurrencyConflict, LogUnavailable, ObjectNotFound
from kz_events.events import (
    Event,
    UnknownEvent,
    checked_event,
    encode_event,
    subject_of,
)
from kz_events.expect import SubjectMoved, publish_expecting
from kz_events.objects import (
    SMALL_OBJECT_BYTES,
    DigestCache,
    ObjectChanged,
    put_new_object,
    read_small_object,
)
from kz_events.port import Record, Settle, Stored, TaskMessage
from kz_events.reader import BatchReader
from kz_events.screen import Screen
from kz_events.subjects import (
    EVENTS_STREAM,
    EVENTS_SUBJECTS,
    EXHAUSTED_ADVISORY,
    JUDGES_BUCKET,
    LIVE_STREAM,
    LIVE_SUBJECTS,
    LOGS_BUCKET,
    PACKAGES_BUCKET,
    consumer_name,
    task_filters,
)

__all__ = ["TRANSIENT", "EventLog", "LogOptions", "Stored", "take"]

log = logging.getLogger(__name__)

T = TypeVar("T")
_SETTLE_PAYLOADS = {
    Settle.ACK: b"+ACK",
    Settle.NAK: b"-NAK",
    Settle.IN_PROGRESS: b"+WPI",
    Settle.TERM: b"+TERM",
}
CLOSE_S = 5.0  # the most a close waits on the client library

TRANSIENT = (
    nats.errors.TimeoutError,
    nats.errors.ConnectionClosedError,
    nats.errors.NoRespondersError,
    nats.js.errors.ServiceUnavailableError,
    nats.js.errors.NoStreamResponseError,
    asyncio.TimeoutError,
    ObjectChanged,
)


async def take(queue: asyncio.Queue[T], timeout_s: float) -> T:
    """The next item of a follower's queue; TimeoutError after `timeout_s` without one.

    `asyncio.timeout`, not `asyncio.wait_for`: on CPython 3.11 `wait_for` drops a cancel that
    arrives in the same loop pass as the item, and a follow loop built on it never stops.
    """
    if not queue.empty():
        return queue.get_nowait()
    async with asyncio.timeout(timeout_s):
        return await queue.get()


@dataclass(frozen=True, kw_only=True)
class LogOptions:
    """How the streams are laid out and how hard the client retries."""

    replicas: int = 1
    dedup_window_s: float = 120.0
    live_max_age_s: float = 600.0
    # Time, not the count, bounds the retries: a cluster electing a stream leader answers
    # "no responders" at once for a few seconds, which would use up a small count.
    retry_attempts: int = 40
    retry_total_s: float = 30.0
    retry_fast: bool = False  # zero waits, for tests
    request_timeout_s: float = 5.0
    object_get_timeout_s: float = 10.0  # per try: an object read that stalls is tried again


class EventLog:
    """Append, load, replay and follow the `KZ_EVENTS` stream; heartbeats and objects beside it."""

    def __init__(self, nc: Client, options: LogOptions | None = None) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream(
            timeout=(options or LogOptions()).request_timeout_s
        )
        self.options = options or LogOptions()
        self._buckets: dict[str, ObjectStore] = {}
        self._objects = DigestCache()
        self._unread: set[str] = set()  # task consumers whose state could not be read

    # --- connection ---------------------------------------------------------------------

    @classmethod
    async def connect(
        cls, url: str, options: LogOptions | None = None, *, name: str = "kz", **connect_kw: Any
    ) -> EventLog:
        async def on_disconnect() -> None:
            if nc_box and (nc_box[0].is_closed or nc_box[0].is_draining):
                return
            log.warning("event log: disconnected from %s, reconnecting", url)

        async def on_reconnect() -> None:
            log.warning("event log: reconnected to %s", url)

        async def on_error(exc: Exception) -> None:
            log.warning("event log: %s: %s", url, exc)  # one line, not a traceback per retry

        nc_box: list[Client] = []
        connect_timeout_s = connect_kw.pop("connect_timeout_s", 15.0)
        try:
            async with asyncio.timeout(connect_timeout_s):
                nc = await nats.connect(
                    servers=[part.strip() for part in url.split(",") if part.strip()],
                    name=name,
                    connect_timeout=2,
                    max_reconnect_attempts=connect_kw.pop("max_reconnect_attempts", 120),
                    reconnect_time_wait=connect_kw.pop("reconnect_time_wait", 0.5),
                    drain_timeout=connect_kw.pop("drain_timeout", 5),
                    disconnected_cb=on_disconnect,
                    reconnected_cb=on_reconnect,
                    error_cb=on_error,
                    **connect_kw,
                )
        except (OSError, nats.errors.NoServersError, TimeoutError) as exc:
            raise LogUnavailable(
                f"cannot reach NATS at {url} within {connect_timeout_s:.0f}s: {exc!r}"
            ) from exc
        nc_box.append(nc)
        return cls(nc, options)

    async def close(self) -> None:
        """Flush and close the connection.

        Every append already waited for its acknowledgement, so there is nothing to drain;
        draining would wait on open pull requests of consumers for its whole timeout.
        """
        if self.nc.is_closed:
            return
        if self.nc.is_connected:
            with contextlib.suppress(nats.errors.TimeoutError, nats.errors.ConnectionClosedError):
                await self.nc.flush(timeout=2)
        # nats-py flushes into a dead socket (ConnectionError) and, under load, can wait on its
        # own reader task for good: a closing part must not hang its process's shutdown.
        with contextlib.suppress(ConnectionError, TimeoutError):
            async with asyncio.timeout(CLOSE_S):
                await self.nc.close()

    @property
    def connected(self) -> bool:
        return bool(self.nc.is_connected)

    # --- setup --------------------------------------------------------------------------

    async def ensure(self) -> None:
        """Create or update the streams and object stores the design needs."""
        opts = self.options
        events = StreamConfig(
            name=EVENTS_STREAM,
            subjects=[EVENTS_SUBJECTS],
            storage=StorageType.FILE,
            num_replicas=opts.replicas,
            duplicate_window=opts.dedup_window_s,
            deny_delete=True,
            deny_purge=True,
            allow_direct=True,
        )
        live = StreamConfig(
            name=LIVE_STREAM,
            subjects=[LIVE_SUBJECTS],
            storage=StorageType.FILE,
            num_replicas=opts.replicas,
            max_msgs_per_subject=1,
            max_age=opts.live_max_age_s,
            allow_direct=True,
        )
        for config in (events, live):
            await self._retry(functools.partial(self._add_or_update, config))
        for bucket in (PACKAGES_BUCKET, LOGS_BUCKET, JUDGES_BUCKET):
            self._buckets[bucket] = await self._retry(functools.partial(self._object_store, bucket))

    async def _add_or_update(self, config: StreamConfig) -> None:
        """Create the stream when it is missing; leave an existing one as it is configured.

        Services in a cluster may create but not update streams (an update could shorten
        retention), so an existing stream is only checked, not changed.
        """
        assert config.name is not None
        try:
            await self.js.stream_info(config.name)
        except nats.js.errors.NotFoundError:
            await self.js.add_stream(config)

    async def _object_store(self, bucket: str) -> ObjectStore:
        """Bind to the bucket, creating it when missing; an existing one is left as configured
        (like the streams: a client with another replica count must not fail to start)."""
        try:
            return await self.js.object_store(bucket)
        except nats.js.errors.NotFoundError:
            pass
        config = ObjectStoreConfig(
            bucket=bucket, storage=StorageType.FILE, replicas=self.options.replicas
        )
        return await self.js.create_object_store(bucket, config)

    # --- appending ----------------------------------------------------------------------

    async def append(
        self, event: Event, *, expect: int | None = None, expect_on: str | None = None
    ) -> int:
        """Store `event` once (its `event_id` de-duplicates retries) and return its sequence.

        `expect` is the sequence of the last event the caller saw for the event's aggregate
        (0: the aggregate must not exist yet); `expect_on` names that aggregate's subject filter.
        A mismatch raises `ConcurrencyConflict`.
        """
        subject = subject_of(event)
        headers = {"Nats-Msg-Id": event.event_id}
        if expect is not None:
            if expect_on is None:
                expect_on = subject.rsplit(".", 1)[0] + ".*"
            headers["Nats-Expected-Last-Subject-Sequence"] = str(expect)
            headers["Nats-Expected-Last-Subject-Sequence-Subject"] = expect_on
        payload = encode_event(event)
        try:
            ack = await self._retry(
                lambda: publish_expecting(self.js, subject, payload, headers, EVENTS_STREAM)
            )
        except SubjectMoved as exc:
            # The server checks the expectation before de-duplication, so a retry of an
            # append that was stored lands here: find it and answer as the first time did.
            stored = await self._find_event(expect_on or subject, event.event_id)
            if stored is not None:
                return stored
            raise ConcurrencyConflict(
                f"{subject_of(event)}: the aggregate moved past sequence {expect}",
                details={"expected": expect, "subject": expect_on},
            ) from exc
        return int(ack.seq)

    async def _find_event(self, subject_filter: str, event_id: str) -> int | None:
        for seq, stored in await self.load(subject_filter):
            if getattr(stored, "event_id", None) == event_id:
                return seq
        return None

    async def publish_live(self, event: Event) -> int:
        """Publish a heartbeat to `KZ_LIVE`, where only the newest per subject is kept."""
        ack = await self._retry(
            lambda: self.js.publish(subject_of(event), encode_event(event), stream=LIVE_STREAM)
        )
        return int(ack.seq)

    async def last_live(self, subject: str) -> Event | UnknownEvent | None:
        try:
            msg = await self._retry(lambda: self.js.get_last_msg(LIVE_STREAM, subject))
        except nats.js.errors.NotFoundError:
            return None
        return checked_event(str(msg.subject), msg.data or b"")

    # --- reading ------------------------------------------------------------------------

    async def last_event(self, subject: str) -> Stored | None:
        """The newest event stored on exactly `subject` (a direct lookup), or None."""
        try:
            msg = await self._retry(functools.partial(self.js.get_last_msg, EVENTS_STREAM, subject))
        except nats.js.errors.NotFoundError:
            return None
        seq = int(msg.seq or 0)
        return seq, checked_event(subject, msg.data or b"")

    async def event_at(self, seq: int) -> Stored | None:
        """The event stored at `seq` of the event stream (screened alone), or None."""
        try:
            msg = await self._retry(functools.partial(self.js.get_msg, EVENTS_STREAM, seq))
        except nats.js.errors.NotFoundError:
            return None
        return seq, checked_event(str(msg.subject), msg.data or b"")

    async def last_seq(self, stream: str = EVENTS_STREAM) -> int:
        info = await self._retry(lambda: self.js.stream_info(stream))
        return int(info.state.last_seq)

    async def load(self, subject_filter: str, *, screen: Screen | None = None) -> list[Stored]:
        """Every event on `subject_filter` so far, in order: rebuilds one aggregate.

        Uses message gets (next by subject), not a consumer, so a client that may not create
        consumers (a runner in a cluster) can rebuild the aggregates it works on. What the
        screen skips (kz_events.screen) comes back as an `UnknownEvent` in its place.
        """
        screen = screen or Screen("load", quiet=True)
        stored: list[Stored] = []
        seq = 1
        while True:
            get = functools.partial(
                self.js.get_msg, EVENTS_STREAM, seq=seq, subject=subject_filter, next=True
            )
            try:
                msg = await self._retry(get)
            except nats.js.errors.NotFoundError:
                return stored
            seq = int(msg.seq or 0)
            stored.append((seq, screen.read(seq, str(msg.subject), msg.data or b"")))
            seq = int(msg.seq or 0) + 1

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
        """Events from `from_seq` up to the stream's end now (or `upto`), in order, then stop.

        `screen` is the reader's (kz_events.screen), kept across its replays and follows so a
        repeat is found across them; without one, this call screens on its own."""
        screen = screen or Screen("replay")
        batches = self._batches(from_seq, subject_filter, upto, stream, batch)
        async with contextlib.aclosing(batches):
            async for records in batches:
                for seq, subject, data in records:
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
        """`replay`, as stored: (sequence, subject, the event's exact bytes)."""
        batches = self._batches(from_seq, subject_filter, upto, stream, batch)
        async with contextlib.aclosing(batches):
            async for records in batches:
                for record in records:
                    yield record

    async def _batches(
        self, from_seq: int, subject_filter: str, upto: int | None, stream: str, batch: int
    ) -> AsyncGenerator[list[Record], None]:
        reader = BatchReader(
            self.nc,
            self.js,
            stream,
            subject_filter,
            from_seq,
            timeout_s=self.options.request_timeout_s,
        )
        try:
            while not reader.drained:
                records = await self._retry(functools.partial(reader.next_batch, batch))
                if upto is not None and records and records[-1][0] > upto:
                    yield [record for record in records if record[0] <= upto]
                    return
                yield records
        finally:
            await reader.close()

    async def subscribe(
        self,
        subject_filter: str = EVENTS_SUBJECTS,
        from_seq: int = 1,
        *,
        stream: str = EVENTS_STREAM,
        stall_check_s: float = 5.0,
        screen: Screen | None = None,
    ) -> AsyncGenerator[Stored, None]:
        """Follow the log from `from_seq` forever (an ordered consumer), screened as `replay`
        is; cancel to stop.

        When nothing arrives for `stall_check_s` while the stream holds a later matching
        event, the consumer is replaced from the next sequence: an ordered consumer made on
        a node that is rejoining a cluster can stay silent, heartbeats and all.
        """
        screen = screen or Screen("follow", repeats=stream != LIVE_STREAM)
        records = self.subscribe_raw(
            subject_filter, from_seq, stream=stream, stall_check_s=stall_check_s
        )
        async with contextlib.aclosing(records):
            async for seq, subject, data in records:
                yield seq, screen.read(seq, subject, data)

    async def subscribe_raw(
        self,
        subject_filter: str = EVENTS_SUBJECTS,
        from_seq: int = 1,
        *,
        stream: str = EVENTS_STREAM,
        stall_check_s: float = 5.0,
    ) -> AsyncGenerator[Record, None]:
        """`subscribe`, as stored: (sequence, subject, the event's exact bytes)."""
        next_seq = max(1, from_seq)
        while True:
            queue: asyncio.Queue[Msg] = asyncio.Queue(maxsize=10_000)
            sub = await self._follow(queue, subject_filter, stream, next_seq)
            try:
                while True:
                    try:
                        msg = await take(queue, stall_check_s)
                    except TimeoutError:
                        if await self._has_after(stream, subject_filter, next_seq):
                            log.warning("event log: follower stalled at %d; resubscribe", next_seq)
                            break
                        continue
                    seq = int(msg.metadata.sequence.stream)
                    if seq < next_seq:
                        continue  # redelivered after the client library reset its consumer
                    next_seq = seq + 1
                    yield seq, msg.subject, msg.data
            finally:
                with contextlib.suppress(*TRANSIENT, nats.errors.BadSubscriptionError):
                    await sub.unsubscribe()

    async def _follow(
        self, queue: asyncio.Queue[Msg], subject_filter: str, stream: str, from_seq: int
    ) -> Any:
        async def on_msg(msg: Msg) -> None:
            await queue.put(msg)

        return await self._retry(
            lambda: self.js.subscribe(
                subject_filter,
                stream=stream,
                ordered_consumer=True,
                deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                config=ConsumerConfig(opt_start_seq=from_seq),
                cb=on_msg,
            )
        )

    async def _has_after(self, stream: str, subject_filter: str, seq: int) -> bool:
        """Whether the stream holds an event on `subject_filter` at or after `seq`."""
        get = functools.partial(self.js.get_msg, stream, seq=seq, subject=subject_filter, next=True)
        try:
            await self._retry(get)
        except nats.js.errors.NotFoundError:
            return False
        except LogUnavailable:
            return False  # the follower's own reconnects will tell; check again later
        return True

    # --- the per-architecture task consumer ---------------------------------------------

    async def ensure_task_consumer(
        self, arch: str, *, lease_s: float = 15.0, max_attempts: int = 3
    ) -> str:
        """Create (or update) the durable pull consumer that every runner of `arch` shares.

        It delivers the arch's `submitted` and `requeued` events (`task_filters`, NATS >= 2.10
        `filter_subjects`). The create request updates a consumer that exists with another
        configuration (one made before `requeued` existed, filtered to `submitted` alone): a
        pull subscription would not, and retries would never be delivered.

        `lease_s` is the ack wait: a task whose runner stops heartbeating (`in_progress`) is
        redelivered after it. Deliveries are not bounded: the log counts the attempts (its
        `claimed` events, up to the submission's `max_attempts`), and a delivery counter, which
        restarts when the server loses consumer state, must not drop a task that never ended;
        `max_attempts` is kept for callers. Returns the consumer's name.
        """
        name = consumer_name(arch)
        config = ConsumerConfig(
            durable_name=name,
            name=name,
            filter_subjects=task_filters(arch),
            deliver_policy=DeliverPolicy.ALL,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=lease_s,
            max_deliver=-1,
            max_ack_pending=10_000,
        )
        await self._retry(functools.partial(self.js.add_consumer, EVENTS_STREAM, config))
        return name

    async def next_task(self, arch: str, wait_s: float) -> TaskMessage | None:
        """The next delivery of `arch`'s task queue, or None when none came within `wait_s`
        (or the queue is moving to a new leader: the caller asks again).

        A pull subscription per call: requests of several callers (the API's claims) on one
        subscription could take each other's messages."""
        psub = await self.js.pull_subscribe_bind(durable=consumer_name(arch), stream=EVENTS_STREAM)
        try:
            msgs = await psub.fetch(1, timeout=max(wait_s, 0.05))
        except nats.errors.TimeoutError:
            return None
        except (*TRANSIENT, nats.js.errors.ServiceUnavailableError) as exc:
            log.warning("event log: task fetch for %s failed, asking again: %r", arch, exc)
            await asyncio.sleep(max(wait_s, 0.05))
            return None
        finally:
            with contextlib.suppress(*TRANSIENT, nats.errors.BadSubscriptionError):
                await psub.unsubscribe()
        if not msgs:
            return None
        msg = msgs[0]
        return TaskMessage(
            seq=int(msg.metadata.sequence.stream),
            subject=str(msg.subject),
            data=bytes(msg.data or b""),
            deliveries=int(msg.metadata.num_delivered),
            reply=str(msg.reply),
        )

    async def settle_task(self, reply: str, how: Settle, *, delay_s: float = 0.0) -> None:
        """Answer the delivery `reply` names by publishing JetStream's acknowledgement there."""
        payload = _SETTLE_PAYLOADS[how]
        if how is Settle.NAK and delay_s > 0:
            payload += b" " + json.dumps({"delay": int(delay_s * 1e9)}).encode()
        await self._retry(functools.partial(self.nc.publish, reply, payload))

    async def task_ack_floor(self, arch: str) -> int | None:
        try:
            info = await self._retry(
                functools.partial(self.js.consumer_info, EVENTS_STREAM, consumer_name(arch))
            )
        except (nats.errors.Error, LogUnavailable, TimeoutError) as exc:
            if not isinstance(exc, nats.js.errors.NotFoundError) and arch not in self._unread:
                log.warning("event log: cannot read the %s task consumer: %r", arch, exc)
                self._unread.add(arch)  # once: the sweeper asks every second
            return None
        return int(info.ack_floor.stream_seq or 0) if info.ack_floor else 0

    async def exhausted_tasks(self) -> AsyncGenerator[int, None]:
        """The sequences JetStream's max-deliveries advisories name, as they come."""
        queue: asyncio.Queue[int] = asyncio.Queue()

        async def on_advisory(msg: Msg) -> None:
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                seq = int(json.loads(msg.data).get("stream_seq", 0))
                if seq > 0:
                    queue.put_nowait(seq)

        sub = await self.nc.subscribe(EXHAUSTED_ADVISORY, cb=on_advisory)
        try:
            while True:
                yield await queue.get()
        finally:
            with contextlib.suppress(*TRANSIENT, nats.errors.BadSubscriptionError):
                await sub.unsubscribe()

    # --- objects ------------------------------------------------------------------------

    async def bucket(self, name: str) -> ObjectStore:
        if name not in self._buckets:
            self._buckets[name] = await self._retry(lambda: self.js.object_store(name))
        return self._buckets[name]

    async def put_object(
        self, bucket: str, key: str, source: Path | IO[bytes] | bytes, *, replacing: bool = False
    ) -> int:
        """Stream `source` into the object store under `key`; returns its size in bytes.

        Bytes (and an in-memory buffer) up to `SMALL_OBJECT_BYTES` are stored in two requests
        when the key is new; a key that exists is replaced through nats-py (unless the key is
        the bytes' SHA-256, a package's name, when the same bytes are there already), and
        `replacing` (a key rewritten in place, like a judge bundle) goes there straight away."""
        store = await self.bucket(bucket)
        if isinstance(source, io.BytesIO):
            source = source.getvalue()
        if isinstance(source, bytes):
            data = source
            if not replacing and len(data) <= SMALL_OBJECT_BYTES:
                if await self._retry(functools.partial(put_new_object, self.js, bucket, key, data)):
                    return len(data)
                if hashlib.sha256(data).hexdigest() == key:  # named by its content: it is there
                    return len(data)
            source = io.BytesIO(data)
        if isinstance(source, Path):
            with source.open("rb") as handle:
                info = await self._retry(functools.partial(self._put_once, store, key, handle))
        else:
            info = await self._retry(functools.partial(self._put_once, store, key, source))
        return int(info.size or 0)

    async def _put_once(self, store: ObjectStore, key: str, source: IO[bytes]) -> Any:
        # A retry starts the upload again: the chunks of a failed try are never referenced.
        if source.seekable():
            source.seek(0)
        return await store.put(key, source)  # type: ignore[arg-type]

    async def has_object(self, bucket: str, key: str) -> bool:
        store = await self.bucket(bucket)
        try:
            await self._retry(functools.partial(store.get_info, key))
        except nats.js.errors.ObjectNotFoundError:
            return False
        return True

    async def get_object(self, bucket: str, key: str, sink: IO[bytes]) -> int:
        """Write the object `key` into `sink`; its size. Raises `ObjectNotFound`.

        Small objects are read with message gets and kept by digest (kz_events.objects);
        large ones stream through nats-py's ordered consumer.
        """
        store = await self.bucket(bucket)
        start = sink.tell() if sink.seekable() else None
        try:
            data = await self._retry(
                functools.partial(read_small_object, self.js, store, bucket, key, self._objects)
            )
            if data is not None:
                sink.write(data)
                return len(data)
            result = await self._retry(functools.partial(self._get_once, store, key, sink, start))
        except nats.js.errors.ObjectNotFoundError as exc:
            raise ObjectNotFound(f"no object {key!r} in {bucket}") from exc
        return int(result.info.size or 0)

    async def _get_once(
        self, store: ObjectStore, key: str, sink: IO[bytes], start: int | None
    ) -> Any:
        """One bounded try: nats-py waits for the chunks without a time limit, and an ordered
        consumer made while a stream changes leader may never deliver them."""
        if start is not None:
            sink.seek(start)
            sink.truncate()
        async with asyncio.timeout(self.options.object_get_timeout_s):
            return await store.get(key, writeinto=sink)  # type: ignore[arg-type]

    async def get_object_bytes(self, bucket: str, key: str) -> bytes:
        sink = io.BytesIO()
        await self.get_object(bucket, key, sink)
        return sink.getvalue()

    # --- retries ------------------------------------------------------------------------

    async def _retry(self, call: Callable[[], Any]) -> Any:
        """Run `call`, retrying named transient errors with jittered backoff, bounded.

        The first try runs bare: building the retry machinery costs more than most requests
        it wraps, and almost every call succeeds at once."""
        try:
            return await call()
        except TRANSIENT as exc:
            if self.options.retry_attempts <= 1:
                raise LogUnavailable(f"NATS did not answer after retries: {exc!r}") from exc
            log.warning("event log: transient error, retrying (attempt 1): %r", exc)
        opts = self.options
        wait = wait_none() if opts.retry_fast else wait_exponential_jitter(multiplier=0.05, max=2.0)
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception_type(TRANSIENT),
                stop=stop_after_attempt(opts.retry_attempts - 1)
                | stop_after_delay(opts.retry_total_s),
                wait=wait,
                reraise=True,
                before_sleep=lambda state: log.warning(
                    "event log: transient error, retrying (attempt %d): %r",
                    state.attempt_number + 1,
                    state.outcome.exception() if state.outcome else None,
                ),
            ):
                with attempt:
                    return await call()
        except TRANSIENT as exc:
            raise LogUnavailable(f"NATS did not answer after retries: {exc!r}") from exc
        raise AssertionError("unreachable")  # pragma: no cover
