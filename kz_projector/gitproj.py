"""The git projector's shell: follows the log, feeds `GitFold`, announces `committed`.

On start it folds the log up to the head's `Kz-Event-Seq` without writing, re-announces the
head's `committed` if the log lacks it (same event id, stored once), then follows. After each
commit it stores the kernel's trusted judge bundle under `judge_key(kernel_id)` in `KZ_JUDGES`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from dulwich.objects import Commit as GitCommit
from dulwich.objects import ObjectID
from dulwich.repo import BaseRepo

from kz_events.aio import stop_tasks
from kz_events.commands import Submission, execute
from kz_events.config import Settings
from kz_events.errors import RuleViolation
from kz_events.events import Event, EventMeta, ReferencePinned, SubmissionAccepted, UnknownEvent
from kz_events.fanout import Follower
from kz_events.ids import KernelId
from kz_events.lifecycle import TERMINAL, Commit, Status, SubmissionState, evolve
from kz_events.port import LogPort, Stored
from kz_events.screen import Screen
from kz_projector.errors import BranchMoved
from kz_projector.gitfold import Applied, GitFold
from kz_projector.gitstore import FileMap, Person, close_repo, open_repo
from kz_projector.packages import (
    ObjectStorePackages,
    PackageSource,
    files_of_tree,
    judge_bundle,
    kernel_ids_of_tree,
    main_files,
    put_judge_bundle,
    restore_judge_bundles,
)
from kz_projector.reference import References

__all__ = ["COMMITTED_NS", "GitProjector", "committed_event_id", "utcnow"]

log = logging.getLogger(__name__)

COMMITTED_NS = uuid.UUID("6f1c3a52-6c1e-4a57-9d0e-4b2a7f0c9e11")
READ_AHEAD = 32  # events ahead of the fold whose packages are read meanwhile
BUFFERED = 10_000  # events the follow may hold ahead of the fold


def utcnow() -> datetime:
    return datetime.now(UTC)


def committed_event_id(submission_id: str, source_commit: str) -> str:
    """The one event id of a submission's `committed`, so a re-announcement is stored once."""
    return str(uuid.uuid5(COMMITTED_NS, f"{submission_id}/committed/{source_commit}"))


def service_person(settings: Settings) -> Person:
    return Person(settings.git_author_name, settings.git_author_email)


class GitProjector:
    """Keeps `settings.kernel_repo_path` (or `repo`) equal to the fold of the log."""

    def __init__(
        self,
        elog: LogPort,
        settings: Settings,
        *,
        repo: BaseRepo | None = None,
        packages: PackageSource | None = None,
        clock: Callable[[], datetime] = utcnow,
        actor: str = "projector",
        batch: int = 64,
        follow: Follower | None = None,
    ) -> None:
        self.elog = elog
        self.follow: Follower = follow or elog
        self.settings = settings
        self.repo_path: Path | None = None if repo is not None else settings.kernel_repo_path
        self.repo = repo
        self.packages = packages or ObjectStorePackages(elog)
        self.clock = clock
        self.actor = actor
        self.fold: GitFold | None = None
        self.subs: dict[str, SubmissionState] = {}
        self.unflushed: list[Applied] = []
        self.batch = batch
        self.judges: dict[str, FileMap] = {}  # kernel id → the judge files stored last
        self.references = References(elog)
        self.screen = Screen("git projector")  # what it skips; a new one per fold from the start

    @property
    def position(self) -> int:
        return self.fold.position if self.fold is not None else 0

    def close(self) -> None:
        """Close the repository this projector opened (a given `repo` is the caller's)."""
        if self.fold is not None and self.repo is None:
            close_repo(self.fold.repo)
        self.fold = None

    async def start(self) -> None:
        """Open the repo, fold the log up to its head, and announce what the log lacks."""
        self.close()
        repo = self.repo or open_repo(self.repo_path)
        self.fold = GitFold(repo, self.packages, service_person(self.settings))
        self.subs = {}
        self.unflushed = []
        self.screen = Screen("git projector")
        upto = self.fold.resume_seq
        if upto > 0:
            async for seq, event in self.elog.replay(1, upto=upto, screen=self.screen):
                self._track(seq, event)
                await self.fold.apply(seq, event)
        self.fold.position = upto
        commits = self.fold.learn_commits()
        lacking = [
            self.fold.applied_of(state.kernel_id, sid, commits[sid])
            for sid, state in list(self.subs.items())
            if state.status is Status.ACCEPTED and sid in commits
        ]
        await self._store_bundles(lacking)  # a crash may have come before the bundles too
        root = self.fold.head_tree()
        if root is not None:  # every kernel of main has its judge in KZ_JUDGES
            restored = await restore_judge_bundles(
                self.elog, self.fold.writer, root, self.references
            )
            self.judges.update(restored)
        for applied in lacking:
            await self.announce(applied, existing=True)

    async def handle(self, seq: int, event: Event | UnknownEvent) -> Applied | None:
        """Fold one event; its commits become durable at the next `flush`."""
        assert self.fold is not None
        if seq <= self.fold.position:
            return None
        self._track(seq, event)
        applied = await self.fold.apply(seq, event)
        if isinstance(event, ReferencePinned):
            await self.flush()  # what the board's bundles are rebuilt from is on main
            await self._repin(event)
        if applied is not None:
            self.unflushed.append(applied)
            if len(self.unflushed) >= self.batch:
                await self.flush()
        return applied

    async def flush(self) -> None:
        """One pack, one compare-and-swap of main, the judge bundles, then `committed` for
        each result (appends to different submissions, sent together).

        Bundles go first so that a `committed` in the log means runners already get main's
        judge; a crash before the announcements is mended by `start`, bundles included.
        """
        assert self.fold is not None
        self.fold.flush()
        done, self.unflushed = self.unflushed, []
        await self._store_bundles(done)
        async with asyncio.TaskGroup() as announcing:  # in flight together: one wait, not n
            for applied in done:
                if applied.announce:
                    announcing.create_task(self.announce(applied))

    async def _store_bundles(self, done: list[Applied]) -> None:
        latest: dict[str, Applied] = {}
        for applied in done:  # in log order: a board's first commit pins its reference
            # An import is one commit (in `bench_result`); a submission's source commit holds
            # its src/.
            commit = applied.source or applied.bench_result
            await self.references.folder(applied.kernel_id, commit, applied.files)
            latest[applied.kernel_id] = applied
        for kernel_id, applied in latest.items():
            reference = await self.references.folder(kernel_id, None, applied.files)
            judge = {**main_files(applied.files), **reference}
            if self.judges.get(kernel_id) != judge:  # most commits leave the judge as it was
                await put_judge_bundle(self.elog, kernel_id, judge_bundle(applied.files, reference))
                self.judges[kernel_id] = judge

    async def _repin(self, event: ReferencePinned) -> None:
        """A maintainer's new reference for a board: its object, then every kernel bundle of
        the board with the new `reference/` folder (runners get it from the next task on)."""
        assert self.fold is not None
        store = self.fold.writer
        commit = store[ObjectID(event.commit.encode())]
        assert isinstance(commit, GitCommit)
        files = files_of_tree(store, commit.tree, event.kernel_id)
        reference = await self.references.pin(event.kernel_id, event.commit, files)
        root = self.fold.head_tree()
        board = KernelId.parse(event.kernel_id).group
        if root is None:
            return
        for kernel_id in kernel_ids_of_tree(store, root):
            if KernelId.parse(kernel_id).group != board:
                continue
            mains = files_of_tree(store, root, kernel_id)
            await put_judge_bundle(self.elog, kernel_id, judge_bundle(mains, reference))
            self.judges[kernel_id] = {**main_files(mains), **reference}
        log.info("git projector: %s pinned at %s as its board's reference", event.kernel_id,
                 event.commit)  # fmt: skip

    async def catch_up(self) -> int:
        """Fold every event now in the log (starting if needed); returns the position."""
        if self.fold is None:
            await self.start()
        async for seq, event in self.elog.replay(self.position + 1, screen=self.screen):
            await self.handle(seq, event)
        await self.flush()
        return self.position

    async def run(self) -> None:
        """Follow the log forever; a lost compare-and-swap restarts from the new head."""
        while True:
            try:
                await self.start()
                log.info("git projector: caught up to %d; following the log", self.position)
                await self._follow()
            except BranchMoved as exc:
                log.info("git projector: %s", exc.message)
                self.close()

    async def _follow(self) -> None:
        """Fold events as they come; the next `READ_AHEAD` waiting in the buffer have their
        packages read meanwhile, and the buffer is flushed whenever it runs dry."""
        buffer: deque[Stored] = deque()
        arrived, room = asyncio.Event(), asyncio.Event()
        room.set()
        scanned = 0  # how many at the front of the buffer were offered to read ahead

        async def pump() -> None:
            follow = self.follow.subscribe(from_seq=self.position + 1, screen=self.screen)
            async for item in follow:
                buffer.append(item)
                arrived.set()
                if len(buffer) >= BUFFERED:
                    room.clear()
                    await room.wait()

        task = asyncio.create_task(pump())
        try:
            while True:
                if not buffer:
                    await self.flush()
                if not buffer:
                    arrived.clear()
                    waiting = asyncio.ensure_future(arrived.wait())
                    await asyncio.wait([waiting, task], return_when=asyncio.FIRST_COMPLETED)
                    if not waiting.done():
                        waiting.cancel()
                        task.result()  # the subscription ended: raise what ended it
                        return
                    continue
                for seq_event in itertools.islice(buffer, scanned, READ_AHEAD):
                    if isinstance(seq_event[1], SubmissionAccepted):
                        self.packages.read_ahead(seq_event[1].package_digest)
                scanned = max(scanned, min(len(buffer), READ_AHEAD)) - 1
                item = buffer.popleft()
                room.set()
                await self.handle(*item)
        finally:
            await stop_tasks(task)

    # --- committed ------------------------------------------------------------------------

    def _track(self, seq: int, event: Event | UnknownEvent) -> None:
        sid = getattr(event, "submission_id", None)
        if sid is None or getattr(event, "aggregate", "") != "submission":
            return
        state = evolve(self.subs.get(sid, SubmissionState()), event, seq)
        if state.status in TERMINAL:
            self.subs.pop(sid, None)
        else:
            self.subs[sid] = state

    async def announce(self, applied: Applied, *, existing: bool = False) -> None:
        """Append `committed` for an applied result, unless the log has it already.

        `existing`: the commit was made by an earlier run (found on the branch at start); the
        append reuses its event id, so the log stores it once, and the line says so. Its
        decision is made on the submission as the log holds it, not on the fold of the log up
        to the branch head, which ends before the `committed` events of the head's batch:
        an announcement the log has already is then nothing to do, and says nothing."""
        assert applied.submission_id is not None and applied.source is not None
        meta = EventMeta(
            event_id=committed_event_id(applied.submission_id, applied.source),
            occurred_at=self.clock(),
            actor=self.actor,
        )
        command = Commit(
            meta=meta,
            source_commit=applied.source,
            bench_result_commit=applied.bench_result,
            accepted_seq=applied.seq,
        )
        aggregate = Submission.of(applied.kernel_id, applied.submission_id)
        try:
            seen = None if existing else self.subs.get(applied.submission_id)
            done = await execute(self.elog, aggregate, command, expected=seen)
        except RuleViolation as exc:
            log.info("git projector: not announcing %s: %s", applied.submission_id, exc.message)
            return
        if not done.events:
            return
        if existing:
            log.info(
                "git projector: re-announced the existing commit %s of %s "
                "(made by an earlier run; the log stores it once)",
                applied.bench_result,
                applied.submission_id,
            )
        else:
            log.info(
                "git projector: committed %s as %s", applied.submission_id, applied.bench_result
            )
