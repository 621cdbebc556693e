"""A runner that reaches the platform only over HTTP: the API claims, heartbeats and reports
for it, against a real NATS server and a real uvicorn server."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from runner_helpers import RMSNORM, RMSNORM_ID, state_of

from kz_api import create_app
from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.events import SubmissionClaimed, SubmissionResult
from kz_events.server import EmbeddedServer, free_port
from kz_package import pack_directory
from kz_runner.backends import get_backend
from kz_runner.core import Runner, RunnerOptions
from kz_runner.http import HttpTransport
from kz_runner.transport import Lease, RunnerInfo

pytestmark = pytest.mark.integration

KEY = "runner-key-cpu"


@contextlib.asynccontextmanager
async def api_server(settings: Settings, log: EventLog) -> AsyncIterator[str]:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, event_log=log), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    task = asyncio.create_task(server.serve())
    for _ in range(200):
        if server.started:
            break
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def _settings(nats: EmbeddedServer, tmp: Path) -> Settings:
    return Settings(
        nats_url=nats.url,
        data_dir=tmp / "data",
        kernel_repo_path=tmp / "repo",
        runner_keys={KEY: ["cpu"]},
        lease_s=30.0,
        lease_secret="s" * 32,
    )


async def _submit(base_url: str, package: Path, tmp: Path) -> str:
    tarball = tmp / "p.tar.gz"
    pack_directory(package, tarball)
    async with httpx.AsyncClient(base_url=base_url) as client:
        response = await client.post(
            "/api/submissions",
            headers={"X-Submitter-Id": "alice"},
            data={"kernel_id": RMSNORM_ID, "submitter_id": "alice"},
            files={"package": ("p.tar.gz", tarball.read_bytes(), "application/gzip")},
        )
    assert response.status_code == 202, response.text
    return str(response.json()["submission_id"])


def _runner(base_url: str, tmp: Path, name: str, backend: str = "stub") -> Runner:
    info = RunnerInfo(runner_id=name, arches=("cpu",), device="cpu", backend=backend)
    options = RunnerOptions(workdir=tmp / name, heartbeat_s=0.5, poll_s=1.0)
    return Runner(info, HttpTransport(base_url, KEY), get_backend(backend), options)


async def test_http_runner_runs_a_task_through_the_api(
    nats_server: EmbeddedServer, event_log: EventLog, tmp_path: Path
) -> None:
    """An HTTP runner claims over the API, runs the example in the sandbox and reports; the
    offer states the package's size, so the runner reads the small package in memory."""
    async with api_server(_settings(nats_server, tmp_path), event_log) as url:
        sid = await _submit(url, RMSNORM, tmp_path)
        runner = _runner(url, tmp_path, "http-1", backend="sandbox")
        sizes: list[int | None] = []
        process = runner.process

        async def recording(lease: Lease, stop: asyncio.Event | None = None) -> None:
            sizes.append(lease.package_size)
            await process(lease, stop)

        runner.process = recording  # type: ignore[method-assign]
        await asyncio.wait_for(runner.run(asyncio.Event(), max_tasks=1), timeout=120)
    assert sizes == [(tmp_path / "p.tar.gz").stat().st_size]
    _, events = await state_of(event_log, "cpu", sid)
    claims = [e for e in events if isinstance(e, SubmissionClaimed)]
    results = [e for e in events if isinstance(e, SubmissionResult)]
    assert [c.runner_id for c in claims] == ["http-1"]
    assert [r.outcome for r in results] == ["accepted"]
    assert results[0].result is not None and results[0].result["metric"]["value"] > 0


async def test_http_runner_hands_its_task_back_on_shutdown(
    nats_server: EmbeddedServer, event_log: EventLog, tmp_path: Path, sleepy_package: Path
) -> None:
    """An HTTP runner told to stop mid-task hands it back; the next runner takes attempt 2."""
    async with api_server(_settings(nats_server, tmp_path), event_log) as url:
        sid = await _submit(url, sleepy_package, tmp_path)
        stop = asyncio.Event()
        leaving = _runner(url, tmp_path, "leaving", backend="sandbox")
        task = asyncio.create_task(leaving.run(stop))
        for _ in range(400):
            state, _ = await state_of(event_log, "cpu", sid)
            if state.status == "running":
                break
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.wait_for(task, timeout=20)
        taker = _runner(url, tmp_path, "taker")
        await asyncio.wait_for(taker.run(asyncio.Event(), max_tasks=1), timeout=20)
    _, events = await state_of(event_log, "cpu", sid)
    claims = [(e.runner_id, e.attempt) for e in events if isinstance(e, SubmissionClaimed)]
    assert claims == [("leaving", 1), ("taker", 2)]
    shutil.rmtree(tmp_path / "leaving", ignore_errors=True)


class Replaying(HttpTransport):
    """An HTTP transport that hands its runner one lease it holds no more, then none, and
    stops the runner: a task taken from it between its claim and its download."""

    def __init__(self, base_url: str, lost: Lease, stop: asyncio.Event) -> None:
        super().__init__(base_url, KEY)
        self.lost: list[Lease] = [lost]
        self.stop = stop

    async def next_task(self, wait_s: float) -> Lease | None:
        if self.lost:
            return self.lost.pop()
        self.stop.set()
        return None


async def test_an_http_runner_skips_a_task_taken_from_it(
    nats_server: EmbeddedServer, event_log: EventLog, tmp_path: Path
) -> None:
    """A runner whose lease another runner took over before it downloaded the package gets
    409 stale_lease, skips the task and serves on: no result, no error, the holder's claim
    stands."""
    async with api_server(_settings(nats_server, tmp_path), event_log) as url:
        sid = await _submit(url, RMSNORM, tmp_path)
        first = HttpTransport(url, KEY)
        await first.register(
            RunnerInfo(runner_id="late", arches=("cpu",), device="cpu", backend="stub")
        )
        lost = await first.next_task(5.0)
        assert lost is not None and lost.attempt == 1
        await first.hand_back(lost)
        await first.close()
        holder = HttpTransport(url, KEY)
        await holder.register(
            RunnerInfo(runner_id="holder", arches=("cpu",), device="cpu", backend="stub")
        )
        taken = await holder.next_task(5.0)
        assert taken is not None and taken.attempt == 2
        stop = asyncio.Event()
        info = RunnerInfo(runner_id="late", arches=("cpu",), device="cpu", backend="stub")
        options = RunnerOptions(workdir=tmp_path / "late", heartbeat_s=0.5, poll_s=1.0)
        late = Runner(info, Replaying(url, lost, stop), get_backend("stub"), options)

        await asyncio.wait_for(late.run(stop), timeout=20)

        assert late.tasks_done == 0
        await holder.close()
    state, events = await state_of(event_log, "cpu", sid)
    assert not [e for e in events if isinstance(e, SubmissionResult)]
    assert (str(state.status), state.lease_id, state.attempt) == ("running", taken.lease_id, 2)
