"""The index projector's shell: folds the log, fetches desc facts, writes index.json atomically.

Writes are debounced: under load at most one write per `debounce_s`, and always once the log
goes quiet. `build_index(elog, upto=SEQ)` renders the index as of any past position.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from kz_events.aio import stop_tasks
from kz_events.eventlog import EventLog, Stored, take
from kz_events.events import PackageSummary
from kz_events.fanout import Follower
from kz_events.screen import Screen
from kz_package.model import problem_note
from kz_projector.errors import PackageUnavailable
from kz_projector.index import (
    IndexState,
    digest_needed,
    fold_index,
    render_index,
    with_facts,
)
from kz_projector.packages import PackageSource, desc_of

__all__ = ["IndexProjector", "build_index", "facts_of", "fold_events", "write_atomic"]


async def facts_of(packages: PackageSource, digest: str) -> PackageSummary:
    """Title, language and metric of a package; an unreadable one shows as untitled."""
    try:
        desc = desc_of(await packages.files(digest))
    except PackageUnavailable:
        desc = {}
    metric = desc.get("metric")
    return PackageSummary(
        title=str(desc.get("title", "")),
        language=str(desc.get("language", "other")),
        metric={k: str(metric[k]) for k in ("name", "unit", "better") if k in metric}
        if isinstance(metric, dict)
        else None,
        problem=problem_note(desc.get("x-problem")),
    )


async def fold_events(
    state: IndexState, events: AsyncIterator[Stored], packages: PackageSource
) -> IndexState:
    async for seq, event in events:
        digest = digest_needed(state, event)
        if digest is not None:
            state = with_facts(state, digest, await facts_of(packages, digest))
        state = fold_index(state, seq, event)
    return state


async def build_index(
    elog: EventLog, packages: PackageSource, *, upto: int | None = None
) -> IndexState:
    """The index as of log position `upto` (default: now)."""
    return await fold_events(IndexState(), elog.replay(1, upto=upto), packages)


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` via a temporary file and a rename, so readers never see half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp).replace(path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            Path(tmp).unlink()
        raise


class IndexProjector:
    """Keeps the index file at `path` equal to the fold of the log, written debounced."""

    def __init__(
        self,
        elog: EventLog,
        packages: PackageSource,
        path: Path,
        *,
        debounce_s: float = 0.5,
        follow: Follower | None = None,
    ) -> None:
        self.elog = elog
        self.follow: Follower = follow or elog
        self.packages = packages
        self.path = path
        self.debounce_s = debounce_s
        self.state = IndexState()
        self.written_seq = -1
        self.screen = Screen("index")  # what it skips (kz_events.screen)

    async def fold(self, seq: int, event: object) -> None:
        await fold_events(self.state, _one(seq, event), self.packages)

    def flush(self) -> bool:
        if self.written_seq == self.state.log_seq:
            return False
        write_atomic(self.path, render_index(self.state))
        self.written_seq = self.state.log_seq
        return True

    async def flush_off_loop(self) -> bool:
        """`flush`, with the write and its fsync in a worker thread so the loop keeps folding."""
        if self.written_seq == self.state.log_seq:
            return False
        seq, data = self.state.log_seq, render_index(self.state)
        await asyncio.to_thread(write_atomic, self.path, data)
        self.written_seq = seq
        return True

    async def catch_up(self) -> int:
        self.state = await fold_events(
            self.state, self.elog.replay(self.state.log_seq + 1, screen=self.screen), self.packages
        )
        self.flush()
        return self.state.log_seq

    async def run(self) -> None:
        await self.catch_up()
        queue: asyncio.Queue[Stored] = asyncio.Queue(maxsize=10_000)

        async def pump() -> None:
            follow = self.follow.subscribe(from_seq=self.state.log_seq + 1, screen=self.screen)
            async for item in follow:
                await queue.put(item)

        task = asyncio.create_task(pump())
        loop = asyncio.get_running_loop()
        try:
            last_write = loop.time()
            while True:
                try:
                    seq, event = await take(queue, self.debounce_s)
                except TimeoutError:
                    await self.flush_off_loop()
                    last_write = loop.time()
                    continue
                await self.fold(seq, event)
                if loop.time() - last_write >= self.debounce_s:
                    await self.flush_off_loop()
                    last_write = loop.time()
        finally:
            await stop_tasks(task)


async def _one(seq: int, event: object) -> AsyncIterator[Stored]:
    yield seq, event  # type: ignore[misc]
