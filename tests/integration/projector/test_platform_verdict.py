"""The referee applies the platform's verdict rule to the samples in a result: the judge's own
`accepted` is not what decides, except for a kernel's first result."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from projector_helpers import Clock, result_doc, store_package, submit_and_run, write_package

from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.lifecycle import Status, fold
from kz_events.subjects import aggregate_filter
from kz_projector.importer import import_path
from kz_projector.service import Projectors

pytestmark = pytest.mark.integration

KID = "cpu/Norm/RMSNorm/fp32/imported"


def _side_by_side(value: float, speedup: float, *, accepted: bool) -> dict[str, Any]:
    """A result whose block log-ratios say the challenger is `speedup` times the incumbent."""
    blocks = [-math.log(speedup) + 0.003 * ((i * 7) % 5 - 2) for i in range(16)]
    return {
        **result_doc(value, accepted=accepted),
        "workloads": [{"name": "w1", "value": value, "speedup": {"log_ratios": blocks}}],
        "comparison": {"against": "incumbent", "margin": 0.05, "outcome": "faster"},
    }


async def _status(elog: EventLog, sid: str) -> Status:
    return fold(await elog.load(aggregate_filter("submission", "cpu", sid))).status


async def test_a_first_result_stands_and_later_ones_are_judged_by_their_samples(
    event_log: EventLog, settings: Settings, clock: Clock, tmp_path: Path
) -> None:
    """An imported kernel without a best: its first run ties with its own source and is taken
    all the same. After that, identical code that says it is faster is rejected, and a
    faster one the judge turned down is accepted."""
    write_package(tmp_path / "kernels" / "k", KID)
    await import_path(event_log, tmp_path / "kernels", submitter="zoo", clock=clock)
    projectors = Projectors(event_log, settings, clock=clock)
    await projectors.catch_up()
    digest = await store_package(event_log, write_package(tmp_path / "p", KID, variant="v2"))

    first = await submit_and_run(
        event_log, clock, KID, digest, 5.0, document=_side_by_side(5.0, 1.0, accepted=True)
    )
    await projectors.catch_up()
    assert await _status(event_log, first) is Status.COMMITTED

    boast = await submit_and_run(
        event_log, clock, KID, digest, 2.0, document=_side_by_side(2.0, 1.0, accepted=True)
    )
    modest = await submit_and_run(
        event_log,
        clock,
        KID,
        digest,
        4.0,
        accepted=False,
        document=_side_by_side(4.0, 1.4, accepted=False),
    )
    await projectors.catch_up()
    assert await _status(event_log, boast) is Status.REJECTED
    assert await _status(event_log, modest) is Status.COMMITTED
