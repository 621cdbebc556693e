"""Stored messages no fold may apply — undecodable, misfiled, a repeated event_id — are counted,
reported and skipped by every reader, and the stack keeps working around them."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from dulwich.repo import Repo
from litestar.testing import AsyncTestClient
from projector_helpers import Clock, store_package, submit_and_run, write_package

from kz_api import create_app
from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.events import SubmissionCommitted, subject_of
from kz_events.lifecycle import Status, fold
from kz_events.server import EmbeddedServer
from kz_events.subjects import EVENTS_STREAM, aggregate_filter
from kz_projector.audit import run_audit
from kz_projector.gitstore import MAIN, commit_trailers
from kz_projector.service import Projectors
from kz_projector.sweeper import open_limit_s

pytestmark = pytest.mark.integration

KID = "cpu/Norm/RMSNorm/fp32/poison"


async def _store(elog: EventLog, subject: str, data: bytes) -> int:
    """Put bytes on an event subject as a writer with publish rights could, bypassing
    `EventLog.append` (a fresh Nats-Msg-Id each time)."""
    ack = await elog.js.publish(
        subject, data, stream=EVENTS_STREAM, headers={"Nats-Msg-Id": str(uuid.uuid4())}
    )
    return int(ack.seq)


async def _raw(elog: EventLog, seq: int) -> tuple[str, bytes]:
    msg = await elog.js.get_msg(EVENTS_STREAM, seq)
    return str(msg.subject), bytes(msg.data or b"")


def _commits_of(repo_path: Path) -> list[str]:
    """The Kz-Submission trailer of every commit on main, newest first."""
    repo = Repo(str(repo_path))
    try:
        head = repo.refs[MAIN]
        return [
            commit_trailers(entry.commit).get("Kz-Submission", "")
            for entry in repo.get_walker(include=[head])
        ]
    finally:
        repo.close()


async def _poison(elog: EventLog, accepted_seq: int) -> dict[str, int]:
    """One of each kind of poison; the kinds' counts as every reader must see them."""
    subject, accepted = await _raw(elog, accepted_seq)
    other = subject.replace(subject.split(".")[4], str(uuid.uuid4()))
    await _store(elog, "kz.ev.submission.cpu.nobody.result", b"{}")
    await _store(elog, "kz.ev.runner.cpu.r9.registered", b"garbage \xff\x00")
    await _store(elog, other, accepted)  # misfiled: another submission's accepted
    await _store(elog, subject, accepted)  # repeated: the same accepted under another msg id
    return {"undecodable": 2, "misfiled": 1, "repeated": 1}


def _accepted_seq(stored: list[tuple[int, Any]]) -> int:
    return next(seq for seq, event in stored if getattr(event, "type", "") == "accepted")


async def test_every_reader_skips_poison_and_later_submissions_commit(
    nats_server: EmbeddedServer,
    event_log: EventLog,
    settings: Settings,
    clock: Clock,
    tmp_path: Path,
) -> None:
    """With `{}`, garbage, a misfiled and a repeated `accepted` in the log, restarted
    projectors fold on, a repeated accepted is committed once, a later submission (one with junk
    on its own aggregate too) commits, the API reports the skips and the audit lists them."""
    digest = await store_package(event_log, write_package(tmp_path / "p", KID))
    first = await submit_and_run(event_log, clock, KID, digest, 2.0)
    await Projectors(event_log, settings, clock=clock).catch_up()
    stored = await event_log.load(aggregate_filter("submission", "cpu", first))
    expected = await _poison(event_log, _accepted_seq(stored))

    second = await submit_and_run(event_log, clock, KID, digest, 1.0)
    # junk on the second submission's own aggregate: its next append must still go through
    junk = subject_of(stored[0][1]).replace(first, second).replace(".submitted", ".result")
    await _store(event_log, junk, b"{}")
    restarted = Projectors(event_log, settings, clock=clock)  # a restart reads it all again
    try:
        await restarted.catch_up()
        for screen in (
            restarted.referee.screen,
            restarted.git.screen,
            restarted.index.screen,
            restarted.sweeper.screen,
        ):
            assert dict(screen.counts) == {**expected, "undecodable": 3}, screen.name
    finally:
        restarted.close()

    states = {
        sid: fold(await event_log.load(aggregate_filter("submission", "cpu", sid)))
        for sid in (first, second)
    }
    assert {s.status for s in states.values()} == {Status.COMMITTED}
    commits = _commits_of(settings.kernel_repo_path)
    assert commits.count(first) == 2 and commits.count(second) == 2  # source + bench result
    committed = [
        e
        for _, e in await event_log.load(aggregate_filter("submission", "cpu", first))
        if isinstance(e, SubmissionCommitted)
    ]
    assert len(committed) == 1

    app = create_app(
        msgspec.structs.replace(settings, nats_url=nats_server.url), lease_secret=b"s" * 32
    )
    async with AsyncTestClient(app) as client:
        health = (await client.get("/api/health")).json()
        assert health["fold"]["caught_up"] is True
        assert health["skipped_events"]["by_kind"] == {**expected, "undecodable": 3}
        assert {e["kind"] for e in health["skipped_events"]["recent"]} == set(expected)
        metrics = (await client.get("/metrics")).text
        assert 'kz_skipped_events_total{kind="repeated"} 1' in metrics
        assert 'kz_skipped_events_total{kind="undecodable"} 3' in metrics
        detail = await client.get(f"/api/submissions/{second}", headers={"X-Submitter-Id": "alice"})
        assert detail.json()["submission"]["status"] == "committed", detail.text

    report = await run_audit(settings, clock=clock, elog=event_log)
    assert sorted(s["kind"] for s in report.skipped) == sorted(
        ["undecodable"] * 3 + ["misfiled", "repeated"]
    )
    assert report.ok, report.problems
    archived = await run_audit(settings, clock=clock, from_archive=settings.kernel_repo_path)
    assert archived.ok, archived.problems  # the archive kept every message, the poison too
    assert archived.archived_seq == report.log_seq


async def test_audit_reports_submissions_open_past_their_time_limit(
    event_log: EventLog, settings: Settings, clock: Clock, tmp_path: Path
) -> None:
    """A claimed submission that never ended is a note once its lease went quiet and a
    divergence once it is open past its time limit; a finished one is neither."""
    digest = await store_package(event_log, write_package(tmp_path / "p", KID))
    done = await submit_and_run(event_log, clock, KID, digest, 2.0)
    stuck = await submit_and_run(event_log, clock, KID, digest, 1.0, stop_after_claim=True)
    projectors = Projectors(event_log, settings, clock=clock)
    await projectors.referee.catch_up()
    await projectors.git.catch_up()
    projectors.close()
    clock.now += timedelta(seconds=30)
    early = await run_audit(settings, clock=clock, elog=event_log)
    assert early.open_too_long == [] and not any(stuck in p for p in early.problems)
    assert any(stuck in n and "lease lapsed" in n for n in early.notes)
    clock.now += timedelta(seconds=open_limit_s(3, settings.task_timeout_s, settings.lease_s))
    late = await run_audit(settings, clock=clock, elog=event_log)
    assert [o["submission_id"] for o in late.open_too_long] == [stuck]
    assert not late.ok and any(stuck in p and "never ended" in p for p in late.problems)
    assert not any(done in p for p in late.problems)
