"""The audit replays by the live readers' rules: a misfiled `accepted` the projectors skipped is
skipped by the replay of the stream and of the archive alike, so neither reports a divergence."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from projector_helpers import Clock, result_doc, store_package, submit_and_run, write_package

from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.events import SubmissionAccepted, encode_event, subject_of
from kz_events.lifecycle import Status, fold
from kz_events.subjects import EVENTS_STREAM, aggregate_filter
from kz_projector.archive import Archive
from kz_projector.audit import run_audit
from kz_projector.gitproj import service_person
from kz_projector.gitstore import open_repo
from kz_projector.service import Projectors

pytestmark = pytest.mark.integration

KID = "cpu/Norm/RMSNorm/fp32/misfiled"


async def test_a_misfiled_accepted_is_skipped_by_the_audit_as_live(
    event_log: EventLog, settings: Settings, clock: Clock, tmp_path: Path
) -> None:
    """A runner's `result` subject holding an `accepted` body (fresh event id) is skipped by
    the projectors (the result is rejected, nothing committed); the audit of the stream and of
    the archive skip it too and find main as the replay makes it."""
    digest = await store_package(event_log, write_package(tmp_path / "p", KID))
    sid = await submit_and_run(event_log, clock, KID, digest, 2.0, accepted=False)
    stored = await event_log.load(aggregate_filter("submission", "cpu", sid))
    result_seq = stored[-1][0]
    forged = SubmissionAccepted(
        event_id=str(uuid.uuid4()),
        occurred_at=clock(),
        actor="runner-1",
        submission_id=sid,
        kernel_id=KID,
        submitter_id="alice",
        runner_id="runner-1",
        attempt=1,
        package_digest=digest,
        result=result_doc(1.0),
        result_seq=result_seq,
    )
    on_result = subject_of(forged).replace(".accepted", ".result")
    await event_log.js.publish(
        on_result,
        encode_event(forged),
        stream=EVENTS_STREAM,
        headers={"Nats-Msg-Id": str(uuid.uuid4())},
    )
    projectors = Projectors(event_log, settings, clock=clock)
    try:
        await projectors.catch_up()
    finally:
        projectors.close()
    state = fold(await event_log.load(aggregate_filter("submission", "cpu", sid)))
    assert state.status is Status.REJECTED

    live = await run_audit(settings, clock=clock, elog=event_log)
    assert live.ok, live.problems
    assert [s["kind"] for s in live.skipped] == ["misfiled"]
    archived = await run_audit(settings, clock=clock, from_archive=settings.kernel_repo_path)
    assert archived.ok, archived.problems
    assert [s["kind"] for s in archived.skipped] == ["misfiled"]
    assert not [n for n in archived.notes if "predate" in n]
    repo = open_repo(settings.kernel_repo_path, create=False)
    lines = list(Archive(repo, service_person(settings)).lines())
    assert [subject for _, _, subject, _ in lines][-2] == on_result
