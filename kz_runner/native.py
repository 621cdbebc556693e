"""The native transport: a runner that talks to the event log directly.

It is one adapter of the lease service (kz_events.leasing), the API's runner endpoints the
other: claims, heartbeats, results and hand-backs follow the same rules either way. Runners of
an architecture share its task queue; the attempt is the one the log counts next, and a delivery
is acknowledged only once its submission ended or this runner's result is stored.
"""

from __future__ import annotations

import logging
from typing import BinaryIO

from kz_events.bundles import runner_bundle
from kz_events.errors import ConcurrencyConflict, RuleViolation
from kz_events.events import EventMeta, RunnerDeregistered, RunnerHeartbeat, RunnerRegistered
from kz_events.leasing import LeaseService, ResultReport, TaskLease
from kz_events.port import LogPort
from kz_events.subjects import PACKAGES_BUCKET
from kz_runner.transport import Lease, Report, RunnerInfo

log = logging.getLogger("kz.runner")

__all__ = ["NativeTransport"]


class NativeTransport:
    """Claims from the per-architecture task queues through the lease service."""

    def __init__(self, log: LogPort, *, lease_s: float = 15.0, max_attempts: int = 3) -> None:
        self.log = log
        self.leases = LeaseService(log, lease_s=lease_s, max_attempts=max_attempts)
        self.info: RunnerInfo | None = None

    async def register(self, info: RunnerInfo) -> None:
        self.info = info
        for arch in info.arches:
            await self.leases.open_queue(arch)
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
        assert self.info is not None
        claimed = await self.leases.claim(self.info.runner_id, list(self.info.arches), wait_s)
        if claimed is None:
            return None
        return Lease(
            submission_id=claimed.submission_id,
            kernel_id=claimed.kernel_id,
            arch=claimed.arch,
            attempt=claimed.attempt,
            lease_id=claimed.lease_id,
            package_digest=claimed.package_digest,
            package_size=claimed.package_size,
            new_kernel=claimed.new_kernel,
            confirms=claimed.confirms,
            handle=claimed,
        )

    async def heartbeat(self, lease: Lease, phase: str) -> bool:
        """True when the task should stop: its submission was cancelled, or the lease is no
        longer its current claim (the API answers that 409, which the HTTP runner stops on)."""
        claimed: TaskLease = lease.handle
        try:
            return await self.leases.heartbeat(claimed, phase)
        except RuleViolation as exc:
            log.info("runner: %s: %s; stopping it", lease.submission_id, exc.message)
            return True

    async def fetch_package(self, lease: Lease, sink: BinaryIO) -> None:
        await self.log.get_object(PACKAGES_BUCKET, lease.package_digest, sink)

    async def fetch_judge(self, lease: Lease) -> bytes | None:
        return await runner_bundle(self.log, lease.kernel_id)

    async def report(self, lease: Lease, report: Report) -> None:
        result = ResultReport(
            outcome=report.outcome,
            result=report.result,
            environment=report.environment,
            duration_s=report.duration_s,
            log=report.log,
            timings=report.timings,
        )
        try:
            await self.leases.report(lease.handle, result)
        except RuleViolation as exc:  # cancelled or taken over meanwhile: the result is moot
            log.info("runner: result for %s not taken: %s", lease.submission_id, exc.message)
        except ConcurrencyConflict:
            log.warning("result for %s: the submission kept changing", lease.submission_id)

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
        """Give the task up now (kz_events.leasing.LeaseService.hand_back)."""
        await self.leases.hand_back(lease.handle)

    async def close(self) -> None:
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
