"""Read-only views of the kernel repo through dulwich: a kernel's files, desc, scoreboard and
the commits that touched it on `refs/heads/main`. Absent repo or kernel reads as None.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dulwich.errors import NotGitRepository
from dulwich.objects import Blob, Commit, ObjectID, Tree
from dulwich.refs import Ref
from dulwich.repo import Repo

__all__ = ["CommitInfo", "KernelSnapshot", "commit_files", "kernel_snapshot", "main_head"]

MAIN = Ref(b"refs/heads/main")


@dataclass(frozen=True)
class CommitInfo:
    """One commit that touched a kernel."""

    id: str
    message: str
    author: str
    at: datetime


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


def _commit_info(commit: Commit) -> CommitInfo:
    return CommitInfo(
        id=commit.id.decode(),
        message=commit.message.decode(errors="replace").strip(),
        author=commit.author.decode(errors="replace"),
        at=datetime.fromtimestamp(commit.commit_time, tz=UTC),
    )


def kernel_snapshot(path: Path, rel: str, *, max_commits: int = 20) -> KernelSnapshot | None:
    """The kernel at `rel` on main, or None when the repo, main or the kernel is absent."""
    head = main_head(path)
    if head is None:
        return None
    files = commit_files(path, head, rel)
    if files is None:
        return None
    repo = _open(path)
    assert repo is not None
    with repo:
        walker = repo.get_walker(
            include=[ObjectID(head.encode())], paths=[rel.encode()], max_entries=max_commits
        )
        commits = [_commit_info(entry.commit) for entry in walker]
    return KernelSnapshot(head=head, files=files, commits=commits)
