"""The platform working under the deployment's NATS permissions: the API and the projector
connect as their own users of `deploy/`'s model (on one node), an HTTP runner with its key
takes a task through the API, and the submission ends with no permission violation."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from kz_api import create_app
from kz_events.config import Settings
from kz_events.eventlog import EventLog, LogOptions
from kz_events.events import SubmissionClaimed
from kz_events.lifecycle import Status, fold
from kz_events.server import EmbeddedServer, free_port
from kz_events.subjects import JUDGES_BUCKET, aggregate_filter, judge_key
from kz_package import pack_directory
from kz_projector.service import Projectors
from kz_runner.backends import get_backend
from kz_runner.core import Runner, RunnerOptions
from kz_runner.http import HttpTransport
from kz_runner.transport import RunnerInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))
from runner_helpers import RMSNORM, RMSNORM_ID

pytestmark = pytest.mark.integration

KEY = "deployed-runner-key-cpu"


def _url(server: EmbeddedServer, user: str, passwords: dict[str, str]) -> str:
    return server.url.replace("nats://", f"nats://{user}:{passwords[user]}@")


@contextlib.asynccontextmanager
async def _api(settings: Settings, log: EventLog) -> AsyncIterator[str]:
    port = free_port()
    app = create_app(settings, event_log=log)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
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


async def test_a_submission_ends_under_the_deployments_permissions(
    deployed_server: EmbeddedServer,
    passwords: dict[str, str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Upload, claim, heartbeat, package download and result through the API as `api`; the
    verdict, the commit and the judge bundle as `projector`; the submission is committed and
    nobody's request was refused by the server."""
    caplog.set_level(logging.WARNING)
    base = {
        "data_dir": tmp_path / "data",
        "kernel_repo_path": tmp_path / "repo",
        "runner_keys": {KEY: ["cpu"]},
        "lease_s": 30.0,
        "lease_secret": "s" * 32,
    }
    api_settings = Settings(nats_url=_url(deployed_server, "api", passwords), **base)
    proj_settings = Settings(nats_url=_url(deployed_server, "projector", passwords), **base)
    api_log = await EventLog.connect(api_settings.nats_url or "", LogOptions(retry_fast=True))
    proj_log = await EventLog.connect(proj_settings.nats_url or "", LogOptions(retry_fast=True))
    try:
        await api_log.ensure()
        await proj_log.ensure()
        projectors = Projectors(proj_log, proj_settings)
        following = asyncio.create_task(projectors.run())
        async with _api(api_settings, api_log) as url:
            tarball = tmp_path / "p.tar.gz"
            pack_directory(RMSNORM, tarball)
            async with httpx.AsyncClient(base_url=url) as client:
                sent = await client.post(
                    "/api/submissions",
                    headers={"X-Submitter-Id": "alice"},
                    data={"kernel_id": RMSNORM_ID},
                    files={"package": ("p.tar.gz", tarball.read_bytes(), "application/gzip")},
                )
            assert sent.status_code == 202, sent.text
            sid = sent.json()["submission_id"]
            info = RunnerInfo(runner_id="deployed-1", arches=("cpu",), device="cpu", backend="stub")
            options = RunnerOptions(workdir=tmp_path / "work", heartbeat_s=0.5, poll_s=1.0)
            runner = Runner(info, HttpTransport(url, KEY), get_backend("stub"), options)
            await asyncio.wait_for(runner.run(asyncio.Event(), max_tasks=1), timeout=60)
            events: list[object] = []
            for _ in range(300):
                stored = await api_log.load(aggregate_filter("submission", "cpu", sid))
                state = fold(stored)
                events = [e for _, e in stored]
                if state.status in (Status.COMMITTED, Status.REJECTED, Status.FAILED):
                    break
                await asyncio.sleep(0.1)
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
        projectors.close()
        judge = await api_log.has_object(JUDGES_BUCKET, judge_key(RMSNORM_ID))
    finally:
        await api_log.close()
        await proj_log.close()
    assert [e.runner_id for e in events if isinstance(e, SubmissionClaimed)] == ["deployed-1"]
    assert state.status is Status.COMMITTED, (state.status, events)
    assert judge  # written by the projector into KZ_JUDGES, read by the API
    refused = [r.getMessage() for r in caplog.records if "ermissions" in r.getMessage()]
    assert refused == []
