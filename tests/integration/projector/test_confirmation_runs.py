"""A result that takes rank 1 on its board is run again; the second run confirms it or
disputes it, and a disputed record is not ranked first."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from projector_helpers import Clock, result_doc, store_package, submit_and_run, write_package

from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.events import EventMeta, SubmissionSubmitted
from kz_events.lifecycle import Claim, ReportResult, Status, SubmissionState, decide, evolve, fold
from kz_events.subjects import aggregate_filter
from kz_projector.referee import confirmation_id
from kz_projector.service import Projectors

pytestmark = pytest.mark.integration

BOARD = "cpu/Norm/RMSNorm/fp32"


def _scored(speedup: float, half: float) -> dict[str, Any]:
    interval = [speedup - half, speedup + half]
    score = {"against": "reference", "speedup": speedup, "interval": interval}
    return {**result_doc(100.0 / speedup), "score": score}


def _meta(clock: Clock, actor: str) -> EventMeta:
    return EventMeta(event_id=str(uuid.uuid4()), occurred_at=clock(), actor=actor)


async def _run(
    elog: EventLog, clock: Clock, sid: str, runner: str, document: dict[str, Any]
) -> None:
    """A runner's claim and result for an existing (confirmation) submission."""
    state = await _state(elog, sid)
    lease = f"lease-{sid}"
    for command in (
        Claim(meta=_meta(clock, runner), runner_id=runner, lease_id=lease, attempt=1),
        ReportResult(meta=_meta(clock, runner), runner_id=runner, lease_id=lease,
                     outcome="accepted", result=document),
    ):  # fmt: skip
        event = decide(state, command)[0]
        state = evolve(state, event, await elog.append(event, expect=state.version))


async def _state(elog: EventLog, sid: str) -> SubmissionState:
    return fold(await elog.load(aggregate_filter("submission", "cpu", sid)))


def _board(settings: Settings) -> list[tuple[str, int, str | None]]:
    index = json.loads(settings.effective_index_path.read_bytes())
    return [
        (row["kernel_id"].rsplit("/", 1)[1], row["rank"], row.get("confirmation"))
        for row in index["unreviewed_leaderboards"][BOARD]  # a board a submission opened
    ]


async def test_a_new_record_is_confirmed_or_disputed_by_a_second_run(
    event_log: EventLog, settings: Settings, clock: Clock, tmp_path: Path
) -> None:
    projectors = Projectors(event_log, settings, clock=clock)
    digests = {}
    for name in ("ref", "fast", "lucky"):
        root = write_package(tmp_path / name, f"{BOARD}/{name}", variant=name)
        digests[name] = await store_package(event_log, root)

    ref, fast_id, lucky_id = (f"{BOARD}/{name}" for name in ("ref", "fast", "lucky"))
    await submit_and_run(event_log, clock, ref, digests["ref"], 100.0, document=_scored(1.0, 0.02))
    await projectors.catch_up()
    fast = await submit_and_run(
        event_log, clock, fast_id, digests["fast"], 66.0, document=_scored(1.5, 0.05)
    )
    await projectors.catch_up()

    # The first kernel of a board takes rank 1 unopposed; the second, beating it, is run again.
    confirm = confirmation_id(fast)
    opened = await _state(event_log, confirm)
    assert opened.status is Status.QUEUED and opened.confirms == fast
    [(_, submitted)] = await event_log.load(aggregate_filter("submission", "cpu", confirm))
    assert isinstance(submitted, SubmissionSubmitted)
    assert submitted.avoid_runner == "runner-1" and submitted.package_digest == digests["fast"]
    await projectors.catch_up()
    assert _board(settings)[0] == ("fast", 1, "unconfirmed")

    await _run(event_log, clock, confirm, "runner-2", _scored(1.52, 0.05))
    await projectors.catch_up()
    assert (await _state(event_log, confirm)).status is Status.CONFIRMED
    assert _board(settings)[0] == ("fast", 1, "confirmed")

    # A lucky record: its second run lands far below it; it is disputed and takes no rank (the
    # kernel has no earlier result that stands for it).
    lucky = await submit_and_run(
        event_log, clock, lucky_id, digests["lucky"], 40.0, document=_scored(2.5, 0.1)
    )
    await projectors.catch_up()
    await _run(event_log, clock, confirmation_id(lucky), "runner-2", _scored(1.1, 0.05))
    await projectors.catch_up()
    ended = await _state(event_log, confirmation_id(lucky))
    assert ended.status is Status.DISPUTED and "disagrees" in (ended.result or {})["reason"]
    assert _board(settings) == [
        ("fast", 1, "confirmed"),
        ("ref", 2, None),
        ("lucky", None, "disputed"),
    ]

    # Replaying the log opens nothing again.
    before = await event_log.last_seq()
    await Projectors(event_log, settings, clock=clock).catch_up()
    assert await event_log.last_seq() == before
