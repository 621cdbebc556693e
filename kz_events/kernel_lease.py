"""A kernel's optimisation lease as pure rules: `decide_lease(lease, command)` and
`evolve_lease(lease, event)`. A submitter claims a kernel for a while; submissions of the kernel
by anyone else are refused until the lease is released or expires (`held_by_another`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import msgspec

from kz_events.errors import RuleViolation
from kz_events.events import Event, EventMeta, KernelClaimed, KernelReleased, UnknownEvent

__all__ = [
    "ClaimKernel",
    "KernelLease",
    "ReleaseKernel",
    "decide_lease",
    "evolve_lease",
    "fold_lease",
    "held_by_another",
]


def _refuse(code: str, message: str, **details: Any) -> RuleViolation:
    return RuleViolation(message, code=code, details=details)


class KernelLease(msgspec.Struct, frozen=True, kw_only=True):
    kernel_id: str = ""
    holder: str | None = None
    lease_id: str | None = None
    expires_at: datetime | None = None
    version: int = 0

    def held_at(self, now: datetime) -> bool:
        return self.holder is not None and self.expires_at is not None and now < self.expires_at


def held_by_another(lease: KernelLease, who: str, now: datetime) -> bool:
    """The one lease rule: at `now` someone other than `who` holds the kernel's lease."""
    return lease.held_at(now) and lease.holder != who


class ClaimKernel(msgspec.Struct, frozen=True, kw_only=True):
    meta: EventMeta
    kernel_id: str
    holder: str
    lease_id: str
    ttl_s: float


class ReleaseKernel(msgspec.Struct, frozen=True, kw_only=True):
    meta: EventMeta
    kernel_id: str
    holder: str


def decide_lease(lease: KernelLease, command: ClaimKernel | ReleaseKernel) -> list[Event]:
    now = command.meta.occurred_at
    meta = msgspec.structs.asdict(command.meta)
    if isinstance(command, ClaimKernel):
        if not 1 <= command.ttl_s <= 7 * 24 * 3600:
            raise _refuse("invalid_ttl", f"ttl must be 1 s to 7 days, got {command.ttl_s}")
        if held_by_another(lease, command.holder, now):
            until = lease.expires_at.isoformat() if lease.expires_at else None
            raise _refuse(
                "claim_held",
                f"{lease.holder} holds this kernel until {until}",
                holder=lease.holder,
                expires_at=until,
            )
        renew = lease.held_at(now) and lease.holder == command.holder
        return [
            KernelClaimed(
                **meta,
                kernel_id=command.kernel_id,
                holder=command.holder,
                lease_id=lease.lease_id if renew and lease.lease_id else command.lease_id,
                expires_at=now + timedelta(seconds=command.ttl_s),
            )
        ]
    if not lease.held_at(now) or lease.holder != command.holder:
        raise _refuse("not_held", f"{command.holder} holds no lease on this kernel")
    assert lease.lease_id is not None
    return [
        KernelReleased(
            **meta, kernel_id=command.kernel_id, holder=command.holder, lease_id=lease.lease_id
        )
    ]


def evolve_lease(lease: KernelLease, event: Event | UnknownEvent, seq: int = 0) -> KernelLease:
    match event:
        case KernelClaimed():
            return KernelLease(
                kernel_id=event.kernel_id,
                holder=event.holder,
                lease_id=event.lease_id,
                expires_at=event.expires_at,
                version=seq or lease.version,
            )
        case KernelReleased():
            return KernelLease(kernel_id=event.kernel_id, version=seq or lease.version)
    return lease


def fold_lease(events: Iterable[tuple[int, Event | UnknownEvent]]) -> KernelLease:
    lease = KernelLease()
    for seq, event in events:
        lease = evolve_lease(lease, event, seq)
    return lease
