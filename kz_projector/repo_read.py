"""The one reader of the kernel repo's history and package trees: the audit compares boards
with it, the API lists a kernel's commits through it (kz_api.kernelrepo), tests read main with it.

Reads go through dulwich objects at main (or a given commit); nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dulwich.objects import Blob, Commit, ObjectID, Tree
from dulwich.repo import BaseRepo, Repo

from kz_events.errors import InvalidInput
from kz_events.ids import KernelId
from kz_projector.gitstore import (
    MAIN,
    close_repo,
    commit_trailers,
    read_subtree,
    ref_value,
    walk_files,
)

__all__ = ["CommitInfo", "KernelRepo", "commit_info"]


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """One commit of main touching a kernel: its id, message, people, commit time and the
    platform's trailers (`Kz-Submission`, `Kz-Event-Seq`, `Kz-Commit`)."""

    commit: str
    parent: str | None
    message: str  # the whole message, trailers included, without surrounding blank lines
    author: str
    committer: str
    at: datetime  # the commit time (UTC)
    submission_id: str | None
    event_seq: int | None
    kind: str | None

    @property
    def id(self) -> str:
        return self.commit

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]


class KernelRepo:
    """The kernel repo at `path`, read-only; missing repo or kernel reads as empty."""

    def __init__(self, path: Path | BaseRepo) -> None:
        self._path = path if isinstance(path, Path) else None
        self._repo: BaseRepo | None = None if isinstance(path, Path) else path

    def _open(self) -> BaseRepo | None:
        path = self._path
        if (
            self._repo is None
            and path is not None
            and ((path / "HEAD").exists() or (path / ".git").exists())
        ):
            self._repo = Repo(str(path))
        return self._repo

    def close(self) -> None:
        """Close the repository if this reader opened it (its pack files stay open otherwise)."""
        if self._path is not None and self._repo is not None:
            close_repo(self._repo)
            self._repo = None

    def head(self) -> str | None:
        repo = self._open()
        if repo is None:
            return None
        value = ref_value(repo, MAIN)
        return value.decode() if value else None

    def _kernel_tree(
        self, kernel_id: str, commit: str | None = None
    ) -> tuple[BaseRepo, ObjectID] | None:
        repo = self._open()
        sha = ObjectID(commit.encode()) if commit else (ref_value(repo, MAIN) if repo else None)
        if repo is None or sha is None:
            return None
        try:
            obj = repo.object_store[sha]
        except KeyError as exc:
            raise InvalidInput(
                f"expected a commit id of the kernel repo, got {commit!r}", code="unknown_commit"
            ) from exc
        if not isinstance(obj, Commit):
            raise InvalidInput(
                f"expected a commit id, got a {obj.type_name.decode()}", code="unknown_commit"
            )
        tree = read_subtree(repo.object_store, obj.tree, list(KernelId.parse(kernel_id).parts))
        return (repo, tree) if tree is not None else None

    def files(self, kernel_id: str, commit: str | None = None) -> list[str]:
        """Paths of the kernel's files at main (relative to the kernel's directory)."""
        found = self._kernel_tree(kernel_id, commit)
        if found is None:
            return []
        repo, tree = found
        return [path for path, _, _ in walk_files(repo.object_store, tree)]

    def package_tree(self, kernel_id: str, commit: str | None = None) -> dict[str, bytes]:
        """Every file of the kernel's package at main (or `commit`): path → content."""
        found = self._kernel_tree(kernel_id, commit)
        if found is None:
            return {}
        repo, tree = found
        out: dict[str, bytes] = {}
        for path, _, sha in walk_files(repo.object_store, tree):
            blob = repo.object_store[sha]
            assert isinstance(blob, Blob)
            out[path] = blob.data
        return out

    def read_file_or_none(self, kernel_id: str, path: str) -> bytes | None:
        found = self._kernel_tree(kernel_id)
        if found is None:
            return None
        repo, tree = found
        node = tree
        for part in path.split("/"):
            obj = repo.object_store[node]
            if not isinstance(obj, Tree) or part.encode() not in obj:
                return None
            node = obj[part.encode()][1]
        blob = repo.object_store[node]
        return blob.data if isinstance(blob, Blob) else None

    def read_file(self, kernel_id: str, path: str) -> bytes:
        data = self.read_file_or_none(kernel_id, path)
        if data is None:
            raise InvalidInput(
                f"expected a file of kernel {kernel_id} at main, got no {path!r}",
                code="unknown_file",
            )
        return data

    def history(self, kernel_id: str, limit: int = 50) -> list[CommitInfo]:
        """Commits of main that changed the kernel, newest first, at most `limit`."""
        repo = self._open()
        head = ref_value(repo, MAIN) if repo else None
        if repo is None or head is None:
            return []
        parts = list(KernelId.parse(kernel_id).parts)
        out: list[CommitInfo] = []
        sha: ObjectID | None = head
        while sha is not None and len(out) < limit:
            commit = repo.object_store[sha]
            assert isinstance(commit, Commit)
            parent = commit.parents[0] if commit.parents else None
            if self._changed(repo, commit, parent, parts):
                out.append(commit_info(commit))
            sha = parent
        return out

    @staticmethod
    def _changed(repo: BaseRepo, commit: Commit, parent: ObjectID | None, parts: list[str]) -> bool:
        mine = read_subtree(repo.object_store, commit.tree, parts)
        if parent is None:
            return mine is not None
        before = repo.object_store[parent]
        assert isinstance(before, Commit)
        return mine != read_subtree(repo.object_store, before.tree, parts)


def commit_info(commit: Commit) -> CommitInfo:
    """What the platform reads of one commit."""
    trailers = commit_trailers(commit)
    seq = trailers.get("Kz-Event-Seq")
    parent = commit.parents[0] if commit.parents else None
    return CommitInfo(
        commit=commit.id.decode(),
        parent=parent.decode() if parent else None,
        message=commit.message.decode(errors="replace").strip(),
        author=commit.author.decode(errors="replace"),
        committer=commit.committer.decode(errors="replace"),
        at=datetime.fromtimestamp(commit.commit_time, UTC),
        submission_id=trailers.get("Kz-Submission"),
        event_seq=int(seq) if seq and seq.isdigit() else None,
        kind=trailers.get("Kz-Commit"),
    )
