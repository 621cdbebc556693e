"""The archive: every event of the log, in order and in batches, on the ref `refs/kz/events`,
and the same commits on the branch `kz-archive`, which a plain `git clone` fetches (it fetches
branches only): a clone carries the whole log and verifies itself with no other command.

Events are JSON lines `{"seq": N, "subject": "kz.ev.…", "event": {...}}` in segment files
`segments/NNNNNN.jsonl` of `SEGMENT_SIZE` events each (segment k holds sequences (k-1)*SIZE+1 …
k*SIZE), so a clone of the kernel repo carries the whole log. The subject is kept so a replay of
the archive skips what the live readers skip (a misfiled event among them); lines archived before
it was kept have none. Each batch is one commit and one compare-and-swap of `refs/kz/events`;
the branch follows it (`Archive.mirror`), and where it fell behind (a crash between the two
moves, a repo from before the branch) the projector brings it up at its next start or batch.
A reader takes whichever copy holds the most events (`find_archive`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections.abc import Iterator
from datetime import UTC, datetime

import msgspec
from dulwich.objects import Blob, Commit, ObjectID, Tree
from dulwich.refs import Ref
from dulwich.repo import BaseRepo

from kz_events.aio import stop_tasks
from kz_events.errors import KzError
from kz_events.eventlog import take
from kz_events.events import decode_event
from kz_events.fanout import RawFollower
from kz_events.port import LogPort, Record
from kz_projector.errors import BranchMoved, HistoryDiverged
from kz_projector.gitstore import Person, Writer, commit_trailers, ref_value

__all__ = [
    "ARCHIVE_BRANCH",
    "ARCHIVE_REF",
    "SEGMENT_SIZE",
    "Archive",
    "ArchiveProjector",
    "archive_line",
    "find_archive",
    "segment_name",
]

log = logging.getLogger(__name__)

ARCHIVE_REF = Ref(b"refs/kz/events")
ARCHIVE_BRANCH = Ref(b"refs/heads/kz-archive")  # the copy a plain `git clone` fetches
CLONED_BRANCH = Ref(b"refs/remotes/origin/kz-archive")  # where a clone keeps it
SEGMENT_SIZE = 1000


class _Line(msgspec.Struct):
    seq: int
    subject: str | None = None  # None: archived before subjects were kept
    event: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    raw: str | None = None  # base64 of a stored message that is not one line of JSON


Archived = tuple[str, int, str | None, bytes]
"""One archived message: its segment, sequence, subject (None on lines from before subjects were
kept) and exact bytes."""


def _one_json_line(raw: bytes) -> bool:
    if b"\n" in raw or b"\r" in raw:
        return False
    try:
        msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return False
    return True


def archive_line(seq: int, subject: str, raw: bytes) -> bytes:
    """The archive keeps every stored message as it is, with its subject; one that is not a
    line of JSON (an undecodable message someone stored) goes in base64 so the line stays JSON."""
    head = b'{"seq":%d,"subject":%s' % (seq, msgspec.json.encode(subject))
    if _one_json_line(raw):
        return head + b',"event":%s}\n' % raw
    return head + b',"raw":"%s"}\n' % base64.b64encode(raw)


def _when(raws: list[bytes]) -> datetime:
    """The commit time of a batch: its newest event's time that decodes (the archive keeps
    every message, an undecodable one too; see kz_events.screen)."""
    for raw in reversed(raws):
        try:
            moment = getattr(decode_event(raw), "occurred_at", None)
        except (msgspec.MsgspecError, KzError):
            continue
        if isinstance(moment, datetime) and moment.tzinfo is not None:
            return moment
    return datetime(1970, 1, 1, tzinfo=UTC)


def segment_name(seq: int, size: int = SEGMENT_SIZE) -> str:
    return f"{(seq - 1) // size + 1:06d}.jsonl"


class Archive:
    """The archive ref of one repo: where it ends, appending a batch, reading it back. `ref`
    is the copy read (a clone's `refs/remotes/origin/kz-archive`, see `find_archive`); an
    archive is written only at `refs/kz/events`, its branch following."""

    def __init__(
        self,
        repo: BaseRepo,
        service: Person,
        segment_size: int = SEGMENT_SIZE,
        *,
        ref: Ref = ARCHIVE_REF,
    ) -> None:
        self.repo = repo
        self.service = service
        self.size = segment_size
        self.writer = Writer(repo)
        self.ref = ref

    def head(self) -> ObjectID | None:
        return ref_value(self.repo, self.ref)

    def mirror(self) -> None:
        """Bring the branch `kz-archive` to the archive's head (compare-and-swap from where it
        is: a writer that moved it meanwhile moved it forward, and the next batch looks again)."""
        head, branch = self.head(), ref_value(self.repo, ARCHIVE_BRANCH)
        if head is None or branch == head:
            return
        if not self.writer.move(branch, head, ARCHIVE_BRANCH):
            log.info("archive: %s moved meanwhile; the next batch moves it", ARCHIVE_BRANCH)

    def archived_seq(self) -> int:
        head = self.head()
        if head is None:
            return 0
        commit = self.repo.object_store[head]
        assert isinstance(commit, Commit)
        value = commit_trailers(commit).get("Kz-Archive-Seq")
        if value is None:
            raise HistoryDiverged(f"{self.ref.decode()} head lacks a Kz-Archive-Seq trailer")
        return int(value)

    def _segments(self, head: ObjectID | None) -> Tree:
        if head is None:
            return Tree()
        commit = self.repo.object_store[head]
        assert isinstance(commit, Commit)
        root = self.repo.object_store[commit.tree]
        assert isinstance(root, Tree)
        if b"segments" not in root:
            return Tree()
        stored = self.repo.object_store[root[b"segments"][1]]
        assert isinstance(stored, Tree)
        tree = Tree()  # a copy: the caller edits it
        for item in stored.iteritems():
            tree.add(item.path, item.mode, item.sha)
        return tree

    def append(self, items: list[Record], when: datetime) -> int:
        """Add `items` (the next sequences, in order) as one commit; returns the archived seq."""
        head = self.head()
        last = self.archived_seq()
        segments = self._segments(head)
        grouped: dict[str, list[bytes]] = {}
        for seq, subject, raw in items:
            if seq != last + 1:
                raise HistoryDiverged(f"archive expected sequence {last + 1}, got {seq}")
            last = seq
            line = archive_line(seq, subject, raw)
            grouped.setdefault(segment_name(seq, self.size), []).append(line)
        for name, lines in grouped.items():
            old = b""
            if name.encode() in segments:
                blob = self.repo.object_store[segments[name.encode()][1]]
                assert isinstance(blob, Blob)
                old = blob.data
            segments.add(name.encode(), 0o100644, self.writer.blob(old + b"".join(lines)))
        root = Tree()
        root.add(b"segments", 0o040000, self.writer.add(segments))
        commit = self.writer.commit(
            tree=self.writer.add(root),
            parent=head,
            author=self.service,
            committer=self.service,
            when=when,
            subject=f"archive events {items[0][0]}..{last}",
            trailers=[("Kz-Archive-Seq", str(last))],
        )
        if self.ref != ARCHIVE_REF:
            raise HistoryDiverged(f"the archive is written at {ARCHIVE_REF.decode()}, not here")
        if not self.writer.move(head, commit, ARCHIVE_REF):
            raise BranchMoved(f"{ARCHIVE_REF.decode()} moved while archiving; resuming")
        self.mirror()
        return last

    def lines(self) -> Iterator[Archived]:
        """(segment, seq, subject, raw event JSON) of every archived event, segment by segment."""
        segments = self._segments(self.head())
        for item in sorted(segments.iteritems(), key=lambda i: i.path):
            blob = self.repo.object_store[item.sha]
            assert isinstance(blob, Blob)
            for raw in blob.data.splitlines():
                line = msgspec.json.decode(raw, type=_Line)
                stored = base64.b64decode(line.raw) if line.raw is not None else bytes(line.event)
                yield item.path.decode(), line.seq, line.subject, stored


def find_archive(repo: BaseRepo, service: Person) -> Archive | None:
    """The repo's archive to read: of `refs/kz/events`, the branch `kz-archive` and a clone's
    `origin/kz-archive`, the copy holding the most events; None when it has none."""
    found = [
        Archive(repo, service, ref=ref)
        for ref in (ARCHIVE_REF, ARCHIVE_BRANCH, CLONED_BRANCH)
        if ref_value(repo, ref) is not None
    ]
    return max(found, key=lambda archive: archive.archived_seq(), default=None)


class ArchiveProjector:
    """Follows the log and appends it to the archive in batches of at most `batch` events."""

    def __init__(
        self,
        elog: LogPort,
        archive: Archive,
        *,
        batch: int = 500,
        idle_s: float = 1.0,
        follow: RawFollower | None = None,
    ) -> None:
        self.elog = elog
        self.archive = archive
        self.batch = batch
        self.idle_s = idle_s
        self.follow: RawFollower = follow or elog

    def _flush(self, pending: list[Record]) -> None:
        if pending:
            self.archive.append(pending, _when([raw for _, _, raw in pending]))
            pending.clear()

    async def catch_up(self) -> int:
        self.archive.mirror()  # a crash between the two moves, or a repo from before the branch
        pending: list[Record] = []
        async for record in self.elog.replay_raw(self.archive.archived_seq() + 1):
            pending.append(record)
            if len(pending) >= self.batch:
                self._flush(pending)
        self._flush(pending)
        return self.archive.archived_seq()

    async def run(self) -> None:
        while True:
            try:
                await self._follow()
            except BranchMoved:
                continue

    async def _follow(self) -> None:
        await self.catch_up()
        queue: asyncio.Queue[Record] = asyncio.Queue(10_000)
        task = asyncio.create_task(self._feed(self.archive.archived_seq() + 1, queue))
        pending: list[Record] = []
        try:
            while True:
                try:
                    pending.append(await take(queue, self.idle_s))
                except TimeoutError:
                    self._flush(pending)
                    continue
                if len(pending) >= self.batch:
                    self._flush(pending)
        finally:
            await stop_tasks(task)

    async def _feed(self, from_seq: int, queue: asyncio.Queue[Record]) -> None:
        async with contextlib.aclosing(self.follow.subscribe_raw(from_seq=from_seq)) as records:
            async for record in records:
                await queue.put(record)
