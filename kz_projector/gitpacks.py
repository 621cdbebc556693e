"""Keep the kernel repo's pack count small: roll small packs into one, geometrically.

The git projector writes one pack per batch, so a busy repo gains packs by the thousand, and
every object lookup (and every check that an object is new) walks the packs one by one. Git
itself answers this with `git repack --geometric=2`, and so does this module: sorted by object
count, each pack must hold at least twice the objects of all smaller packs together; the small
packs that break that progression are rewritten as one. The result is O(log n) packs, and each
object is rewritten O(log n) times over the repo's life.

A rewrite is crash-safe: the new pack is complete on disk (pack, then index) before any old
pack is removed, and an object that ends up in two packs is harmless (the next roll-up keeps
one copy). Readers in other processes (the API) see a removed pack disappear and rescan, as
they do when `git gc` runs beside them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

from dulwich.object_store import PackBasedObjectStore
from dulwich.objects import ObjectID
from dulwich.pack import Pack, UnpackedObject, full_unpacked_object

__all__ = ["MAX_PACKS", "consolidate_packs", "roll_up"]

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
    count = len({sha for pack in merged for sha in pack})
    new = store.add_pack_data(count, _objects(merged))
    new_name = new.name() if new is not None else None
    for pack in merged:
        if pack.name() != new_name:
            _remove(pack)
    store.close()  # forget the removed packs; the next read rescans the pack directory
    log.info("git: rolled %d packs (%d objects) into one", len(merged), count)
    return len(merged)
