"""The status long-poll: answers at once when the caller is behind, waits otherwise, and
wakes on the fold (not a timer) within 100 ms of the change."""

from __future__ import annotations

import asyncio
import time

import pytest
from api_helpers import Api, meta, tarball

from kz_events.events import SubmissionCancelled

pytestmark = pytest.mark.integration

ALICE = {"X-Submitter-Id": "alice"}


async def _submitted(api: Api) -> tuple[str, int]:
    body = (await api.submit(tarball())).json()
    return body["submission_id"], body["version"]


async def test_status_answers_at_once_when_behind(api: Api) -> None:
    """`since` older than the version answers immediately with changed: true."""
    sid, version = await _submitted(api)
    resp = await api.client.get(
        f"/api/submissions/{sid}/status", params={"since": version - 1}, headers=ALICE
    )
    body = resp.json()
    assert body["changed"] and body["version"] == version and body["queue_position"] == 1
    assert (await api.client.get(f"/api/submissions/{sid}/status")).status_code == 401


async def test_status_times_out_unchanged(api: Api) -> None:
    """With nothing new within `timeout`, the answer says changed: false."""
    sid, version = await _submitted(api)
    resp = await api.client.get(
        f"/api/submissions/{sid}/status", params={"since": version, "timeout": 0.2}, headers=ALICE
    )
    assert resp.status_code == 200 and resp.json()["changed"] is False
    too_long = await api.client.get(
        f"/api/submissions/{sid}/status", params={"since": version, "timeout": 61}, headers=ALICE
    )
    assert too_long.status_code == 400


async def test_longpoll_wakes_within_100ms_of_the_change(api: Api) -> None:
    """An event appended while the long-poll waits ends it within 100 ms, not at the timeout."""
    sid, version = await _submitted(api)
    ctx, stamps = api.ctx, {}
    kernel_id = ctx.models.submissions[sid].state.kernel_id

    async def cancel_while_waiting() -> None:
        await asyncio.sleep(0.3)  # let the long-poll start waiting; if not, it answers at once
        stamps["waiting"] = ctx.models.waiting(sid)
        event = SubmissionCancelled(**meta("alice"), submission_id=sid, kernel_id=kernel_id)
        await ctx.log.append(event, expect=version)
        stamps["appended"] = time.monotonic()

    api.client.blocking_portal.start_task_soon(cancel_while_waiting)
    resp = await api.client.get(
        f"/api/submissions/{sid}/status", params={"since": version, "timeout": 30}, headers=ALICE
    )
    answered = time.monotonic()
    body = resp.json()
    assert body["changed"] and body["status"] == "cancelled" and body["version"] > version
    assert stamps["waiting"], "the long-poll was not waiting when the change came"
    assert answered - stamps["appended"] < 0.1
