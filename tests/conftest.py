"""Fixtures shared by every suite: a real `nats-server` on a free port with a temp store."""

from __future__ import annotations

import ast
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

# Loaded up front: importing hypothesis lazily at session end (its pytest plugin does) hits a
# CPython 3.11.7 AST recursion bug inside pytest's assertion rewriter.
import hypothesis  # noqa: F401
import pytest

from kz_events.eventlog import EventLog, LogOptions
from kz_events.server import EmbeddedServer
from kz_package.pyparse import parse_python
from kz_testing.lanes import CPU_ENV, lane_cpu

# CPython 3.11.7's ast.parse shares its recursion-depth state between threads: in a test
# process the API's upload threads (validation, the tripwire) parse while pytest, hypothesis or
# inspect parse on the main thread. Every parse of the process takes the platform's one lock.
ast.parse = parse_python  # type: ignore[assignment]


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[EmbeddedServer]:
    """A fresh JetStream server for one test."""
    server = EmbeddedServer(tmp_path / "nats-store")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def event_log(nats_server: EmbeddedServer) -> AsyncIterator[EventLog]:
    """An `EventLog` connected to the test's server, streams ensured."""
    elog = await EventLog.connect(nats_server.url, LogOptions(retry_fast=True))
    await elog.ensure()
    try:
        yield elog
    finally:
        await elog.close()


LAYERS = ("unit", "integration", "system", "webui")


def pytest_configure(config: pytest.Config) -> None:
    """Each parallel test process judges on a CPU of its own: every runner, `kz up` and judge
    it starts reads `KZ_RUNNER_CPU` (two judges pinned to one CPU would measure each other)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker inherits the controller's setting
        os.environ[CPU_ENV] = str(lane_cpu())
    else:
        os.environ.setdefault(CPU_ENV, str(lane_cpu()))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` selects tests by layer marker: a test with none would silently never run."""
    unmarked = [
        item.nodeid for item in items if not any(item.get_closest_marker(m) for m in LAYERS)
    ]
    if unmarked:
        raise pytest.UsageError(
            f"tests without a layer marker ({', '.join(LAYERS)}) would never run in make test: "
            + ", ".join(unmarked)
        )
