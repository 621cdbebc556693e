"""The HTTP runner transport: register, claim from the durable consumer, heartbeat, result,
downloads; runner keys bound to architectures and lease tokens nobody else can use."""

from __future__ import annotations

from typing import Any

import pytest
from api_helpers import KERNEL, RESULT_DOC, Api, import_kernel, put_judge, stream_events, tarball

from kz_api.readmodel import ReadModels
from kz_events.events import RunnerRegistered, SubmissionClaimed, SubmissionResult
from kz_events.subjects import LOGS_BUCKET

pytestmark = pytest.mark.integration

KEYS = {"cpu-key": ["cpu"], "gpu-key": ["sm90"]}
CPU = {"X-Runner-Key": "cpu-key"}
GPU = {"X-Runner-Key": "gpu-key"}
keyed = pytest.mark.parametrize("api_overrides", [{"runner_keys": KEYS}])


def _code(resp: Any) -> str:
    return str(resp.json()["error"]["code"])


async def _register(api: Api, runner_id: str = "r1", headers: dict[str, str] = CPU) -> Any:
    body = {"runner_id": runner_id, "arches": ["cpu"], "device": "x86", "backend": "stub"}
    return await api.client.post("/api/runner/register", json=body, headers=headers)


async def _claimed(api: Api, headers: dict[str, str] = CPU) -> dict[str, Any]:
    assert (await _register(api, headers=headers)).status_code == 200
    assert (await api.submit(tarball())).status_code == 202
    resp = await api.client.post(
        "/api/runner/claim", json={"runner_id": "r1", "wait_s": 2}, headers=headers
    )
    assert resp.status_code == 200, resp.text
    offer: dict[str, Any] = resp.json()
    return offer


@keyed
async def test_register_appends_event_and_returns_intervals(api: Api) -> None:
    """Registering returns the intervals and appends RunnerRegistered; /api/runners lists it."""
    resp = await _register(api)
    assert resp.status_code == 200, resp.text
    assert resp.json()["lease_s"] == api.settings.lease_s
    events = await stream_events(api.log)
    assert isinstance(events[0], RunnerRegistered) and events[0].arches == ["cpu"]
    runners = (await api.client.get("/api/runners")).json()["items"]
    assert runners[0]["runner_id"] == "r1" and runners[0]["state"] == "idle"


@keyed
async def test_runner_key_rules(api: Api) -> None:
    """No key or an unknown key is 401; a key for another architecture is 403."""
    assert _code(await _register(api, headers={})) == "unauthenticated"
    assert _code(await _register(api, headers={"X-Runner-Key": "nope"})) == "unauthenticated"
    wrong = await _register(api, headers=GPU)
    assert wrong.status_code == 403 and _code(wrong) == "arch_not_allowed"
    assert await stream_events(api.log) == []


@keyed
async def test_claim_without_task_is_204_and_unknown_runner_404(api: Api) -> None:
    """An empty queue answers 204; an unregistered runner id answers 404."""
    await _register(api)
    resp = await api.client.post("/api/runner/claim", json={"runner_id": "r1"}, headers=CPU)
    assert resp.status_code == 204
    other = await api.client.post("/api/runner/claim", json={"runner_id": "zz"}, headers=CPU)
    assert other.status_code == 404 and _code(other) == "unknown_runner"
    big = await api.client.post(
        "/api/runner/claim", json={"runner_id": "r1", "wait_s": 99}, headers=CPU
    )
    assert big.status_code == 400 and _code(big) == "invalid_input"


@keyed
async def test_claim_heartbeat_result_flow(api: Api) -> None:
    """A claimed task appends `claimed`, heartbeats, downloads, and reports its result and log."""
    offer = await _claimed(api)
    assert offer["attempt"] == 1 and offer["arch"] == "cpu"
    # A new kernel is offered its board's bundle too (its pinned reference); this board has none.
    judge = await api.client.get(
        offer["judge_url"], headers={**CPU, "X-Lease-Token": offer["lease_token"]}
    )
    assert judge.status_code == 404 and offer["confirms"] is None
    events = await stream_events(api.log)
    assert isinstance(events[-1], SubmissionClaimed) and events[-1].lease_id == offer["lease_id"]
    sid, token = offer["submission_id"], offer["lease_token"]
    beat = await api.client.post(
        "/api/runner/heartbeat", json={"lease_token": token, "phase": "build"}, headers=CPU
    )
    assert beat.status_code == 200 and beat.json() == {"cancelled": False}
    pkg = await api.client.get(offer["package_url"], headers={**CPU, "X-Lease-Token": token})
    assert pkg.status_code == 200 and pkg.content[:2] == b"\x1f\x8b"
    body = {
        "lease_token": token,
        "outcome": "accepted",
        "result": RESULT_DOC,
        "environment": {"device": "x86"},
        "duration_s": 1.5,
        "log": "built\nran\n",
    }
    done = await api.client.post(f"/api/submissions/{sid}/result", json=body, headers=CPU)
    assert done.status_code == 200, done.text
    last = (await stream_events(api.log))[-1]
    assert isinstance(last, SubmissionResult) and last.outcome == "accepted"
    assert await api.log.get_object_bytes(LOGS_BUCKET, f"{sid}-1") == b"built\nran\n"
    logs = await api.client.get(f"/api/submissions/{sid}/logs")
    assert logs.status_code == 200 and logs.text == "built\nran\n"
    again = await api.client.post(f"/api/submissions/{sid}/result", json=body, headers=CPU)
    assert again.status_code == 409 and _code(again) == "duplicate_result"


@keyed
async def test_foreign_and_forged_leases(api: Api) -> None:
    """Another key (here of another architecture) is 403 lease_not_yours; a tampered token is
    409 stale_lease; nothing appended."""
    offer = await _claimed(api)
    sid, token = offer["submission_id"], offer["lease_token"]
    before = len(await stream_events(api.log))
    body = {"lease_token": token, "outcome": "accepted", "result": RESULT_DOC}
    foreign = await api.client.post(f"/api/submissions/{sid}/result", json=body, headers=GPU)
    assert foreign.status_code == 403 and _code(foreign) == "lease_not_yours"
    head, _, mac = token.partition(".")
    forged = {**body, "lease_token": head[:-2] + "xx." + mac}
    stale = await api.client.post(f"/api/submissions/{sid}/result", json=forged, headers=CPU)
    assert stale.status_code == 409 and _code(stale) == "stale_lease"
    beat = await api.client.post("/api/runner/heartbeat", json={"lease_token": "x.y"}, headers=CPU)
    assert beat.status_code == 409 and _code(beat) == "stale_lease"
    assert len(await stream_events(api.log)) == before
    assert not await api.log.has_object(LOGS_BUCKET, f"{sid}-1")


@keyed
async def test_result_must_match_schema(api: Api) -> None:
    """An accepted outcome with a result document that fails its schema is 400 invalid_result."""
    offer = await _claimed(api)
    body = {"lease_token": offer["lease_token"], "outcome": "accepted", "result": {"x": 1}}
    resp = await api.client.post(
        f"/api/submissions/{offer['submission_id']}/result", json=body, headers=CPU
    )
    assert resp.status_code == 400 and _code(resp) == "invalid_result"


@keyed
async def test_heartbeat_reports_cancellation(api: Api) -> None:
    """After the submitter cancels, the runner's heartbeat answers cancelled: true."""
    offer = await _claimed(api)
    cancel = await api.client.post(
        f"/api/submissions/{offer['submission_id']}/cancel", headers={"X-Submitter-Id": "alice"}
    )
    assert cancel.status_code == 200
    beat = await api.client.post(
        "/api/runner/heartbeat", json={"lease_token": offer["lease_token"]}, headers=CPU
    )
    assert beat.json() == {"cancelled": True}


@keyed
async def test_judge_download_for_existing_kernel(api: Api) -> None:
    """A task of an existing kernel carries a judge URL that streams main's judge bundle."""
    await import_kernel(api)
    await put_judge(api)
    offer = await _claimed(api)
    assert offer["judge_url"] == f"/api/runner/tasks/{offer['submission_id']}/judge"
    headers = {**CPU, "X-Lease-Token": offer["lease_token"]}
    judge = await api.client.get(offer["judge_url"], headers=headers)
    assert judge.status_code == 200 and judge.content[:2] == b"\x1f\x8b"
    wrong = await api.client.get(
        "/api/runner/tasks/00000000-0000-4000-8000-000000000000/judge", headers=headers
    )
    assert wrong.status_code == 409 and _code(wrong) == "stale_lease"


async def test_open_mode_accepts_any_runner_key(api: Api) -> None:
    """Without configured keys in open mode, any runner key may serve any architecture."""
    resp = await _register(api, headers={"X-Runner-Key": "anything"})
    assert resp.status_code == 200
    assert KERNEL.startswith("cpu/")


@keyed
async def test_claim_by_get_query(api: Api) -> None:
    """GET /api/runner/claim takes runner_id and wait_s from the query string."""
    await _register(api)
    await api.submit(tarball())
    resp = await api.client.get(
        "/api/runner/claim", params={"runner_id": "r1", "wait_s": 2}, headers=CPU
    )
    assert resp.status_code == 200 and resp.json()["attempt"] == 1


class HeldFold:
    """Holds the app's event fold: events stay unfolded until a request waits for the read
    model to reach them, as on a replica whose fold lags the log (under load, or behind
    another replica's claim)."""

    def __init__(self, models: ReadModels) -> None:
        self.models = models
        self.apply, self.wait_seq = models.apply, models.wait_seq
        self.held: list[tuple[int, Any]] | None = []
        self.waited = 0
        models.apply = self._apply  # type: ignore[method-assign]
        models.wait_seq = self._wait_seq  # type: ignore[method-assign]

    def _apply(self, seq: int, event: Any) -> None:
        if self.held is None:
            self.apply(seq, event)
        else:
            self.held.append((seq, event))

    async def _wait_seq(self, seq: int, timeout_s: float) -> bool:
        self.waited += 1
        held, self.held = self.held or [], None
        for item in held:
            self.apply(*item)
        return await self.wait_seq(seq, timeout_s)


@keyed
async def test_a_download_right_after_the_claim_waits_for_the_read_model(api: Api) -> None:
    """A runner asks for its package before this replica's read model folded its claim: the
    log shows the lease is current, so the download waits for the fold and succeeds."""
    assert (await _register(api)).status_code == 200
    assert (await api.submit(tarball())).status_code == 202
    fold = HeldFold(api.ctx.models)
    resp = await api.client.post(
        "/api/runner/claim", json={"runner_id": "r1", "wait_s": 2}, headers=CPU
    )
    assert resp.status_code == 200, resp.text
    offer = resp.json()
    assert api.ctx.models.submissions[offer["submission_id"]].state.lease_id is None  # not folded

    pkg = await api.client.get(
        offer["package_url"], headers={**CPU, "X-Lease-Token": offer["lease_token"]}
    )

    assert pkg.status_code == 200, pkg.text
    assert fold.waited == 1 and pkg.content[:2] == b"\x1f\x8b"


@keyed
async def test_a_download_for_a_task_taken_over_is_a_stale_lease(api: Api) -> None:
    """A runner that handed its task back (or lost it) and asks for its package after another
    runner claimed the next attempt gets 409 stale_lease, naming the submission's state."""
    first = await _claimed(api)
    headers = {**CPU, "X-Lease-Token": first["lease_token"]}
    back = await api.client.post(
        "/api/runner/heartbeat",
        json={"lease_token": first["lease_token"], "phase": "handed_back"},
        headers=CPU,
    )
    assert back.status_code == 200
    resp = await api.client.post(
        "/api/runner/claim", json={"runner_id": "r1", "wait_s": 5}, headers=CPU
    )
    assert resp.status_code == 200 and resp.json()["attempt"] == 2, resp.text

    for url in (first["package_url"], first["judge_url"]):
        stale = await api.client.get(url, headers=headers)
        assert stale.status_code == 409 and _code(stale) == "stale_lease", stale.text
        assert "running" in stale.json()["error"]["message"]
