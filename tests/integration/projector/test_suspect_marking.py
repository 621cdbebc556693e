"""Suspect marking by the referee: tripwire hits and runtime flags mark a result suspect before
its verdict; the mark changes no verdict and no commit, and a replay rebuilds the same repo."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from projector_helpers import Clock, result_doc, settings_for, store_package, write_package

from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.events import (
    EventMeta,
    SubmissionAccepted,
    SubmissionSuspected,
    TripwireHit,
)
from kz_events.lifecycle import (
    Claim,
    ClearSuspect,
    ReportResult,
    SubmissionState,
    Submit,
    decide,
    evolve,
    fold,
)
from kz_events.subjects import aggregate_filter
from kz_projector.repo_read import KernelRepo
from kz_projector.service import Projectors

pytestmark = pytest.mark.integration

KID = "cpu/Norm/RMSNorm/fp32/marked_k"
GC_HIT = TripwireHit(code="gc", path="src/kernel.py", line=1, message="uses gc")


async def _run(
    elog: EventLog,
    clock: Clock,
    digest: str,
    value: float,
    *,
    tripwire: list[TripwireHit] | None = None,
    flags: list[dict[str, Any]] | None = None,
    accepted: bool = True,
) -> str:
    """Append submitted (with its tripwire hits), claimed and result (with its flags)."""
    sid = str(uuid.uuid4())

    def meta(actor: str) -> EventMeta:
        return EventMeta(event_id=str(uuid.uuid4()), occurred_at=clock(), actor=actor)

    result = result_doc(value, accepted=accepted)
    if flags is not None:
        result = {**result, "schema_version": 2, "flags": flags}
    state = SubmissionState()
    for command in (
        Submit(
            meta=meta("alice"),
            submission_id=sid,
            kernel_id=KID,
            submitter_id="alice",
            package_digest=digest,
            package_size=1,
            tripwire=tripwire or [],
        ),
        Claim(meta=meta("r1"), runner_id="r1", lease_id="L1", attempt=1),
        ReportResult(
            meta=meta("r1"),
            runner_id="r1",
            lease_id="L1",
            outcome="accepted" if accepted else "rejected",
            result=result,
        ),
    ):
        event = decide(state, command)[0]
        state = evolve(state, event, await elog.append(event, expect=state.version))
    return sid


async def _events(elog: EventLog, sid: str) -> list[Any]:
    return [e for _, e in await elog.load(aggregate_filter("submission", "cpu", sid))]


async def test_tripwire_and_flags_mark_suspect_before_the_verdict(
    event_log: EventLog, settings: Settings, clock: Clock, tmp_path: Path
) -> None:
    """Hits and flags give one `suspect` event right before `accepted`, naming every reason;
    a clean result and a rejected one get none."""
    digest = await store_package(event_log, write_package(tmp_path / "p", KID))
    clean = await _run(event_log, clock, digest, 5.0)
    hit = await _run(
        event_log,
        clock,
        digest,
        4.0,
        tripwire=[GC_HIT],
        flags=[{"code": "extra_threads", "message": "a thread outlived the call"}],
    )
    flagged = await _run(event_log, clock, digest, 3.0, flags=[{"code": "late_output"}])
    rejected = await _run(event_log, clock, digest, 9.0, tripwire=[GC_HIT], accepted=False)
    await Projectors(event_log, settings, clock=clock).catch_up()

    assert not any(isinstance(e, SubmissionSuspected) for e in await _events(event_log, clean))
    assert not any(isinstance(e, SubmissionSuspected) for e in await _events(event_log, rejected))
    types = [e.type for e in await _events(event_log, hit)]
    assert types[types.index("suspect") + 1] == "accepted" and "committed" in types
    mark = next(e for e in await _events(event_log, hit) if isinstance(e, SubmissionSuspected))
    assert [(r.source, r.code) for r in mark.reasons] == [
        ("tripwire", "gc"),
        ("runtime", "extra_threads"),
    ]
    assert mark.reasons[0].path == "src/kernel.py" and mark.reasons[0].line == 1
    late = fold(await event_log.load(aggregate_filter("submission", "cpu", flagged)))
    assert late.suspect is not None and late.suspect[0].code == "late_output"
    assert str(late.status) == "committed"


async def test_suspect_marks_change_no_commit_and_replay_matches(
    event_log: EventLog, settings: Settings, clock: Clock, tmp_path: Path
) -> None:
    """A suspect best is committed as any other (its bench_result.yaml knows nothing of the
    mark), the index shows it marked, clearing it unmarks it, and a replay of the log into an
    empty repo rebuilds the same commits."""
    digest = await store_package(event_log, write_package(tmp_path / "p", KID))
    await _run(event_log, clock, digest, 5.0)
    sid = await _run(event_log, clock, digest, 2.0, tripwire=[GC_HIT])
    projectors = Projectors(event_log, settings, clock=clock)
    await projectors.catch_up()
    repo = KernelRepo(settings.kernel_repo_path)
    board = repo.read_file(KID, ".kernel_package/bench_result.yaml").decode()
    assert "value: 2.0" in board and "suspect" not in board
    index = json.loads(settings.effective_index_path.read_bytes())
    [kernel] = index["kernels"]
    assert kernel["best"]["value"] == 2.0 and kernel["best"]["suspect"] is True
    # a submission opened the board: it is listed apart until a maintainer reviews it
    assert (
        index["leaderboards"] == {}
        and index["boards"]["cpu/Norm/RMSNorm/fp32"]["reviewed"] is False
    )
    assert index["unreviewed_leaderboards"]["cpu/Norm/RMSNorm/fp32"][0]["suspect"] is True

    head = repo.head()
    state = fold(await event_log.load(aggregate_filter("submission", "cpu", sid)))
    meta = EventMeta(event_id=str(uuid.uuid4()), occurred_at=clock(), actor="maintainer")
    [cleared] = decide(state, ClearSuspect(meta=meta, reason="gc for a buffer pool"))
    await event_log.append(cleared, expect=state.version)
    await projectors.catch_up()
    assert repo.head() == head
    index = json.loads(settings.effective_index_path.read_bytes())
    assert "suspect" not in index["kernels"][0]["best"]
    projectors.close()

    replay = settings_for(tmp_path / "replay")
    again = Projectors(event_log, replay, clock=Clock())
    await again.catch_up()
    again.close()
    assert KernelRepo(replay.kernel_repo_path).head() == head
    accepted = [e for e in await _events(event_log, sid) if isinstance(e, SubmissionAccepted)]
    assert len(accepted) == 1
