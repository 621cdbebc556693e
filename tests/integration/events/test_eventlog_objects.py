"""Objects beside the log: streaming put/get of packages and logs, with bounded memory."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kz_events.errors import ObjectCorrupt, ObjectNotFound
from kz_events.eventlog import EventLog
from kz_events.objects import content_nuid
from kz_events.server import EmbeddedServer
from kz_events.subjects import LOGS_BUCKET, PACKAGES_BUCKET

pytestmark = pytest.mark.integration

MIB = 1024 * 1024

# Runs in a fresh interpreter so that its peak RSS measures this round trip alone.
ROUND_TRIP = """
import asyncio, hashlib, json, os, resource, sys
from pathlib import Path
from kz_events.eventlog import EventLog, LogOptions

def peak_kib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

def sha256_of(path):
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()

async def main(url, work, size_mib):
    source, copy = work / "source.bin", work / "copy.bin"
    with source.open("wb") as handle:
        for _ in range(size_mib):
            handle.write(os.urandom(1 << 20))
    digest = sha256_of(source)
    elog = await EventLog.connect(url, LogOptions(retry_fast=True))
    await elog.ensure()
    await elog.has_object("KZ_PACKAGES", "warm-up")
    baseline = peak_kib()
    size = await elog.put_object("KZ_PACKAGES", digest, source)
    after_put = peak_kib()
    with copy.open("wb") as sink:
        got = await elog.get_object("KZ_PACKAGES", digest, sink)
    after_get = peak_kib()
    await elog.close()
    print(json.dumps({
        "size": size, "got": got, "same": sha256_of(copy) == digest,
        "baseline_kib": baseline, "put_growth_kib": after_put - baseline,
        "get_growth_kib": after_get - baseline,
    }))

asyncio.run(main(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])))
"""


def test_fifty_mib_round_trip_with_bounded_memory(
    nats_server: EmbeddedServer, tmp_path: Path
) -> None:
    """A 50 MiB object streams from a file to the store and back with RSS growth far below that."""
    out = subprocess.run(
        [sys.executable, "-c", ROUND_TRIP, nats_server.url, str(tmp_path), "50"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["size"] == report["got"] == 50 * MIB
    assert report["same"]
    # Reading the object whole would grow RSS by > 100 MiB; streaming stays near 20 MiB (the
    # ordered consumer's flow-control window), whatever the object's size.
    assert report["put_growth_kib"] < 32 * 1024, report
    assert report["get_growth_kib"] < 32 * 1024, report


async def test_small_objects(event_log: EventLog, tmp_path: Path) -> None:
    """Objects put from a stream or a path come back as bytes, into a sink, and are listed."""
    assert not await event_log.has_object(LOGS_BUCKET, "s-1")
    assert await event_log.put_object(LOGS_BUCKET, "s-1", io.BytesIO(b"log line\n")) == 9
    assert await event_log.has_object(LOGS_BUCKET, "s-1")
    assert await event_log.get_object_bytes(LOGS_BUCKET, "s-1") == b"log line\n"
    path = tmp_path / "package.tar.gz"
    path.write_bytes(b"\x1f\x8b" + bytes(range(256)) * 10)
    assert await event_log.put_object(PACKAGES_BUCKET, "abc", path) == 2562
    sink = io.BytesIO()
    assert await event_log.get_object(PACKAGES_BUCKET, "abc", sink) == 2562
    assert sink.getvalue() == path.read_bytes()


async def test_missing_objects_are_named(event_log: EventLog) -> None:
    """Reading an object that is not there raises ObjectNotFound naming the key and bucket."""
    with pytest.raises(ObjectNotFound, match=r"nope.*KZ_PACKAGES"):
        await event_log.get_object_bytes(PACKAGES_BUCKET, "nope")
    with pytest.raises(ObjectNotFound, match="nope"):
        await event_log.get_object(PACKAGES_BUCKET, "nope", io.BytesIO())


async def test_empty_object_round_trips(event_log: EventLog) -> None:
    """An empty object is stored and read back as empty."""
    await event_log.put_object(LOGS_BUCKET, "empty", io.BytesIO(b""))
    assert await event_log.get_object_bytes(LOGS_BUCKET, "empty") == b""


async def test_small_objects_are_read_without_a_consumer(
    event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package of several chunks reads back whole through message gets: no consumer made."""
    data = bytes(range(256)) * 2000  # 512,000 bytes: four chunks of 128 KiB
    await event_log.put_object(PACKAGES_BUCKET, "chunks", io.BytesIO(data))

    async def no_consumers(*args: object, **kwargs: object) -> None:
        raise AssertionError("a small object was read through a consumer")

    monkeypatch.setattr(event_log.js, "subscribe", no_consumers)
    assert await event_log.get_object_bytes(PACKAGES_BUCKET, "chunks") == data


async def test_a_replaced_object_is_never_served_from_the_cache(event_log: EventLog) -> None:
    """The reader keeps what it read by digest: a key put again reads back the new content."""
    await event_log.put_object(PACKAGES_BUCKET, "judge:k", io.BytesIO(b"first bundle"))
    assert await event_log.get_object_bytes(PACKAGES_BUCKET, "judge:k") == b"first bundle"
    assert await event_log.get_object_bytes(PACKAGES_BUCKET, "judge:k") == b"first bundle"
    await event_log.put_object(PACKAGES_BUCKET, "judge:k", io.BytesIO(b"second, longer bundle"))
    assert await event_log.get_object_bytes(PACKAGES_BUCKET, "judge:k") == b"second, longer bundle"
    store = await event_log.bucket(PACKAGES_BUCKET)
    await store.delete("judge:k")
    with pytest.raises(ObjectNotFound):
        await event_log.get_object_bytes(PACKAGES_BUCKET, "judge:k")


async def test_a_corrupt_chunk_is_refused(event_log: EventLog) -> None:
    """Content that does not match the digest in the meta record is never returned."""
    await event_log.put_object(PACKAGES_BUCKET, "bad", io.BytesIO(b"original content"))
    store = await event_log.bucket(PACKAGES_BUCKET)
    info = await store.get_info("bad")
    # Replace the chunk under the same nuid behind the store's back.
    subject = f"$O.{PACKAGES_BUCKET}.C.{info.nuid}"
    await event_log.js.purge_stream(f"OBJ_{PACKAGES_BUCKET}", subject=subject)
    await event_log.js.publish(subject, b"tampered content")
    with pytest.raises(ObjectCorrupt, match="SHA-256"):
        await event_log.get_object_bytes(PACKAGES_BUCKET, "bad")


async def test_a_new_key_is_stored_without_asking_for_it_first(
    event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes under a new key are stored as chunks plus a meta record, with no meta lookup;
    nats-py's own reader gets them back, with the digest and size it expects."""
    data = bytes(range(256)) * 1500  # 384,000 bytes: three chunks
    store = await event_log.bucket(PACKAGES_BUCKET)

    async def no_lookup(*args: object, **kwargs: object) -> None:
        raise AssertionError("a new key was looked up before it was stored")

    with monkeypatch.context() as patched:
        patched.setattr(store, "get_info", no_lookup)
        assert await event_log.put_object(PACKAGES_BUCKET, "fresh", data) == len(data)
    result = await store.get("fresh")  # nats-py's consumer path checks the digest itself
    assert result.data == data and result.info.size == len(data) and result.info.chunks == 3


async def test_a_key_stored_again_is_replaced_and_its_old_chunks_purged(
    event_log: EventLog,
) -> None:
    """The same key put twice (a package re-stored after a crash, a judge bundle updated):
    the second content wins and the stream keeps no chunk of the first."""
    await event_log.put_object(PACKAGES_BUCKET, "again", b"first content")
    await event_log.put_object(PACKAGES_BUCKET, "again", b"second content, longer")
    assert await event_log.get_object_bytes(PACKAGES_BUCKET, "again") == (b"second content, longer")
    info = await (await event_log.bucket(PACKAGES_BUCKET)).get_info("again")
    stream = await event_log.js.stream_info(f"OBJ_{PACKAGES_BUCKET}", subjects_filter=">")
    chunk_subjects = [s for s in (stream.state.subjects or {}) if ".C." in s]
    assert chunk_subjects == [f"$O.{PACKAGES_BUCKET}.C.{info.nuid}"]


async def test_a_package_named_by_its_digest_is_read_in_one_request(
    event_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-chunk object under the SHA-256 of its bytes has its chunk on a subject derived
    from that name: it reads back without its meta record, and nats-py reads it too."""
    data = b"\x1f\x8b a package's bytes " * 100
    key = hashlib.sha256(data).hexdigest()
    assert await event_log.put_object(PACKAGES_BUCKET, key, data) == len(data)
    store = await event_log.bucket(PACKAGES_BUCKET)
    info = await store.get_info(key)
    assert info.nuid == content_nuid(key) and info.chunks == 1

    async def no_meta(*args: object, **kwargs: object) -> None:
        raise AssertionError("the meta record was read")

    with monkeypatch.context() as patched:
        patched.setattr(store, "get_info", no_meta)
        assert await event_log.get_object_bytes(PACKAGES_BUCKET, key) == data
    assert (await store.get(key)).data == data


async def test_the_same_package_stored_twice_at_once_reads_back_whole(
    event_log: EventLog,
) -> None:
    """Two writers of one package race: both answer its size, the derived subject holds its
    chunk once, and every reader (one request, nats-py) gets the bytes."""
    data = bytes(range(256)) * 100
    key = hashlib.sha256(data).hexdigest()
    sizes = await asyncio.gather(
        *(event_log.put_object(PACKAGES_BUCKET, key, data) for _ in range(2))
    )
    assert sizes == [len(data)] * 2
    store = await event_log.bucket(PACKAGES_BUCKET)
    assert (await store.get(key)).data == data
    assert await event_log.get_object_bytes(PACKAGES_BUCKET, key) == data
    subject = f"$O.{PACKAGES_BUCKET}.C.{content_nuid(key)}"
    stream = await event_log.js.stream_info(f"OBJ_{PACKAGES_BUCKET}", subjects_filter=subject)
    assert (stream.state.subjects or {}).get(subject) == 1  # stored once


async def test_a_tampered_package_chunk_is_refused_by_both_readers(event_log: EventLog) -> None:
    """A derived chunk that does not hash to its name is not taken on the one-request path;
    the meta record's path then refuses it as corrupt."""
    data = b"the real package"
    key = hashlib.sha256(data).hexdigest()
    await event_log.put_object(PACKAGES_BUCKET, key, data)
    subject = f"$O.{PACKAGES_BUCKET}.C.{content_nuid(key)}"
    await event_log.js.purge_stream(f"OBJ_{PACKAGES_BUCKET}", subject=subject)
    await event_log.js.publish(subject, b"a tampered one!!")
    with pytest.raises(ObjectCorrupt, match="SHA-256"):
        await event_log.get_object_bytes(PACKAGES_BUCKET, key)


async def test_a_package_stored_by_nats_py_is_read_through_its_meta_record(
    event_log: EventLog,
) -> None:
    """Packages stored before chunk subjects were derived (a random id) still read back."""
    data = b"stored the old way"
    key = hashlib.sha256(data).hexdigest()
    store = await event_log.bucket(PACKAGES_BUCKET)
    await store.put(key, data)
    assert (await store.get_info(key)).nuid != content_nuid(key)
    assert await event_log.get_object_bytes(PACKAGES_BUCKET, key) == data
