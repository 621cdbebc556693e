"""Read-only views of the kernel repo for the API's handlers: a kernel's files at main with the
commits that touched it (read by kz_projector.repo_read, the one reader of a kernel's history),
a folder at a commit, one commit in detail. Absent repo or kernel reads as None.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dulwich.diff_tree import tree_changes
from dulwich.errors import NotGitRepository
from dulwich.objects import Blob, Commit, Tree
from dulwich.refs import Ref
from dulwich.repo import Repo
from dulwich.trailers import parse_trailers

from kz_projector.repo_read import CommitInfo, KernelRepo

__all__ = [
    "CommitDetail",
    "CommitInfo",
    "KernelSnapshot",
    "commit_detail",
    "commit_files",
    "kernel_snapshot",
    "main_head",
]

MAIN = Ref(b"refs/heads/main")


@dataclass(frozen=True)
class CommitDetail:
    """One commit of the kernel repo: who, when, why (message and trailers), what changed."""

    id: str
    message: str
    author: str
    committer: str
    authored_at: datetime
    committed_at: datetime
    parents: list[str]
    trailers: dict[str, str]
    changes: list[tuple[str, str]]  # (path, added | modified | deleted), in path order


@dataclass(frozen=True)
class KernelSnapshot:
    """A kernel as main has it: its files (path → bytes), head commit and recent commits."""

    head: str
    files: dict[str, bytes]
    commits: list[CommitInfo]


def _open(path: Path) -> Repo | None:
    try:
        return Repo(str(path))
    except (NotGitRepository, FileNotFoundError, NotADirectoryError):
        return None


def main_head(path: Path) -> str | None:
    repo = _open(path)
    if repo is None:
        return None
    with repo:
        try:
            return repo.refs[MAIN].decode()
        except KeyError:
            return None


def _subtree(repo: Repo, tree: Tree, rel: str) -> Tree | None:
    for part in rel.split("/"):
        try:
            mode, sha = tree[part.encode()]
        except KeyError:
            return None
        if not stat.S_ISDIR(mode):
            return None
        sub = repo[sha]
        if not isinstance(sub, Tree):
            return None
        tree = sub
    return tree


def _files(repo: Repo, tree: Tree, prefix: str = "") -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for entry in tree.iteritems():
        name = prefix + entry.path.decode()
        obj = repo[entry.sha]
        if isinstance(obj, Tree):
            found.update(_files(repo, obj, name + "/"))
        elif isinstance(obj, Blob) and stat.S_ISREG(entry.mode):
            found[name] = obj.as_raw_string()
    return found


def commit_files(path: Path, commit: str, rel: str) -> dict[str, bytes] | None:
    """Files of the folder `rel` at `commit`, or None when the repo, commit or folder is absent."""
    repo = _open(path)
    if repo is None:
        return None
    with repo:
        try:
            obj = repo[commit.encode()]
        except (KeyError, ValueError):
            return None
        if not isinstance(obj, Commit):
            return None
        root = repo[obj.tree]
        assert isinstance(root, Tree)
        sub = _subtree(repo, root, rel)
        return None if sub is None else _files(repo, sub)


def kernel_snapshot(path: Path, rel: str, *, max_commits: int = 20) -> KernelSnapshot | None:
    """The kernel at `rel` on main, or None when the repo, main or the kernel is absent."""
    head = main_head(path)
    if head is None:
        return None
    files = commit_files(path, head, rel)
    if files is None:
        return None
    reader = KernelRepo(path)
    try:
        commits = reader.history(rel, limit=max_commits)
    finally:
        reader.close()
    return KernelSnapshot(head=head, files=files, commits=commits)


_CHANGE = {"add": "added", "modify": "modified", "delete": "deleted"}


def _changes(repo: Repo, commit: Commit) -> list[tuple[str, str]]:
    parent = repo[commit.parents[0]] if commit.parents else None
    old = parent.tree if isinstance(parent, Commit) else None
    found = []
    for change in tree_changes(repo.object_store, old, commit.tree):
        kind = _CHANGE.get(change.type, change.type)
        entry = change.old if kind == "deleted" else change.new
        if entry is not None and entry.path is not None:
            found.append((entry.path.decode(errors="replace"), kind))
    return sorted(found)


def commit_detail(path: Path, commit_id: str) -> CommitDetail | None:
    """The commit `commit_id` (40 hex digits), or None when the repo or the commit is absent."""
    repo = _open(path)
    if repo is None:
        return None
    with repo:
        try:
            obj = repo[commit_id.encode()]
        except (KeyError, ValueError):
            return None
        if not isinstance(obj, Commit):
            return None
        _body, trailers = parse_trailers(obj.message)
        return CommitDetail(
            id=obj.id.decode(),
            message=obj.message.decode(errors="replace").strip(),
            author=obj.author.decode(errors="replace"),
            committer=obj.committer.decode(errors="replace"),
            authored_at=datetime.fromtimestamp(obj.author_time, tz=UTC),
            committed_at=datetime.fromtimestamp(obj.commit_time, tz=UTC),
            parents=[p.decode() for p in obj.parents],
            trailers={t.key: t.value for t in trailers},
            changes=_changes(repo, obj),
        )
