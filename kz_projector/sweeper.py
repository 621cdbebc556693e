"""The sweeper: a task whose runner was lost ends as `failed` with code `runner_lost`.

Lost means: its last attempt is running and no heartbeat came for longer than the lease plus a
grace (or none since the claim), or JetStream reports that its message ran out of deliveries.
`lost_tasks` is the pure rule; the shell brings the clock and the heartbeats.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from nats.aio.msg import Msg

from kz_events.errors import ConcurrencyConflict, RuleViolation
from kz_events.eventlog import EventLog
from kz_events.events import Event, EventMeta, SubmissionClaimed, UnknownEvent, decode_event
from kz_events.fanout import Follower
from kz_events.ids import KernelId
from kz_events.lifecycle import TERMINAL, Fail, Status, SubmissionState, decide, evolve, fold
from kz_events.subjects import EVENTS_STREAM, aggregate_filter, live_subject

__all__ = ["ADVISORY_SUBJECT", "OpenTask", "Sweeper", "lost_tasks"]

log = logging.getLogger(__name__)

ADVISORY_SUBJECT = f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{EVENTS_STREAM}.*"


@dataclass(frozen=True, slots=True)
class OpenTask:
    submission_id: str
    attempt: int
    max_attempts: int
    claimed_at: datetime


def lost_tasks(
    tasks: Iterable[OpenTask],
    beats: Mapping[str, datetime | None],
    now: datetime,
    lease_s: float,
    grace_s: float,
) -> list[str]:
    """Ids of running tasks on their last attempt whose runner went quiet past lease + grace."""
    limit = timedelta(seconds=lease_s + grace_s)
    lost = []
    for task in tasks:
        if task.attempt < task.max_attempts:
            continue  # JetStream redelivers it to another runner
        last = max(task.claimed_at, beats.get(task.submission_id) or task.claimed_at)
        if now - last > limit:
            lost.append(task.submission_id)
    return sorted(lost)


class Sweeper:
    """Follows open submissions; fails the lost ones through `decide(Fail)`."""

    def __init__(
        self,
        elog: EventLog,
        *,
        lease_s: float,
        grace_s: float,
        clock: Callable[[], datetime],
        new_id: Callable[[], str],
        interval_s: float = 1.0,
        actor: str = "sweeper",
        follow: Follower | None = None,
    ) -> None:
        self.elog = elog
        self.follow: Follower = follow or elog
        self.lease_s = lease_s
        self.grace_s = grace_s
        self.clock = clock
        self.new_id = new_id
        self.interval_s = interval_s
        self.actor = actor
        self.subs: dict[str, SubmissionState] = {}
        self.claimed_at: dict[str, datetime] = {}
        self.position = 0

    def track(self, seq: int, event: Event | UnknownEvent) -> None:
        if seq <= self.position:
            return  # the follow and a catch-up (after an advisory) may both hand it over
        self.position = seq
        sid = getattr(event, "submission_id", None)
        if sid is None or getattr(event, "aggregate", "") != "submission":
            return
        state = evolve(self.subs.get(sid, SubmissionState()), event, seq)
        if isinstance(event, SubmissionClaimed):
            self.claimed_at[sid] = event.occurred_at
        if state.status in TERMINAL or state.status is Status.ACCEPTED:
            self.subs.pop(sid, None)
            self.claimed_at.pop(sid, None)
        else:
            self.subs[sid] = state

    async def catch_up(self) -> None:
        async for seq, event in self.elog.replay(self.position + 1):
            self.track(seq, event)

    async def sweep(self) -> list[str]:
        """One pass over the log as it is now: fail every lost task; returns the ids failed."""
        await self.catch_up()
        return await self._sweep_tracked()

    async def _sweep_tracked(self) -> list[str]:
        tasks = [
            OpenTask(sid, s.attempt, s.max_attempts, self.claimed_at[sid])
            for sid, s in self.subs.items()
            if s.status is Status.RUNNING and sid in self.claimed_at
        ]
        beats = {t.submission_id: await self._beat(t.submission_id) for t in tasks
                 if t.attempt >= t.max_attempts}
        failed = []
        for sid in lost_tasks(tasks, beats, self.clock(), self.lease_s, self.grace_s):
            if await self.fail(sid, "the runner stopped heartbeating past its lease"):
                failed.append(sid)
        return failed

    async def _beat(self, sid: str) -> datetime | None:
        state = self.subs[sid]
        beat = await self.elog.last_live(
            live_subject("task", KernelId.parse(state.kernel_id).arch, sid)
        )
        occurred = getattr(beat, "occurred_at", None)
        return occurred if isinstance(occurred, datetime) else None

    async def fail(self, sid: str, reason: str) -> bool:
        state = self.subs.get(sid)
        for _ in range(5):
            if state is None:
                return False
            meta = EventMeta(event_id=self.new_id(), occurred_at=self.clock(), actor=self.actor)
            try:
                events = decide(state, Fail(meta=meta, code="runner_lost", reason=reason))
                await self.elog.append(events[0], expect=state.version)
                return True
            except RuleViolation:
                return False
            except ConcurrencyConflict:
                arch = KernelId.parse(state.kernel_id).arch
                state = fold(await self.elog.load(aggregate_filter("submission", arch, sid)))
        return False

    async def on_advisory(self, msg: Msg) -> None:
        """A `submitted` message ran out of deliveries: its task is lost."""
        seq = int(json.loads(msg.data).get("stream_seq", 0))
        if seq <= 0:
            return
        stored = await self.elog.js.get_msg(EVENTS_STREAM, seq)
        event = decode_event(stored.data or b"")
        sid = getattr(event, "submission_id", None)
        if sid is None:
            return
        await self.catch_up()
        await self.fail(sid, "the task ran out of delivery attempts")

    async def run(self) -> None:
        """Follow the log and sweep every `interval_s`, until cancelled."""
        await self.catch_up()
        sub = await self.elog.nc.subscribe(ADVISORY_SUBJECT, cb=self.on_advisory)
        follow = asyncio.create_task(self._track_follow(), name="sweeper-follow")
        try:
            while not follow.done():
                await self._sweep_tracked()
                await asyncio.wait([follow], timeout=self.interval_s)
            follow.result()  # the follow ended: raise what ended it
        finally:
            follow.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follow
            await sub.unsubscribe()

    async def _track_follow(self) -> None:
        async with contextlib.aclosing(self.follow.subscribe(from_seq=self.position + 1)) as events:
            async for seq, event in events:
                self.track(seq, event)
