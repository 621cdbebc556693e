"""The API's read models: in-memory folds of the event log that any replica can rebuild.

Submissions (status documents, queue positions, idempotency keys), kernels (the pure index fold
of kz_projector plus an accepted-history fold), optimisation leases, runners and queue depth.
`apply` is the only writer; long-polls wait on a per-submission `asyncio.Event` it sets.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from kz_events.events import (
    Event,
    KernelClaimed,
    KernelImported,
    KernelReleased,
    RunnerDeregistered,
    RunnerHeartbeat,
    RunnerRegistered,
    SubmissionAccepted,
    SubmissionCommitted,
    SubmissionDisqualified,
    SubmissionResult,
    SubmissionSubmitted,
    TaskHeartbeat,
    UnknownEvent,
)
from kz_events.ids import KernelId
from kz_events.lifecycle import (
    OPEN,
    KernelLease,
    Status,
    SubmissionState,
    evolve,
    evolve_lease,
)
from kz_events.result import Metric, stored_result
from kz_events.screen import Screen
from kz_projector.index import IndexState, fold_index

__all__ = [
    "RUNNER_GONE_AFTER",
    "ArchQueue",
    "HistoryEntry",
    "ReadModels",
    "RunnerView",
    "SubmissionView",
]

# A runner heartbeats every few seconds while idle (or asks for work over HTTP, at most a
# long-poll apart); one silent this long is gone, however it stopped (a crash leaves no
# `deregistered`, and a previous `kz up`'s runner would otherwise stay listed as idle).
RUNNER_GONE_AFTER = timedelta(seconds=90)
RECENT_SUBMISSIONS = 256  # kept per submitter and kernel: the rate allows far fewer a window


@dataclass
class SubmissionView:
    """One submission as the API shows it: the lifecycle state plus what the form said."""

    state: SubmissionState
    submitted: SubmissionSubmitted
    arch: str
    events: list[tuple[int, str, datetime, str]] = field(default_factory=list)
    log_key: str | None = None

    @property
    def id(self) -> str:
        return self.state.submission_id


@dataclass
class HistoryEntry:
    """One accepted submission of a kernel."""

    submission_id: str
    submitter_id: str
    value: float | None
    at: datetime
    commit: str | None = None
    bench_result_commit: str | None = None
    disqualified: str | None = None


@dataclass
class RunnerView:
    """A registered runner and its latest heartbeat."""

    runner_id: str
    arches: list[str]
    device: str = ""
    backend: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    registered_at: datetime | None = None
    last_heartbeat: datetime | None = None
    busy_with: str | None = None
    deregistered: bool = False

    def state_at(self, now: datetime) -> str:
        """`deregistered`, `gone` (silent for `RUNNER_GONE_AFTER`), `busy` or `idle`."""
        if self.deregistered:
            return "deregistered"
        last = max((t for t in (self.last_heartbeat, self.registered_at) if t), default=None)
        if last is None or now - last > RUNNER_GONE_AFTER:
            return "gone"
        return "busy" if self.busy_with else "idle"


@dataclass
class KernelHistory:
    metric: Metric | None = None
    entries: list[HistoryEntry] = field(default_factory=list)


class ArchQueue:
    """The queued submissions of one architecture in arrival order. A place in line is a
    binary search, not a walk of the queue: every answer to an upload asks for one."""

    def __init__(self) -> None:
        self._ticket: dict[str, int] = {}
        self._tickets: list[int] = []  # the tickets of the queued submissions, ascending
        self._last = 0

    def __len__(self) -> int:
        return len(self._ticket)

    def push(self, submission_id: str) -> None:
        """Join the back of the line (again, for a submission that was running)."""
        self.discard(submission_id)
        self._last += 1
        self._ticket[submission_id] = self._last
        self._tickets.append(self._last)

    def discard(self, submission_id: str) -> None:
        ticket = self._ticket.pop(submission_id, None)
        if ticket is not None:
            del self._tickets[bisect.bisect_left(self._tickets, ticket)]

    def position(self, submission_id: str) -> int | None:
        """1-based place in line; None when not queued."""
        ticket = self._ticket.get(submission_id)
        return None if ticket is None else bisect.bisect_left(self._tickets, ticket) + 1


class ReadModels:
    """Everything the API reads, folded from `KZ_EVENTS` (and heartbeats from `KZ_LIVE`)."""

    def __init__(self) -> None:
        self.seq = 0
        self.unknown_events = 0
        self.screen = Screen("api")  # what the event fold skips (kz_events.screen)
        self.submissions: dict[str, SubmissionView] = {}
        self.queued: dict[str, ArchQueue] = {}
        self.running: dict[str, set[str]] = {}
        self.open_by_submitter: Counter[str] = Counter()
        self.open_digests: dict[tuple[str, str], str] = {}
        # (submitter, kernel) → when they submitted it, newest last: the resubmission rate's
        # facts (kz_events.admission); confirmation runs are not theirs and are not counted
        self.submitted_at: dict[tuple[str, str], deque[datetime]] = {}
        self.idempotency: dict[tuple[str, str], str] = {}
        self.stored_packages: set[str] = set()  # digests a `submitted` event vouches for
        self.confirmations: dict[str, str] = {}  # accepted submission → its confirmation run
        self.leases: dict[str, KernelLease] = {}
        self.known_kernels: set[str] = set()
        self.history: dict[str, KernelHistory] = {}
        self.runners: dict[str, RunnerView] = {}
        self.task_heartbeats: dict[str, TaskHeartbeat] = {}
        self.index: IndexState = IndexState()
        self._changed: dict[str, asyncio.Event] = {}
        self._tick = asyncio.Event()

    # --- waiting ------------------------------------------------------------------------

    async def wait_seq(self, seq: int, timeout_s: float) -> bool:
        """Wait until the fold has applied `seq`; False when `timeout_s` passed first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.seq < seq:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):  # not wait_for: it can drop a cancel
                    await self._tick.wait()
        return True

    async def wait_change(self, submission_id: str, since: int, timeout_s: float) -> bool:
        """Wait until the submission's version passes `since`; False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while (view := self.submissions.get(submission_id)) is None or view.state.version <= since:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            event = self._changed.setdefault(submission_id, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await event.wait()
        return True

    def waiting(self, submission_id: str) -> bool:
        """Whether a long-poll waits on this submission now."""
        return submission_id in self._changed

    def _wake(self, submission_id: str | None) -> None:
        if submission_id is not None and (event := self._changed.pop(submission_id, None)):
            event.set()
        tick, self._tick = self._tick, asyncio.Event()
        tick.set()

    # --- folding ------------------------------------------------------------------------

    def apply(self, seq: int, event: Event | UnknownEvent) -> None:
        """Fold one event of `KZ_EVENTS` stored at `seq`."""
        if isinstance(event, UnknownEvent):
            self.unknown_events += 1
        else:
            self.index = fold_index(self.index, seq, event)
            self._apply_known(seq, event)
        self.seq = max(self.seq, seq)
        self._wake(getattr(event, "submission_id", None))

    def _apply_known(self, seq: int, event: Event) -> None:
        match event:
            case SubmissionSubmitted():
                self._on_submitted(seq, event)
            case KernelImported():
                self.known_kernels.add(event.kernel_id)
            case RunnerRegistered() | RunnerDeregistered():
                self._on_runner(event)
        if event.aggregate == "submission":
            self._on_submission_event(seq, event)
        elif isinstance(event, KernelImported | KernelClaimed | KernelReleased):
            lease = self.leases.get(event.kernel_id, KernelLease(kernel_id=event.kernel_id))
            self.leases[event.kernel_id] = evolve_lease(lease, event, seq)

    def _on_submitted(self, seq: int, event: SubmissionSubmitted) -> None:
        if event.submission_id in self.submissions:
            return
        arch = KernelId.parse(event.kernel_id).arch
        self.submissions[event.submission_id] = SubmissionView(SubmissionState(), event, arch)
        self.stored_packages.add(event.package_digest)
        if event.confirms is not None:  # one per result: the first the log names stands
            self.confirmations.setdefault(event.confirms, event.submission_id)
        else:
            times = self.submitted_at.setdefault(
                (event.submitter_id, event.kernel_id), deque(maxlen=RECENT_SUBMISSIONS)
            )
            times.append(event.occurred_at)
        if event.idempotency_key:
            self.idempotency[(event.submitter_id, event.idempotency_key)] = event.submission_id

    def _on_submission_event(self, seq: int, event: Event) -> None:
        sid = getattr(event, "submission_id", "")
        view = self.submissions.get(sid)
        if view is None:
            return
        before = view.state.status
        view.state = evolve(view.state, event, seq)
        view.events.append((seq, event.type, event.occurred_at, event.actor))
        if isinstance(event, SubmissionResult) and event.log_key:
            view.log_key = event.log_key
        self._reindex(view, before)
        self._on_history(event)

    def _reindex(self, view: SubmissionView, before: Status) -> None:
        after, sid, arch = view.state.status, view.id, view.arch
        if before == after:
            return
        self.queued.setdefault(arch, ArchQueue()).discard(sid)
        self.running.setdefault(arch, set()).discard(sid)
        if after is Status.QUEUED:
            self.queued[arch].push(sid)
        elif after is Status.RUNNING:
            self.running[arch].add(sid)
        digest_key = (view.state.kernel_id, view.state.package_digest)
        if after in OPEN and before not in OPEN:
            self.open_by_submitter[view.state.submitter_id] += 1
            self.open_digests[digest_key] = sid
        elif before in OPEN and after not in OPEN:
            self.open_by_submitter[view.state.submitter_id] -= 1
            if self.open_digests.get(digest_key) == sid:
                del self.open_digests[digest_key]

    def _on_history(self, event: Event) -> None:
        match event:
            case SubmissionAccepted():
                history = self.history.setdefault(event.kernel_id, KernelHistory())
                document = stored_result(event.result)
                metric = document.metric if document is not None else None
                if metric is not None:
                    history.metric = metric.spec()
                entry = HistoryEntry(
                    submission_id=event.submission_id,
                    submitter_id=event.submitter_id,
                    value=metric.value if metric is not None else None,
                    at=event.occurred_at,
                )
                history.entries.append(entry)
            case SubmissionCommitted():
                self.known_kernels.add(event.kernel_id)
                for entry in self._entries(event.kernel_id, event.submission_id):
                    entry.commit = event.source_commit
                    entry.bench_result_commit = event.bench_result_commit
            case SubmissionDisqualified():
                for entry in self._entries(event.kernel_id, event.submission_id):
                    entry.disqualified = event.reason

    def _entries(self, kernel_id: str, submission_id: str) -> list[HistoryEntry]:
        history = self.history.get(kernel_id)
        entries = history.entries if history else []
        return [entry for entry in entries if entry.submission_id == submission_id]

    def _on_runner(self, event: RunnerRegistered | RunnerDeregistered) -> None:
        if isinstance(event, RunnerDeregistered):
            if event.runner_id in self.runners:
                self.runners[event.runner_id].deregistered = True
            return
        self.runners[event.runner_id] = RunnerView(
            runner_id=event.runner_id,
            arches=list(event.arches),
            device=event.device,
            backend=event.backend,
            labels=dict(event.labels),
            registered_at=event.occurred_at,
        )

    def apply_live(self, event: Event | UnknownEvent) -> None:
        """Fold one heartbeat of `KZ_LIVE`."""
        if isinstance(event, RunnerHeartbeat):
            view = self.runners.setdefault(
                event.runner_id, RunnerView(runner_id=event.runner_id, arches=list(event.arches))
            )
            view.last_heartbeat = event.occurred_at
            view.busy_with = event.busy_with
            view.device = view.device or event.device
        elif isinstance(event, TaskHeartbeat):
            self.task_heartbeats[event.submission_id] = event
            runner = self.runners.get(event.runner_id)
            if runner is not None:
                runner.last_heartbeat = event.occurred_at
                runner.busy_with = event.submission_id

    # --- queries ------------------------------------------------------------------------

    def queue_position(self, view: SubmissionView) -> int | None:
        """1-based place among the queued submissions of its architecture."""
        if view.state.status is not Status.QUEUED:
            return None
        queue = self.queued.get(view.arch)
        return None if queue is None else queue.position(view.id)

    def live_runners(self, now: datetime) -> list[RunnerView]:
        """The runners that are neither deregistered nor gone at `now`."""
        return [r for r in self.runners.values() if r.state_at(now) in ("busy", "idle")]

    def queue_depth(self) -> dict[str, tuple[int, int]]:
        arches = sorted(set(self.queued) | set(self.running))
        return {a: (len(self.queued.get(a, ())), len(self.running.get(a, ()))) for a in arches}

    def awaiting_commit(self) -> int:
        """Accepted submissions the git projector has not committed yet (its lag)."""
        return sum(1 for v in self.submissions.values() if v.state.status is Status.ACCEPTED)

    def kernel_known(self, kernel_id: str) -> bool:
        return kernel_id in self.known_kernels
