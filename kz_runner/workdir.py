"""A task's work dir: the package laid out with main's judge files over it, then removed.

A small package (compressed size known and at most `MEMORY_PACKAGE_BYTES`) is fetched into
memory, read there with every check `unpack_tarball` makes, given the judge files, and written
once: its work dir is the task dir itself. A bigger package, or one whose files hold more than
`MEMORY_TREE_BYTES`, is unpacked from its tarball into `<task dir>/pkg`. Writing files costs
far more than reading them on the filesystems runners use, so the in-memory path writes each
folder and file exactly once.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from kz_package import (
    JUDGE_FILES,
    MIB,
    PACKAGE_DIR,
    REFERENCE_DIR,
    MemoryBudgetExceeded,
    PackageFiles,
    read_package,
    read_package_files,
    unpack_tarball,
    write_tree,
)

__all__ = [
    "MEMORY_PACKAGE_BYTES",
    "MEMORY_TREE_BYTES",
    "SOURCE_MTIME",
    "TARBALL",
    "baseline_path",
    "copy_source",
    "incumbent_files",
    "judge_files",
    "lay_out",
    "make_task_dir",
    "reads_in_memory",
    "reference_files",
    "remove_tree",
    "write_incumbent",
]

MEMORY_PACKAGE_BYTES = 1 * MIB
MEMORY_TREE_BYTES = 16 * MIB
TARBALL = "package.tar.gz"
_BASELINE = f"{PACKAGE_DIR}/bench_result.yaml"
_PARENT = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_DIR = _PARENT | os.O_NOFOLLOW
SOURCE_MTIME = 946_684_800  # 2000-01-01: every worker's src/ carries this time, whoever it is


def reads_in_memory(package_size: int | None) -> bool:
    """Whether a package of this compressed size (None: unknown) is fetched into memory."""
    return package_size is not None and package_size <= MEMORY_PACKAGE_BYTES


def make_task_dir(base: Path) -> None:
    """The task dir of a package unpacked from disk, which holds its tarball and `pkg/`; the
    sandbox's unprivileged uid passes through it."""
    base.mkdir(mode=0o711)
    base.chmod(0o711)


def judge_files(bundle: bytes | None) -> dict[str, bytes]:
    """Main's trusted judge files in its bundle, by path in the package; none without one."""
    if bundle is None:
        return {}
    trusted = read_package_files(bundle)
    wanted = (f"{PACKAGE_DIR}/{name}" for name in JUDGE_FILES)
    return {rel: trusted[rel][1] for rel in wanted if rel in trusted}


def incumbent_files(bundle: bytes | None) -> dict[str, bytes]:
    """Main's `src/` of the kernel in its bundle (the incumbent), by path under `src/`."""
    return _files_under(bundle, "src/")


def reference_files(bundle: bytes | None) -> dict[str, bytes]:
    """The board's pinned reference `src/` in a bundle (its `reference/src/`), by path under
    `src/`."""
    return _files_under(bundle, f"{REFERENCE_DIR}/src/")


def _files_under(bundle: bytes | None, prefix: str) -> dict[str, bytes]:
    if bundle is None:
        return {}
    trusted = read_package_files(bundle)
    return {rel.removeprefix(prefix): data for rel, (_mode, data) in trusted.items()
            if rel.startswith(prefix)}  # fmt: skip


def write_incumbent(files: dict[str, bytes], folder: Path) -> Path | None:
    """Write the incumbent's files as `folder/src` (its view in a worker); None without any."""
    if not files:
        return None
    src = folder / "src"
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    return src


def copy_source(source: Path | None, target: Path) -> None:
    """Write `source` (None: nothing) as `target`, a read-only tree that tells nothing but its
    content: folders 0555 and files 0444 owned by the runner, every time `SOURCE_MTIME`, so
    the candidate's, the incumbent's and the reference's `src/` look alike to a worker that
    stats them. Links are not copied (a package cannot hold any)."""
    target.mkdir(mode=0o755)
    folders = [target]
    if source is not None:
        for directory, dirs, files in os.walk(source):
            here = target / Path(directory).relative_to(source)
            for name in sorted(dirs):
                if not (Path(directory) / name).is_symlink():
                    (here / name).mkdir(mode=0o755)
                    folders.append(here / name)
            for name in sorted(files):
                path = Path(directory) / name
                if not path.is_symlink():
                    (here / name).write_bytes(path.read_bytes())
                    _settle(here / name, 0o444)
    for folder in reversed(folders):
        _settle(folder, 0o555)


def _settle(path: Path, mode: int) -> None:
    path.chmod(mode)
    os.utime(path, (SOURCE_MTIME, SOURCE_MTIME), follow_symlinks=False)


def baseline_path(workdir: Path, judge: dict[str, bytes]) -> Path | None:
    """Main's bench_result.yaml in the work dir, when the judge bundle brought one."""
    return workdir / _BASELINE if _BASELINE in judge else None


def lay_out(
    base: Path,
    package: bytes | Path,
    judge: dict[str, bytes],
    *,
    max_memory_bytes: int = MEMORY_TREE_BYTES,
) -> Path:
    """Lay the package (its tarball's bytes, or its path on disk) out under the task dir `base`
    with the judge files over it; the work dir. Raises PackageError for a package that
    `unpack_tarball` refuses."""
    if isinstance(package, Path):
        return _unpack(package, base, judge)
    try:
        tree = read_package(package, max_memory_bytes=max_memory_bytes)
    except MemoryBudgetExceeded:
        make_task_dir(base)
        return _unpack(io.BytesIO(package), base, judge)
    _overlay(tree, judge)
    write_tree(tree.files, base, tree.dirs)
    base.chmod(0o755)
    return base


def _unpack(source: Path | BinaryIO, base: Path, judge: dict[str, bytes]) -> Path:
    workdir = base / "pkg"
    unpack_tarball(source, workdir)
    workdir.chmod(0o755)
    for rel, data in judge.items():
        (workdir / rel).write_bytes(data)
    return workdir


def _overlay(tree: PackageFiles, judge: dict[str, bytes]) -> None:
    """Judge files replace the submitted ones in place, keeping their modes, as on disk."""
    for rel, data in judge.items():
        mode = tree.files[rel][0] if rel in tree.files else 0o644
        tree.files[rel] = (mode, data)


def remove_tree(path: Path) -> None:
    """Remove `path` and everything under it, never following a link; a missing path is fine.

    Folders a step left read-only or unreadable are opened up (owner only) on the way, so
    nothing stays; raises OSError for what still cannot be removed.
    """
    try:
        is_dir = stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return
    if not is_dir:
        path.unlink()
        return
    parent = os.open(path.parent, _PARENT)
    try:
        _remove_dir(parent, path.name)
    finally:
        os.close(parent)


def _remove_dir(parent: int, name: str) -> None:
    fd = _open_dir(parent, name)
    try:
        with os.scandir(fd) as entries:
            listed = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
        for child, is_dir in listed:
            _opening_up(fd, _remove_dir if is_dir else _unlink, child)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)


def _open_dir(parent: int, name: str) -> int:
    try:
        return os.open(name, _DIR, dir_fd=parent)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=parent)
        return os.open(name, _DIR, dir_fd=parent)


def _unlink(parent: int, name: str) -> None:
    os.unlink(name, dir_fd=parent)


def _opening_up(fd: int, remove: Callable[[int, str], None], name: str) -> None:
    """Remove `name` in the folder `fd`; if refused, make that folder writable and retry."""
    try:
        remove(fd, name)
    except PermissionError:
        os.chmod(fd, 0o700)
        remove(fd, name)
