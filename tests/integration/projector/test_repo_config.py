"""The kernel repo's objects are fsynced, and git reads the repo without a warning."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dulwich.objects import Tree
from dulwich.repo import Repo

from kz_projector import gitpacks
from kz_projector.gitstore import Person, Writer, open_repo

pytestmark = pytest.mark.integration


def _git(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(path), *args], capture_output=True, text=True, check=True
    )


def test_objects_are_fsynced_and_git_reads_the_repo_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "kernels.git"
    repo = open_repo(path)
    synced: list[str] = []  # the files fsynced, by name (dulwich fsyncs ref files anyway)
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(gitpacks.os, "fsync", fsync)
    writer = Writer(repo)
    who = Person("kernel zoo", "bot@kernel-zoo.invalid")
    commit = writer.commit(
        tree=writer.add(Tree()),
        parent=None,
        author=who,
        committer=who,
        when=datetime(2026, 11, 30, tzinfo=UTC),
        subject="empty",
        trailers=[],
    )
    assert writer.move(None, commit)

    # the pack and its index, under the temporary names they have until renamed into place
    assert {name.split("_")[1] for name in synced if name.startswith("tmp_")} == {"pack", "idx"}
    log = _git(path, "log", "--oneline")
    assert log.stdout.strip().endswith("empty")
    assert log.stderr == ""  # git >= 2.36 warns here when core.fsyncObjectFiles is set
    assert "fsyncobjectfiles" not in (path / "config").read_text().lower()


def test_a_repo_an_earlier_version_configured_loses_the_deprecated_key(tmp_path: Path) -> None:
    path = tmp_path / "kernels.git"
    Repo.init_bare(str(path), mkdir=True)
    _git(path, "config", "core.fsyncObjectFiles", "true")

    repo = open_repo(path)

    assert repo.object_store.fsync_object_files is True
    assert "fsyncobjectfiles" not in (path / "config").read_text().lower()
    assert _git(path, "config", "core.bare").stdout.strip() == "true"
