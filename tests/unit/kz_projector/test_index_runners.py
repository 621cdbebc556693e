"""Runners in the index: what the log says of them (registered, deregistered, and when), never a
heartbeat the log cannot know; liveness is /api/runners'."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kz_events.events import RunnerDeregistered, RunnerRegistered
from kz_package.schemas import validate
from kz_projector.index import IndexState, fold_index, render_index

pytestmark = pytest.mark.unit

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _meta(n: int) -> dict[str, Any]:
    return {"event_id": str(uuid.uuid4()), "occurred_at": T0 + timedelta(seconds=n), "actor": "r1"}


def _registered(n: int) -> RunnerRegistered:
    return RunnerRegistered(**_meta(n), runner_id="r1", arches=["cpu"], device="cpu (this host)")


def _runners(events: list[Any]) -> list[dict[str, Any]]:
    state = IndexState()
    for seq, event in enumerate(events, 1):
        state = fold_index(state, seq, event)
    doc: dict[str, Any] = json.loads(render_index(state))
    assert validate("index", doc) == []
    runners: list[dict[str, Any]] = doc["runners"]
    return runners


def test_a_registered_runner_carries_its_registration_time_not_a_heartbeat() -> None:
    """A registration is listed with `registered_at`; the index names no heartbeat."""
    [runner] = _runners([_registered(0)])
    assert runner == {
        "id": "r1",
        "arches": ["cpu"],
        "device": "cpu (this host)",
        "registered_at": "2025-01-01T00:00:00Z",
        "state": "registered",
    }
    assert "last_heartbeat" not in runner


def test_a_deregistration_keeps_the_registration_time_and_adds_its_own() -> None:
    """Deregistered: `state` says so, `registered_at` stays, `deregistered_at` is its event's."""
    [runner] = _runners([_registered(0), RunnerDeregistered(**_meta(5), runner_id="r1", arches=[])])
    assert runner["state"] == "deregistered"
    assert runner["registered_at"] == "2025-01-01T00:00:00Z"
    assert runner["deregistered_at"] == "2025-01-01T00:00:05Z"
    assert "last_heartbeat" not in runner


def test_registering_again_starts_a_new_entry() -> None:
    """A runner registered again after a deregistration is registered, as of its new event."""
    dereg = RunnerDeregistered(**_meta(5), runner_id="r1", arches=[])
    [runner] = _runners([_registered(0), dereg, _registered(9)])
    assert runner["state"] == "registered"
    assert runner["registered_at"] == "2025-01-01T00:00:09Z"
    assert "deregistered_at" not in runner
