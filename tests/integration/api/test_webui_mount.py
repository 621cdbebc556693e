"""The web UI is served under `/webui/`, and `/webui` sends the browser there."""

from __future__ import annotations

from pathlib import Path

import pytest
from litestar.testing import TestClient

from kz_api import create_app
from kz_events.config import Settings
from kz_events.server import EmbeddedServer

pytestmark = pytest.mark.integration


def test_webui_without_slash_redirects_keeping_the_query(
    nats_server: EmbeddedServer, tmp_path: Path
) -> None:
    """`/webui?x=1` answers 308 to `/webui/?x=1`; `/webui/` serves the app's HTML."""
    settings = Settings(
        nats_url=nats_server.url, data_dir=tmp_path / "d", kernel_repo_path=tmp_path / "r"
    )
    with TestClient(create_app(settings)) as client:
        bare = client.get("/webui", follow_redirects=False)
        query = client.get("/webui?x=1", follow_redirects=False)
        page = client.get("/webui/")
    assert (bare.status_code, bare.headers["location"]) == (308, "/webui/")
    assert (query.status_code, query.headers["location"]) == (308, "/webui/?x=1")
    assert page.status_code == 200 and "<html" in page.text.lower()
