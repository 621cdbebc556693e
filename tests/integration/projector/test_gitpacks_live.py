"""Pack roll-up on a real repository: bounded pack count, every object kept, fsck clean."""

from __future__ import annotations

import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dulwich.objects import Blob
from dulwich.repo import Repo

from kz_projector import gitpacks
from kz_projector.gitpacks import MAX_PACKS, write_pack
from kz_projector.gitstore import Person, Writer

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
    count = subprocess.run(
        ["git", "-C", str(path), "count-objects", "-v"], check=True, capture_output=True, text=True
    ).stdout
    assert "in-pack: 300" in count


def _verify_packs(path: Path) -> None:
    for idx in (path / "objects" / "pack").glob("*.idx"):
        subprocess.run(
            ["git", "-C", str(path), "verify-pack", str(idx)], check=True, capture_output=True
        )
    subprocess.run(["git", "-C", str(path), "fsck", "--strict"], check=True, capture_output=True)


def test_roll_up_copies_entries_and_keeps_one_copy_of_each_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Packs the projector wrote roll up by copying their entries, not by re-deflating them;
    trees written again in later batches end up once in the rolled-up pack; git's own
    verify-pack accepts every pack (checksums, CRCs, offsets) and fsck the repo."""
    monkeypatch.setattr(gitpacks, "_objects", lambda packs: pytest.fail("objects rewritten"))
    path = tmp_path / "repo.git"
    repo = Repo.init_bare(str(path), mkdir=True)
    writer = Writer(repo)
    shared = writer.tree_of({"a.txt": (0o100644, b"same\n")})
    writer.flush()
    trees = {shared}
    for i in range(40):
        writer.known.discard(shared)  # as after a restart: the same tree is written again
        trees.add(writer.tree_of({"a.txt": (0o100644, b"same\n")}))
        trees.add(writer.tree_of({f"f{i}.txt": (0o100644, f"{i}\n".encode())}))
        writer.flush()
    repo.close()
    _verify_packs(path)
    count = subprocess.run(
        ["git", "-C", str(path), "count-objects", "-v"], check=True, capture_output=True, text=True
    ).stdout
    packed = int(
        next(line for line in count.splitlines() if line.startswith("in-pack:")).split()[1]
    )
    copies = len(trees) + 40 + 1  # trees, the 40 distinct blobs, the shared blob
    assert _packs(path) <= MAX_PACKS
    assert packed <= copies + MAX_PACKS  # at most one extra copy per surviving pack
    fresh = Repo(str(path))
    assert all(sha in fresh.object_store for sha in trees)
    fresh.close()


def test_packs_with_deltas_roll_up_through_the_slow_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pack git wrote with deltas (e.g. after `git gc`) is not byte-copied: its objects are
    rewritten whole, and the repo stays valid."""
    path = tmp_path / "repo.git"
    repo = Repo.init_bare(str(path), mkdir=True)
    writer = Writer(repo)
    text = "".join(f"line {n}\n" for n in range(400))
    shas = [writer.blob((text + f"tail {i}\n").encode()) for i in range(20)]
    files = {f"v{i}": (0o100644, (text + f"tail {i}\n").encode()) for i in range(20)}
    someone = Person("someone", "someone@example.org")
    head = writer.commit(
        tree=writer.tree_of(files),
        parent=None,
        author=someone,
        committer=someone,
        when=datetime(2026, 1, 1, tzinfo=UTC),
        subject="all",
        trailers=[],
    )
    assert writer.move(None, head, b"refs/heads/keep")
    repo.close()
    subprocess.run(
        ["git", "-C", str(path), "repack", "-adf", "--window=50"], check=True, capture_output=True
    )
    verify = subprocess.run(
        [
            "git",
            "-C",
            str(path),
            "verify-pack",
            "-v",
            *map(str, (path / "objects" / "pack").glob("*.idx")),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "chain length" in verify  # git made deltas
    rewritten: list[int] = []
    whole = gitpacks._objects
    monkeypatch.setattr(
        gitpacks, "_objects", lambda packs: (rewritten.append(len(packs)), whole(packs))[1]
    )
    repo = Repo(str(path))
    writer = Writer(repo)
    for i in range(MAX_PACKS + 2):  # enough small packs that the big one joins the roll-up
        shas.extend(writer.blob(f"more {i} {k}\n".encode()) for k in range(4))
        writer.flush()
    repo.close()
    assert rewritten  # the roll-up that took in git's pack went through dulwich
    _verify_packs(path)
    assert _packs(path) <= MAX_PACKS
    fresh = Repo(str(path))
    assert all(sha in fresh.object_store for sha in shas)
    fresh.close()


def test_a_writer_killed_mid_index_does_not_block_the_next(tmp_path: Path) -> None:
    """A projector killed while writing a pack's index leaves the pack and a half-written
    `pack-<name>.idx.lock`. Folding again writes the same objects as the same pack: it must be
    installed regardless (no lock file is taken), with nothing left behind but that debris."""
    first = Repo.init_bare(str(tmp_path / "first.git"), mkdir=True)
    blobs = [Blob.from_string(f"object {i}\n".encode()) for i in range(20)]
    write_pack(first.object_store, blobs)
    [idx] = (tmp_path / "first.git" / "objects" / "pack").glob("pack-*.idx")
    first.close()
    path = tmp_path / "repo.git"
    repo = Repo.init_bare(str(path), mkdir=True)
    pack_dir = path / "objects" / "pack"
    shutil.copy(idx.with_suffix(".pack"), pack_dir)  # what the killed writer left
    (pack_dir / f"{idx.name}.lock").write_bytes(b"half an index")
    write_pack(repo.object_store, blobs)
    assert (pack_dir / idx.name).read_bytes() == idx.read_bytes()
    assert not list(pack_dir.glob("tmp_*"))
    assert all(Repo(str(path)).object_store[blob.id].id == blob.id for blob in blobs)
    repo.close()
    _verify_packs(path)
