"""Fixtures for the cluster suite: a three-node JetStream cluster on loopback, and one server
running the deployment's permission model with known passwords."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kz_events.cluster import LocalCluster, render_permissions, role_users
from kz_events.server import EmbeddedServer


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """Three `nats-server` processes forming one JetStream cluster, stopped after the test."""
    with LocalCluster(tmp_path / "cluster", size=3) as local:
        yield local


@pytest.fixture
def passwords() -> dict[str, str]:
    """A password per user of the rendered configuration."""
    return {user: f"pw-{user}" for user in role_users()}


@pytest.fixture
def secured_server(tmp_path: Path, passwords: dict[str, str]) -> Iterator[EmbeddedServer]:
    """One JetStream server started with the rendered permissions."""
    server = EmbeddedServer(tmp_path / "secured", extra_config=render_permissions(passwords))
    with server:
        yield server
