"""Fixtures for the security suite: one `nats-server` started with the deployment's permission
model (`deploy/nats/accounts.conf`, rendered with known passwords, on one node), and the API
against a plain server as the API suite has it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from kz_api import create_app
from kz_events.cluster import render_permissions, role_users
from kz_events.eventlog import EventLog
from kz_events.server import EmbeddedServer


@pytest.fixture
def passwords() -> dict[str, str]:
    """A password per user of the rendered configuration."""
    return {user: f"pw-{user}" for user in role_users()}


@pytest.fixture
def deployed_server(tmp_path: Path, passwords: dict[str, str]) -> Iterator[EmbeddedServer]:
    """One JetStream server with the deployment's accounts, users and permissions."""
    with EmbeddedServer(tmp_path / "deployed", extra_config=render_permissions(passwords)) as s:
        yield s


# The API suite's helpers and its `api` fixture, for the tests of secure defaults.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
from api_helpers import SECRET, Api, make_settings  # noqa: E402


@pytest.fixture
def api_overrides() -> dict[str, Any]:
    """Settings a test module wants changed (override this fixture)."""
    return {}


@pytest.fixture
async def api(
    nats_server: EmbeddedServer, event_log: EventLog, tmp_path: Path, api_overrides: dict[str, Any]
) -> AsyncIterator[Api]:
    """The app against the test's NATS server, behind Litestar's async test client."""
    settings = make_settings(nats_server, tmp_path, **api_overrides)
    app = create_app(settings, lease_secret=SECRET)
    async with AsyncTestClient(app, raise_server_exceptions=False) as client:
        yield Api(client, event_log, settings, tmp_path)
