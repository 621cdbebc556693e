"""Writing a tree held in memory to disk: the tree, modes and refusals `unpack_tarball` gives."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from package_builders import valid_files

from kz_package import (
    UNSAFE_ARCHIVE,
    PackageError,
    pack_files,
    read_package,
    unpack_tarball,
    write_tree,
)

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    """Modes below are those of the usual umask, whatever the test runner's is."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def _tree(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every path under `root` with its permission bits, and its bytes for a file."""
    out: dict[str, tuple[int, bytes | None]] = {}
    for path in sorted(root.rglob("*")):
        mode = stat.S_IMODE(path.lstat().st_mode)
        out[path.relative_to(root).as_posix()] = (
            mode,
            path.read_bytes() if path.is_file() else None,
        )
    return out


def test_the_written_tree_is_the_unpacked_tree(tmp_path: Path) -> None:
    """A package read into memory and written out equals the same package unpacked: every
    folder, file, byte and mode, empty folders included."""
    files = {name: (0o644, data) for name, data in valid_files().items()}
    files["src/run.sh"] = (0o700, b"#!/bin/sh\n")
    files["src/deep/er/data.bin"] = (0o600, b"\0" * 100)
    files["src/empty.txt"] = (0o644, b"")
    tarball = io.BytesIO()
    pack_files(files, tarball)
    unpack_tarball(io.BytesIO(tarball.getvalue()), tmp_path / "unpacked")
    tree = read_package(tarball.getvalue())
    write_tree(tree.files, tmp_path / "written", tree.dirs)
    written = _tree(tmp_path / "written")
    assert written == _tree(tmp_path / "unpacked")
    assert written["src/run.sh"][0] == 0o755 and written["src/deep/er/data.bin"][0] == 0o644
    assert written["src/deep/er"] == (0o755, None)


def test_folders_without_files_and_missing_parents_are_made(tmp_path: Path) -> None:
    """`dirs` adds folders that hold no file; `dest` and its missing parents are made, 0o755."""
    dest = tmp_path / "not" / "yet" / "here"
    write_tree({"a/b/c.txt": (0o644, b"c")}, dest, {"empty", "a/also/empty"})
    assert _tree(dest) == {
        "a": (0o755, None),
        "a/also": (0o755, None),
        "a/also/empty": (0o755, None),
        "a/b": (0o755, None),
        "a/b/c.txt": (0o644, b"c"),
        "empty": (0o755, None),
    }
    assert stat.S_IMODE(dest.stat().st_mode) == 0o755


@pytest.mark.parametrize(
    ("files", "dirs", "message"),
    [
        ({"../escape.txt": (0o644, b"x")}, set(), "must not contain '..'"),
        ({"a/../../escape.txt": (0o644, b"x")}, set(), "must not contain '..'"),
        ({"ok.txt": (0o644, b"x")}, {".."}, "must not contain '..'"),
        ({"/etc/escape": (0o644, b"x")}, set(), "must be relative"),
        ({"C:escape": (0o644, b"x")}, set(), "must be relative"),
        ({"a\\..\\escape": (0o644, b"x")}, set(), "must be relative"),
        ({"a//b": (0o644, b"x")}, set(), "'//'"),
        ({"./a": (0o644, b"x")}, set(), "'.'"),
        ({"a": (0o644, b"x"), "a/b": (0o644, b"y")}, set(), "collides"),
        ({"a": (0o644, b"x")}, {"a"}, "collides"),
    ],
)
def test_paths_that_leave_dest_or_collide_write_nothing(
    files: dict[str, tuple[int, bytes]], dirs: set[str], message: str, tmp_path: Path
) -> None:
    """A path outside `dest`, or a file where a folder must be, is refused before anything is
    written: `dest` never appears and nothing lands beside it."""
    dest = tmp_path / "box" / "dest"
    with pytest.raises(PackageError) as refused:
        write_tree(files, dest, dirs)
    assert refused.value.code == UNSAFE_ARCHIVE
    assert message in refused.value.message
    assert list(tmp_path.iterdir()) == []


def test_an_existing_dest_is_refused(tmp_path: Path) -> None:
    """Like unpacking, writing a tree never merges into an existing folder."""
    (tmp_path / "dest").mkdir()
    with pytest.raises(FileExistsError, match="must not exist"):
        write_tree({"a.txt": (0o644, b"a")}, tmp_path / "dest")
    assert list((tmp_path / "dest").iterdir()) == []
