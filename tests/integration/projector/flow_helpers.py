"""A whole platform in one test: a real NATS server, the projectors (referee, git, index,
archive, sweeper) and two runners on the stub backend, fed submissions whose `src/stub.json`
scripts what the judge reports on each attempt."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.events import Event, EventMeta, TripwireHit, UnknownEvent
from kz_events.lifecycle import OPEN, Status, SubmissionState, Submit, decide, fold
from kz_events.subjects import PACKAGES_BUCKET, aggregate_filter
from kz_package.archive import pack_directory
from kz_projector.service import Projectors
from kz_runner.backends import get_backend
from kz_runner.core import Runner, RunnerOptions
from kz_runner.native import NativeTransport
from kz_runner.transport import RunnerInfo
from kz_testing import package_files, write_package

BOARD = "cpu/Norm/RMSNorm/fp32"
RUNNERS = ("r1", "r2")


@dataclass
class Platform:
    """The running parts, and what was submitted to them."""

    log: EventLog
    settings: Settings
    tmp: Path
    submitted: list[str] = field(default_factory=list)

    async def submit(
        self,
        name: str,
        script: dict[str, Any],
        *,
        submitter: str = "alice",
        tripwire: list[TripwireHit] | None = None,
    ) -> str:
        """Store a package of `BOARD/name` whose stub script is `script`, and append its
        `submitted` (the API's part); returns its id."""
        kernel_id = f"{BOARD}/{name}"
        src = {"kernel.py": f"NAME = {name!r}\n", "stub.json": json.dumps(script)}
        root = write_package(
            self.tmp / "packages" / uuid.uuid4().hex, package_files(kernel_id, src=src)
        )
        buffer = io.BytesIO()
        digest = pack_directory(root, buffer)
        await self.log.put_object(PACKAGES_BUCKET, digest, buffer.getvalue())
        sid = str(uuid.uuid4())
        command = Submit(
            meta=EventMeta(
                event_id=str(uuid.uuid4()), occurred_at=datetime.now(UTC), actor=submitter
            ),
            submission_id=sid,
            kernel_id=kernel_id,
            submitter_id=submitter,
            package_digest=digest,
            package_size=len(buffer.getvalue()),
            tripwire=list(tripwire or []),
        )
        [event] = decide(SubmissionState(), command)
        await self.log.append(event, expect=0)
        self.submitted.append(sid)
        return sid

    async def events(self, sid: str) -> list[Event | UnknownEvent]:
        stored = await self.log.load(aggregate_filter("submission", "cpu", sid))
        return [event for _, event in stored]

    async def state(self, sid: str) -> SubmissionState:
        return fold(await self.log.load(aggregate_filter("submission", "cpu", sid)))

    async def settled(self, timeout_s: float = 120.0) -> None:
        """Wait until every submission, confirmation runs included, has ended (committed,
        rejected, failed, confirmed or disputed)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            stored = await self.log.load("kz.ev.submission.>")
            by_sid: dict[str, list[tuple[int, Event | UnknownEvent]]] = {}
            for seq, event in stored:
                by_sid.setdefault(getattr(event, "submission_id", ""), []).append((seq, event))
            states = [fold(events) for events in by_sid.values()]
            if states and all(
                s.status not in OPEN and s.status is not Status.ACCEPTED for s in states
            ):
                return
            if loop.time() > deadline:
                raise AssertionError(f"still open: {[(s.submission_id, s.status) for s in states]}")
            await asyncio.sleep(0.2)

    def index(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.settings.effective_index_path.read_bytes())
        return doc

    def board(self) -> list[dict[str, Any]]:
        index = self.index()
        rows: list[dict[str, Any]] = {
            **index["unreviewed_leaderboards"],
            **index["leaderboards"],
        }.get(BOARD, [])
        return rows


@contextlib.asynccontextmanager
async def running(log: EventLog, settings: Settings, tmp: Path) -> AsyncIterator[Platform]:
    """The projectors and two stub runners, for as long as the block runs; then the index is
    written once more from the whole log."""
    projectors = Projectors(log, settings, debounce_s=0.1)
    stop = asyncio.Event()
    runners = [
        Runner(
            RunnerInfo(runner_id=name, arches=("cpu",), device="cpu", backend="stub"),
            NativeTransport(log, lease_s=settings.lease_s),
            get_backend("stub"),
            RunnerOptions(workdir=tmp / name, heartbeat_s=0.5, poll_s=0.5, step_timeout_s=60),
        )
        for name in RUNNERS
    ]
    tasks = [
        asyncio.create_task(projectors.run()),
        *(asyncio.create_task(r.run(stop)) for r in runners),
    ]
    try:
        yield Platform(log, settings, tmp)
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        projectors.close()
    final = Projectors(log, settings)
    try:
        await final.catch_up()
    finally:
        final.close()
