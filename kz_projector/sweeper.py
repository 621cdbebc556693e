"""The sweeper: every claimed submission ends, whatever happens to its runner or the server.

A running task's lease has lapsed when no claim or heartbeat of it came for longer than the lease
plus a grace. Such a task on its last attempt ends `failed` (`runner_lost`). One with attempts left
is re-queued by JetStream: runners ack a task message only once its submission has ended (or
their result is stored), so the message is still held and is delivered again after its ack
wait, and the next claim is the attempt the log counts next. Where the consumer no longer holds
it (its ack floor passed the message, or it ran out of deliveries) nothing would offer it again,
so it ends `failed` (`runner_lost`) too. A submission the referee returned to the queue
(`requeued`) starts a new round: its attempts and its time limit count from there, and its task
message is the `requeued` event. Whatever else happens, a submission still running without
a result longer than its time limit after its first claim (`open_limit_s`) ends `failed`
(`timed_out`); one with a result waits for the referee.
`endings` is the pure rule; the shell brings the clock, the heartbeats and the consumer's state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from kz_events.aio import stop_tasks
from kz_events.commands import Submission, execute
from kz_events.errors import ConcurrencyConflict, RuleViolation
from kz_events.events import (
    Event,
    EventMeta,
    SubmissionRequeued,
    SubmissionSubmitted,
    UnknownEvent,
)
from kz_events.fanout import Follower
from kz_events.ids import KernelId
from kz_events.lifecycle import TERMINAL, Fail, Status, SubmissionState, evolve
from kz_events.port import LogPort
from kz_events.screen import Screen
from kz_events.subjects import live_subject

__all__ = [
    "Ending",
    "OpenTask",
    "Sweeper",
    "endings",
    "lost_tasks",
    "open_limit_s",
]

log = logging.getLogger(__name__)


def open_limit_s(max_attempts: int, task_timeout_s: float, lease_s: float) -> float:
    """The longest a claimed submission can rightly stay open: each attempt may run to the task
    time limit, with a lease to notice a lost runner and a lease to redeliver around each."""
    return max(1, max_attempts) * (task_timeout_s + 2 * lease_s)


@dataclass(frozen=True, slots=True)
class OpenTask:
    submission_id: str
    attempt: int
    max_attempts: int
    claimed_at: datetime
    first_claimed_at: datetime | None = None
    has_result: bool = False  # the referee judges it; its runner is done
    round_attempts: int | None = None  # attempts a round allows (a retry starts a new round)


@dataclass(frozen=True, slots=True)
class Ending:
    """A task the sweeper ends, with the `failed` event's code and reason."""

    submission_id: str
    code: str
    reason: str


def _ending(
    task: OpenTask,
    beat: datetime | None,
    now: datetime,
    lease_s: float,
    grace_s: float,
    limit_s: float,
    gone: bool,
) -> Ending | None:
    if task.has_result:
        return None  # the referee judges it (and the projector restarts a stalled referee)
    first = task.first_claimed_at or task.claimed_at
    open_s = (now - first).total_seconds()
    if open_s > limit_s:
        return Ending(
            task.submission_id,
            "timed_out",
            f"open {open_s:.0f} s since its first claim, past its limit of {limit_s:.0f} s",
        )
    quiet = now - max(task.claimed_at, beat or task.claimed_at)
    if quiet <= timedelta(seconds=lease_s + grace_s):
        return None
    if task.attempt >= task.max_attempts:
        return Ending(
            task.submission_id,
            "runner_lost",
            f"the runner of its last attempt ({task.attempt}) stopped heartbeating past its lease",
        )
    if gone:
        return Ending(
            task.submission_id,
            "runner_lost",
            f"the runner of attempt {task.attempt} stopped heartbeating past its lease "
            "and the task queue no longer holds it",
        )
    return None  # re-queued: JetStream delivers the held message again


def endings(
    tasks: Iterable[OpenTask],
    beats: Mapping[str, datetime | None],
    now: datetime,
    lease_s: float,
    grace_s: float,
    *,
    limit_s: float = math.inf,
    gone: Collection[str] = (),
) -> list[Ending]:
    """The running tasks the sweeper ends now, by submission id. `beats` holds the newest
    heartbeat of each task; `gone`, the tasks whose message the queue no longer holds."""
    found = [
        _ending(
            task,
            beats.get(task.submission_id),
            now,
            lease_s,
            grace_s,
            limit_s,
            task.submission_id in gone,
        )
        for task in tasks
    ]
    return sorted((e for e in found if e is not None), key=lambda e: e.submission_id)


def lost_tasks(
    tasks: Iterable[OpenTask],
    beats: Mapping[str, datetime | None],
    now: datetime,
    lease_s: float,
    grace_s: float,
    **rule: object,
) -> list[str]:
    """Ids of the tasks `endings` ends."""
    return [e.submission_id for e in endings(tasks, beats, now, lease_s, grace_s, **rule)]  # type: ignore[arg-type]


def _open_task(sid: str, state: SubmissionState) -> OpenTask:
    assert state.claimed_at is not None
    return OpenTask(
        sid,
        state.attempt,
        state.last_attempt,
        state.claimed_at,
        state.first_claimed_at,
        state.result_seq is not None,
        state.max_attempts,
    )


class Sweeper:
    """Follows open submissions; ends the lapsed and overdue ones with `Fail` (by `execute`)."""

    def __init__(
        self,
        elog: LogPort,
        *,
        lease_s: float,
        grace_s: float,
        clock: Callable[[], datetime],
        new_id: Callable[[], str],
        interval_s: float = 1.0,
        task_timeout_s: float = math.inf,
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
        self.task_timeout_s = task_timeout_s  # bounds how long a claimed task stays open
        self.actor = actor
        self.subs: dict[str, SubmissionState] = {}
        self.submitted_seq: dict[str, int] = {}
        self.gone: set[str] = set()  # tasks whose message ran out of deliveries
        self.position = 0
        self.screen = Screen("sweeper")  # what it skips (kz_events.screen)

    def track(self, seq: int, event: Event | UnknownEvent) -> None:
        if seq <= self.position:
            return  # the follow and a catch-up (after an advisory) may both hand it over
        self.position = seq
        sid = getattr(event, "submission_id", None)
        if sid is None or getattr(event, "aggregate", "") != "submission":
            return
        state = evolve(self.subs.get(sid, SubmissionState()), event, seq)
        if isinstance(event, SubmissionSubmitted):
            self.submitted_seq.setdefault(sid, seq)
        elif isinstance(event, SubmissionRequeued):
            self.submitted_seq[sid] = seq  # the message that queues its task now
        if state.status in TERMINAL or state.status is Status.ACCEPTED:
            self.subs.pop(sid, None)
            self.submitted_seq.pop(sid, None)
            self.gone.discard(sid)
        else:
            self.subs[sid] = state

    async def catch_up(self) -> None:
        async for seq, event in self.elog.replay(self.position + 1, screen=self.screen):
            self.track(seq, event)

    async def sweep(self) -> list[str]:
        """One pass over the log as it is now: end every lapsed or overdue task; the ids ended."""
        await self.catch_up()
        return await self._sweep_tracked()

    def _running(self) -> dict[str, SubmissionState]:
        """The claimed submissions as tracked now: a copy, because the follow goes on tracking
        (and drops the ones that end) during every await of a pass."""
        return {
            sid: s
            for sid, s in self.subs.items()
            if s.status is Status.RUNNING and s.claimed_at is not None
        }

    async def _sweep_tracked(self) -> list[str]:
        running = self._running()
        tasks = [_open_task(sid, state) for sid, state in running.items()]
        now = self.clock()
        quiet = [
            t
            for t in tasks
            if not t.has_result
            and now - t.claimed_at > timedelta(seconds=self.lease_s + self.grace_s)
        ]
        beats = {t.submission_id: await self._beat(running[t.submission_id]) for t in quiet}
        gone = self.gone | await self._unheld(
            {t.submission_id: running[t.submission_id] for t in quiet if t.attempt < t.max_attempts}
        )
        ended = []
        for task in tasks:
            rounds = task.round_attempts or task.max_attempts
            limit = open_limit_s(rounds, self.task_timeout_s, self.lease_s)
            for ending in endings(
                [task], beats, now, self.lease_s, self.grace_s, limit_s=limit, gone=gone
            ):
                judged = running[ending.submission_id]
                if await self.fail(
                    ending.submission_id, ending.reason, code=ending.code, judged=judged
                ):
                    log.warning(
                        "sweeper: %s failed (%s): %s",
                        ending.submission_id,
                        ending.code,
                        ending.reason,
                    )
                    ended.append(ending.submission_id)
        return sorted(ended)

    async def _beat(self, state: SubmissionState) -> datetime | None:
        """The newest heartbeat of the task's current lease."""
        beat = await self.elog.last_live(
            live_subject("task", KernelId.parse(state.kernel_id).arch, state.submission_id)
        )
        if getattr(beat, "lease_id", None) != state.lease_id:
            return None
        occurred = getattr(beat, "occurred_at", None)
        return occurred if isinstance(occurred, datetime) else None

    async def _unheld(self, states: Mapping[str, SubmissionState]) -> set[str]:
        """Which of the tasks the task consumer of their architecture no longer holds: their
        `submitted` lies at or below its ack floor, so it was acknowledged. A consumer that
        does not exist (yet) delivers the whole queue once made, so it holds everything; one
        that cannot be read now holds everything until the next pass."""
        by_arch: dict[str, list[str]] = {}
        for sid, state in states.items():
            by_arch.setdefault(KernelId.parse(state.kernel_id).arch, []).append(sid)
        unheld: set[str] = set()
        for arch, group in by_arch.items():
            floor = await self.elog.task_ack_floor(arch)
            if floor is None:
                continue
            unheld |= {sid for sid in group if self.submitted_seq.get(sid, floor + 1) <= floor}
        return unheld

    async def fail(
        self,
        sid: str,
        reason: str,
        *,
        code: str = "runner_lost",
        judged: SubmissionState | None = None,
    ) -> bool:
        """End an open submission as `failed`; False when the rules refuse (it ended
        meanwhile) or it kept changing (the next pass looks again). `judged` is the state the
        ending was judged on: a submission claimed again since then is left alone, because
        the ending was about a lease it no longer has."""
        state = judged or self.subs.get(sid)
        if state is None:
            return False
        lease_id = state.lease_id

        def failing(current: SubmissionState) -> Fail:
            if judged is not None and current.lease_id != lease_id:
                raise RuleViolation(
                    f"submission {sid} was claimed again since the sweeper judged it",
                    code="stale_lease",
                )
            meta = EventMeta(event_id=self.new_id(), occurred_at=self.clock(), actor=self.actor)
            return Fail(meta=meta, code=code, reason=reason)

        try:
            await execute(self.elog, Submission.of(state.kernel_id, sid), failing, expected=state)
        except RuleViolation:
            return False
        except ConcurrencyConflict:
            log.warning("sweeper: %s kept changing; the next pass looks again", sid)
            return False
        return True

    async def on_exhausted(self, seq: int) -> None:
        """A `submitted` message ran out of deliveries: the queue no longer holds its task, so
        the next pass ends it once its lease has lapsed."""
        stored = await self.elog.event_at(seq)
        sid = getattr(stored[1], "submission_id", None) if stored is not None else None
        if sid is None:
            return
        await self.catch_up()
        if sid in self.subs:
            self.gone.add(sid)

    async def _watch_exhausted(self) -> None:
        exhausted = self.elog.exhausted_tasks()
        async with contextlib.aclosing(exhausted) as seqs:
            async for seq in seqs:
                await self.on_exhausted(seq)

    async def run(self) -> None:
        """Follow the log and sweep every `interval_s`, until cancelled."""
        await self.catch_up()
        watch = asyncio.create_task(self._watch_exhausted(), name="sweeper-exhausted")
        follow = asyncio.create_task(self._track_follow(), name="sweeper-follow")
        try:
            while not follow.done() and not watch.done():
                await self._sweep_tracked()
                await asyncio.wait([follow, watch], timeout=self.interval_s)
            (follow if follow.done() else watch).result()  # it ended: raise what ended it
        finally:
            await stop_tasks(follow, watch)

    async def _track_follow(self) -> None:
        events = self.follow.subscribe(from_seq=self.position + 1, screen=self.screen)
        async with contextlib.aclosing(events) as followed:
            async for seq, event in followed:
                self.track(seq, event)
