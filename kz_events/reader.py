"""Fast ordered reads of a stream, batch by batch, for `EventLog.replay`.

nats-py's `fetch` spends a task (and a uuid) on every message; replaying a long log is then
bound by the client. This reader drives an ephemeral pull consumer with plain pull requests
and a callback subscription, so a batch costs one request and one timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from kz_events.port import Record

__all__ = ["BatchReader", "Record"]


def _sequence_and_pending(reply: str) -> tuple[int, int]:
    """Stream sequence and pending count from a `$JS.ACK.…` reply subject (v1 or v2 form)."""
    tokens = reply.split(".")
    if len(tokens) == 9:  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
        return int(tokens[5]), int(tokens[8])
    # $JS.ACK.<domain>.<hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>[.<r>]
    return int(tokens[7]), int(tokens[10])


class BatchReader:
    """Reads `subject_filter` of `stream` in order from a start sequence until it is drained.

    A lost batch (timeout) drops the consumer; the next call re-creates it from the sequence
    after the last record returned, so a retry never skips or repeats a message.
    """

    def __init__(
        self,
        nc: Client,
        js: JetStreamContext,
        stream: str,
        subject_filter: str,
        from_seq: int,
        *,
        timeout_s: float = 5.0,
    ) -> None:
        self._nc = nc
        self._js = js
        self._stream = stream
        self._filter = subject_filter
        self._timeout_s = timeout_s
        self.next_seq = max(1, from_seq)
        self.pending = -1  # unknown until the consumer exists
        self._consumer: str | None = None
        self._sub: Subscription | None = None
        self._records: list[Record] = []
        self._want = 0
        self._done = asyncio.Event()

    @property
    def drained(self) -> bool:
        return self.pending == 0

    async def _on_msg(self, msg: Msg) -> None:
        if not msg.data and msg.headers and "Status" in msg.headers:
            self._done.set()  # "404 No Messages", "408 Request Timeout": the batch ends here
            return
        seq, pending = _sequence_and_pending(msg.reply)
        self._records.append((seq, msg.subject, msg.data))
        self.pending = pending
        if len(self._records) >= self._want:
            self._done.set()

    async def _open(self) -> str:
        # A fresh inbox per consumer: stragglers of an abandoned batch cannot mix in.
        self._sub = await self._nc.subscribe(self._nc.new_inbox(), cb=self._on_msg)
        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=self.next_seq,
            ack_policy=AckPolicy.NONE,
            filter_subject=self._filter,
            inactive_threshold=60.0,
            mem_storage=True,
            num_replicas=1,
        )
        info = await self._js.add_consumer(self._stream, config, timeout=self._timeout_s)
        self.pending = int(info.num_pending or 0)
        self._consumer = str(info.name)
        return self._consumer

    async def next_batch(self, size: int) -> list[Record]:
        """Up to `size` records after the last one returned; empty once the stream is drained."""
        fresh = self._consumer is None
        consumer = self._consumer or await self._open()
        if self.pending == 0:
            return []
        self._records, self._want = [], min(size, self.pending)
        self._done.clear()
        request = json.dumps({"batch": self._want, "no_wait": True}).encode()
        subject = f"$JS.API.CONSUMER.MSG.NEXT.{self._stream}.{consumer}"
        assert self._sub is not None
        await self._nc.publish(subject, request, reply=self._sub.subject)
        try:
            async with asyncio.timeout(self._timeout_s):  # not wait_for: it can drop a cancel
                await self._done.wait()
        except TimeoutError as exc:
            await self._abandon()
            raise nats.errors.TimeoutError from exc
        records = self._records
        self._records = []
        if records:
            self.next_seq = records[-1][0] + 1
        elif fresh:
            # A new consumer that counted messages to come but had none to give is not the end
            # of the stream: in a cluster it can sit on a replica still catching up after a
            # restart. Taking it for the end would end a replay early and skip events; ask
            # again later, as after a lost batch.
            await self._abandon()
            raise nats.errors.TimeoutError
        else:
            # Nothing from a consumer that had more: it may be gone (idle past its threshold),
            # so never take this for the end; ask a new consumer from where we are.
            await self._abandon()
            return await self.next_batch(size)
        return records

    async def _abandon(self) -> None:
        """Forget the consumer (the server reaps it when idle) so the next batch starts afresh."""
        self._consumer = None
        self.pending = -1
        await self._unsubscribe()

    async def _unsubscribe(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(nats.errors.ConnectionClosedError):
                await sub.unsubscribe()

    async def close(self) -> None:
        await self._unsubscribe()
        if self._consumer is not None and self._nc.is_connected:
            name, self._consumer = self._consumer, None
            with contextlib.suppress(nats.js.errors.NotFoundError, nats.errors.TimeoutError):
                await self._js.delete_consumer(self._stream, name)
