"""The one command path: load an aggregate, decide with the pure rules, append with the check.

`execute(log, aggregate, command, expected=...)` is how every writer changes an aggregate. Its
conflict policy, the only one (docs/decisions.md):

1. Decide on `expected` when the caller has it (its own fold, or the state after its last
   append: no read), else on the aggregate as the log holds it.
2. A refusal (`RuleViolation`) on `expected` is asked again on the stored aggregate, which may
   have moved on; a refusal on the stored aggregate is the answer, raised to the caller.
3. Nothing to append (an idempotent command met its own result) is done, appends nothing.
4. The events are appended in order, the first expecting the sequence the decision saw, each
   next one the sequence of the one before. A `ConcurrencyConflict` means the aggregate moved:
   load it and decide again, up to `ATTEMPTS` decisions in all, then raise the conflict.

A command may be given as a function of the state it is decided on (a claim's attempt is the
one after the state's), called again on each decision, so a retry is always built afresh.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar, cast

from kz_events.errors import ConcurrencyConflict, RuleViolation
from kz_events.events import Event
from kz_events.ids import KernelId
from kz_events.lifecycle import (
    ClaimKernel,
    Command,
    KernelLease,
    ReleaseKernel,
    SubmissionState,
    decide,
    decide_lease,
    evolve,
    evolve_lease,
    fold,
    fold_lease,
)
from kz_events.port import LogPort, Stored
from kz_events.subjects import aggregate_filter

__all__ = [
    "ATTEMPTS",
    "Aggregate",
    "CommandOf",
    "Executed",
    "Kernel",
    "Submission",
    "execute",
]

ATTEMPTS = 5  # decisions per command: each conflict costs a load and a decision

S = TypeVar("S")
C = TypeVar("C")


class Aggregate(ABC, Generic[S, C]):
    """Where an aggregate's events live and the pure rules that fold and decide them."""

    @property
    @abstractmethod
    def subject_filter(self) -> str: ...

    @abstractmethod
    def fold(self, stored: list[Stored]) -> S: ...

    @abstractmethod
    def decide(self, state: S, command: C) -> list[Event]: ...

    @abstractmethod
    def evolve(self, state: S, event: Event, seq: int) -> S: ...

    @abstractmethod
    def version(self, state: S) -> int: ...


@dataclass(frozen=True, slots=True)
class Submission(Aggregate[SubmissionState, Command]):
    """One submission: `kz.ev.submission.<arch>.<id>.*`, decided by `lifecycle.decide`."""

    arch: str
    submission_id: str

    @classmethod
    def of(cls, kernel_id: str, submission_id: str) -> Submission:
        return cls(KernelId.parse(kernel_id).arch, submission_id)

    @property
    def subject_filter(self) -> str:
        return aggregate_filter("submission", self.arch, self.submission_id)

    def fold(self, stored: list[Stored]) -> SubmissionState:
        return fold(stored)

    def decide(self, state: SubmissionState, command: Command) -> list[Event]:
        return decide(state, command)

    def evolve(self, state: SubmissionState, event: Event, seq: int) -> SubmissionState:
        return evolve(state, event, seq)

    def version(self, state: SubmissionState) -> int:
        return state.version


@dataclass(frozen=True, slots=True)
class Kernel(Aggregate[KernelLease, ClaimKernel | ReleaseKernel]):
    """A kernel's optimisation lease: `kz.ev.kernel.<arch>.<kernel id>.*`."""

    kernel_id: str

    @property
    def subject_filter(self) -> str:
        return aggregate_filter("kernel", KernelId.parse(self.kernel_id).arch, self.kernel_id)

    def fold(self, stored: list[Stored]) -> KernelLease:
        lease = fold_lease(stored)
        newest = stored[-1][0] if stored else 0  # every event of the kernel counts, not leases
        return lease if lease.version == newest else _at(lease, newest)

    def decide(self, state: KernelLease, command: ClaimKernel | ReleaseKernel) -> list[Event]:
        return decide_lease(state, command)

    def evolve(self, state: KernelLease, event: Event, seq: int) -> KernelLease:
        return _at(evolve_lease(state, event, seq), seq)

    def version(self, state: KernelLease) -> int:
        return state.version


def _at(lease: KernelLease, seq: int) -> KernelLease:
    return KernelLease(
        kernel_id=lease.kernel_id,
        holder=lease.holder,
        lease_id=lease.lease_id,
        expires_at=lease.expires_at,
        version=seq,
    )


@dataclass(frozen=True, slots=True)
class Executed(Generic[S]):
    """What a command did: the events it appended (none when it was done already), the
    aggregate's state after them, and the sequence of the last one (0: nothing appended)."""

    state: S
    events: list[Event]
    seq: int


CommandOf: TypeAlias = C | Callable[[S], C | Awaitable[C]]
"""A command, or a function of the state it is decided on that makes one."""


async def execute(
    log: LogPort,
    aggregate: Aggregate[S, C],
    command: CommandOf[C, S],
    *,
    expected: S | None = None,
    before_append: Callable[[list[Event]], Awaitable[None]] | None = None,
) -> Executed[S]:
    """Decide `command` on `aggregate` and append what it causes, by the module's policy.

    `before_append` runs once, before the first append, with the events decided (the runner's
    log is stored only for a result the rules take). Raises `RuleViolation` when the rules
    refuse the command on the stored aggregate, `ConcurrencyConflict` when it kept moving."""
    state, guessed = expected, expected is not None
    prepared = False
    for _ in range(ATTEMPTS):
        if state is None:
            state, guessed = aggregate.fold(await log.load(aggregate.subject_filter)), False
        try:
            events = aggregate.decide(state, await _built(command, state))
        except RuleViolation:
            if not guessed:
                raise
            state = None  # the caller's view may be stale: decide on the stored aggregate
            continue
        if not events:
            return Executed(state, [], 0)
        if before_append is not None and not prepared:
            await before_append(events)
            prepared = True
        try:
            return await _append(log, aggregate, state, events)
        except ConcurrencyConflict:
            state = None
    raise ConcurrencyConflict(
        f"{aggregate.subject_filter}: kept changing through {ATTEMPTS} decisions",
        details={"subject": aggregate.subject_filter, "attempts": ATTEMPTS},
    )


async def _built(command: CommandOf[C, S], state: S) -> C:
    if not callable(command):
        return command
    made = command(state)
    if inspect.isawaitable(made):
        return cast(C, await made)
    return made


async def _append(
    log: LogPort, aggregate: Aggregate[S, C], state: S, events: list[Event]
) -> Executed[S]:
    expect, seq = aggregate.version(state), 0
    for event in events:
        seq = await log.append(event, expect=expect, expect_on=aggregate.subject_filter)
        state = aggregate.evolve(state, event, seq)
        expect = seq
    return Executed(state, events, seq)
