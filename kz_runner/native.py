"""The native transport: a runner that talks to NATS directly.

Runners of an architecture share its durable pull consumer. The attempt is the one the log
counts next (its `claimed` events), never the delivery counter, which restarts when the server
loses consumer state. A delivery is acked only when its submission has ended or this runner's
result is stored: a delivery for a task whose lease is still live is handed back for later, so
the queue never drops work that never ended. Claims and results go through the lifecycle rules
with the per-aggregate concurrency check.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import BinaryIO

from kz_events.bundles import runner_bundle
from kz_events.errors import ConcurrencyConflict, RuleViolation
from kz_events.events import (
    EventMeta,
    RunnerDeregistered,
    RunnerHeartbeat,
    RunnerRegistered,
    SubmissionSubmitted,
    TaskHeartbeat,
    checked_event,
)
from kz_events.lifecycle import (
    HOLDER_GONE_AFTER,
    OPEN,
    RELEASED_PHASE,
    Claim,
    Command,
    ReportResult,
    SubmissionState,
    decide,
    evolve,
    fold,
)
from kz_events.port import LogPort, Settle, TaskMessage, lease_signs
from kz_events.subjects import (
    LOGS_BUCKET,
    PACKAGES_BUCKET,
    aggregate_filter,
    event_subject,
)
from kz_runner.transport import Lease, Report, RunnerInfo

log = logging.getLogger("kz.runner")

__all__ = ["NativeTransport"]


class NativeTransport:
    """Claims from the per-architecture consumers and appends events itself."""

    def __init__(self, log: LogPort, *, lease_s: float = 15.0, max_attempts: int = 3) -> None:
        self.log = log
        self.lease_s = lease_s
        self.max_attempts = max_attempts
        self.info: RunnerInfo | None = None
        self._arches: list[str] = []
        self._next = 0
        self._claimed: dict[str, SubmissionState] = {}  # lease id → state after our claim

    async def register(self, info: RunnerInfo) -> None:
        self.info = info
        for arch in info.arches:
            await self.log.ensure_task_consumer(
                arch, lease_s=self.lease_s, max_attempts=self.max_attempts
            )
            self._arches.append(arch)
        meta = EventMeta.now(info.runner_id)
        await self.log.append(
            RunnerRegistered(
                **meta.fields(),
                runner_id=info.runner_id,
                arches=list(info.arches),
                device=info.device,
                backend=info.backend,
                labels=info.labels,
            )
        )

    async def next_task(self, wait_s: float) -> Lease | None:
        deadline = asyncio.get_running_loop().time() + wait_s
        while True:
            arch = self._arches[self._next % len(self._arches)]
            self._next += 1
            slice_s = max(0.05, min(1.0, deadline - asyncio.get_running_loop().time()))
            msg = await self.log.next_task(arch, slice_s)
            if msg is not None:
                lease = await self._claim(msg)
                if lease is not None:
                    return lease
            if asyncio.get_running_loop().time() >= deadline:
                return None

    async def _state(self, arch: str, submission_id: str) -> SubmissionState:
        return fold(await self.log.load(aggregate_filter("submission", arch, submission_id)))

    async def _append(
        self,
        arch: str,
        submission_id: str,
        command: Callable[[], Command],
        guess: SubmissionState | None,
    ) -> SubmissionState:
        """Append what `command()` decides for the submission under the per-aggregate check;
        the state after it. `guess` is the state this runner believes current (what it saw
        last): tried first, with loading the aggregate as the fallback, so the common case
        costs no reads. Raises `RuleViolation` when the aggregate refuses the command and
        `ConcurrencyConflict` when it kept moving."""
        for _ in range(5):
            state = guess if guess is not None else await self._state(arch, submission_id)
            try:
                event = decide(state, command())[0]
                seq = await self.log.append(event, expect=state.version)
            except (ConcurrencyConflict, RuleViolation):
                if guess is None:
                    raise
                guess = None  # the guess was stale: decide against the stored aggregate
                continue
            return evolve(state, event, seq)
        raise ConcurrencyConflict(f"submission {submission_id} kept changing")

    async def _claim(self, msg: TaskMessage) -> Lease | None:
        """Append `claimed` (the attempt the log counts next) for this delivery.

        A delivery whose submission has ended is acked; one whose submission is open but not
        claimable now (its lease is live, or its attempts are used up and the sweeper ends it)
        is handed back with a delay, never acked: it may be the only copy of the task.
        """
        assert self.info is not None
        submitted = checked_event(msg.subject, msg.data)
        if not isinstance(submitted, SubmissionSubmitted):
            # not a task (an undecodable or misfiled message): never again
            await self.log.settle_task(msg.reply, Settle.TERM)
            return None
        arch = submitted.kernel.arch
        lease_id = str(uuid.uuid4())
        # A first delivery usually finds the submission as it was submitted: try that first.
        first = fold([(msg.seq, submitted)]) if msg.deliveries == 1 else None
        state = await self._claim_as(arch, submitted.submission_id, lease_id, first, msg)
        if state is None:
            return None
        self._claimed[lease_id] = state
        return Lease(
            submission_id=submitted.submission_id,
            kernel_id=submitted.kernel_id,
            arch=arch,
            attempt=state.attempt,
            lease_id=lease_id,
            package_digest=submitted.package_digest,
            package_size=submitted.package_size,
            new_kernel=submitted.new_kernel,
            handle=msg.reply,
        )

    async def _claim_as(
        self,
        arch: str,
        submission_id: str,
        lease_id: str,
        guess: SubmissionState | None,
        msg: TaskMessage,
    ) -> SubmissionState | None:
        """The state after this runner's claim, or None once the delivery is settled."""
        assert self.info is not None
        for _ in range(5):
            state = guess if guess is not None else await self._state(arch, submission_id)
            seen, phase = (
                await lease_signs(self.log, arch, submission_id, state.lease_id)
                if guess is None
                else (None, "")
            )
            command = Claim(
                meta=EventMeta.now(self.info.runner_id),
                runner_id=self.info.runner_id,
                lease_id=lease_id,
                attempt=state.attempt + 1,
                holder_seen_at=seen,
                holder_released=phase == RELEASED_PHASE,
                lease_s=self.lease_s * HOLDER_GONE_AFTER,
            )
            try:
                event = decide(state, command)[0]
                seq = await self.log.append(event, expect=state.version)
            except ConcurrencyConflict:
                guess = None
                continue
            except RuleViolation as refusal:
                if guess is not None:
                    guess = None  # decide against the stored aggregate
                    continue
                if state.status in OPEN:
                    log.info(
                        "runner: %s not claimable now (%s); handing it back",
                        submission_id,
                        refusal.message,
                    )
                    await self.log.settle_task(msg.reply, Settle.NAK, delay_s=self.lease_s)
                else:
                    await self.log.settle_task(msg.reply, Settle.ACK)  # ended: nothing to run
                return None
            return evolve(state, event, seq)
        await self.log.settle_task(msg.reply, Settle.NAK)
        return None

    async def heartbeat(self, lease: Lease, phase: str) -> bool:
        assert self.info is not None
        meta = EventMeta.now(self.info.runner_id)
        await self.log.settle_task(lease.handle, Settle.IN_PROGRESS)
        await self.log.publish_live(
            TaskHeartbeat(
                **meta.fields(),
                submission_id=lease.submission_id,
                kernel_id=lease.kernel_id,
                runner_id=self.info.runner_id,
                attempt=lease.attempt,
                lease_id=lease.lease_id,
                phase=phase,
            )
        )
        cancelled = event_subject("submission", lease.arch, lease.submission_id, "cancelled")
        return await self.log.last_event(cancelled) is not None

    async def fetch_package(self, lease: Lease, sink: BinaryIO) -> None:
        await self.log.get_object(PACKAGES_BUCKET, lease.package_digest, sink)

    async def fetch_judge(self, lease: Lease) -> bytes | None:
        return await runner_bundle(self.log, lease.kernel_id)

    async def report(self, lease: Lease, report: Report) -> None:
        assert self.info is not None
        info = self.info
        log_key = f"{lease.submission_id}-{lease.attempt}"
        await self.log.put_object(LOGS_BUCKET, log_key, report.log)
        try:
            await self._append(
                lease.arch,
                lease.submission_id,
                lambda: ReportResult(
                    meta=EventMeta.now(info.runner_id),
                    runner_id=info.runner_id,
                    lease_id=lease.lease_id,
                    outcome=report.outcome,
                    result=report.result,
                    log_key=log_key,
                    environment=report.environment,
                    duration_s=report.duration_s,
                    timings=report.timings,
                ),
                self._claimed.pop(lease.lease_id, None),
            )
        except RuleViolation:
            pass  # cancelled or given to another runner meanwhile: our result is moot
        except ConcurrencyConflict:
            log.warning("result for %s: the submission kept changing", lease.submission_id)
        await self.log.settle_task(lease.handle, Settle.ACK)

    async def runner_heartbeat(self, busy_with: str | None) -> None:
        assert self.info is not None
        meta = EventMeta.now(self.info.runner_id)
        await self.log.publish_live(
            RunnerHeartbeat(
                **meta.fields(),
                runner_id=self.info.runner_id,
                arches=list(self.info.arches),
                device=self.info.device,
                busy_with=busy_with,
            )
        )

    async def hand_back(self, lease: Lease) -> None:
        """Give the task up now: a last heartbeat says the lease is released, so the runner
        that gets the redelivery takes it over at once instead of waiting for it to lapse."""
        self._claimed.pop(lease.lease_id, None)
        assert self.info is not None
        await self.log.publish_live(
            TaskHeartbeat(
                **EventMeta.now(self.info.runner_id).fields(),
                submission_id=lease.submission_id,
                kernel_id=lease.kernel_id,
                runner_id=self.info.runner_id,
                attempt=lease.attempt,
                lease_id=lease.lease_id,
                phase=RELEASED_PHASE,
            )
        )
        await self.log.settle_task(lease.handle, Settle.NAK)

    async def close(self) -> None:
        self._arches.clear()
        if self.info is not None and self.log.connected:
            meta = EventMeta.now(self.info.runner_id)
            await self.log.append(
                RunnerDeregistered(
                    **meta.fields(),
                    runner_id=self.info.runner_id,
                    arches=list(self.info.arches),
                    reason="stopped",
                )
            )
