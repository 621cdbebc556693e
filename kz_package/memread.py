"""Reading a submission tarball into memory with the same checks, order and errors as unpacking.

`read_package` streams the gzip tar once, applies every rule `unpack_tarball` applies (entry
count, types, names, duplicates, collisions, sizes, ratio) and returns the package's files and
directories relative to the package root, so a caller that only needs bytes never touches disk.
"""

from __future__ import annotations

import contextlib
import io
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from kz_package.archive import (
    _CHUNK,
    PACKAGE_DIR,
    _Budget,
    admit_member,
    archive_errors,
    open_members,
)
from kz_package.errors import INVALID_PACKAGE, UNSAFE_ARCHIVE, PackageError
from kz_package.limits import Limits

__all__ = ["MemoryBudgetExceeded", "PackageFiles", "read_package", "read_package_files"]


class MemoryBudgetExceeded(Exception):
    """The package holds more bytes than the caller allowed in memory (not a package fault)."""


@dataclass(slots=True)
class PackageFiles:
    """A package's tree in memory: file path → (mode 0o755 or 0o644, bytes), and every folder."""

    files: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)

    def data(self, rel: str) -> bytes | None:
        entry = self.files.get(rel)
        return None if entry is None else entry[1]


def _prefixes(key: str) -> list[str]:
    parts = key.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _collides(name: str) -> PackageError:
    return PackageError.one(
        UNSAFE_ARCHIVE, name, "name", "entry collides with another entry's path"
    )


def _add_dirs(tree: PackageFiles, member: tarfile.TarInfo, keys: list[str]) -> None:
    for key in keys:
        if key in tree.files:
            raise _collides(member.name)
        tree.dirs.add(key)


def _read_data(
    stream: tarfile.TarFile, member: tarfile.TarInfo, budget: _Budget, cap: int | None
) -> bytes:
    source = stream.extractfile(member)
    if source is None:  # pragma: no cover - regular members always have data
        raise PackageError.one(INVALID_PACKAGE, member.name, "", "entry has no data")
    out = bytearray()
    with source:
        while chunk := source.read(_CHUNK):
            budget.add_bytes(member.name, len(chunk))
            if cap is not None and budget.unpacked > cap:
                raise MemoryBudgetExceeded(f"package holds more than {cap} bytes")
            out += chunk
    return bytes(out)


def _read_member(
    stream: tarfile.TarFile,
    member: tarfile.TarInfo,
    tree: PackageFiles,
    budget: _Budget,
    seen: set[str],
    cap: int | None,
) -> None:
    parts = admit_member(member, budget, seen)
    if not parts:
        return
    key = "/".join(parts)
    if member.isdir():
        _add_dirs(tree, member, [*_prefixes(key), key])
        return
    budget.add_file(member.name, member.size)
    _add_dirs(tree, member, _prefixes(key))
    if key in tree.dirs:
        raise _collides(member.name)
    mode = 0o755 if member.mode & 0o111 else 0o644
    tree.files[key] = (mode, _read_data(stream, member, budget, cap))


def _rooted(tree: PackageFiles) -> PackageFiles:
    """The package root: the archive root, or its one top-level folder holding the package."""
    if PACKAGE_DIR in tree.dirs or PACKAGE_DIR in tree.files:
        return tree
    top = {key.split("/", 1)[0] for key in (*tree.files, *tree.dirs)}
    if len(top) != 1:
        return tree
    (child,) = top
    if child not in tree.dirs or f"{child}/{PACKAGE_DIR}" not in tree.dirs:
        return tree
    cut = len(child) + 1
    return PackageFiles(
        files={k[cut:]: v for k, v in tree.files.items() if k.startswith(f"{child}/")},
        dirs={k[cut:] for k in tree.dirs if k.startswith(f"{child}/")},
    )


def _open(source: Path | BinaryIO | bytes) -> contextlib.AbstractContextManager[BinaryIO]:
    if isinstance(source, Path):
        return source.open("rb")
    if isinstance(source, bytes | bytearray | memoryview):
        return contextlib.nullcontext(io.BytesIO(source))
    return contextlib.nullcontext(source)


def read_package(
    source: Path | BinaryIO | bytes,
    limits: Limits = Limits(),  # noqa: B008
    *,
    max_memory_bytes: int | None = None,
) -> PackageFiles:
    """Read a submission tarball into memory or raise PackageError, as `unpack_tarball` would.

    With `max_memory_bytes`, a package whose files hold more than that raises
    `MemoryBudgetExceeded`, so a caller can fall back to unpacking it to disk.
    """
    with _open(source) as raw:
        tree, seen = PackageFiles(), set[str]()
        with archive_errors(seen):
            members, budget = open_members(raw, limits)
            for stream, member in members:
                _read_member(stream, member, tree, budget, seen, max_memory_bytes)
    return _rooted(tree)


def read_package_files(
    source: Path | BinaryIO | bytes,
    limits: Limits = Limits(),  # noqa: B008
) -> dict[str, tuple[int, bytes]]:
    """Every file of a submission tarball as path → (mode, bytes), sorted, checked as on unpack."""
    return dict(sorted(read_package(source, limits).files.items()))
