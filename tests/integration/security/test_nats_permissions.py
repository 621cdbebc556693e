"""Issue 21's attacks on the event log, as each NATS role of the deployment, against a real
server running `deploy/`'s permission model on one node: each is refused, and each role's own
work still goes through. tests/system/test_cluster_permissions.py runs the same attacks on a
three-node cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from nats_attacks import (
    ROLES,
    Session,
    connect,
    delete_and_purge_directly,
    delete_by_reflection,
    forge_by_reflection,
    legitimate_api,
    legitimate_projector,
    overwrite_judge_bundle,
    provision,
    publish_foreign_events,
    runner_logins_are_gone,
)

from kz_events.eventlog import EventLog
from kz_events.server import EmbeddedServer

pytestmark = pytest.mark.integration

Login = Callable[[str], Awaitable[Session]]


@pytest.fixture
async def api_log(
    deployed_server: EmbeddedServer, passwords: dict[str, str]
) -> AsyncIterator[EventLog]:
    async with provision(deployed_server.url, passwords) as elog:
        yield elog


@pytest.fixture
async def login(
    deployed_server: EmbeddedServer, passwords: dict[str, str], api_log: EventLog
) -> AsyncIterator[Login]:
    sessions: list[Session] = []

    async def open_session(user: str) -> Session:
        session = await connect(deployed_server.url, user, passwords[user])
        sessions.append(session)
        return session

    yield open_session
    for session in sessions:
        await session.nc.close()


@pytest.mark.parametrize("role", ROLES)
async def test_no_role_forges_an_event_by_reflection(login: Login, role: str) -> None:
    """A body stored on a role's own subject cannot be copied onto another role's event
    subject by a direct get (refused), a message get, a stream info or a publish
    acknowledgement aimed there (what lands is no event)."""
    await forge_by_reflection(await login(role), await login("admin"))


@pytest.mark.parametrize("role", ROLES)
async def test_no_role_deletes_a_stream_by_reflection(login: Login, role: str) -> None:
    """Replies and acknowledgements aimed at every stream's delete and purge subjects leave
    every stream in place with its messages."""
    await delete_by_reflection(await login(role), await login("admin"))


@pytest.mark.parametrize("role", ROLES)
async def test_no_role_deletes_purges_or_updates_outright(login: Login, role: str) -> None:
    """Stream delete, update, message delete and purge (other than replacing the role's own
    objects) are permission violations."""
    await delete_and_purge_directly(await login(role), await login("admin"))


async def test_the_api_cannot_touch_judge_bundles(login: Login, api_log: EventLog) -> None:
    """Judge bundles live apart from uploads: the api user can neither write nor purge them."""
    await overwrite_judge_bundle(await login("api"), await login("admin"), api_log)


@pytest.mark.parametrize("role", ROLES)
async def test_roles_publish_only_their_event_types(login: Login, role: str) -> None:
    """The API cannot append verdicts, the projector cannot append intake events."""
    await publish_foreign_events(await login(role), await login("admin"))


async def test_runners_have_no_nats_login(
    deployed_server: EmbeddedServer, passwords: dict[str, str]
) -> None:
    """The runner users are gone: runners reach the platform through the API with a key."""
    await runner_logins_are_gone(deployed_server.url, passwords)


async def test_the_api_still_does_its_work(
    login: Login, deployed_server: EmbeddedServer, passwords: dict[str, str]
) -> None:
    """Streams, intake events, packages, logs, heartbeats, task pulls and acks, reads."""
    await legitimate_api(deployed_server.url, passwords, await login("admin"))


async def test_the_projector_still_does_its_work(
    deployed_server: EmbeddedServer, passwords: dict[str, str], api_log: EventLog
) -> None:
    """Verdicts, package reads, judge bundles written and replaced, the sweeper's advisory."""
    await legitimate_projector(deployed_server.url, passwords, api_log)
