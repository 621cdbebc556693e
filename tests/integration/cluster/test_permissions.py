"""The deployment's permission model enforced by a real server: each service may do its own work
through nats-py and the event log client, and the server refuses the rest (the attacks of issue
21 are in tests/integration/security/)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext

from kz_events.eventlog import EventLog, LogOptions
from kz_events.server import EmbeddedServer
from kz_events.subjects import (
    EVENTS_STREAM,
    event_subject,
)

pytestmark = pytest.mark.integration

REFUSED_WAIT_S = 0.5


@dataclass
class Session:
    """One user's connection and the asynchronous errors the server sent it."""

    nc: Client
    errors: list[str] = field(default_factory=list)

    @property
    def js(self) -> JetStreamContext:
        return self.nc.jetstream(timeout=REFUSED_WAIT_S)

    async def refused(self, call: Awaitable[Any], subject: str) -> None:
        """`call` gets no answer, and the server reports a violation naming `subject`."""
        with pytest.raises(nats.errors.TimeoutError):
            await call
        await self.nc.flush()
        expected = f'permissions violation for publish to "{subject.lower()}"'
        assert any(expected in error for error in self.errors), self.errors


Connect = Callable[[str], Awaitable[Session]]


@pytest.fixture
async def login(
    secured_server: EmbeddedServer, passwords: dict[str, str]
) -> AsyncIterator[Connect]:
    """Connects as a named user of the rendered configuration; closes every session after."""
    sessions: list[Session] = []

    async def connect(user: str) -> Session:
        session = Session(nc=None)  # type: ignore[arg-type]

        async def on_error(exc: Exception) -> None:
            session.errors.append(str(exc))

        session.nc = await nats.connect(
            secured_server.url, user=user, password=passwords[user], error_cb=on_error
        )
        sessions.append(session)
        return session

    yield connect
    for session in sessions:
        await session.nc.close()


@pytest.fixture
async def provisioned(
    secured_server: EmbeddedServer, passwords: dict[str, str]
) -> AsyncIterator[EventLog]:
    """The API's event log: streams, buckets and both task consumers ensured with its user."""
    elog = await EventLog.connect(
        secured_server.url,
        LogOptions(retry_fast=True),
        user="api",
        password=passwords["api"],
    )
    await elog.ensure()
    for arch in ("sm80", "sm90"):
        await elog.ensure_task_consumer(arch)
    try:
        yield elog
    finally:
        await elog.close()


def submission(arch: str, kind: str) -> str:
    return event_subject("submission", arch, str(uuid.uuid4()), kind)


async def stored_on(elog: EventLog, subject: str) -> bool:
    try:
        await elog.js.get_last_msg(EVENTS_STREAM, subject)
    except nats.js.errors.NotFoundError:
        return False
    return True


@pytest.mark.parametrize(
    ("user", "kind", "allowed"),
    [
        ("api", "submitted", True),
        ("api", "cancelled", True),
        ("api", "accepted", False),
        ("api", "committed", False),
        ("projector", "accepted", True),
        ("projector", "rejected", True),
        ("projector", "failed", True),
        ("projector", "committed", True),
        ("projector", "submitted", True),  # it opens confirmation runs
        ("projector", "confirmed", True),
        ("projector", "claimed", False),
    ],
)
async def test_services_append_only_their_event_types(
    login: Connect, provisioned: EventLog, user: str, kind: str, allowed: bool
) -> None:
    """The API writes intake events, the projector verdicts and commits, neither the other's."""
    session = await login(user)
    subject = submission("sm90", kind)
    if allowed:
        await session.js.publish(subject, b"{}")
    else:
        await session.refused(session.js.publish(subject, b"{}"), subject)
    assert await stored_on(provisioned, subject) is allowed


async def test_services_cannot_delete_or_reconfigure_the_log(
    login: Connect, provisioned: EventLog
) -> None:
    """Only the admin may delete or update streams; the API and projector are refused."""
    for user in ("api", "projector"):
        session = await login(user)
        delete = f"$JS.API.STREAM.DELETE.{EVENTS_STREAM}"
        await session.refused(session.js.delete_stream(EVENTS_STREAM), delete)
        info = await provisioned.js.stream_info(EVENTS_STREAM)
        update = f"$JS.API.STREAM.UPDATE.{EVENTS_STREAM}"
        await session.refused(session.js.update_stream(info.config), update)
    admin = await login("admin")
    assert (await admin.js.stream_info(EVENTS_STREAM)).config.deny_delete is True


async def test_every_service_ensures_the_streams_without_updating_them(
    provisioned: EventLog, passwords: dict[str, str], secured_server: EmbeddedServer
) -> None:
    """After the API created them, the projector's start-up ensure succeeds with create-only
    rights, because the configuration it asks for is the one already there."""
    elog = await EventLog.connect(
        secured_server.url,
        LogOptions(retry_fast=True),
        user="projector",
        password=passwords["projector"],
    )
    try:
        await elog.ensure()
        assert (await elog.js.stream_info(EVENTS_STREAM)).config.deny_purge is True
    finally:
        await elog.close()
