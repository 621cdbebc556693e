"""The resources one running app shares across requests, handed to handlers by injection."""

from __future__ import annotations

from dataclasses import dataclass, field

from litestar.di import NamedDependency

from kz_api.idempotency import KeyedLocks
from kz_api.index_cache import IndexCache
from kz_api.kernels_query import KernelsCache
from kz_api.leases import LeaseSigner
from kz_api.live_feed import EventHub
from kz_api.metrics import Metrics
from kz_api.readmodel import ReadModels
from kz_api.time_travel import TimeTravel
from kz_api.upload import UploadMemory
from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_projector.packages import PackageSource

__all__ = ["ApiContext", "Ctx"]


@dataclass
class ApiContext:
    """Settings, the event log, the in-memory read models, the lease signer, the metrics and
    the memory uploads may hold."""

    settings: Settings
    log: EventLog
    models: ReadModels
    signer: LeaseSigner
    packages: PackageSource
    metrics: Metrics = field(default_factory=Metrics)
    task_consumers: set[str] = field(default_factory=set)
    index_cache: IndexCache = field(default_factory=IndexCache)
    kernels_cache: KernelsCache = field(default_factory=KernelsCache)
    idempotency_locks: KeyedLocks = field(default_factory=KeyedLocks)
    upload_memory: UploadMemory = field(default_factory=UploadMemory)
    event_hub: EventHub = field(default_factory=EventHub)
    time_travel: TimeTravel = field(default_factory=TimeTravel)


Ctx = NamedDependency[ApiContext]
"""A handler parameter `ctx: Ctx` receives the app's context."""
