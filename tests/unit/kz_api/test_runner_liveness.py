"""A runner that stops heartbeating is shown as gone and no longer counted as live."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kz_api.readmodel import RUNNER_GONE_AFTER, ReadModels
from kz_api.views import runner_doc
from kz_events.events import RunnerDeregistered, RunnerHeartbeat, RunnerRegistered

pytestmark = pytest.mark.unit

T0 = datetime(2026, 12, 1, 20, 0, 0, tzinfo=UTC)


def registered(runner_id: str, at: datetime) -> RunnerRegistered:
    return RunnerRegistered(
        event_id=f"r-{runner_id}",
        occurred_at=at,
        actor=runner_id,
        runner_id=runner_id,
        arches=["cpu"],
    )


def beat(runner_id: str, at: datetime, busy_with: str | None = None) -> RunnerHeartbeat:
    return RunnerHeartbeat(
        event_id=f"h-{runner_id}-{at}",
        occurred_at=at,
        actor=runner_id,
        runner_id=runner_id,
        arches=["cpu"],
        busy_with=busy_with,
    )


def test_a_previous_runs_runner_is_gone_and_not_counted() -> None:
    """Given yesterday's runner that never deregistered and today's that heartbeats, only
    today's is live; the old one reads `gone`, not `idle`."""
    models = ReadModels()
    models.apply(1, registered("local-old", T0 - timedelta(days=1)))
    models.apply(2, registered("local-new", T0 - timedelta(seconds=5)))
    models.apply_live(beat("local-new", T0 - timedelta(seconds=1)))

    assert [r.runner_id for r in models.live_runners(T0)] == ["local-new"]
    assert runner_doc(models.runners["local-old"], T0).state == "gone"
    assert runner_doc(models.runners["local-new"], T0).state == "idle"


@pytest.mark.parametrize(
    ("silent_for", "busy_with", "state"),
    [
        (timedelta(seconds=1), None, "idle"),
        (timedelta(seconds=1), "s1", "busy"),
        (RUNNER_GONE_AFTER, "s1", "busy"),
        (RUNNER_GONE_AFTER + timedelta(seconds=1), "s1", "gone"),
    ],
)
def test_the_state_follows_the_last_sign_of_life(
    silent_for: timedelta, busy_with: str | None, state: str
) -> None:
    models = ReadModels()
    models.apply(1, registered("r1", T0 - timedelta(days=1)))
    models.apply_live(beat("r1", T0 - silent_for, busy_with))
    assert models.runners["r1"].state_at(T0) == state


def test_a_deregistered_runner_stays_deregistered() -> None:
    models = ReadModels()
    models.apply(1, registered("r1", T0))
    models.apply(
        2,
        RunnerDeregistered(
            event_id="d", occurred_at=T0, actor="r1", runner_id="r1", arches=["cpu"]
        ),
    )
    assert models.runners["r1"].state_at(T0) == "deregistered"
    assert models.live_runners(T0) == []
