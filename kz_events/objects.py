"""Reading objects from a NATS object store with message gets, and a cache keyed by digest.

nats-py reads an object through an ordered consumer made for that one read: a consumer created
and deleted on the server per package fetch, the most expensive thing a runner asked of NATS.
Packages, judge bundles and logs are a chunk or a few, so here an object is read as its meta
record and then each chunk by a message get (next by subject) — two requests for a package.
Large objects still go through the consumer, where one request per chunk would cost more.

The object's meta record carries the SHA-256 of its content, so a reader can keep small objects
it has read and answer a later read of the same key from memory after one meta lookup: the
judge bundle of a kernel is read by every task and every upload for that kernel and changes
only when main does.

Writing is the mirror: nats-py first asks for the key's meta record (to purge the chunks of an
object it replaces) and reads the source through a worker thread. Most keys written here are
new — a package under its digest, a log under its attempt — so `put_new_object` publishes the
chunks and a meta record that the server stores only if the key has none yet; a key that does
exist is left to nats-py's put, which replaces it properly.

A package is named by the SHA-256 of its bytes and never replaced, so when it fits one chunk
its chunk subject is derived from that name (`content_nuid`) instead of a random id: a reader
that knows the name fetches the chunk in one request and checks it against the name, without
the meta record (which is still written, so nats-py reads it too). The chunk is stored only
if its subject is empty, so two writers of one package leave one chunk, and a failed write's
chunk stays for the next try to use.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from collections import OrderedDict
from datetime import UTC, datetime

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import Header, ObjectInfo, ObjectMetaOptions
from nats.js.object_store import (
    OBJ_CHUNKS_PRE_TEMPLATE,
    OBJ_DEFAULT_CHUNK_SIZE,
    OBJ_DIGEST_TEMPLATE,
    OBJ_DIGEST_TYPE,
    OBJ_META_PRE_TEMPLATE,
    OBJ_STREAM_TEMPLATE,
    ObjectStore,
)

from kz_events.errors import ObjectCorrupt
from kz_events.expect import SubjectMoved, publish_expecting
from kz_events.ids import is_digest

__all__ = [
    "SMALL_OBJECT_BYTES",
    "DigestCache",
    "ObjectChanged",
    "content_nuid",
    "put_new_object",
    "read_small_object",
]


MESSAGE_GET_CHUNKS = 8  # objects of more chunks are read through a consumer
SMALL_OBJECT_BYTES = MESSAGE_GET_CHUNKS * OBJ_DEFAULT_CHUNK_SIZE  # written by put_new_object
CACHED_OBJECT_BYTES = 1 << 20  # the largest object kept in the cache


def content_nuid(key: str) -> str:
    """The chunk subject token of a one-chunk object named by the SHA-256 of its bytes."""
    return f"sha256-{key}"


async def _by_content(js: JetStreamContext, bucket: str, key: str) -> bytes | None:
    """The object named by its SHA-256 `key`, read from its derived chunk subject in one
    request; None when that subject holds nothing that hashes to `key` (an object stored
    with a random chunk id, of more than one chunk, or none)."""
    subject = OBJ_CHUNKS_PRE_TEMPLATE.format(bucket=bucket, obj=content_nuid(key))
    stream = OBJ_STREAM_TEMPLATE.format(bucket=bucket)
    try:
        msg = await js.get_msg(stream, seq=1, subject=subject, next=True)
    except nats.js.errors.NotFoundError:
        return None
    data = msg.data or b""
    return data if hashlib.sha256(data).hexdigest() == key else None


class ObjectChanged(Exception):
    """The object was replaced or deleted while it was read; reading it again will succeed."""


class DigestCache:
    """Small objects by (bucket, key), each with the digest it had; oldest use leaves first."""

    def __init__(self, max_bytes: int = 32 << 20) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._items: OrderedDict[tuple[str, str], tuple[str, bytes]] = OrderedDict()

    def get(self, bucket: str, key: str, digest: str) -> bytes | None:
        item = self._items.get((bucket, key))
        if item is None or item[0] != digest:
            return None
        self._items.move_to_end((bucket, key))
        return item[1]

    def put(self, bucket: str, key: str, digest: str, data: bytes) -> None:
        if len(data) > CACHED_OBJECT_BYTES:
            return
        old = self._items.pop((bucket, key), None)
        if old is not None:
            self.size -= len(old[1])
        self._items[(bucket, key)] = (digest, data)
        self.size += len(data)
        while self.size > self.max_bytes:
            _, (_, dropped) = self._items.popitem(last=False)
            self.size -= len(dropped)


def _expected_sha256(info: ObjectInfo) -> bytes:
    digest = info.digest or ""
    if not digest.upper().startswith(OBJ_DIGEST_TYPE.upper()):
        raise ObjectCorrupt(f"object {info.name!r}: its meta record has no SHA-256 digest")
    return base64.urlsafe_b64decode(digest[len(OBJ_DIGEST_TYPE) :])


async def _chunks_by_message_get(js: JetStreamContext, bucket: str, info: ObjectInfo) -> bytes:
    stream = OBJ_STREAM_TEMPLATE.format(bucket=bucket)
    subject = OBJ_CHUNKS_PRE_TEMPLATE.format(bucket=bucket, obj=info.nuid)
    parts: list[bytes] = []
    seq = 1
    for _ in range(info.chunks or 0):
        try:
            msg = await js.get_msg(stream, seq=seq, subject=subject, next=True)
        except nats.js.errors.NotFoundError as exc:
            raise ObjectChanged(f"object {info.name!r} lost a chunk while it was read") from exc
        parts.append(msg.data or b"")
        seq = int(msg.seq or 0) + 1
    return b"".join(parts)


async def read_small_object(
    js: JetStreamContext, store: ObjectStore, bucket: str, key: str, cache: DigestCache
) -> bytes | None:
    """The object's content checked against its digest, or None for one too large (or a link)
    to read here, which the caller streams through nats-py instead.

    Raises nats' `ObjectNotFoundError` when there is no such object and `ObjectChanged` when
    it was replaced during the read (worth another try); `ObjectCorrupt` when the content
    does not match the digest.
    """
    if is_digest(key) and (data := await _by_content(js, bucket, key)) is not None:
        return data
    info = await store.get_info(key)
    if info.is_link() or (info.chunks or 0) > MESSAGE_GET_CHUNKS:
        return None
    digest = info.digest or ""
    cached = cache.get(bucket, key, digest)
    if cached is not None:
        return cached
    data = await _chunks_by_message_get(js, bucket, info) if info.size else b""
    if len(data) != (info.size or 0) or hashlib.sha256(data).digest() != _expected_sha256(info):
        raise ObjectCorrupt(
            f"object {key!r} in {bucket}: its {len(data)} bytes do not match the size "
            f"{info.size} and SHA-256 digest of its meta record"
        )
    cache.put(bucket, key, digest, data)
    return data


async def _put_content_chunk(js: JetStreamContext, bucket: str, subject: str, data: bytes) -> None:
    """Publish the one chunk of an object named by its content, unless its subject holds it
    already (another writer's, or a failed try's: the same bytes either way)."""
    if not data:
        return
    expect_new: dict[str, str] = {Header.EXPECTED_LAST_SUBJECT_SEQUENCE: "0"}
    stream = OBJ_STREAM_TEMPLATE.format(bucket=bucket)
    for _ in range(3):
        try:
            await publish_expecting(js, subject, data, expect_new)
            return
        except SubjectMoved:
            try:  # there, unless another writer's chunk was refused after all
                await js.get_msg(stream, seq=1, subject=subject, next=True)
                return
            except nats.js.errors.NotFoundError:
                continue
    raise ObjectChanged(f"the chunk subject {subject} kept changing while it was written")


async def put_new_object(js: JetStreamContext, bucket: str, key: str, data: bytes) -> bool:
    """Store `data` under `key` if the bucket has no object `key`; False (and nothing stored)
    when it has one. The meta record is the same nats-py writes, so either reads it."""
    sha256 = hashlib.sha256(data)
    by_content = len(data) <= OBJ_DEFAULT_CHUNK_SIZE and sha256.hexdigest() == key
    # nats-py's own id source for chunk subjects, unless the content names the chunk
    nuid = content_nuid(key) if by_content else js._nc._nuid.next().decode()
    chunks = OBJ_CHUNKS_PRE_TEMPLATE.format(bucket=bucket, obj=nuid)
    info = ObjectInfo(
        name=key,
        bucket=bucket,
        nuid=nuid,
        size=len(data),
        chunks=0,
        mtime=datetime.now(UTC).isoformat(),
        digest=OBJ_DIGEST_TEMPLATE.format(
            digest=base64.urlsafe_b64encode(sha256.digest()).decode()
        ),
        options=ObjectMetaOptions(max_chunk_size=OBJ_DEFAULT_CHUNK_SIZE),
    )
    meta = OBJ_META_PRE_TEMPLATE.format(
        bucket=bucket, obj=base64.urlsafe_b64encode(key.encode()).decode()
    )
    try:
        if by_content:
            await _put_content_chunk(js, bucket, chunks, data)
            info.chunks = 1 if data else 0
        else:
            for start in range(0, len(data), OBJ_DEFAULT_CHUNK_SIZE):
                await js.publish(chunks, data[start : start + OBJ_DEFAULT_CHUNK_SIZE])
                info.chunks = (info.chunks or 0) + 1
        await publish_expecting(
            js,
            meta,
            json.dumps(info.as_dict()).encode(),
            {
                Header.ROLLUP: "sub",
                Header.EXPECTED_LAST_SUBJECT_SEQUENCE: "0",  # only if the key is new
            },
        )
    except BaseException as exc:
        if not by_content:  # a derived subject's chunk is the same whoever stored it
            with contextlib.suppress(Exception):  # what is not purged is never referenced
                await js.purge_stream(OBJ_STREAM_TEMPLATE.format(bucket=bucket), subject=chunks)
        if isinstance(exc, SubjectMoved):
            return False
        raise
    return True
