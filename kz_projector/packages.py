"""Where the projections get package contents: the object store by digest, or a repo clone.

Both sources answer `files(digest)` with the package's files as a `FileMap`; contents are
immutable per digest, so a small cache in front is always right.
"""

from __future__ import annotations

import asyncio
import io
import os
import stat
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Any, Protocol

from dulwich.objects import Blob, Commit, ObjectID, Tree
from dulwich.refs import Ref
from dulwich.repo import BaseRepo

from kz_events.errors import ObjectNotFound
from kz_events.port import LogPort
from kz_events.subjects import JUDGES_BUCKET, PACKAGES_BUCKET, judge_key
from kz_package.archive import PACKAGE_DIR, pack_directory, pack_files
from kz_package.errors import PackageError
from kz_package.judge import JUDGE_FILES
from kz_package.memread import read_package_files
from kz_package.yaml_safe import load_yaml
from kz_projector.errors import PackageUnavailable
from kz_projector.gitstore import (
    EXEC_MODE,
    FILE_MODE,
    MAIN,
    FileMap,
    ObjectSource,
    commit_trailers,
    read_subtree,
    ref_value,
    walk_files,
)

__all__ = [
    "GitPackages",
    "ObjectStorePackages",
    "PackageSource",
    "desc_of",
    "files_from_dir",
    "files_from_tarball",
    "files_of_tree",
    "judge_bundle",
    "judge_files",
    "kernel_ids_of_tree",
    "main_files",
    "put_judge_bundle",
    "restore_judge_bundles",
]

DESC = f"{PACKAGE_DIR}/desc.yaml"
KERNEL_DEPTH = 5  # arch, op_class, sub_class, quant, name
_SKIPPED_DIRS = frozenset({".git", "__pycache__"})


class PackageSource(Protocol):
    async def files(self, digest: str) -> FileMap: ...

    def read_ahead(self, digest: str) -> None:
        """A hint that `files(digest)` comes soon: a source may start reading it now."""


def files_from_dir(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every regular file below `root` as a `FileMap`, keeping the executable bit."""
    out: dict[str, tuple[int, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file() or name.endswith(".pyc"):
                continue
            mode = EXEC_MODE if path.stat().st_mode & 0o111 else FILE_MODE
            out[path.relative_to(root).as_posix()] = (mode, path.read_bytes())
    return dict(sorted(out.items()))


def _skipped(path: str) -> bool:
    *dirs, name = path.split("/")
    return name.endswith(".pyc") or any(d in _SKIPPED_DIRS for d in dirs)


def files_from_tarball(data: bytes) -> dict[str, tuple[int, bytes]]:
    """A package tarball's files as a `FileMap`, read in memory with the unpacking checks.

    The same files `files_from_dir` gives for the unpacked tree: `.git`, `__pycache__` and
    `.pyc` are left out, and the executable bit is kept.
    """
    return {
        path: (EXEC_MODE if mode & 0o111 else FILE_MODE, content)
        for path, (mode, content) in read_package_files(data).items()
        if not _skipped(path)
    }


def desc_of(files: FileMap) -> dict[str, Any]:
    """desc.yaml of a package as data (empty when absent or unreadable)."""
    entry = files.get(DESC)
    if entry is None:
        return {}
    try:
        data = load_yaml(entry[1], path=DESC)
    except PackageError:
        return {}
    return data if isinstance(data, dict) else {}


class _Cache:
    def __init__(self, size: int = 256) -> None:
        self.size = size
        self.items: OrderedDict[str, FileMap] = OrderedDict()

    def get(self, key: str) -> FileMap | None:
        if key in self.items:
            self.items.move_to_end(key)
            return self.items[key]
        return None

    def put(self, key: str, value: FileMap) -> None:
        self.items[key] = value
        if len(self.items) > self.size:
            self.items.popitem(last=False)


class ObjectStorePackages:
    """Packages from `KZ_PACKAGES`, unpacked with the same safety checks as uploads.

    `read_ahead` starts fetching a package's bytes so that the requests of the packages a fold
    will need soon overlap instead of following one another. At most `READ_AHEAD` are kept;
    past that the oldest is dropped (a fold that skipped it will not ask for it).
    """

    READ_AHEAD = 64

    def __init__(self, elog: LogPort) -> None:
        self.elog = elog
        self.cache = _Cache()
        self.reading: dict[str, asyncio.Task[bytes]] = {}

    def read_ahead(self, digest: str) -> None:
        if digest in self.reading or self.cache.get(digest) is not None:
            return
        if len(self.reading) >= self.READ_AHEAD:
            self.reading.pop(next(iter(self.reading))).cancel()
        reading = asyncio.create_task(self._bytes(digest))
        # A read dropped after it failed is never awaited: mark its error seen (an awaited
        # one still raises it).
        reading.add_done_callback(lambda task: task.cancelled() or task.exception())
        self.reading[digest] = reading

    async def files(self, digest: str) -> FileMap:
        cached = self.cache.get(digest)
        if cached is not None:
            return cached
        reading = self.reading.pop(digest, None)
        files = files_from_tarball(await (reading or self._bytes(digest)))
        self.cache.put(digest, files)
        return files

    async def _bytes(self, digest: str) -> bytes:
        try:
            return await self.elog.get_object_bytes(PACKAGES_BUCKET, digest)
        except ObjectNotFound as exc:
            raise PackageUnavailable(
                f"package {digest} is not in {PACKAGES_BUCKET}; expected the tarball there"
            ) from exc


class GitPackages:
    """Packages read back from a kernel repo's history (source commits carry `Kz-Package`)."""

    def __init__(self, repo: BaseRepo, ref: Ref = MAIN) -> None:
        self.repo = repo
        self.ref = ref
        self.where: dict[str, tuple[ObjectID, str]] | None = None

    def _index(self) -> dict[str, tuple[ObjectID, str]]:
        where: dict[str, tuple[ObjectID, str]] = {}
        head = ref_value(self.repo, self.ref)
        for entry in self.repo.get_walker(include=[head]) if head else []:
            trailers = commit_trailers(entry.commit)
            if "Kz-Package" in trailers and "Kz-Kernel" in trailers:
                where[trailers["Kz-Package"]] = (entry.commit.id, trailers["Kz-Kernel"])
        return where

    def read_ahead(self, digest: str) -> None:
        """Reading from the repo is local: nothing to start early."""

    async def files(self, digest: str) -> FileMap:
        if self.where is None:
            self.where = self._index()
        if digest not in self.where:
            raise PackageUnavailable(f"package {digest} is in no source commit of the repo")
        commit_id, kernel_id = self.where[digest]
        commit = self.repo.object_store[commit_id]
        assert isinstance(commit, Commit)
        files = files_of_tree(self.repo.object_store, commit.tree, kernel_id)
        if not files:
            raise PackageUnavailable(f"commit {commit_id.decode()} lacks {kernel_id}")
        return files


def files_of_tree(
    store: ObjectSource, root: ObjectID, kernel_id: str
) -> dict[str, tuple[int, bytes]]:
    """The files of the kernel at `kernel_id` in the tree `root` (empty when it is absent)."""
    tree = read_subtree(store, root, kernel_id.split("/"))
    out: dict[str, tuple[int, bytes]] = {}
    if tree is None:
        return out
    for path, mode, sha in walk_files(store, tree):
        blob = store[sha]
        assert isinstance(blob, Blob)
        out[path] = (mode, blob.data)
    return out


def judge_files(files: FileMap) -> dict[str, tuple[int, bytes]]:
    """The judge files among a package's files (`.kernel_package/` as main has it)."""
    return {
        f"{PACKAGE_DIR}/{name}": files[f"{PACKAGE_DIR}/{name}"]
        for name in JUDGE_FILES
        if f"{PACKAGE_DIR}/{name}" in files
    }


def main_files(files: FileMap) -> dict[str, tuple[int, bytes]]:
    """What main's bundle of a kernel carries to runners: its judge files, and its `src/` (the
    incumbent, measured beside every challenger)."""
    return {
        **judge_files(files),
        **{path: entry for path, entry in files.items() if path.startswith("src/")},
    }


def judge_bundle(files: FileMap, reference: FileMap | None = None) -> bytes:
    """The canonical tar.gz of main's bundle of a kernel (see `main_files`), with its board's
    pinned `reference/` folder (kz_projector/reference.py) when it has one. Only the platform
    adds that folder: a package's own `reference/` never reaches a bundle."""
    judge = {**main_files(files), **(reference or {})}
    out = io.BytesIO()
    if judge:
        pack_files(judge, out)
    else:
        with tempfile.TemporaryDirectory(prefix="kz-judge-") as tmp:
            (Path(tmp) / "judge" / PACKAGE_DIR).mkdir(parents=True)
            pack_directory(Path(tmp) / "judge", out)
    return out.getvalue()


def kernel_ids_of_tree(store: ObjectSource, root: ObjectID) -> list[str]:
    """Every kernel id of the tree `root`: the folders `<arch>/<op_class>/<sub_class>/<quant>/
    <name>`, in tree order."""
    found: list[str] = []

    def walk(tree_id: ObjectID, parts: list[str]) -> None:
        tree = store[tree_id]
        assert isinstance(tree, Tree)
        for item in tree.iteritems():
            if stat.S_ISDIR(item.mode):
                path = [*parts, item.path.decode()]
                if len(path) == KERNEL_DEPTH:
                    found.append("/".join(path))
                else:
                    walk(item.sha, path)

    walk(root, [])
    return found


class BoardReferences(Protocol):
    """Each board's pinned `reference/` folder (kz_projector.reference.References)."""

    async def folder(
        self, kernel_id: str, commit: str | None, files: FileMap
    ) -> dict[str, tuple[int, bytes]]: ...


async def restore_judge_bundles(
    elog: LogPort,
    store: ObjectSource,
    root: ObjectID,
    references: BoardReferences | None = None,
) -> dict[str, dict[str, tuple[int, bytes]]]:
    """Store main's judge bundle for each kernel of the tree `root` that `KZ_JUDGES` lacks (a
    store from before judge bundles had their own bucket kept them among the uploads); the
    judge files stored, by kernel id."""
    stored: dict[str, dict[str, tuple[int, bytes]]] = {}
    for kernel_id in kernel_ids_of_tree(store, root):
        if await elog.has_object(JUDGES_BUCKET, judge_key(kernel_id)):
            continue
        files = files_of_tree(store, root, kernel_id)
        reference = await references.folder(kernel_id, None, files) if references else {}
        await put_judge_bundle(elog, kernel_id, judge_bundle(files, reference))
        stored[kernel_id] = {**main_files(files), **reference}
    return stored


async def put_judge_bundle(elog: LogPort, kernel_id: str, bundle: bytes) -> None:
    """Store `bundle` (from `judge_bundle`) as main's judge files of `kernel_id`."""
    await elog.put_object(JUDGES_BUCKET, judge_key(kernel_id), bundle, replacing=True)
