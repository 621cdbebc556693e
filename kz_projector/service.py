"""`kz projector`: the referee, git projector, index, archive and sweeper as asyncio tasks.

Each part follows the log on its own; running two services at once is harmless, because every
write is either a compare-and-swap of a ref or an append with the concurrency check.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from datetime import datetime

from kz_events.aio import stop_tasks
from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.fanout import SharedFollow
from kz_projector.archive import Archive, ArchiveProjector
from kz_projector.errors import PartStalled
from kz_projector.gitproj import GitProjector, service_person, utcnow
from kz_projector.gitstore import close_repo, open_repo
from kz_projector.index_writer import IndexProjector
from kz_projector.packages import ObjectStorePackages
from kz_projector.referee import Referee
from kz_projector.sweeper import Sweeper

__all__ = ["Projectors", "run_projectors"]

log = logging.getLogger(__name__)

STALL_S = 60.0  # a part this long at one position while the log moves on is started again


def _new_id() -> str:
    return str(uuid.uuid4())


class Projectors:
    """The five parts over one event log and one kernel repo."""

    def __init__(
        self,
        elog: EventLog,
        settings: Settings,
        *,
        clock: Callable[[], datetime] = utcnow,
        debounce_s: float = 0.5,
        stall_s: float = STALL_S,
        watch_s: float = 10.0,
    ) -> None:
        self.elog, self.settings, self.clock, self.debounce_s = elog, settings, clock, debounce_s
        self.stall_s, self.watch_s = stall_s, watch_s
        self.repo = open_repo(settings.kernel_repo_path)
        self._build()

    def _build(self) -> None:
        """The parts, with their own follow of the log and package source."""
        elog, settings, clock = self.elog, self.settings, self.clock
        packages = ObjectStorePackages(elog)
        follow = SharedFollow(elog)  # one subscription for the parts that follow the log
        self.git = GitProjector(elog, settings, packages=packages, clock=clock, follow=follow)
        self.referee = Referee(elog, packages, clock=clock, new_id=_new_id, follow=follow)
        self.index = IndexProjector(
            elog, packages, settings.effective_index_path, debounce_s=self.debounce_s, follow=follow
        )
        self.archive = ArchiveProjector(
            elog, Archive(self.repo, service_person(settings)), follow=follow
        )
        self.sweeper = Sweeper(
            elog,
            lease_s=settings.lease_s,
            grace_s=settings.lease_s,
            task_timeout_s=settings.task_timeout_s,
            clock=clock,
            new_id=_new_id,
            follow=follow,
        )

    def close(self) -> None:
        """Close the repositories the parts opened; call once they have stopped."""
        self.git.close()
        close_repo(self.repo)

    async def catch_up(self) -> None:
        """Bring every part up to the end of the log once, until nothing new is appended."""
        while True:
            before = await self.git.elog.last_seq()
            await self.referee.catch_up()
            await self.git.catch_up()
            await self.sweeper.sweep()
            if await self.git.elog.last_seq() == before:
                break
        await self.index.catch_up()
        await self.archive.catch_up()

    async def run(self) -> None:
        """Run the parts until one fails; a part that stands still while the log moves on
        (`stall_s`) is not waited for: every part is started again from what it has
        durably done, as a restart of the process would."""
        while True:
            try:
                await self._run_parts()
                return
            except PartStalled as exc:
                log.error("projector: %s; starting every part again", exc.message)
                self.git.close()
                self._build()

    async def _run_parts(self) -> None:
        parts = {
            "referee": self.referee.run(),
            "git": self.git.run(),
            "index": self.index.run(),
            "archive": self.archive.run(),
            "sweeper": self.sweeper.run(),
            "watch": self._watch(),
        }
        tasks = [asyncio.create_task(coro, name=name) for name, coro in parts.items()]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()
        finally:
            await stop_tasks(*tasks)

    async def _watch(self) -> None:
        """Raise `PartStalled` when the referee or the git projector keeps one position for
        `stall_s` while the log holds later events: results would wait forever otherwise."""
        since: dict[str, tuple[int, float]] = {}
        while True:
            await asyncio.sleep(self.watch_s)
            head = await self.elog.last_seq()
            now = time.monotonic()
            for name, position in (("referee", self.referee.position), ("git", self.git.position)):
                first = since.get(name)
                if position >= head or first is None or first[0] != position:
                    since[name] = (position, now)
                elif now - first[1] >= self.stall_s:
                    raise PartStalled(
                        f"the {name} stood at sequence {position} for {now - first[1]:.0f} s "
                        f"while the log reached {head}",
                        details={"part": name, "position": position, "head": head},
                    )


async def run_projectors(elog: EventLog, settings: Settings) -> None:
    projectors = Projectors(elog, settings)
    try:
        await projectors.run()
    finally:
        projectors.close()
