"""Drives a running `Stack` like its users do: concurrent submitters over HTTP that submit and
long-poll until their submissions end, and a fault injector that kills and restarts processes.
"""

from __future__ import annotations

import hashlib
import queue
import random
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from system_packages import Planned, build
from system_stack import RoundRobin, Stack, StackError, stream_leader, wait_for

__all__ = ["TERMINAL", "FaultInjector", "Progress", "Record", "run_submitters"]

TERMINAL = frozenset({"committed", "rejected", "failed", "cancelled"})


@dataclass
class Record:
    """What one submitter did with one planned submission, and what it saw."""

    plan: Planned
    digest: str
    http_status: int = 0
    error_code: str | None = None
    submission_id: str | None = None
    submitted_at: float = 0.0
    terminal_at: float | None = None
    final: dict[str, Any] | None = None
    last: dict[str, Any] | None = None  # the newest status document seen
    stale_reads: int = 0

    @property
    def status(self) -> str | None:
        return None if self.final is None else str(self.final["status"])

    @property
    def latency_s(self) -> float | None:
        return None if self.terminal_at is None else self.terminal_at - self.submitted_at


class Progress:
    """How many planned submissions have been dealt with (refused, or followed to their end)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self._cond = threading.Condition()

    def step(self) -> None:
        with self._cond:
            self.done += 1
            self._cond.notify_all()

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0


def submit(client: RoundRobin, record: Record, data: bytes) -> None:
    """POST the package; retries across API processes are made safe by an Idempotency-Key."""
    plan = record.plan
    headers = {"X-Submitter-Id": plan.submitter, "Idempotency-Key": uuid.uuid4().hex}
    record.submitted_at = time.monotonic()
    response = client.post(
        "/api/submissions",
        headers=headers,
        data={"kernel_id": plan.kernel_id, "message": f"system test {plan.verdict}"},
        files={"package": ("package.tar.gz", data, "application/gzip")},
    )
    record.http_status = response.status_code
    body = response.json()
    if response.status_code == 202:
        record.submission_id = str(body["submission_id"])
    else:
        record.error_code = str(body["error"]["code"])


def follow(
    client: RoundRobin, record: Record, timeout_s: float, abort: threading.Event | None = None
) -> None:
    """Long-poll the status until it is terminal; the submitter's view of the end."""
    assert record.submission_id is not None
    deadline = time.monotonic() + timeout_s
    since = 0
    headers = {"X-Submitter-Id": record.plan.submitter}
    path = f"/api/submissions/{record.submission_id}/status"
    while time.monotonic() < deadline:
        if abort is not None and abort.is_set():
            raise StackError("the run was aborted")
        response = client.get(path, params={"since": since, "timeout": 10}, headers=headers)
        if response.status_code == 404:
            # Another API process answered the submit and this one has not folded it yet.
            record.stale_reads += 1
            time.sleep(0.1)
            continue
        response.raise_for_status()
        doc = response.json()
        record.last = doc
        since = int(doc["version"])
        if doc["status"] in TERMINAL:
            record.final = doc
            record.terminal_at = time.monotonic()
            return
    raise StackError(
        f"submission {record.submission_id} ({record.plan}) not terminal in time; "
        f"last seen {where(record)}"
    )


def where(record: Record) -> str:
    """Where a followed submission last stood, as its submitter saw it."""
    if record.last is None:
        return "nothing (no status read answered)"
    return f"{record.last['status']} at version {record.last['version']}"


def unfinished(records: Sequence[Record | None]) -> str:
    """The submissions followed but not ended, by where they stood: when a run stops, whether
    every submitter waits (so nothing new arrives) or only some."""
    waiting = [r for r in records if r is not None and r.submission_id and r.final is None]
    if not waiting:
        return "no submission was left unfinished"
    by_status = Counter(
        "no status read" if r.last is None else str(r.last["status"]) for r in waiting
    )
    lines = [f"{len(waiting)} submissions unfinished ({dict(by_status)}):"]
    lines += [f"  {r.submission_id} {r.plan.verdict}: {where(r)}" for r in waiting]
    return "\n".join(lines)


def run_submitters(
    stack: Stack,
    plans: Sequence[Planned],
    *,
    workers: int = 20,
    follow_timeout_s: float = 240.0,
    progress: Progress | None = None,
) -> list[Record]:
    """`workers` submitters share the plans; each submits one, follows it to its end, repeats."""
    work: queue.Queue[int] = queue.Queue()
    for i in range(len(plans)):
        work.put(i)
    records: list[Record | None] = [None] * len(plans)

    def worker() -> None:
        client = stack.client()
        try:
            while not abort.is_set():
                try:
                    i = work.get_nowait()
                except queue.Empty:
                    return
                data = build(plans[i])
                record = Record(plans[i], hashlib.sha256(data).hexdigest())
                records[i] = record
                submit(client, record, data)
                if record.submission_id is not None:
                    follow(client, record, follow_timeout_s, abort)
                if progress is not None:
                    progress.step()
        finally:
            client.close()

    abort = threading.Event()  # a failed submitter or an interrupt stops them all
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="submitter") as pool:
        futures = [pool.submit(worker) for _ in range(workers)]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:
                if future.done():
                    future.result()
            for future in futures:
                future.result()
        except BaseException as exc:
            abort.set()
            if isinstance(exc, StackError):
                raise StackError(f"{exc}\n{unfinished(records)}") from exc
            raise
    return [r for r in records if r is not None]


@dataclass
class FaultInjector:
    """Kills and restarts processes of the stack from a thread while the submitters work.

    Every `runner_every_s` a random runner is SIGKILLed and started again. The other faults
    fire when the given fraction of the submissions is done, so they land mid-run at any
    size: the projector restarts (SIGTERM, then SIGKILL), one API process restarts (SIGTERM),
    and on a cluster the server leading `KZ_EVENTS` is killed and restarted `nats_down_s` later.
    """

    stack: Stack
    progress: Progress
    runner_every_s: float | None = 4.0
    projector_at: tuple[float, ...] = (0.15, 0.6)
    api_at: float | None = 0.35
    nats_at: float | None = None
    nats_down_s: float = 8.0
    seed: int = 7
    faults: Counter[str] = field(default_factory=Counter)
    log: list[str] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _finishing: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _t0: float = field(default_factory=time.monotonic)

    def start(self) -> FaultInjector:
        """Two threads: the scheduled faults, and the runner kills (so a slow restart of an
        API process does not hold the runner kills back)."""
        self._threads = [
            threading.Thread(target=self._guard(self._run_scheduled), daemon=True),
            threading.Thread(target=self._guard(self._run_runner_kills), daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        """Fire the scheduled faults still pending (a fast run may outpace them), then stop."""
        self._finishing.set()
        for thread in self._threads:
            thread.join(timeout=300)
        self._stop.set()

    def _guard(self, loop: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                loop()
            except BaseException as exc:  # reported by the test
                self.errors.append(exc)

        return run

    def _count(self, what: str) -> None:
        with self._lock:
            self.faults[what] += 1
            self.log.append(f"{time.monotonic() - self._t0:6.1f}s {what}")

    def _schedule(self) -> list[tuple[float, str, Callable[[], None]]]:
        plan: list[tuple[float, str, Callable[[], None]]] = []
        for n, at in enumerate(self.projector_at):
            sig = signal.SIGTERM if n % 2 == 0 else signal.SIGKILL
            plan.append((at, f"projector restart ({sig.name})", self._restart("projector", sig)))
        if self.api_at is not None:
            plan.append(
                (self.api_at, "api-1 restart (SIGTERM)", self._restart("api-1", signal.SIGTERM))
            )
        if self.nats_at is not None:
            plan.append((self.nats_at, "nats stream leader killed", self._kill_leader))
        return sorted(plan, key=lambda item: item[0])

    def _restart(self, name: str, sig: int) -> Callable[[], None]:
        return lambda: self.stack.restart(name, sig=sig)

    def _kill_leader(self) -> None:
        leader = wait_for("a KZ_EVENTS leader", lambda: stream_leader(self.stack), 30)
        i = self.stack.cluster_node(leader)
        self.stack.kill_nats_node(i)
        self.log.append(f"killed {leader}, the KZ_EVENTS leader")
        self._stop.wait(self.nats_down_s)
        self.stack.restart_nats_node(i)
        self.log.append(f"restarted {leader}")

    def _run_scheduled(self) -> None:
        pending = self._schedule()
        while pending and not self._stop.is_set():
            if self._finishing.is_set() or self.progress.fraction >= pending[0][0]:
                _, what, action = pending.pop(0)
                action()
                self._count(what)
            else:
                self._stop.wait(0.1)

    def _run_runner_kills(self) -> None:
        every = self.runner_every_s
        if not every:
            return
        rng = random.Random(self.seed)
        runners = [n for n in self.stack.procs if n.startswith("runner")]
        while not self._finishing.wait(every):
            self.stack.restart(rng.choice(runners), sig=signal.SIGKILL)
            self._count("runner killed (SIGKILL) and restarted")
