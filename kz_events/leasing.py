"""The lease service: how a runner claims, keeps, reports and gives back a task, whatever the
transport. The native runner (kz_runner.native) calls it directly; the API's runner endpoints
(kz_api.runner_tasks) call it on an HTTP runner's behalf. Both get the same answer in every case.

- `claim`: take the next delivery of the runner's architectures (a `submitted` event, or a
  `requeued` one that returns a submission to the queue for a retry) and append `claimed` (the
  attempt the log counts next) through `execute`. A delivery that is no task is terminated; one
  whose submission ended, or that a later `requeued` superseded, is acknowledged; one whose
  submission is open but not claimable now (its lease is live, its attempts are used up) is handed
  back for a lease, never acknowledged: it may be the only copy of the task. A claim that kept
  conflicting hands the delivery back at once. A task that names a runner to avoid (a
  confirmation run, a retry) is handed back a few times by that runner, so another takes it.
- `heartbeat`: from the log, not a read model: a cancelled submission says stop; a lease that is
  no longer the submission's current claim is refused (`stale_lease`); else the heartbeat goes
  to the live stream and the delivery's redelivery deadline is pushed out.
- `report`: store the log (only for a result the rules take), append `result`, settle.
- `hand_back`: a last heartbeat says the lease is released (the next runner takes it over at
  once), and the delivery is handed back.

Settling a delivery after a report or a hand-back follows one rule (`settle_rule`): acknowledge
it when the submission ended or this lease's result is stored, hand it back when this lease is
still current, and leave it alone when another runner's lease is (the delivery is theirs now).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass

from kz_events.commands import Submission, execute
from kz_events.errors import ConcurrencyConflict, RuleViolation
from kz_events.events import (
    EventMeta,
    SubmissionRequeued,
    SubmissionSubmitted,
    TaskHeartbeat,
    checked_event,
)
from kz_events.ids import KernelId
from kz_events.lifecycle import (
    HOLDER_GONE_AFTER,
    OPEN,
    RELEASED_PHASE,
    Claim,
    ReportResult,
    Status,
    SubmissionState,
    fold,
)
from kz_events.port import LogPort, Settle, TaskMessage, lease_signs
from kz_events.subjects import LOGS_BUCKET

__all__ = ["LeaseService", "ResultReport", "TaskLease", "settle_rule"]

log = logging.getLogger(__name__)

AVOID_DELIVERIES = 3  # how often a runner hands back a confirmation run of its own result
AVOID_DELAY_S = 2.0


@dataclass(frozen=True, kw_only=True)
class TaskLease:
    """One claimed task: the claim, and the reply subject that settles its delivery. An HTTP
    runner's lease token carries the same (kz_api.leases), so any API replica rebuilds it."""

    submission_id: str
    kernel_id: str
    attempt: int
    lease_id: str
    runner_id: str
    reply: str
    package_digest: str = ""
    package_size: int = 0
    new_kernel: bool = False
    confirms: str | None = None  # a confirmation run: the accepted submission it runs again

    @property
    def arch(self) -> str:
        return KernelId.parse(self.kernel_id).arch

    @property
    def aggregate(self) -> Submission:
        return Submission.of(self.kernel_id, self.submission_id)


@dataclass(frozen=True, kw_only=True)
class ResultReport:
    """What a runner reports when its task ends; `log` is stored beside the result."""

    outcome: str
    result: dict[str, object] | None
    environment: dict[str, str]
    duration_s: float
    log: bytes
    timings: dict[str, float]


def settle_rule(state: SubmissionState, lease_id: str) -> Settle | None:
    """How a runner done with its delivery settles it: acknowledged when the submission ended or
    the lease's result is stored, handed back while the lease is current, else left to the
    runner whose lease is current (None)."""
    if state.status not in OPEN:
        return Settle.ACK
    if state.lease_id != lease_id:
        return None
    return Settle.ACK if state.result_seq is not None else Settle.NAK


class LeaseService:
    """Claims, heartbeats, reports and hand-backs for runners, on one log."""

    def __init__(
        self,
        elog: LogPort,
        *,
        lease_s: float,
        max_attempts: int = 3,
        queues: set[str] | None = None,
    ) -> None:
        self.log = elog
        self.lease_s = lease_s
        self.max_attempts = max_attempts
        self.queues = queues if queues is not None else set()  # architectures made already

    async def open_queue(self, arch: str) -> None:
        """Make `arch`'s task queue (once per service: the consumer update is a request)."""
        if arch not in self.queues:
            await self.log.ensure_task_consumer(
                arch, lease_s=self.lease_s, max_attempts=self.max_attempts
            )
            self.queues.add(arch)

    async def _state(self, lease: TaskLease) -> SubmissionState:
        return fold(await self.log.load(lease.aggregate.subject_filter))

    # --- claim ----------------------------------------------------------------------------

    async def claim(self, runner_id: str, arches: list[str], wait_s: float) -> TaskLease | None:
        """The next task of `arches` this runner claimed, or None when none came in `wait_s`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        for arch in arches:
            await self.open_queue(arch)
        while True:
            for arch in arches:
                remaining = deadline - loop.time()
                slice_s = max(0.05, min(max(remaining, 0.0), 1.0) / len(arches))
                msg = await self.log.next_task(arch, slice_s)
                if msg is not None and (lease := await self._claim(msg, runner_id)):
                    return lease
            if loop.time() >= deadline:
                return None

    async def _claim(self, msg: TaskMessage, runner_id: str) -> TaskLease | None:
        task, avoid = await self._task_of(msg)
        if task is None:
            await self.log.settle_task(msg.reply, Settle.TERM)  # no task (undecodable, misfiled)
            return None
        if avoid == runner_id and msg.deliveries <= AVOID_DELIVERIES:
            # A confirmation run or a retry is for another runner when one serves the arch:
            # handed back a few times, it comes to this one again after other work.
            await self.log.settle_task(msg.reply, Settle.NAK, delay_s=AVOID_DELAY_S)
            return None
        aggregate = Submission.of(task.kernel_id, task.submission_id)
        lease_id = str(uuid.uuid4())

        async def claiming(state: SubmissionState) -> Claim:
            if state.task_seq > msg.seq:
                raise RuleViolation("a retry queued the task again", code="superseded")
            seen, phase = await lease_signs(
                self.log, aggregate.arch, task.submission_id, state.lease_id
            )
            return Claim(
                meta=EventMeta.now(runner_id),
                runner_id=runner_id,
                lease_id=lease_id,
                attempt=state.attempt + 1,
                holder_seen_at=seen,
                holder_released=phase == RELEASED_PHASE,
                lease_s=self.lease_s * HOLDER_GONE_AFTER,
            )

        # A first delivery of a submission usually finds it as it was submitted: try that first.
        plain = msg.deliveries == 1 and msg.subject.endswith(".submitted")
        first = fold([(msg.seq, task)]) if plain else None
        try:
            done = await execute(self.log, aggregate, claiming, expected=first)
        except RuleViolation as refusal:
            await self._refused(msg, task, refusal)
            return None
        except ConcurrencyConflict:
            await self.log.settle_task(msg.reply, Settle.NAK)
            return None
        return TaskLease(
            submission_id=task.submission_id,
            kernel_id=task.kernel_id,
            attempt=done.state.attempt,
            lease_id=lease_id,
            runner_id=runner_id,
            reply=msg.reply,
            package_digest=task.package_digest,
            package_size=task.package_size,
            new_kernel=task.new_kernel,
            confirms=task.confirms,
        )

    async def _task_of(self, msg: TaskMessage) -> tuple[SubmissionSubmitted | None, str | None]:
        """The submission a delivery queues, and the runner it prefers to avoid: a `submitted`
        event is the task itself; a `requeued` one names a submission whose `submitted` event
        says what to run. (None, None) for a delivery that is no task."""
        event = checked_event(msg.subject, msg.data)
        if isinstance(event, SubmissionSubmitted):
            return event, event.avoid_runner
        if not isinstance(event, SubmissionRequeued):
            return None, None
        aggregate = Submission.of(event.kernel_id, event.submission_id)
        stored = await self.log.load(aggregate.subject_filter)
        submitted = next((e for _, e in stored if isinstance(e, SubmissionSubmitted)), None)
        return submitted, event.avoid_runner

    async def _refused(
        self, msg: TaskMessage, task: SubmissionSubmitted, refusal: RuleViolation
    ) -> None:
        aggregate = Submission.of(task.kernel_id, task.submission_id)
        state = fold(await self.log.load(aggregate.subject_filter))
        if state.status in OPEN and state.task_seq <= msg.seq:
            log.info(
                "leases: %s not claimable now (%s); handing it back",
                task.submission_id,
                refusal.message,
            )
            await self.log.settle_task(msg.reply, Settle.NAK, delay_s=self.lease_s)
        else:
            await self.log.settle_task(msg.reply, Settle.ACK)  # ended or queued again: done

    # --- while it runs --------------------------------------------------------------------

    async def cancelled(self, lease: TaskLease) -> bool:
        """Whether the lease's submission was cancelled, as the log says."""
        return (await self._state(lease)).status is Status.CANCELLED

    async def heartbeat(self, lease: TaskLease, phase: str) -> bool:
        """Keep the lease alive; True when the runner should stop: its submission was
        cancelled. Raises `RuleViolation` (stale_lease) when the lease is not the submission's
        current claim any more."""
        state = await self._state(lease)
        if state.status is Status.CANCELLED:
            return True
        if state.status is not Status.RUNNING or state.lease_id != lease.lease_id:
            raise RuleViolation(
                f"the lease is not the submission's current claim (it is {state.status})",
                code="stale_lease",
            )
        await self.log.publish_live(self._beat(lease, phase))
        await self.log.settle_task(lease.reply, Settle.IN_PROGRESS)
        return False

    def _beat(self, lease: TaskLease, phase: str) -> TaskHeartbeat:
        return TaskHeartbeat(
            **EventMeta.now(lease.runner_id).fields(),
            submission_id=lease.submission_id,
            kernel_id=lease.kernel_id,
            runner_id=lease.runner_id,
            attempt=lease.attempt,
            lease_id=lease.lease_id,
            phase=phase,
        )

    # --- the end of a lease ---------------------------------------------------------------

    async def report(self, lease: TaskLease, report: ResultReport) -> SubmissionState:
        """Store the log and append `result` for the lease, then settle the delivery; the
        state after it. Raises `RuleViolation` when the rules refuse the result (the lease is
        not current, a result was stored already), after settling by `settle_rule`.

        Decided on the submission as the log has it, never on what the claim saw: a lease lost
        meanwhile is refused before its log is stored, by either transport."""
        log_key = f"{lease.submission_id}-{lease.attempt}" if report.log else None

        async def store_log(_: object) -> None:
            if log_key is not None:
                await self.log.put_object(LOGS_BUCKET, log_key, report.log)

        command = ReportResult(
            meta=EventMeta.now(lease.runner_id),
            runner_id=lease.runner_id,
            lease_id=lease.lease_id,
            outcome=report.outcome,
            result=dict(report.result) if report.result is not None else None,
            log_key=log_key,
            environment=report.environment,
            duration_s=report.duration_s,
            timings=report.timings,
        )
        try:
            done = await execute(self.log, lease.aggregate, command, before_append=store_log)
        except RuleViolation:
            await self._settle(lease, await self._state(lease))
            raise
        await self._settle(lease, done.state)
        return done.state

    async def hand_back(self, lease: TaskLease) -> None:
        """Give the task up at once: a released heartbeat, so the runner that gets it next takes
        it over without waiting for the lease to lapse, and the delivery handed back."""
        state = await self._state(lease)
        if state.status is Status.RUNNING and state.lease_id == lease.lease_id:
            await self.log.publish_live(self._beat(lease, RELEASED_PHASE))
        await self._settle(lease, state)

    async def settle(self, lease: TaskLease) -> None:
        """Settle the lease's delivery by `settle_rule` on the submission as the log has it:
        an acknowledgement for ended work, a hand-back for a current lease."""
        await self._settle(lease, await self._state(lease))

    async def _settle(self, lease: TaskLease, state: SubmissionState) -> None:
        how = settle_rule(state, lease.lease_id)
        if how is not None:
            await self.log.settle_task(lease.reply, how)
