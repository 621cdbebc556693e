"""Audit: replay the log into an empty repo and compare with the live projections.

The log comes from the stream, or from the archive of a clone alone (a plain `git clone` has it
on `origin/kz-archive`, kz_projector.archive). The report lists every
divergence: main's head, each `committed` event's commits, each kernel's scoreboard, index.json,
the stream against the archive (a lost event or segment on either side), and submissions claimed
longer ago than their time limit that never ended. It also lists every stored message the
readers skip (kz_events.screen), read by the same rule they use.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from dulwich.objects import Commit
from dulwich.repo import BaseRepo

from kz_events.config import Settings
from kz_events.events import SubmissionCommitted
from kz_events.ids import KernelId
from kz_events.lifecycle import OPEN, Status, SubmissionState, evolve
from kz_events.port import LogPort, Stored, lease_signs
from kz_events.screen import Screen
from kz_package.archive import PACKAGE_DIR
from kz_projector.archive import Archive, find_archive
from kz_projector.errors import HistoryDiverged
from kz_projector.gitfold import Applied, GitFold
from kz_projector.gitproj import service_person
from kz_projector.gitstore import MAIN, commit_trailers, open_repo, ref_value
from kz_projector.index import IndexState, render_index
from kz_projector.index_writer import fold_events, write_atomic
from kz_projector.packages import GitPackages, ObjectStorePackages, PackageSource
from kz_projector.repo_read import KernelRepo
from kz_projector.scoreboard import iso
from kz_projector.sweeper import open_limit_s

__all__ = ["AuditReport", "run_audit"]


@dataclass(slots=True)
class AuditReport:
    ok: bool = True
    checked_at: str = ""
    source: str = "stream"
    log_seq: int = 0
    archived_seq: int = 0
    live_head: str | None = None
    live_head_seq: int = 0
    replay_head: str | None = None
    results_compared: int = 0
    kernels_compared: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    open_too_long: list[dict[str, Any]] = field(default_factory=list)

    def problem(self, text: str) -> None:
        self.ok = False
        self.problems.append(text)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), indent=2, sort_keys=True).encode() + b"\n"

    def lines(self) -> list[str]:
        verdict = "clean" if self.ok else f"{len(self.problems)} divergence(s)"
        out = [
            f"audit ({self.source}): {verdict}",
            f"  log: {self.log_seq} events, archive: {self.archived_seq}",
            f"  main: live {self.live_head} (seq {self.live_head_seq}), replay {self.replay_head}",
            f"  compared: {self.results_compared} results, {self.kernels_compared} kernels",
        ]
        out += [f"  DIVERGENCE: {p}" for p in self.problems]
        out += [f"  note: {n}" for n in self.notes]
        if self.skipped:
            kinds = sorted({s["kind"] for s in self.skipped})
            counts = ", ".join(f"{sum(s['kind'] == k for s in self.skipped)} {k}" for k in kinds)
            out.append(f"  skipped by every reader: {len(self.skipped)} stored messages ({counts})")
            out += [
                f"    seq {s['seq']} {s['subject'] or '(subject not archived)'}: "
                f"{s['kind']}: {s['reason']}"
                for s in self.skipped[:SKIPPED_SHOWN]
            ]
            if len(self.skipped) > SKIPPED_SHOWN:
                out.append(f"    … {len(self.skipped) - SKIPPED_SHOWN} more (--json lists all)")
        return out


SKIPPED_SHOWN = 20


async def _archive_events(
    archive: Archive, screen: Screen, report: AuditReport
) -> AsyncIterator[Stored]:
    """The archive's events, screened as every live reader screens the stream. A line archived
    before the archive kept subjects is read as filed where its body says (misfiling cannot be
    told without the subject); the report notes how many such lines there were."""
    unfiled = 0
    for _, seq, subject, raw in archive.lines():
        if subject is None:
            unfiled += 1
            yield seq, screen.read_unfiled(seq, raw)
        else:
            yield seq, screen.read(seq, subject, raw)
    if unfiled:
        report.notes.append(
            f"{unfiled} archived events predate the archive keeping subjects: "
            "a misfiled one among them would be read as filed where its body says"
        )


class _Replay:
    """Folds events into an in-memory repo and an index, snapshotting at the live positions."""

    def __init__(
        self, packages: PackageSource, settings: Settings, live_seq: int, index_seq: int | None
    ) -> None:
        self.fold = GitFold(open_repo(None), packages, service_person(settings))
        self.packages = packages
        self.live_seq = live_seq
        self.index_seq = index_seq
        self.index = IndexState()
        self.head_at_live: bytes | None = None
        self.index_at: bytes | None = None
        self.applied: dict[str, Applied] = {}
        self.committed: list[SubmissionCommitted] = []
        self.log_seq = 0
        self.open: dict[str, SubmissionState] = {}

    def _track(self, seq: int, event: Any) -> None:
        sid = getattr(event, "submission_id", None)
        if sid is None or getattr(event, "aggregate", "") != "submission":
            return
        state = evolve(self.open.get(sid, SubmissionState()), event, seq)
        if state.status in OPEN:
            self.open[sid] = state
        else:
            self.open.pop(sid, None)

    async def feed(self, seq: int, event: Any) -> None:
        self._track(seq, event)
        applied = await self.fold.apply(seq, event)
        if applied is not None and applied.submission_id is not None and applied.announce:
            self.applied[applied.submission_id] = applied
        if isinstance(event, SubmissionCommitted):
            self.committed.append(event)
        if seq <= self.live_seq:
            self.head_at_live = self.fold.head
        await fold_events(self.index, _one(seq, event), self.packages)
        if self.index_seq is not None and seq == self.index_seq:
            self.index_at = render_index(self.index)
        self.log_seq = seq


async def _one(seq: int, event: Any) -> AsyncIterator[Stored]:
    yield seq, event


def _live_head(repo: BaseRepo, report: AuditReport) -> int:
    head = ref_value(repo, MAIN)
    report.live_head = head.decode() if head else None
    if head is None:
        return 0
    commit = repo.object_store[head]
    assert isinstance(commit, Commit)
    seq = commit_trailers(commit).get("Kz-Event-Seq")
    if seq is None:
        report.problem(
            f"main's head {report.live_head} has no Kz-Event-Seq trailer: "
            "the branch was moved by hand"
        )
        return 0
    return int(seq)


def _ancestors(repo: BaseRepo) -> set[str]:
    head = ref_value(repo, MAIN)
    if head is None:
        return set()
    return {entry.commit.id.decode() for entry in repo.get_walker(include=[head])}


def _compare_results(replay: _Replay, live: BaseRepo, report: AuditReport) -> None:
    reachable = _ancestors(live)
    for event in replay.committed:
        report.results_compared += 1
        mine = replay.applied.get(event.submission_id)
        if mine is None or (mine.source, mine.bench_result) != (
            event.source_commit,
            event.bench_result_commit,
        ):
            got = f"{mine.source}/{mine.bench_result}" if mine else "nothing"
            report.problem(
                f"submission {event.submission_id}: the log says committed as "
                f"{event.source_commit}/{event.bench_result_commit}, replay made {got}"
            )
        if event.bench_result_commit not in reachable:
            report.problem(
                f"submission {event.submission_id}: commit "
                f"{event.bench_result_commit} is not on main (history rewritten?)"
            )


def _compare_boards(replay: _Replay, live: BaseRepo, report: AuditReport) -> None:
    if replay.head_at_live is None:
        return
    mine = KernelRepo(replay.fold.repo)
    theirs = KernelRepo(live)
    head = replay.head_at_live.decode()
    for kernel_id in sorted(replay.fold.boards):
        report.kernels_compared += 1
        path = f"{PACKAGE_DIR}/bench_result.yaml"
        a = mine.package_tree(kernel_id, head).get(path)
        b = theirs.read_file_or_none(kernel_id, path)
        if a != b:
            report.problem(f"kernel {kernel_id}: live bench_result.yaml differs from the replay")


def _compare_archive(
    stream: dict[int, bytes] | None, archive: Archive, report: AuditReport
) -> None:
    expected = 1
    for segment, seq, _, raw in archive.lines():
        if seq != expected:
            report.problem(
                f"archive: expected event {expected}, got {seq} in {segment} "
                "(a segment or events are missing)"
            )
            expected = seq
        if stream is not None and stream.get(seq) not in (None, raw):
            report.problem(f"archive: event {seq} differs from the stream's")
        expected += 1
    report.archived_seq = expected - 1
    if stream is not None:
        missing = [s for s in stream if s > report.archived_seq]
        if len(stream) < report.archived_seq:
            report.problem(f"stream holds {len(stream)} events, the archive {report.archived_seq}")
        if missing:
            report.notes.append(f"archive is {len(missing)} events behind the stream")


def _report_open(replay: _Replay, settings: Settings, now: datetime, report: AuditReport) -> None:
    """Submissions still open past their time limit: claimed ones never ended (a problem),
    queued ones wait for a runner of their architecture (a note)."""
    for sid, state in sorted(replay.open.items()):
        limit = open_limit_s(state.max_attempts, settings.task_timeout_s, settings.lease_s)
        queued_at = state.updated_at if state.requeues else state.created_at  # a retry: requeued
        since = state.first_claimed_at if state.status is Status.RUNNING else queued_at
        if since is None or (now - since).total_seconds() <= limit:
            continue
        age = (now - since).total_seconds()
        report.open_too_long.append(
            {
                "submission_id": sid,
                "kernel_id": state.kernel_id,
                "status": str(state.status),
                "attempt": state.attempt,
                "since": iso(since),
                "open_s": round(age),
                "limit_s": round(limit),
            }
        )
        if state.status is Status.RUNNING:
            report.problem(
                f"submission {sid} is running since its first claim at {iso(since)} "
                f"({age:.0f} s, attempt {state.attempt}), past its time limit of "
                f"{limit:.0f} s: it never ended"
            )
        else:
            report.notes.append(
                f"submission {sid} has been queued since {iso(since)} "
                f"({age:.0f} s), past {limit:.0f} s: no runner took it"
            )


async def _report_quiet(
    replay: _Replay, elog: LogPort, settings: Settings, now: datetime, report: AuditReport
) -> None:
    """A note for each running submission whose lease went quiet (no claim or heartbeat for
    two leases): the sweeper or a redelivery should end or take it soon; past its time limit
    it is a divergence (`_report_open`)."""
    for sid, state in sorted(replay.open.items()):
        if state.status is not Status.RUNNING or state.claimed_at is None:
            continue
        arch = KernelId.parse(state.kernel_id).arch
        seen, _ = await lease_signs(elog, arch, sid, state.lease_id)
        quiet = (now - max(t for t in (state.claimed_at, seen) if t is not None)).total_seconds()
        if quiet > 2 * settings.lease_s:
            report.notes.append(
                f"submission {sid} (attempt {state.attempt}) has had no claim or "
                f"heartbeat for {quiet:.0f} s: its lease lapsed"
            )


def _index_seq(path: Path) -> tuple[int | None, bytes | None]:
    if not path.is_file():
        return None, None
    data = path.read_bytes()
    try:
        return int(json.loads(data)["log_seq"]), data
    except (ValueError, KeyError, TypeError):
        return -1, data


async def run_audit(
    settings: Settings,
    *,
    clock: Callable[[], datetime],
    elog: LogPort | None = None,
    from_archive: Path | None = None,
) -> AuditReport:
    """Replay, compare, and write the report to `settings.data_dir/audit.json`."""
    report = AuditReport(checked_at=iso(clock()), source="archive" if from_archive else "stream")
    live = open_repo(from_archive or settings.kernel_repo_path, create=False)
    live_seq = _live_head(live, report)
    report.live_head_seq = live_seq
    index_seq, live_index = (
        (None, None) if from_archive else _index_seq(settings.effective_index_path)
    )
    archive = Archive(live, service_person(settings))
    if from_archive is not None:
        archive = find_archive(live, service_person(settings)) or archive
    screen = Screen("audit", keep=None)
    if from_archive is not None:
        packages: PackageSource = GitPackages(live)
        events = _archive_events(archive, screen, report)
        stream = None
    else:
        assert elog is not None
        packages = ObjectStorePackages(elog)
        records = [record async for record in elog.replay_raw()]
        stream = {seq: raw for seq, _, raw in records}
        events = _iter(records, screen)
    replay = _Replay(packages, settings, live_seq, index_seq)
    try:
        async for seq, event in events:
            await replay.feed(seq, event)
    except HistoryDiverged as exc:
        report.problem(exc.message)
    replay.fold.flush()
    report.log_seq = replay.log_seq
    report.replay_head = replay.head_at_live.decode() if replay.head_at_live else None
    if replay.head_at_live != ref_value(live, MAIN):
        report.problem(
            f"main is {report.live_head}, the replay of the log up to event "
            f"{live_seq} gives {report.replay_head}"
        )
    if replay.fold.head != replay.head_at_live:
        report.notes.append(f"the live projector is behind: the log goes on to {replay.log_seq}")
    _compare_results(replay, live, report)
    _compare_boards(replay, live, report)
    _compare_archive(stream, archive, report)
    now = clock()
    _report_open(replay, settings, now, report)
    if elog is not None:
        await _report_quiet(replay, elog, settings, now, report)
    report.skipped = [
        {"seq": s.seq, "subject": s.subject, "kind": s.kind, "reason": s.reason}
        for s in screen.recent
    ]
    if live_index is not None and replay.index_at != live_index:
        report.problem(f"index.json (log_seq {index_seq}) differs from the replay's")
    write_atomic(settings.data_dir / "audit.json", report.to_json())
    return report


async def _iter(records: list[tuple[int, str, bytes]], screen: Screen) -> AsyncIterator[Stored]:
    for seq, subject, raw in records:
        yield seq, screen.read(seq, subject, raw)
