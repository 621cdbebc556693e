"""The app factory's lifespan: an injected event log is used and left open; without a NATS URL
the app starts (and stops) its own embedded server."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from api_helpers import SECRET, make_settings, tarball
from litestar.testing import AsyncTestClient

from kz_api import create_app
from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.server import EmbeddedServer

pytestmark = pytest.mark.integration


async def test_injected_event_log_on_the_same_loop(
    nats_server: EmbeddedServer, event_log: EventLog, tmp_path: Path
) -> None:
    """With `event_log=` the app serves on the caller's loop and leaves the connection open."""
    app = create_app(make_settings(nats_server, tmp_path), event_log=event_log, lease_secret=SECRET)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.lifespan(),
        httpx.AsyncClient(transport=transport, base_url="http://t") as client,
    ):
        resp = await client.post(
            "/api/submissions",
            files={"package": ("p.tar.gz", tarball(), "application/gzip")},
            data={"kernel_id": "cpu/Norm/RMSNorm/fp32/numpy_ref"},
            headers={"X-Submitter-Id": "alice"},
        )
        assert resp.status_code == 202, resp.text
    assert event_log.connected and await event_log.last_seq() == 1


async def test_embedded_server_when_no_url(tmp_path: Path) -> None:
    """Without KZ_NATS_URL the lifespan starts an embedded server under data_dir/nats."""
    settings = Settings(data_dir=tmp_path / "data", kernel_repo_path=tmp_path / "repo")
    async with AsyncTestClient(create_app(settings, lease_secret=SECRET)) as client:
        body = (await client.get("/api/health")).json()
        assert body["status"] == "ok" and body["nats"]["stream_seq"] == 0
    assert (tmp_path / "data" / "nats").is_dir()
