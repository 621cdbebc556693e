"""Fixtures for the API suite: the app running against a real NATS server, behind Litestar's
async test client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from api_helpers import SECRET, Api, make_settings
from litestar.testing import AsyncTestClient

from kz_api import create_app
from kz_events.eventlog import EventLog
from kz_events.server import EmbeddedServer


@pytest.fixture
def api_overrides() -> dict[str, Any]:
    """Settings a test module wants changed (override this fixture)."""
    return {}


@pytest.fixture
async def api(
    nats_server: EmbeddedServer, event_log: EventLog, tmp_path: Path, api_overrides: dict[str, Any]
) -> AsyncIterator[Api]:
    """The app running against the test's NATS server, behind Litestar's async test client."""
    settings = make_settings(nats_server, tmp_path, **api_overrides)
    app = create_app(settings, lease_secret=SECRET)
    async with AsyncTestClient(app, raise_server_exceptions=False) as client:
        yield Api(client, event_log, settings, tmp_path)
