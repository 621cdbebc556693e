"""Keep the kernel repo's pack count small: roll small packs into one, geometrically.

The git projector writes one pack per batch, so a busy repo gains packs by the thousand, and
every object lookup (and every check that an object is new) walks the packs one by one. Git
itself answers this with `git repack --geometric=2`, and so does this module: sorted by object
count, each pack must hold at least twice the objects of all smaller packs together; the small
packs that break that progression are rewritten as one. The result is O(log n) packs, and each
object is rewritten O(log n) times over the repo's life.

Packs are written here rather than through dulwich's `add_objects`, which deflates each
object, then reads the pack back inflating every object twice (once to index it, once to
check it): the index is built from what was just written. A roll-up of packs that hold no
deltas (all the projector writes) copies their entries byte for byte — each entry is a
self-contained zlib stream, and its CRC is unchanged — so no object is inflated or deflated
again. Packs from elsewhere (with deltas) take the slow path through dulwich.

A rewrite is crash-safe: the new pack is complete on disk (pack, then index, both fsynced
when the store fsyncs objects) before any old pack is removed, and an object that ends
up in two packs is harmless (the next roll-up keeps one copy). Readers in other processes
(the API) see a removed pack disappear and rescan, as they do when `git gc` runs beside
them.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import mmap
import os
import struct
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from dulwich.object_store import PACK_MODE, DiskObjectStore, PackBasedObjectStore
from dulwich.objects import ObjectID, ShaFile
from dulwich.pack import (
    OFS_DELTA,
    REF_DELTA,
    Pack,
    UnpackedObject,
    full_unpacked_object,
    iter_sha1,
    write_pack_data,
    write_pack_index,
)

__all__ = ["MAX_PACKS", "consolidate_packs", "roll_up", "write_pack"]

log = logging.getLogger("kz.projector.git")

MAX_PACKS = 8  # below this many packs nothing is rewritten


def roll_up(counts: Sequence[int]) -> int:
    """How many of the packs, by object count ascending, to rewrite as one (0: none).

    Pack i is rolled up when it holds fewer than twice the objects of the packs below it;
    everything below the last such pack goes with it.
    """
    below, split = 0, 0
    for i, count in enumerate(counts):
        if below and count < 2 * below:
            split = i + 1
        below += count
    return split if split >= 2 else 0


def _objects(packs: Sequence[Pack]) -> Iterator[UnpackedObject]:
    seen: set[ObjectID] = set()
    for pack in packs:
        for obj in pack.iterobjects():
            if obj.id not in seen:
                seen.add(obj.id)
                yield full_unpacked_object(obj)


Entry = tuple[bytes, int, int]
"""An index entry: raw object id, offset in the pack, CRC-32 of the entry's bytes."""

_TRAILER = 20  # SHA-1 of everything before it


def _install(store: DiskObjectStore, tmp: Path, entries: list[Entry], checksum: bytes) -> bytes:
    """Move the finished pack file `tmp` into place and write its index; returns the pack's
    name. The store finds the pack on its next lookup (a miss rescans the pack directory).

    Both files are named by their content, so any writer of them writes the same bytes: the
    index is written to a file of its own and renamed into place, with no lock file that a
    writer killed midway could leave behind to block the next one.
    """
    entries.sort()
    name = iter_sha1(e[0] for e in entries)
    base = Path(store.pack_dir) / f"pack-{name.decode()}"
    if base.with_suffix(".idx").exists():  # the same objects are already packed
        tmp.unlink()
        return name
    tmp.replace(base.with_suffix(".pack"))
    with _pack_file(store, "tmp_idx_") as (idx, idx_tmp):
        write_pack_index(idx, entries, checksum, version=2)
    idx_tmp.replace(base.with_suffix(".idx"))
    return name


@contextlib.contextmanager
def _pack_file(
    store: DiskObjectStore, prefix: str = "tmp_pack_"
) -> Iterator[tuple[BinaryIO, Path]]:
    """A new file in the pack directory, named as git names its own unfinished ones, on disk
    (fsynced as the store is set) when the block ends; removed when the block fails."""
    fd, name = tempfile.mkstemp(dir=store.pack_dir, prefix=prefix)
    tmp = Path(name)
    tmp.chmod(PACK_MODE)
    try:
        with os.fdopen(fd, "wb") as out:
            yield out, tmp
            out.flush()
            if store.fsync_object_files:
                os.fsync(out.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_pack(store: PackBasedObjectStore, objects: Sequence[ShaFile]) -> None:
    """Write `objects` as one pack (no deltas) and its index, fsynced as the store is set."""
    if not objects:
        return
    if not isinstance(store, DiskObjectStore):
        store.add_objects([(obj, None) for obj in objects])
        return
    with _pack_file(store) as (out, tmp):
        found, checksum = write_pack_data(
            out.write,
            (full_unpacked_object(obj) for obj in objects),
            store.object_format,
            num_records=len(objects),
            compression_level=store.pack_compression_level,
        )
    _install(store, tmp, [(sha, off, crc) for sha, (off, crc) in found.items()], checksum)


_Span = tuple[bytes, mmap.mmap, int, int]
"""An entry to copy: raw object id, the bytes of its pack, where the entry starts and ends."""


def _spans(pack: Pack, seen: set[bytes]) -> Iterator[_Span] | None:
    with open(pack._basename + ".pack", "rb") as f:  # dulwich names files only through it
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    entries = sorted(pack.index.iterentries(), key=lambda e: e[1])
    ends = [e[1] for e in entries[1:]] + [len(data) - _TRAILER]
    spans: list[_Span] = []
    for (sha, start, _), end in zip(entries, ends, strict=True):
        if (data[start] >> 4) & 7 in (OFS_DELTA, REF_DELTA):
            data.close()
            return None
        if sha not in seen:
            seen.add(sha)
            spans.append((sha, data, start, end))
    return iter(spans)


def _raw_entries(packs: Sequence[Pack]) -> list[_Span] | None:
    """Every entry to keep, the first copy of each object; None when a pack holds a delta
    (its entries are not self-contained)."""
    kept: list[_Span] = []
    seen: set[bytes] = set()
    for pack in packs:
        spans = _spans(pack, seen)
        if spans is None:
            for data in {id(span[1]): span[1] for span in kept}.values():
                data.close()
            return None
        kept.extend(spans)
    return kept


def _copy_packs(store: DiskObjectStore, packs: Sequence[Pack]) -> bytes | None:
    """Concatenate the entries of delta-free `packs` into one new pack; its name, or None
    when some pack holds deltas."""
    spans = _raw_entries(packs)
    if spans is None:
        return None
    entries: list[Entry] = []
    try:
        with _pack_file(store) as (out, tmp):
            digest = hashlib.sha1(usedforsecurity=False)
            header = b"PACK" + struct.pack(">II", 2, len(spans))
            out.write(header)
            digest.update(header)
            offset = len(header)
            for sha, data, start, end in spans:
                chunk = data[start:end]
                out.write(chunk)
                digest.update(chunk)
                entries.append((sha, offset, zlib.crc32(chunk)))
                offset += len(chunk)
            checksum = digest.digest()
            out.write(checksum)
    finally:
        for data in {id(span[1]): span[1] for span in spans}.values():
            data.close()
    return _install(store, tmp, entries, checksum)


def _remove(pack: Pack) -> None:
    base = pack._basename  # dulwich names a pack's files only through it
    pack.close()
    for suffix in (".idx", ".pack", ".rev", ".bitmap"):  # the index first: readers key on it
        Path(base + suffix).unlink(missing_ok=True)


def consolidate_packs(store: PackBasedObjectStore, *, max_packs: int = MAX_PACKS) -> int:
    """Rewrite the small packs of `store` as one when it has more than `max_packs`; returns
    how many packs were rolled up."""
    packs = sorted(store.packs, key=len)
    if len(packs) <= max_packs:
        return 0
    split = roll_up([len(p) for p in packs]) or 2
    merged = packs[:split]
    new_name = _copy_packs(store, merged) if isinstance(store, DiskObjectStore) else None
    if new_name is None:
        count = len({sha for pack in merged for sha in pack})
        new = store.add_pack_data(count, _objects(merged))
        new_name = new.name() if new is not None else None
    for pack in merged:
        if pack.name() != new_name:
            _remove(pack)
    store.close()  # forget the removed packs; the next read rescans the pack directory
    log.info("git: rolled %d packs into one", len(merged))
    return len(merged)
