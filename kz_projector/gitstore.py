"""Object-level git with dulwich: blobs, trees and commits first, then one compare-and-swap.

No working tree is needed and no `git` process runs. A non-bare repo's checkout is refreshed
after the branch moved. A `<ref>.lock` left by a writer that died holding it is removed once it
has stayed unchanged for `STALE_REF_LOCK_S`; a live writer's stops the move (`Writer.move`).
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol, cast

from dulwich.file import FileLocked
from dulwich.object_store import PackBasedObjectStore
from dulwich.objects import Blob, Commit, ObjectID, ShaFile, Tree
from dulwich.refs import Ref
from dulwich.repo import BaseRepo, MemoryRepo, Repo
from dulwich.trailers import Trailer, format_trailers, parse_trailers

from kz_projector.errors import RefLocked
from kz_projector.gitpacks import consolidate_packs, write_pack

log = logging.getLogger("kz.projector.git")

STALE_REF_LOCK_S = 5.0  # a ref lock unchanged this long was left by a writer that died

__all__ = [
    "MAIN",
    "FileMap",
    "Person",
    "Writer",
    "close_repo",
    "commit_trailers",
    "open_repo",
    "read_subtree",
    "ref_value",
]

MAIN = Ref(b"refs/heads/main")
EXEC_MODE = stat.S_IFREG | 0o755
FILE_MODE = stat.S_IFREG | 0o644


class ObjectSource(Protocol):
    """Anything that maps object ids to objects: an object store, or a `Writer`."""

    def __getitem__(self, sha: ObjectID) -> ShaFile: ...


FileMap = Mapping[str, tuple[int, bytes]]
"""Package files: path relative to the package root → (git mode, content)."""


@dataclass(frozen=True, slots=True)
class Person:
    name: str
    email: str

    def ident(self) -> bytes:
        name, email = (_clean(s) for s in (self.name, self.email))
        return f"{name} <{email}>".encode()


def _outlived(lock: Path, stale_s: float) -> bool:
    """Wait (up to `stale_s` and a little) while `lock` exists; True when it stayed the same
    file, untouched, for `stale_s` — its writer is gone — and False when it went away or was
    taken again meanwhile."""
    try:
        first = lock.stat()
    except FileNotFoundError:
        return False
    deadline = time.monotonic() + stale_s + 1.0
    while time.monotonic() < deadline:
        try:
            now = lock.stat()
        except FileNotFoundError:
            return False
        if (now.st_ino, now.st_mtime_ns) != (first.st_ino, first.st_mtime_ns):
            return False
        if time.time() - now.st_mtime >= stale_s:
            return True
        time.sleep(0.05)
    return False


def _clean(text: str) -> str:
    return text.replace("<", "").replace(">", "").replace("\n", " ")


def close_repo(repo: BaseRepo) -> None:
    """Close a repository's open pack files (a memory repo has none)."""
    if isinstance(repo, Repo):
        repo.close()


def open_repo(path: Path | None, *, create: bool = True) -> BaseRepo:
    """The kernel repo at `path` (bare or not), created bare when missing; None: in memory."""
    if path is None:
        repo: BaseRepo = MemoryRepo()
        repo.refs.set_symbolic_ref(Ref(b"HEAD"), MAIN)
        return repo
    if not path.exists() or not any(path.iterdir()):
        if not create:
            raise FileNotFoundError(f"expected a git repository at {path}, found none")
        path.mkdir(parents=True, exist_ok=True)
        disk = Repo.init_bare(str(path), default_branch=b"main")
    else:
        disk = Repo(str(path))
    _fsync_objects(disk)
    return disk


def _fsync_objects(disk: Repo) -> None:
    """Have the projector's object writes fsynced, without saying so in the repo's config.

    dulwich fsyncs objects when `core.fsyncObjectFiles` is set, but git 2.36 and later warn
    "core.fsyncObjectFiles is deprecated" on every command in a repo that sets it, and the
    kernel repo is read with git by everyone. The setting is made on the open store instead,
    and taken out of the config of a repo an earlier version wrote it to.
    """
    disk.object_store.fsync_object_files = True
    config = disk.get_config()
    core = config[(b"core",)] if config.has_section((b"core",)) else None
    if core is not None and b"fsyncObjectFiles" in core:
        del core[b"fsyncObjectFiles"]
        config.write_to_path()


def ref_value(repo: BaseRepo, ref: Ref = MAIN) -> ObjectID | None:
    try:
        return repo.refs[ref]
    except KeyError:
        return None


def commit_trailers(commit: Commit) -> dict[str, str]:
    _, trailers = parse_trailers(commit.message)
    return {t.key: t.value for t in trailers}


def read_subtree(store: ObjectSource, tree_id: ObjectID, parts: list[str]) -> ObjectID | None:
    """The id of the tree at `parts` below `tree_id`, or None."""
    current = tree_id
    for part in parts:
        tree = store[current]
        assert isinstance(tree, Tree)
        try:
            mode, sha = tree[part.encode()]
        except KeyError:
            return None
        if not stat.S_ISDIR(mode):
            return None
        current = sha
    return current


def walk_files(
    store: ObjectSource, tree_id: ObjectID, prefix: str = ""
) -> Iterator[tuple[str, int, ObjectID]]:
    """(path, mode, blob id) of every file below `tree_id`, sorted by path."""
    tree = store[tree_id]
    assert isinstance(tree, Tree)
    for item in tree.iteritems():
        name = prefix + item.path.decode()
        if stat.S_ISDIR(item.mode):
            yield from walk_files(store, item.sha, name + "/")
        else:
            yield name, item.mode, item.sha


class Writer:
    """Builds objects for a repo; `flush` writes them as one pack, then `move` sets a ref once.

    Objects wait in memory until `flush`, so a batch costs one pack file (fsynced when the
    store fsyncs objects, as `open_repo` sets it) instead of one file per object; reads see
    pending ones.
    Small packs are rolled up as they accumulate (kz_projector.gitpacks).
    """

    def __init__(self, repo: BaseRepo, cache_size: int = 4096) -> None:
        self.repo = repo
        self.store = repo.object_store
        self.pending: dict[ObjectID, ShaFile] = {}
        self.known: set[ObjectID] = set()
        self.cache: dict[ObjectID, ShaFile] = {}
        self.cache_size = cache_size
        self._blobs: dict[int, tuple[bytes, ObjectID]] = {}

    def __getitem__(self, sha: ObjectID) -> ShaFile:
        found = self.pending.get(sha) or self.cache.get(sha)
        if found is None:
            found = self.store[sha]
            if len(self.cache) >= self.cache_size:
                self.cache.clear()
            self.cache[sha] = found
        return found

    def add(self, obj: ShaFile) -> ObjectID:
        """Queue `obj` for the next pack unless the repo has it.

        Only blobs are looked up in the object store: package files repeat from version to
        version, while a tree or commit made here is almost always new, and asking the store
        about an absent object walks every pack and rescans the pack directory. A tree that
        does exist already is written again, which git allows; the pack roll-up keeps one.
        """
        sha = obj.id
        if sha in self.known or sha in self.pending:
            return sha
        if sha in self.cache or (isinstance(obj, Blob) and sha in self.store):
            self.known.add(sha)
            return sha
        self.pending[sha] = obj
        return sha

    def flush(self) -> None:
        """Write every pending object (one pack on disk) before any ref points at them."""
        if not self.pending:
            return
        if isinstance(self.store, PackBasedObjectStore):
            write_pack(self.store, list(self.pending.values()))
            consolidate_packs(self.store)
        else:
            self.store.add_objects([(obj, None) for obj in self.pending.values()])
        self.known.update(self.pending)
        if len(self.known) > 200_000:
            self.known.clear()
        self.pending.clear()

    def blob(self, data: bytes) -> ObjectID:
        memo = self._blobs.get(id(data))
        if memo is not None and memo[0] is data:
            return memo[1]  # the same bytes object as before: package files repeat
        sha = self.add(Blob.from_string(data))
        if len(self._blobs) > 20_000:
            self._blobs.clear()
        self._blobs[id(data)] = (data, sha)
        return sha

    def tree_of(self, files: FileMap) -> ObjectID:
        """A tree holding `files` (nested directories built bottom-up)."""
        nested: dict[str, object] = {}
        for path, (mode, data) in files.items():
            node = nested
            *dirs, name = path.split("/")
            for part in dirs:
                node = node.setdefault(part, {})  # type: ignore[assignment]
            node[name] = (mode, data)
        return self._tree(nested)

    def _tree(self, nested: dict[str, object]) -> ObjectID:
        tree = Tree()
        for name, value in nested.items():
            if isinstance(value, dict):
                tree.add(name.encode(), stat.S_IFDIR, self._tree(value))
            else:
                mode, data = cast(tuple[int, bytes], value)
                tree.add(name.encode(), mode, self.blob(data))
        return self.add(tree)

    def put_path(
        self, root: ObjectID | None, parts: list[str], subtree: ObjectID | None
    ) -> ObjectID:
        """`root` with the entry at `parts` replaced by `subtree` (None removes it)."""
        return self._put(root, parts, subtree) or self.add(Tree())

    def _put(
        self, root: ObjectID | None, parts: list[str], subtree: ObjectID | None
    ) -> ObjectID | None:
        entries: dict[bytes, tuple[int, ObjectID]] = {}
        if root is not None:
            old = self[root]
            assert isinstance(old, Tree)
            entries = {item.path: (item.mode, item.sha) for item in old.iteritems()}
        head = parts[0].encode()
        if len(parts) == 1:
            new_id = subtree
        else:
            child = entries.get(head)
            below = child[1] if child is not None and stat.S_ISDIR(child[0]) else None
            new_id = self._put(below, parts[1:], subtree)
        if new_id is None:
            entries.pop(head, None)
        else:
            entries[head] = (stat.S_IFDIR, new_id)
        if not entries:
            return None
        tree = Tree()
        for name, (mode, sha) in entries.items():
            tree.add(name, mode, sha)
        return self.add(tree)

    def commit(
        self,
        *,
        tree: ObjectID,
        parent: ObjectID | None,
        author: Person,
        committer: Person,
        when: datetime,
        subject: str,
        trailers: list[tuple[str, str]],
    ) -> ObjectID:
        """A deterministic commit: same inputs, same id."""
        commit = Commit()
        commit.tree = tree
        commit.parents = [parent] if parent is not None else []
        commit.author = author.ident()
        commit.committer = committer.ident()
        seconds = int(when.timestamp())
        commit.author_time = commit.commit_time = seconds
        commit.author_timezone = commit.commit_timezone = 0
        body = format_trailers([Trailer(k, v) for k, v in trailers])
        commit.message = subject.encode() + b"\n\n" + body
        return self.add(commit)

    def move(self, old: ObjectID | None, new: ObjectID, ref: Ref = MAIN) -> bool:
        """Compare-and-swap `ref` from `old` to `new`; False when another writer moved it.

        A ref's lock file is held for the milliseconds of one update. One that stays unchanged
        for `STALE_REF_LOCK_S` was left by a writer that died holding it (a projector killed
        mid-update): it is removed, with a warning, and the update goes ahead. One that keeps
        being renewed, or goes away, is another live writer's.
        """
        self.flush()
        for attempt in range(3):
            try:
                if old is None:
                    return bool(self.repo.refs.add_if_new(ref, new))
                return bool(self.repo.refs.set_if_equals(ref, old, new))
            except FileLocked as exc:
                lock = Path(os.fsdecode(exc.lockfilename))
                if attempt < 2 and _outlived(lock, STALE_REF_LOCK_S):
                    log.warning("git: removing %s, left by a writer that died holding it", lock)
                    lock.unlink(missing_ok=True)
                    continue
                if attempt < 2 and not lock.exists():
                    continue  # a live writer finished: ask again
                raise RefLocked(
                    f"cannot move {ref.decode()}: its lock file {lock} is held by another "
                    "writer that keeps renewing it; stop the other git process on this repo",
                    details={"lock": str(lock)},
                ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def refresh_checkout(self, tree: ObjectID) -> None:
        """Bring a non-bare repo's index and files to `tree`; a bare repo has none."""
        if isinstance(self.repo, Repo) and not self.repo.bare:
            self.repo.get_worktree().reset_index(tree)
