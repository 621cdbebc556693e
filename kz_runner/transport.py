"""The port between the runner's task loop and the platform: NATS (native) or HTTP.

A `Lease` is one claimed task; the transport keeps whatever it needs to heartbeat, finish or
hand back that claim. Both transports do the same things in the same order, so the task loop
in `kz_runner.core` is shared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, BinaryIO, Protocol

from kz_events.errors import KzError

__all__ = ["Lease", "LeaseLost", "Report", "RunnerInfo", "Transport"]


class LeaseLost(KzError):
    """The task was taken from this runner before it ran it: its lease is no longer the
    submission's current claim (it lapsed and another runner claimed it, or the submission
    ended). The runner skips the task; whoever holds it now runs it."""

    code = "stale_lease"


@dataclass(frozen=True, kw_only=True)
class RunnerInfo:
    runner_id: str
    arches: tuple[str, ...]
    device: str
    backend: str
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(kw_only=True)
class Lease:
    """A claimed task: what to run and the handle that keeps the claim."""

    submission_id: str
    kernel_id: str
    arch: str
    attempt: int
    lease_id: str
    package_digest: str
    package_size: int | None = None  # compressed bytes, when the transport is told
    new_kernel: bool = False
    # A confirmation run: measured as the run it confirms was (incumbent and reference beside
    # it), but only its score over the board's reference counts (KZ_CONFIRMATION).
    confirms: str | None = None
    handle: Any = None


@dataclass(frozen=True, kw_only=True)
class Report:
    """What the runner reports when a task ends."""

    outcome: str
    result: dict[str, Any] | None
    environment: dict[str, str]
    duration_s: float
    log: bytes
    timings: dict[str, float] = field(default_factory=dict)


class Transport(Protocol):
    async def register(self, info: RunnerInfo) -> None: ...

    async def next_task(self, wait_s: float) -> Lease | None:
        """Claim the next task of the runner's architectures, or None after `wait_s`."""

    async def heartbeat(self, lease: Lease, phase: str) -> bool:
        """Keep the claim alive; True when the submission was cancelled meanwhile."""

    async def fetch_package(self, lease: Lease, sink: BinaryIO) -> None:
        """Write the package's tarball into `sink` (a file, or memory for a small package).
        Raises `LeaseLost` when the lease is no longer the task's current claim."""

    async def fetch_judge(self, lease: Lease) -> bytes | None:
        """Main's trusted judge bundle for the kernel (a small tar.gz); None when none exists.
        Raises `LeaseLost` when the lease is no longer the task's current claim."""

    async def report(self, lease: Lease, report: Report) -> None:
        """Store the log, append the result and finish the claim."""

    async def runner_heartbeat(self, busy_with: str | None) -> None:
        """Say this runner is alive (and what it works on) between and during tasks."""

    async def hand_back(self, lease: Lease) -> None:
        """Give the task up at once so another runner takes it."""

    async def close(self) -> None: ...
