"""The runner's task loop, shared by both transports: claim, fetch, unpack, run, report.

Each step is a call to a port (the transport, the backend, the package unpacker); the loop
itself holds no business rules. While a task runs it heartbeats every `heartbeat_s`; a
cancelled submission stops its task within one heartbeat; SIGTERM hands the task back.
"""

from __future__ import annotations

import asyncio
import io
import logging
import platform
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kz_events.errors import KzError, LogUnavailable
from kz_events.ids import KernelId
from kz_package import PackageError, validate_result_document
from kz_runner.backends.base import Backend
from kz_runner.execute import TaskOutcome, TaskSpec, execute_task
from kz_runner.gpuguard import DeviceBusy
from kz_runner.limits import StepLimits
from kz_runner.transport import Lease, LeaseLost, Report, RunnerInfo, Transport
from kz_runner.workdir import (
    TARBALL,
    baseline_path,
    incumbent_files,
    judge_files,
    lay_out,
    make_task_dir,
    reads_in_memory,
    reference_files,
    remove_tree,
    write_incumbent,
)

__all__ = ["Runner", "RunnerOptions", "default_runner_id"]

log = logging.getLogger("kz.runner")

HARNESS_DIR = Path(__file__).resolve().parents[1]  # holds kz_harness/


def default_runner_id() -> str:
    return f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True, kw_only=True)
class RunnerOptions:
    workdir: Path
    heartbeat_s: float = 2.0
    task_timeout_s: float = 600.0
    step_timeout_s: float = 300.0
    poll_s: float = 5.0
    limits: StepLimits = field(default_factory=StepLimits)
    keep_workdirs: bool = False
    cpu: int | None = None  # the CPU a task's judge and workers are pinned to (None: the last)


@dataclass
class _Task:
    lease: Lease
    cancel: threading.Event = field(default_factory=threading.Event)
    phase: str = "fetch"
    handed_back: bool = False


class Runner:
    """One runner process: serves its architectures until `stop` is set."""

    def __init__(
        self, info: RunnerInfo, transport: Transport, backend: Backend, options: RunnerOptions
    ) -> None:
        self.info = info
        self.transport = transport
        self.backend = backend
        self.options = options
        self.current: _Task | None = None
        self.tasks_done = 0

    @property
    def taskdir(self) -> Path:
        """Where this runner's task directories live: its own folder of the work dir, so
        runners sharing a work dir never touch each other's tasks."""
        return self.options.workdir / re.sub(r"[^A-Za-z0-9._-]", "_", self.info.runner_id)

    async def run(self, stop: asyncio.Event, *, max_tasks: int | None = None) -> None:
        self.backend.check_available()
        self.taskdir.mkdir(parents=True, exist_ok=True)
        self.taskdir.chmod(0o711)  # the sandbox's unprivileged uid passes through to its task
        if not self.options.keep_workdirs:
            # A runner killed mid-task left its task directory behind; nothing else will.
            for leftover in self.taskdir.glob("task-*"):
                await asyncio.to_thread(self._remove, leftover)
        await self.transport.register(self.info)
        alive = asyncio.create_task(self._announce_alive())
        try:
            await self._serve(stop, max_tasks)
        finally:
            alive.cancel()

    async def _serve(self, stop: asyncio.Event, max_tasks: int | None) -> None:
        log.info(
            "runner: %s serving %s with %s",
            self.info.runner_id,
            ",".join(self.info.arches),
            self.backend.name,
        )
        while not stop.is_set() and (max_tasks is None or self.tasks_done < max_tasks):
            try:
                lease = await self.transport.next_task(self.options.poll_s)
                if lease is None:
                    continue
                await self.process(lease, stop)
            except LogUnavailable as exc:
                # The log stayed away past the retries: keep serving; an unfinished task is
                # redelivered when its lease runs out.
                log.warning("runner: event log unavailable, carrying on: %s", exc.message)
                await asyncio.sleep(1.0)
                continue
            except LeaseLost as exc:
                # Taken from this runner before it ran (its lease lapsed and another runner
                # claimed it, or it ended): the holder runs it; this runner takes the next.
                log.info("runner: skipping a task: %s", exc.message)
                continue
            self.tasks_done += 1

    async def process(self, lease: Lease, stop: asyncio.Event | None = None) -> None:
        """Run one claimed task to its end and report it (or hand it back on shutdown).
        Raises `LeaseLost`, having run nothing, when the task was taken from this runner."""
        task = _Task(lease)
        self.current = task
        started = time.monotonic()
        log.info(
            "runner: task %s %s attempt %d: started",
            lease.submission_id,
            lease.kernel_id,
            lease.attempt,
        )
        beat = asyncio.create_task(self._heartbeat(task))
        watch = asyncio.create_task(self._watch_stop(task, stop)) if stop else None
        try:
            outcome = await self._execute(task)
        except DeviceBusy as exc:  # the runner's fault: void, and let another attempt run it
            log.error("task %s: %s; handing it back", lease.submission_id, exc.message)
            task.handed_back = True
            outcome = TaskOutcome.failed("cancelled", exc.message)
        finally:
            beat.cancel()
            if watch:
                watch.cancel()
            self.current = None
        if task.handed_back:
            await self.transport.hand_back(lease)
            log.info("runner: task %s: handed back", lease.submission_id)
            return
        report = Report(
            outcome=outcome.reason,
            result=outcome.result,
            environment={**outcome.environment, **self._environment()},
            duration_s=round(time.monotonic() - started, 3),
            log=outcome.log,
            timings=dict(outcome.timings),
        )
        await self.transport.report(lease, report)
        log.info(
            "runner: task %s: %s in %.2fs", lease.submission_id, outcome.reason, report.duration_s
        )

    async def _announce_alive(self) -> None:
        while True:
            busy = self.current.lease.submission_id if self.current else None
            try:
                await self.transport.runner_heartbeat(busy)
            except KzError as exc:
                log.warning("runner: heartbeat failed: %s", exc.message)
            await asyncio.sleep(self.options.heartbeat_s)

    async def _watch_stop(self, task: _Task, stop: asyncio.Event) -> None:
        await stop.wait()
        task.handed_back = True
        task.cancel.set()

    async def _heartbeat(self, task: _Task) -> None:
        # The claim was the first sign of life; a task done within a beat sends no heartbeat.
        while True:
            await asyncio.sleep(self.options.heartbeat_s)
            try:
                if await self.transport.heartbeat(task.lease, task.phase):
                    task.cancel.set()
            except KzError as exc:
                log.warning(
                    "runner: heartbeat for %s failed: %s", task.lease.submission_id, exc.message
                )

    async def _execute(self, task: _Task) -> TaskOutcome:
        lease = task.lease
        base = self.taskdir / f"task-{lease.submission_id[:8]}-{uuid.uuid4().hex[:8]}"
        handed_to_thread = False
        try:
            package = await self._fetch_package(lease, base)
            judge = await self.transport.fetch_judge(lease)
            handed_to_thread = True
            # One trip off the loop for all the disk work, so heartbeats and claims go on.
            return await asyncio.to_thread(self._run_in, task, base, package, judge)
        finally:
            if not handed_to_thread:
                await asyncio.to_thread(self._remove, base)

    async def _fetch_package(self, lease: Lease, base: Path) -> bytes | Path:
        """The package's tarball: its bytes when small, else its path in a new task dir."""
        if reads_in_memory(lease.package_size):
            sink = io.BytesIO()
            await self.transport.fetch_package(lease, sink)
            return sink.getvalue()
        make_task_dir(base)
        tarball = base / TARBALL
        with tarball.open("wb") as out:
            await self.transport.fetch_package(lease, out)
        return tarball

    def _run_in(
        self, task: _Task, base: Path, package: bytes | Path, bundle: bytes | None
    ) -> TaskOutcome:
        """Lay the package out in `base`, run it, and remove `base` (in a worker thread)."""
        try:
            judge = judge_files(bundle)
            try:
                workdir = lay_out(base, package, judge)
            except PackageError as exc:
                return TaskOutcome.failed("invalid_result", f"package unpack failed: {exc.message}")
            task.phase = "run"
            incumbent = write_incumbent(incumbent_files(bundle), Path(f"{base}.incumbent"))
            reference = write_incumbent(reference_files(bundle), Path(f"{base}.reference"))
            spec = TaskSpec(
                kernel_id=KernelId.parse(task.lease.kernel_id),
                arch=task.lease.arch,
                workdir=workdir,
                baseline_path=baseline_path(workdir, judge),
                incumbent=incumbent,
                reference=reference,
                confirming=task.lease.confirms is not None,
                attempt=task.lease.attempt,
                cpu=self.options.cpu,
                step_timeout_s=self.options.step_timeout_s,
                task_timeout_s=self.options.task_timeout_s,
                limits=self.options.limits,
                harness_path=HARNESS_DIR,
            )
            return execute_task(
                spec,
                self.backend,
                cancelled=task.cancel.is_set,
                validate_result=validate_result_document,
            )
        finally:
            self._remove(base)
            self._remove(Path(f"{base}.incumbent"))
            self._remove(Path(f"{base}.reference"))

    def _remove(self, base: Path) -> None:
        if self.options.keep_workdirs:
            return
        try:
            remove_tree(base)
        except OSError as exc:  # left for the next start's sweep; the task's result stands
            log.warning("runner: task dir %s not removed: %s", base, exc)

    def _environment(self) -> dict[str, str]:
        return {
            "runner_id": self.info.runner_id,
            "backend": self.backend.name,
            "device": self.info.device,
            "host_platform": platform.platform(),
        }
