"""Pack roll-up on a real repository: bounded pack count, every object kept, fsck clean."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from dulwich.objects import Blob
from dulwich.repo import Repo

from kz_projector.gitpacks import MAX_PACKS
from kz_projector.gitstore import Writer

pytestmark = pytest.mark.integration


def _packs(path: Path) -> int:
    return len(list((path / "objects" / "pack").glob("*.idx")))


def test_many_flushes_keep_few_packs_and_every_object(tmp_path: Path) -> None:
    """300 one-blob batches leave at most MAX_PACKS + a few packs; a reader opened before the
    roll-ups still finds every object; git fsck --strict accepts the repo."""
    path = tmp_path / "repo.git"
    repo = Repo.init_bare(str(path), mkdir=True)
    reader = Repo(str(path))
    writer = Writer(repo)
    shas = []
    for i in range(300):
        shas.append(writer.blob(f"object {i}\n".encode()))
        writer.flush()
        if i == 5:
            assert all(reader.object_store[sha].id == sha for sha in shas)  # packs now cached
        assert _packs(path) <= MAX_PACKS + 1
    assert _packs(path) <= MAX_PACKS
    for sha in shas:
        blob = reader.object_store[sha]
        assert isinstance(blob, Blob) and blob.id == sha
    fresh = Repo(str(path))
    assert all(sha in fresh.object_store for sha in shas)
    for opened in (fresh, reader, repo):
        opened.close()
    subprocess.run(["git", "-C", str(path), "fsck", "--strict"], check=True, capture_output=True)
    count = subprocess.run(["git", "-C", str(path), "count-objects", "-v"], check=True,
                           capture_output=True, text=True).stdout
    assert "in-pack: 300" in count
