"""The deployment's permission model enforced by a real server: each role may do its own work
through nats-py and the event log client, and the server refuses the rest."""

from __future__ import annotations

import io
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
from nats.js.api import AckPolicy, ConsumerConfig

from kz_events.eventlog import EventLog, LogOptions
from kz_events.server import EmbeddedServer
from kz_events.subjects import (
    EVENTS_STREAM,
    LOGS_BUCKET,
    PACKAGES_BUCKET,
    consumer_name,
    event_subject,
    submitted_filter,
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


async def test_runner_cannot_publish_accepted(login: Connect, provisioned: EventLog) -> None:
    """A runner key publishing an `accepted` event is refused and the stream does not get it."""
    runner = await login("runner-sm90")
    subject = submission("sm90", "accepted")
    await runner.refused(runner.js.publish(subject, b"{}"), subject)
    assert not await stored_on(provisioned, subject)


async def test_runner_publishes_claims_and_results_of_its_arch(
    login: Connect, provisioned: EventLog
) -> None:
    """A runner appends `claimed` and `result` for its own architecture."""
    runner = await login("runner-sm90")
    for kind in ("claimed", "result"):
        subject = submission("sm90", kind)
        await runner.js.publish(subject, b"{}")
        assert await stored_on(provisioned, subject)
    assert runner.errors == []


async def test_runner_cannot_claim_for_another_arch(login: Connect, provisioned: EventLog) -> None:
    """A runner of sm90 cannot append a claim for an sm80 submission."""
    runner = await login("runner-sm90")
    subject = submission("sm80", "claimed")
    await runner.refused(runner.js.publish(subject, b"{}"), subject)
    assert not await stored_on(provisioned, subject)


async def test_runner_works_its_own_queue_only(login: Connect, provisioned: EventLog) -> None:
    """A runner fetches, extends and acks tasks of its consumer, and cannot pull from another's."""
    await provisioned.js.publish(submission("sm90", "submitted"), b"{}")
    runner = await login("runner-sm90")
    own = await runner.js.pull_subscribe_bind(consumer_name("sm90"), stream=EVENTS_STREAM)
    [task] = await own.fetch(1, timeout=2)
    await task.in_progress()
    await task.ack_sync()
    assert (await own.consumer_info()).num_ack_pending == 0

    other = await runner.js.pull_subscribe_bind(consumer_name("sm80"), stream=EVENTS_STREAM)
    next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{EVENTS_STREAM}.{consumer_name('sm80')}"
    await runner.refused(other.fetch(1, timeout=REFUSED_WAIT_S), next_subject)


async def test_runner_reads_packages_and_writes_logs(
    login: Connect, provisioned: EventLog, passwords: dict[str, str], secured_server: EmbeddedServer
) -> None:
    """With its credentials the runner's event log gets a package, stores a log and
    heartbeats, but the server refuses it a package upload."""
    package = bytes(range(256)) * 1200
    await provisioned.put_object(PACKAGES_BUCKET, "a" * 64, io.BytesIO(package))
    elog = await EventLog.connect(
        secured_server.url,
        LogOptions(retry_fast=True),
        user="runner-sm90",
        password=passwords["runner-sm90"],
    )
    try:
        assert await elog.get_object_bytes(PACKAGES_BUCKET, "a" * 64) == package
        await elog.put_object(LOGS_BUCKET, "log-1", io.BytesIO(b"build ok\n" * 5000))
        assert await provisioned.get_object_bytes(LOGS_BUCKET, "log-1") == b"build ok\n" * 5000
        ack = await elog.js.publish("kz.live.task.sm90.t1", b"{}")
        assert ack.stream == "KZ_LIVE"
    finally:
        await elog.close()
    runner = await login("runner-sm90")
    store = await runner.js.object_store(PACKAGES_BUCKET)
    with pytest.raises(nats.errors.TimeoutError):
        await store.put("b" * 64, b"forged package")
    await runner.nc.flush()
    assert any(f'publish to "$o.{PACKAGES_BUCKET.lower()}.c.' in e for e in runner.errors)


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
        ("projector", "submitted", False),
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


async def test_runner_may_define_only_its_own_task_consumer(
    login: Connect, provisioned: EventLog
) -> None:
    """A runner can (re)create its arch's durable with its own filter, not another filter."""
    runner = await login("runner-sm90")
    name = consumer_name("sm90")
    own = ConsumerConfig(
        name=name,
        durable_name=name,
        filter_subject=submitted_filter("sm90"),
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=15,
        max_deliver=3,
    )
    info = await runner.js.add_consumer(EVENTS_STREAM, own)
    assert info.config.filter_subject == submitted_filter("sm90")
    stolen = ConsumerConfig(
        name=name,
        durable_name=name,
        filter_subject=submitted_filter("sm80"),
        ack_policy=AckPolicy.EXPLICIT,
    )
    subject = f"$JS.API.CONSUMER.CREATE.{EVENTS_STREAM}.{name}.{submitted_filter('sm80')}"
    await runner.refused(runner.js.add_consumer(EVENTS_STREAM, stolen), subject)
    unnamed = f"$JS.API.CONSUMER.CREATE.{EVENTS_STREAM}"
    await runner.refused(
        runner.js.add_consumer(EVENTS_STREAM, ConsumerConfig(ack_policy=AckPolicy.NONE)), unnamed
    )


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
