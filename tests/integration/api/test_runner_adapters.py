"""The two adapters of the lease service, the native runner's and the API's (through the HTTP
runner), give one answer in each branch: a live lease is not taken and its delivery is handed
back, a claim on a stale first delivery conflicts and acknowledges the ended task, a cancelled
task and a lease taken over both stop at the next heartbeat."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from api_helpers import KERNEL, SECRET, Api, tarball

from kz_api.leases import LeaseSigner
from kz_events.events import SubmissionClaimed
from kz_events.ids import KernelId
from kz_events.lifecycle import Status, fold
from kz_events.port import Settle
from kz_events.subjects import aggregate_filter
from kz_runner.http import HttpTransport
from kz_runner.native import NativeTransport
from kz_runner.transport import Lease, Report, RunnerInfo, Transport

pytestmark = pytest.mark.integration

ARCH = KernelId.parse(KERNEL).arch
MakeRunner = Callable[[str], Any]


@pytest.fixture(params=["native", "http"])
async def runner(request: pytest.FixtureRequest, api: Api) -> AsyncIterator[MakeRunner]:
    """Makes registered runners of one transport: the native one on the log, or the HTTP one
    through the API (the app under test)."""
    made: list[Transport] = []

    async def make(runner_id: str) -> Transport:
        transport: Transport
        if request.param == "native":
            transport = NativeTransport(api.log, lease_s=api.settings.lease_s)
        else:
            http = HttpTransport("http://testserver.local", "any-key")
            await http.client.aclose()
            http.client = api.client
            api.client.headers["X-Runner-Key"] = "any-key"
            transport = http
        await transport.register(
            RunnerInfo(runner_id=runner_id, arches=(ARCH,), device="x", backend="stub")
        )
        made.append(transport)
        return transport

    yield make
    for transport in made:
        if isinstance(transport, NativeTransport):
            await transport.close()


def _reply(lease: Lease) -> str:
    """The reply subject of the lease's delivery, whichever transport holds it."""
    if isinstance(lease.handle, dict):
        return LeaseSigner(SECRET).verify(lease.handle["lease_token"]).reply
    return str(lease.handle.reply)


async def _submitted(api: Api) -> str:
    resp = await api.submit(tarball())
    assert resp.status_code == 202, resp.text
    return str(resp.json()["submission_id"])


async def _claims(api: Api, sid: str) -> list[SubmissionClaimed]:
    stored = await api.log.load(aggregate_filter("submission", ARCH, sid))
    return [e for _, e in stored if isinstance(e, SubmissionClaimed)]


async def _state(api: Api, sid: str) -> Any:
    return fold(await api.log.load(aggregate_filter("submission", ARCH, sid)))


async def _floor_reaches(api: Api, seq: int) -> bool:
    for _ in range(40):
        floor = await api.log.task_ack_floor(ARCH)
        if floor is not None and floor >= seq:
            return True
        await asyncio.sleep(0.05)
    return False


async def test_a_live_lease_is_not_taken_and_its_delivery_is_handed_back(
    api: Api, runner: MakeRunner
) -> None:
    """A task delivered again while its lease is live (the server lost its consumer state) is
    refused by the rules and handed back for later, never acknowledged."""
    first, second = await runner("r1"), await runner("r2")
    sid = await _submitted(api)
    lease = await first.next_task(5)
    assert lease is not None and lease.attempt == 1
    await api.log.settle_task(_reply(lease), Settle.NAK)  # the delivery comes again at once
    assert await second.next_task(1.5) is None
    assert [c.runner_id for c in await _claims(api, sid)] == ["r1"]
    assert not await _floor_reaches(api, 1)  # the queue still holds the task


async def test_a_claim_on_a_stale_first_delivery_conflicts_and_acks_the_ended_task(
    api: Api, runner: MakeRunner
) -> None:
    """Cancelled before any runner saw it, a task's first delivery is decided on a stale view:
    the append conflicts, the stored submission refuses, and the delivery is acknowledged."""
    worker = await runner("r1")
    sid = await _submitted(api)
    cancel = await api.client.post(
        f"/api/submissions/{sid}/cancel", headers={"X-Submitter-Id": "alice"}
    )
    assert cancel.status_code == 200, cancel.text
    assert await worker.next_task(1.5) is None
    assert await _claims(api, sid) == []
    submitted_seq = (await api.log.load(aggregate_filter("submission", ARCH, sid)))[0][0]
    assert await _floor_reaches(api, submitted_seq)


async def test_a_cancelled_task_stops_at_the_next_heartbeat(api: Api, runner: MakeRunner) -> None:
    """After the submitter cancels, the runner's heartbeat says stop."""
    worker = await runner("r1")
    sid = await _submitted(api)
    lease = await worker.next_task(5)
    assert lease is not None
    assert await worker.heartbeat(lease, "build") is False
    cancel = await api.client.post(
        f"/api/submissions/{sid}/cancel", headers={"X-Submitter-Id": "alice"}
    )
    assert cancel.status_code == 200
    assert await worker.heartbeat(lease, "run") is True


@pytest.mark.parametrize("api_overrides", [{"lease_s": 1.0}])
async def test_a_lease_taken_over_stops_at_the_next_heartbeat(api: Api, runner: MakeRunner) -> None:
    """A runner that stayed quiet past half its lease loses the task to the next delivery's
    runner (attempt 2); its next heartbeat says stop, and its late result is not taken."""
    first, second = await runner("r1"), await runner("r2")
    sid = await _submitted(api)
    lease = await first.next_task(5)
    assert lease is not None
    await asyncio.sleep(0.7)
    await api.log.settle_task(_reply(lease), Settle.NAK)
    taken = await second.next_task(5)
    assert taken is not None and taken.attempt == 2
    assert await first.heartbeat(lease, "run") is True
    late = Report(outcome="timed_out", result=None, environment={}, duration_s=1.0, log=b"late")
    await first.report(lease, late)
    state = await _state(api, sid)
    assert state.runner_id == "r2" and state.status is Status.RUNNING
    assert state.result_seq is None
