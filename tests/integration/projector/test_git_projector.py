"""The referee and the git projector against a real nats-server and a real git repo."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from dulwich.objects import Tree
from projector_helpers import Clock, store_package, submit_and_run, write_package

from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.events import SubmissionCommitted
from kz_projector.archive import ARCHIVE_REF
from kz_projector.audit import run_audit
from kz_projector.repo_read import KernelRepo
from kz_projector.service import Projectors

pytestmark = pytest.mark.integration

KID = "cpu/Norm/RMSNorm/fp32/test_k"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


async def test_accepted_results_become_two_commits_each(
    event_log: EventLog, settings: Settings, clock: Clock, tmp_path: Path
) -> None:
    """Each accepted result becomes a source and a bench-result commit with trailers, fsck-clean."""
    digest = await store_package(event_log, write_package(tmp_path / "p1", KID))
    sids = [await submit_and_run(event_log, clock, KID, digest, v) for v in (5.0, 3.0, 4.0)]
    projectors = Projectors(event_log, settings, clock=clock)
    await projectors.catch_up()
    repo = settings.kernel_repo_path
    log = git(repo, "log", "--format=%(trailers:key=Kz-Submission,valueonly)", "main")
    seqs = git(repo, "log", "--format=%(trailers:key=Kz-Event-Seq,valueonly)", "main").split()
    assert git(repo, "rev-list", "--count", "main").strip() == "6"
    for sid in sids:
        assert log.count(sid) == 2
    assert len(seqs) == 6 and len(set(seqs)) == 3
    git(repo, "fsck", "--strict")
    board = KernelRepo(repo).read_file(KID, ".kernel_package/bench_result.yaml").decode()
    assert "value: 3.0" in board and "accepted_count: 3" in board
    committed = [e for _, e in await event_log.load("kz.ev.submission.*.*.committed")]
    assert sorted(e.submission_id for e in committed if isinstance(e, SubmissionCommitted)) == (
        sorted(sids))


async def test_replay_and_audit_are_clean_and_catch_a_moved_branch(
    event_log: EventLog, settings: Settings, clock: Clock, tmp_path: Path
) -> None:
    """Audit replays the log to the live head; a branch moved by hand makes it fail."""
    digest = await store_package(event_log, write_package(tmp_path / "p1", KID))
    for value in (5.0, 6.0, 2.0):
        await submit_and_run(event_log, clock, KID, digest, value)
    await submit_and_run(event_log, clock, KID, digest, 1.0, accepted=False)
    projectors = Projectors(event_log, settings, clock=clock)
    await projectors.catch_up()
    report = await run_audit(settings, clock=clock, elog=event_log)
    assert report.ok, report.lines()
    assert report.results_compared == 3 and report.archived_seq == await event_log.last_seq()
    assert (settings.data_dir / "audit.json").is_file()
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "--mirror", "-q", str(settings.kernel_repo_path), str(clone))
    from_archive = await run_audit(settings, clock=clock, from_archive=clone)
    assert from_archive.ok, from_archive.lines()
    repo = settings.kernel_repo_path
    parent = git(repo, "rev-parse", "main~2").strip()
    git(repo, "update-ref", "refs/heads/main", parent)
    moved = await run_audit(settings, clock=clock, elog=event_log)
    assert not moved.ok and any("not on main" in p for p in moved.problems)


async def test_audit_finds_a_lost_archive_segment(
    event_log: EventLog, settings: Settings, clock: Clock, tmp_path: Path
) -> None:
    """An archive missing a segment is a divergence."""
    digest = await store_package(event_log, write_package(tmp_path / "p1", KID))
    for value in (5.0, 4.0, 3.0, 2.0):
        await submit_and_run(event_log, clock, KID, digest, value)
    projectors = Projectors(event_log, settings, clock=clock)
    projectors.archive.archive.size = 5
    await projectors.catch_up()
    assert (await run_audit(settings, clock=clock, elog=event_log)).ok
    archive = projectors.archive.archive
    segments = archive._segments(archive.head())
    del segments[b"000002.jsonl"]
    writer = archive.writer
    root = Tree()
    root.add(b"segments", 0o040000, writer.add(segments))
    head = archive.head()
    commit = writer.commit(tree=writer.add(root), parent=head, author=archive.service,
                           committer=archive.service, when=clock(), subject="lose a segment",
                           trailers=[("Kz-Archive-Seq", str(archive.archived_seq()))])
    assert writer.move(head, commit, ARCHIVE_REF)
    report = await run_audit(settings, clock=clock, elog=event_log)
    assert not report.ok and any("missing" in p for p in report.problems)
