"""The port of the event log: what the other packages need of it, and nothing of NATS.

`EventLog` (kz_events.eventlog) is the NATS adapter, `MemoryLog` (kz_events.memlog) the
in-memory one; one contract suite (tests/integration/events/test_log_contract.py) runs against
both. Callers outside kz_events type their log as `LogPort` and never touch a NATS object: the
task queue's messages come back as `TaskMessage`s and are settled by their reply subject, so any
process holding the reply (an API replica, say) can settle a delivery another one fetched.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import IO, Protocol

from kz_events.events import Event, TaskHeartbeat, UnknownEvent
from kz_events.screen import Screen
from kz_events.subjects import EVENTS_STREAM, EVENTS_SUBJECTS, live_subject

__all__ = [
    "LogPort",
    "Record",
    "Settle",
    "Stored",
    "TaskMessage",
    "lease_signs",
    "subject_matches",
]

Stored = tuple[int, Event | UnknownEvent]
"""An event with its stream sequence."""

Record = tuple[int, str, bytes]
"""A stored message: its stream sequence, its subject and its payload."""


class Settle(StrEnum):
    """How a task delivery is answered (JetStream's acknowledgement kinds)."""

    ACK = "ack"  # done: never deliver it again
    NAK = "nak"  # hand it back: deliver it again (after a delay, when one is given)
    IN_PROGRESS = "in_progress"  # still working: push the redelivery deadline out
    TERM = "term"  # not a task: never deliver it again, and it was not done


@dataclass(frozen=True, slots=True)
class TaskMessage:
    """One delivery of a `submitted` or `requeued` event by an architecture's task queue."""

    seq: int  # the stream sequence of the event
    subject: str
    data: bytes
    deliveries: int  # how many times the queue has delivered it, this one included
    reply: str  # names the delivery to `LogPort.settle_task`


def subject_matches(subject_filter: str, subject: str) -> bool:
    """Whether `subject` matches a NATS filter (`*`: one token, `>`: one or more at the end)."""
    want, have = subject_filter.split("."), subject.split(".")
    for i, part in enumerate(want):
        if part == ">":
            return len(have) > i
        if i >= len(have) or part not in ("*", have[i]):
            return False
    return len(want) == len(have)


class LogPort(Protocol):
    """The event log as the rest of the platform uses it.

    Events: `append` stores an event once (its `event_id` de-duplicates retries); with `expect`
    (the sequence of the last event the caller saw on the aggregate, 0 for none) it raises
    `ConcurrencyConflict` when any event on `expect_on` (default: the event's aggregate) is newer.
    Readers screen what they read (kz_events.screen). Heartbeats go to a second stream that keeps
    the newest per subject. Objects are kept by bucket and key.
    """

    @property
    def connected(self) -> bool: ...

    async def ensure(self) -> None: ...

    async def close(self) -> None: ...

    # --- events -------------------------------------------------------------------------

    async def append(
        self, event: Event, *, expect: int | None = None, expect_on: str | None = None
    ) -> int: ...

    async def load(self, subject_filter: str, *, screen: Screen | None = None) -> list[Stored]: ...

    async def last_event(self, subject: str) -> Stored | None: ...

    async def event_at(self, seq: int) -> Stored | None:
        """The event stored at `seq` of the event stream (screened alone), or None."""

    async def last_seq(self, stream: str = EVENTS_STREAM) -> int: ...

    def replay(
        self,
        from_seq: int = 1,
        *,
        subject_filter: str = EVENTS_SUBJECTS,
        upto: int | None = None,
        stream: str = EVENTS_STREAM,
        batch: int = 1000,
        screen: Screen | None = None,
    ) -> AsyncGenerator[Stored, None]: ...

    def replay_raw(
        self,
        from_seq: int = 1,
        *,
        subject_filter: str = EVENTS_SUBJECTS,
        upto: int | None = None,
        stream: str = EVENTS_STREAM,
        batch: int = 1000,
    ) -> AsyncGenerator[Record, None]: ...

    def subscribe(
        self,
        subject_filter: str = EVENTS_SUBJECTS,
        from_seq: int = 1,
        *,
        stream: str = EVENTS_STREAM,
        stall_check_s: float = 5.0,
        screen: Screen | None = None,
    ) -> AsyncGenerator[Stored, None]: ...

    def subscribe_raw(
        self,
        subject_filter: str = EVENTS_SUBJECTS,
        from_seq: int = 1,
        *,
        stream: str = EVENTS_STREAM,
        stall_check_s: float = 5.0,
    ) -> AsyncGenerator[Record, None]: ...

    # --- heartbeats ---------------------------------------------------------------------

    async def publish_live(self, event: Event) -> int: ...

    async def last_live(self, subject: str) -> Event | UnknownEvent | None: ...

    # --- the per-architecture task queue ------------------------------------------------

    async def ensure_task_consumer(
        self, arch: str, *, lease_s: float = 15.0, max_attempts: int = 3
    ) -> str: ...

    async def next_task(self, arch: str, wait_s: float) -> TaskMessage | None:
        """The next delivery of `arch`'s task queue, or None when none came within `wait_s`."""

    async def settle_task(self, reply: str, how: Settle, *, delay_s: float = 0.0) -> None:
        """Answer the delivery `reply` names; `delay_s` delays a `NAK`'s redelivery."""

    async def task_ack_floor(self, arch: str) -> int | None:
        """The sequence at and below which `arch`'s queue holds nothing any more; None when the
        queue does not exist (yet) or cannot be read now."""

    def exhausted_tasks(self) -> AsyncGenerator[int, None]:
        """Forever, the sequence of each task message a queue stopped delivering because it ran
        out of deliveries; cancel to stop."""

    # --- objects ------------------------------------------------------------------------

    async def put_object(
        self, bucket: str, key: str, source: Path | IO[bytes] | bytes, *, replacing: bool = False
    ) -> int: ...

    async def has_object(self, bucket: str, key: str) -> bool: ...

    async def get_object(self, bucket: str, key: str, sink: IO[bytes]) -> int: ...

    async def get_object_bytes(self, bucket: str, key: str) -> bytes: ...


async def lease_signs(
    log: LogPort, arch: str, submission_id: str, lease_id: str | None
) -> tuple[datetime | None, str]:
    """When the newest heartbeat of the lease `lease_id` on a task was sent (None: there is
    none), and its phase (the runner's "released" when it handed the task back)."""
    if lease_id is None:
        return None, ""
    beat = await log.last_live(live_subject("task", arch, submission_id))
    if not isinstance(beat, TaskHeartbeat) or beat.lease_id != lease_id:
        return None, ""
    return beat.occurred_at, beat.phase
