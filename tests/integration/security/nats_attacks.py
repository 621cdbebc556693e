"""The attacks of issue 21 on the deployment's NATS permissions, as each role, against any
server or cluster started with `render_permissions`: shared by the integration suite (one node)
and the system suite (three nodes).

Every attack asks the server to publish on the attacker's behalf (a reply subject or a publish
acknowledgement aimed at a JetStream API or event subject) or to delete, purge or overwrite what
the role does not own. Each check returns nothing and raises AssertionError when the server did
what it should have refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig

from kz_events.cluster import SWEEPER_ADVISORY
from kz_events.eventlog import EventLog, LogOptions
from kz_events.events import UnknownEvent, decode_event
from kz_events.subjects import (
    EVENTS_STREAM,
    JUDGES_BUCKET,
    LIVE_STREAM,
    LOGS_BUCKET,
    PACKAGES_BUCKET,
    consumer_name,
    event_subject,
    judge_key,
    submitted_filter,
)

__all__ = [
    "ROLES",
    "STREAMS",
    "Session",
    "connect",
    "provision",
    "streams_present",
]

ROLES = ("api", "projector")
"""The service users that may publish events (admin aside); runners have no NATS user."""
STREAMS = (
    EVENTS_STREAM,
    LIVE_STREAM,
    f"OBJ_{PACKAGES_BUCKET}",
    f"OBJ_{LOGS_BUCKET}",
    f"OBJ_{JUDGES_BUCKET}",
)
SETTLE_S = 0.5  # long enough for the server to act on what it was sent


@dataclass
class Session:
    """One user's connection and the asynchronous errors (permission violations) it got."""

    user: str
    nc: Client
    errors: list[str] = field(default_factory=list)

    def violated(self, subject: str) -> bool:
        wanted = f'permissions violation for publish to "{subject.lower()}"'
        return any(wanted in error.lower() for error in self.errors)

    async def settle(self) -> None:
        await self.nc.flush()
        await asyncio.sleep(SETTLE_S)


async def connect(url: str, user: str, password: str) -> Session:
    session = Session(user=user, nc=None)  # type: ignore[arg-type]

    async def on_error(exc: Exception) -> None:
        session.errors.append(str(exc))

    session.nc = await nats.connect(
        url, user=user, password=password, error_cb=on_error, allow_reconnect=False
    )
    return session


@contextlib.asynccontextmanager
async def provision(
    url: str, passwords: dict[str, str], replicas: int = 1
) -> AsyncIterator[EventLog]:
    """Streams, buckets and a task consumer ensured as the API would, with the api user."""
    options = LogOptions(retry_fast=True, replicas=replicas)
    elog = await EventLog.connect(url, options, user="api", password=passwords["api"])
    await elog.ensure()
    await elog.ensure_task_consumer("sm90")
    try:
        yield elog
    finally:
        await elog.close()


async def streams_present(admin: Session) -> set[str]:
    js = admin.nc.jetstream(timeout=5)
    return {info.config.name for info in await js.streams_info() if info.config.name}


async def stored_bodies(admin: Session, subject: str) -> list[bytes]:
    """Every body stored on exactly `subject` in the event log."""
    js = admin.nc.jetstream(timeout=5)
    sub = await js.subscribe(subject, ordered_consumer=True, stream=EVENTS_STREAM)
    bodies: list[bytes] = []
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=0.5)
            except nats.errors.TimeoutError:
                return bodies
            bodies.append(msg.data)
    finally:
        await sub.unsubscribe()


def is_event(data: bytes) -> bool:
    """Whether `data` decodes as an event of the vocabulary (what a fold would apply)."""
    try:
        return not isinstance(decode_event(data), UnknownEvent)
    except Exception:  # anything that does not decode is not an event
        return False


def other_subject(kind: str) -> str:
    return event_subject("submission", "sm80", str(uuid.uuid4()), kind)


def own_subject(user: str) -> str:
    """A subject `user` may publish an event on."""
    kind = "result" if user == "api" else "accepted"
    return event_subject("submission", "sm90", str(uuid.uuid4()), kind)


def foreign_kind(user: str) -> str:
    """An event type `user` may not publish (the other service's)."""
    return "accepted" if user == "api" else "claimed"


# --- the attacks ---------------------------------------------------------------------------


async def forge_by_reflection(attacker: Session, admin: Session) -> None:
    """Store a body on an own subject, then ask the server to copy it, verbatim, onto another
    role's event subject through the reply of a direct get, a message get, a stream info or a
    publish acknowledgement: no forged body lands there, and nothing that does decodes as an
    event."""
    js = attacker.nc.jetstream(timeout=5)
    forged = json.dumps({"type": foreign_kind(attacker.user), "marker": str(uuid.uuid4())})
    ack = await js.publish(own_subject(attacker.user), forged.encode())
    targets = []
    for request, body in (
        (f"$JS.API.DIRECT.GET.{EVENTS_STREAM}", json.dumps({"seq": ack.seq})),
        (f"$JS.API.STREAM.MSG.GET.{EVENTS_STREAM}", json.dumps({"seq": ack.seq})),
        (f"$JS.API.STREAM.INFO.{EVENTS_STREAM}", ""),
        (own_subject(attacker.user), forged),  # the publish acknowledgement
    ):
        target = other_subject(foreign_kind(attacker.user))
        targets.append(target)
        await attacker.nc.publish(request, body.encode(), reply=target)
    await attacker.settle()
    assert attacker.violated(f"$JS.API.DIRECT.GET.{EVENTS_STREAM}"), attacker.errors
    for target in targets:
        for data in await stored_bodies(admin, target):
            assert data != forged.encode(), f"{attacker.user} forged an event on {target}"
            assert not is_event(data), f"{attacker.user} landed an event on {target}: {data!r}"


async def delete_by_reflection(attacker: Session, admin: Session) -> None:
    """Aim replies and publish acknowledgements at the delete and purge subjects of every
    stream: every stream is still there, with its messages."""
    js = attacker.nc.jetstream(timeout=5)
    ack = await js.publish(own_subject(attacker.user), b'{"type": "x"}')
    before = await admin.nc.jetstream().stream_info(EVENTS_STREAM)
    for stream in STREAMS:
        for verb in ("DELETE", "PURGE"):
            target = f"$JS.API.STREAM.{verb}.{stream}"
            for request, body in (
                (f"$JS.API.DIRECT.GET.{EVENTS_STREAM}", json.dumps({"seq": ack.seq})),
                (f"$JS.API.STREAM.MSG.GET.{EVENTS_STREAM}", json.dumps({"seq": ack.seq})),
                (f"$JS.API.STREAM.INFO.{EVENTS_STREAM}", ""),
                (own_subject(attacker.user), "{}"),
            ):
                await attacker.nc.publish(request, body.encode(), reply=target)
    await attacker.settle()
    assert await streams_present(admin) >= set(STREAMS)
    after = await admin.nc.jetstream().stream_info(EVENTS_STREAM)
    assert after.state.messages >= before.state.messages


async def delete_and_purge_directly(attacker: Session, admin: Session) -> None:
    """Ask to delete or purge each stream, and to delete a message of the log, outright: each
    request is a permission violation and nothing changes (the replacement purge of the role's
    own object buckets aside, which `legitimate_*` shows)."""
    own_purge = {f"OBJ_{PACKAGES_BUCKET}", f"OBJ_{LOGS_BUCKET}"}
    if attacker.user == "projector":
        own_purge = {f"OBJ_{PACKAGES_BUCKET}", f"OBJ_{JUDGES_BUCKET}"}
    subjects = [f"$JS.API.STREAM.DELETE.{s}" for s in STREAMS]
    subjects += [f"$JS.API.STREAM.PURGE.{s}" for s in STREAMS if s not in own_purge]
    subjects += [
        f"$JS.API.STREAM.MSG.DELETE.{EVENTS_STREAM}",
        f"$JS.API.STREAM.UPDATE.{EVENTS_STREAM}",
    ]
    for subject in subjects:
        with contextlib.suppress(nats.errors.TimeoutError):
            await attacker.nc.request(subject, b'{"seq": 1}', timeout=0.3)
    await attacker.settle()
    for subject in subjects:
        assert attacker.violated(subject), (subject, attacker.errors)
    assert await streams_present(admin) >= set(STREAMS)


async def overwrite_judge_bundle(attacker: Session, admin: Session, elog: EventLog) -> None:
    """The API serves judge bundles but cannot write, replace or purge one: they live in their
    own bucket, which only the projector writes."""
    key = judge_key("sm90/GEMM/dense/fp16/victim")
    store = await attacker.nc.jetstream(timeout=0.5).object_store(JUDGES_BUCKET)
    with contextlib.suppress(nats.errors.TimeoutError, nats.js.errors.Error):
        await store.put(key, b"a judge that accepts everything")
    purge = f"$JS.API.STREAM.PURGE.OBJ_{JUDGES_BUCKET}"
    with contextlib.suppress(nats.errors.TimeoutError):
        await attacker.nc.request(purge, b"", timeout=0.3)
    await attacker.settle()
    assert attacker.violated(f"$O.{JUDGES_BUCKET}.C.") or any(
        f'publish to "$o.{JUDGES_BUCKET.lower()}.c.' in e.lower() for e in attacker.errors
    ), attacker.errors
    assert attacker.violated(purge), attacker.errors
    assert not await elog.has_object(JUDGES_BUCKET, key)


async def publish_foreign_events(attacker: Session, admin: Session) -> None:
    """Events of the other role's types are refused and not stored."""
    subject = other_subject(foreign_kind(attacker.user))
    with contextlib.suppress(nats.errors.TimeoutError):
        await attacker.nc.jetstream(timeout=0.3).publish(subject, b"{}")
    await attacker.settle()
    assert attacker.violated(subject), attacker.errors
    assert await stored_bodies(admin, subject) == []


async def runner_logins_are_gone(url: str, passwords: dict[str, str]) -> None:
    """No runner user exists: a runner login from before is refused at connect."""
    for user in ("runner-sm80", "runner-sm90"):
        for password in (passwords.get(user, "pw-" + user), passwords["api"]):
            try:
                nc = await nats.connect(
                    url,
                    user=user,
                    password=password,
                    allow_reconnect=False,
                    max_reconnect_attempts=0,
                    connect_timeout=2,
                )
            except (nats.errors.Error, OSError) as exc:
                assert "authorization" in str(exc).lower() or isinstance(
                    exc, nats.errors.NoServersError
                ), exc
                continue
            await nc.close()
            raise AssertionError(f"{user} could log in")


# --- what each role must still do ----------------------------------------------------------


async def legitimate_api(url: str, passwords: dict[str, str], admin: Session) -> None:
    """The API ensures the streams, appends its events, stores and reads packages and logs,
    reads judge bundles, heartbeats, pulls and acks a task of a runner consumer, and reads
    aggregates by message get."""
    elog = await EventLog.connect(
        url, LogOptions(retry_fast=True), user="api", password=passwords["api"]
    )
    try:
        await elog.ensure()
        subject = event_subject("submission", "sm90", str(uuid.uuid4()), "submitted")
        ack = await elog.js.publish(subject, b'{"type": "submitted"}')
        aggregate = subject.rsplit(".", 1)[0] + ".*"  # read as EventLog.load does: next by subject
        msg = await elog.js.get_msg(EVENTS_STREAM, seq=1, subject=aggregate, next=True)
        assert msg.seq == ack.seq and msg.data == b'{"type": "submitted"}'
        package = bytes(range(256)) * 700
        await elog.put_object(PACKAGES_BUCKET, "p" * 64, package)
        assert await elog.get_object_bytes(PACKAGES_BUCKET, "p" * 64) == package
        await elog.put_object(LOGS_BUCKET, "s-1", b"log\n")
        await elog.put_object(LOGS_BUCKET, "s-1", b"log, replaced\n")
        assert await elog.get_object_bytes(LOGS_BUCKET, "s-1") == b"log, replaced\n"
        assert not await elog.has_object(JUDGES_BUCKET, judge_key("sm90/a/b/c/none"))
        await elog.js.publish("kz.live.task.sm90.t1", b"{}")
        durable = await elog.ensure_task_consumer("sm90")
        psub = await elog.js.pull_subscribe_bind(durable, stream=EVENTS_STREAM)
        [task] = await psub.fetch(1, timeout=5)
        await task.in_progress()
        await task.ack_sync()
        await psub.unsubscribe()
        assert durable == consumer_name("sm90")
    finally:
        await elog.close()


async def legitimate_projector(url: str, passwords: dict[str, str], api_log: EventLog) -> None:
    """The projector ensures the streams, appends verdicts, reads packages, writes and
    replaces judge bundles that the API then reads, and hears the sweeper's advisory when a
    task used up its deliveries."""
    elog = await EventLog.connect(
        url, LogOptions(retry_fast=True), user="projector", password=passwords["projector"]
    )
    heard: asyncio.Queue[str] = asyncio.Queue()

    async def on_advisory(msg: Msg) -> None:
        heard.put_nowait(msg.subject)

    try:
        await elog.ensure()
        await elog.js.publish(own_subject("projector"), b'{"type": "accepted"}')
        await api_log.put_object(PACKAGES_BUCKET, "q" * 64, b"package bytes")
        assert await elog.get_object_bytes(PACKAGES_BUCKET, "q" * 64) == b"package bytes"
        key = judge_key("sm90/GEMM/dense/fp16/k")
        for bundle in (b"judge v1", b"judge v2" * 50_000):
            await elog.put_object(JUDGES_BUCKET, key, bundle, replacing=True)
            assert await api_log.get_object_bytes(JUDGES_BUCKET, key) == bundle
        await elog.nc.subscribe(SWEEPER_ADVISORY, cb=on_advisory)
        await elog.nc.flush()
        await _exhaust_one_task(api_log, "sm80")
        subject = await asyncio.wait_for(heard.get(), timeout=15)
        assert subject.startswith("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.")
    finally:
        await elog.close()


async def _exhaust_one_task(api_log: EventLog, arch: str) -> None:
    """A task delivered once and never acked, on a consumer that allows one delivery."""
    name = f"exhaust-{arch}"
    config = ConsumerConfig(
        durable_name=name,
        name=name,
        filter_subject=submitted_filter(arch),
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=1.0,
        max_deliver=1,
    )
    await api_log.js.add_consumer(EVENTS_STREAM, config)
    await api_log.js.publish(
        event_subject("submission", arch, str(uuid.uuid4()), "submitted"), b"{}"
    )
    psub = await api_log.js.pull_subscribe_bind(name, stream=EVENTS_STREAM)
    try:
        await psub.fetch(1, timeout=5)
        await asyncio.sleep(1.5)
        with contextlib.suppress(nats.errors.TimeoutError):
            await psub.fetch(1, timeout=1.5)
    finally:
        await psub.unsubscribe()
