"""`kz projector`: the referee, git projector, index, archive and sweeper as asyncio tasks.

Each part follows the log on its own; running two services at once is harmless, because every
write is either a compare-and-swap of a ref or an append with the concurrency check.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from datetime import datetime

from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.fanout import SharedFollow
from kz_projector.archive import Archive, ArchiveProjector
from kz_projector.gitproj import GitProjector, service_person, utcnow
from kz_projector.gitstore import close_repo, open_repo
from kz_projector.index_writer import IndexProjector
from kz_projector.packages import ObjectStorePackages
from kz_projector.referee import Referee
from kz_projector.sweeper import Sweeper

__all__ = ["Projectors", "run_projectors"]

log = logging.getLogger(__name__)


def _new_id() -> str:
    return str(uuid.uuid4())


class Projectors:
    """The five parts over one event log and one kernel repo."""

    def __init__(
        self, elog: EventLog, settings: Settings, *, clock: Callable[[], datetime] = utcnow,
        debounce_s: float = 0.5,
    ) -> None:
        packages = ObjectStorePackages(elog)
        follow = SharedFollow(elog)  # one subscription for the parts that follow the log
        self.repo = repo = open_repo(settings.kernel_repo_path)
        self.git = GitProjector(elog, settings, packages=packages, clock=clock, follow=follow)
        self.referee = Referee(elog, packages, clock=clock, new_id=_new_id, follow=follow)
        self.index = IndexProjector(elog, packages, settings.effective_index_path,
                                    debounce_s=debounce_s, follow=follow)
        self.archive = ArchiveProjector(elog, Archive(repo, service_person(settings)),
                                        follow=follow)
        self.sweeper = Sweeper(elog, lease_s=settings.lease_s, grace_s=settings.lease_s,
                               clock=clock, new_id=_new_id, follow=follow)

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
        parts = {
            "referee": self.referee.run(),
            "git": self.git.run(),
            "index": self.index.run(),
            "archive": self.archive.run(),
            "sweeper": self.sweeper.run(),
        }
        tasks = [asyncio.create_task(coro, name=name) for name, coro in parts.items()]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def run_projectors(elog: EventLog, settings: Settings) -> None:
    projectors = Projectors(elog, settings)
    try:
        await projectors.run()
    finally:
        projectors.close()
