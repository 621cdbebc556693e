"""The referee and the git projector against a real nats-server and a real git repo."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
from pathlib import Path

import pytest
from dulwich.objects import Tree
from projector_helpers import Clock, store_package, submit_and_run, write_package

from kz_events.config import Settings
from kz_events.errors import LogUnavailable
from kz_events.eventlog import EventLog
from kz_events.events import SubmissionAccepted, SubmissionCommitted, SubmissionRejected
from kz_projector.archive import ARCHIVE_REF
from kz_projector.audit import run_audit
from kz_projector.errors import PackageUnavailable
from kz_projector.packages import ObjectStorePackages
from kz_projector.repo_read import KernelRepo
from kz_projector.service import Projectors

pytestmark = pytest.mark.integration

KID = "cpu/Norm/RMSNorm/fp32/test_k"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


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
        sorted(sids)
    )


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
    commit = writer.commit(
        tree=writer.add(root),
        parent=head,
        author=archive.service,
        committer=archive.service,
        when=clock(),
        subject="lose a segment",
        trailers=[("Kz-Archive-Seq", str(archive.archived_seq()))],
    )
    assert writer.move(head, commit, ARCHIVE_REF)
    report = await run_audit(settings, clock=clock, elog=event_log)
    assert not report.ok and any("missing" in p for p in report.problems)


async def test_running_projectors_judge_and_commit_a_burst_once_each_in_log_order(
    event_log: EventLog, settings: Settings, clock: Clock, tmp_path: Path
) -> None:
    """Results that arrive together while the service follows the log are judged side by
    side and their packages read ahead of the fold: each is committed once, in the order of
    its `accepted` event, and rejected ones never reach git."""
    digests = [
        await store_package(event_log, write_package(tmp_path / f"p{i}", KID, variant=f"v{i}"))
        for i in range(6)
    ]
    projectors = Projectors(event_log, settings, clock=clock)
    running = asyncio.create_task(projectors.run())
    try:
        sids = await asyncio.gather(
            *(
                submit_and_run(
                    event_log, clock, KID, digests[i % 6], 10.0 - i % 7, accepted=i % 5 != 4
                )
                for i in range(40)
            )
        )
        for _ in range(200):
            done = await event_log.load("kz.ev.submission.*.*.committed")
            if len(done) == 32:
                break
            await asyncio.sleep(0.05)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        projectors.close()
    accepted = [
        e.submission_id
        for _, e in await event_log.load("kz.ev.submission.*.*.accepted")
        if isinstance(e, SubmissionAccepted)
    ]
    rejected = {
        e.submission_id
        for _, e in await event_log.load("kz.ev.submission.*.*.rejected")
        if isinstance(e, SubmissionRejected)
    }
    assert len(accepted) == 32 and len(set(accepted)) == 32 and len(rejected) == 8
    assert set(accepted) | rejected == set(sids)
    repo = settings.kernel_repo_path
    sources = git(
        repo,
        "log",
        "--reverse",
        "--format=%(trailers:key=Kz-Submission,valueonly)",
        "--grep=Kz-Commit: source",
        "main",
    ).split()
    assert sources == accepted  # each once, in log order
    committed = [e for _, e in await event_log.load("kz.ev.submission.*.*.committed")]
    assert len(committed) == 32
    git(repo, "fsck", "--strict")


async def test_packages_read_ahead_are_the_packages_and_stay_bounded(
    event_log: EventLog, tmp_path: Path
) -> None:
    """A package read ahead is what a plain read gives; past the bound the oldest read is
    dropped, and asking for it later reads it again."""
    digests = [
        await store_package(event_log, write_package(tmp_path / f"p{i}", KID, variant=f"v{i}"))
        for i in range(4)
    ]
    plain = [await ObjectStorePackages(event_log).files(d) for d in digests]
    packages = ObjectStorePackages(event_log)
    packages.READ_AHEAD = 3
    for digest in digests:
        packages.read_ahead(digest)
        packages.read_ahead(digest)  # asked twice, read once
    assert list(packages.reading) == digests[1:]
    assert [await packages.files(d) for d in reversed(digests)] == plain[::-1]
    assert packages.reading == {}
    packages.read_ahead(digests[0])  # cached now: nothing to read
    assert packages.reading == {}
    missing = "0" * 64
    packages.read_ahead(missing)
    with pytest.raises(PackageUnavailable):
        await packages.files(missing)


async def test_a_failed_judgement_stops_the_referee_with_its_own_error(
    event_log: EventLog, settings: Settings, clock: Clock, tmp_path: Path
) -> None:
    """Judgements run side by side, but what stops one reaches the service as it was (a
    `KzError` the `kz` command prints as one line), not wrapped in an exception group."""
    digest = await store_package(event_log, write_package(tmp_path / "p", KID))
    projectors = Projectors(event_log, settings, clock=clock)

    async def unavailable(submission_id: str) -> None:
        raise LogUnavailable(f"judging {submission_id}: the log stayed away")

    projectors.referee.judge = unavailable  # type: ignore[method-assign]
    running = asyncio.create_task(projectors.referee.run())
    await submit_and_run(event_log, clock, KID, digest, 1.0)
    with pytest.raises(LogUnavailable, match="the log stayed away"):
        await asyncio.wait_for(running, timeout=10)
    projectors.close()


async def test_a_restarted_projector_says_nothing_of_commits_the_log_announced(
    event_log: EventLog,
    settings: Settings,
    clock: Clock,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Started again over a branch whose commits the log has announced, the git projector
    appends nothing and logs none of them again (its fold ends at the branch head, before the
    head batch's `committed` events, so it asks the log)."""
    digest = await store_package(event_log, write_package(tmp_path / "p1", KID))
    for value in (5.0, 4.0, 3.0):
        await submit_and_run(event_log, clock, KID, digest, value)
    first = Projectors(event_log, settings, clock=clock)
    try:
        await first.catch_up()
    finally:
        first.close()
    before = await event_log.last_seq()
    caplog.clear()
    caplog.set_level(logging.INFO, logger="kz_projector.gitproj")

    again = Projectors(event_log, settings, clock=clock)
    try:
        await again.catch_up()
    finally:
        again.close()

    assert await event_log.last_seq() == before
    assert [r.getMessage() for r in caplog.records if r.name == "kz_projector.gitproj"] == []
