"""A task's work dir: laid out in memory or from disk to the same tree, and removed whole."""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from runner_helpers import REPO

from kz_package import UNSAFE_ARCHIVE, PackageError, pack_files
from kz_runner.workdir import (
    MEMORY_PACKAGE_BYTES,
    TARBALL,
    baseline_path,
    judge_files,
    lay_out,
    make_task_dir,
    reads_in_memory,
    remove_tree,
)

pytestmark = pytest.mark.integration

SUBMITTED = {
    ".kernel_package/desc.yaml": (0o644, b"kernel_id: submitted\n"),
    ".kernel_package/benchmark.py": (0o755, b"print('submitted judge')\n"),
    ".kernel_package/build_test_env.py": (0o644, b"pass\n"),
    "src/kernel.py": (0o644, b"def kernel(x):\n    return x\n"),
    "src/data/table.bin": (0o644, b"\1\2\3"),
}
MAIN_JUDGE = {
    ".kernel_package/benchmark.py": (0o644, b"print('main judge')\n"),
    ".kernel_package/bench_result.yaml": (0o644, b"best: {value: 1.0}\n"),
    "src/ignored.py": (0o644, b"not a judge file\n"),
}


def _targz(files: dict[str, tuple[int, bytes]]) -> bytes:
    out = io.BytesIO()
    pack_files(files, out)
    return out.getvalue()


def _tree(root: Path) -> dict[str, tuple[int, bytes | None]]:
    return {
        path.relative_to(root).as_posix(): (
            stat.S_IMODE(path.lstat().st_mode),
            path.read_bytes() if path.is_file() else None,
        )
        for path in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize(
    ("size", "in_memory"),
    [(None, False), (0, True), (MEMORY_PACKAGE_BYTES, True), (MEMORY_PACKAGE_BYTES + 1, False)],
)
def test_only_packages_known_to_be_small_are_fetched_into_memory(
    size: int | None, in_memory: bool
) -> None:
    """A package of unknown size, or over the limit, goes to disk."""
    assert reads_in_memory(size) is in_memory


def test_memory_and_disk_lay_out_the_same_work_dir(tmp_path: Path) -> None:
    """From memory the task dir is the work dir; from disk the tarball sits beside `pkg/`.
    Both hold the same files, bytes and modes, with main's judge files over the submitted
    ones (the submitted file's mode kept) and nothing else of the bundle."""
    data = _targz(SUBMITTED)
    judge = judge_files(_targz(MAIN_JUDGE))
    in_memory = lay_out(tmp_path / "mem", data, judge)
    make_task_dir(tmp_path / "disk")
    (tmp_path / "disk" / TARBALL).write_bytes(data)
    on_disk = lay_out(tmp_path / "disk", tmp_path / "disk" / TARBALL, judge)
    assert in_memory == tmp_path / "mem" and on_disk == tmp_path / "disk" / "pkg"
    assert sorted(p.name for p in (tmp_path / "disk").iterdir()) == [TARBALL, "pkg"]
    tree = _tree(in_memory)
    assert tree == _tree(on_disk)
    assert tree[".kernel_package/benchmark.py"] == (0o755, b"print('main judge')\n")
    assert tree[".kernel_package/bench_result.yaml"] == (0o644, b"best: {value: 1.0}\n")
    assert "src/ignored.py" not in tree
    assert stat.S_IMODE(in_memory.stat().st_mode) == stat.S_IMODE(on_disk.stat().st_mode)
    assert baseline_path(in_memory, judge) == in_memory / ".kernel_package/bench_result.yaml"
    assert baseline_path(in_memory, {}) is None


def test_a_package_over_the_memory_budget_is_unpacked_from_disk(tmp_path: Path) -> None:
    """Files holding more than the memory budget are unpacked instead, to the same tree."""
    workdir = lay_out(tmp_path / "task", _targz(SUBMITTED), {}, max_memory_bytes=8)
    assert workdir == tmp_path / "task" / "pkg"
    assert _tree(workdir) == _tree(lay_out(tmp_path / "mem", _targz(SUBMITTED), {}))


def test_a_refused_package_is_refused_in_memory_as_on_disk(tmp_path: Path) -> None:
    """A tarball whose entry leaves the package raises the same PackageError either way."""
    evil = _targz({**SUBMITTED, "../escape.txt": (0o644, b"x")})
    make_task_dir(tmp_path / "disk")
    (tmp_path / "disk" / TARBALL).write_bytes(evil)
    with pytest.raises(PackageError) as in_memory:
        lay_out(tmp_path / "mem", evil, {})
    with pytest.raises(PackageError) as on_disk:
        lay_out(tmp_path / "disk", tmp_path / "disk" / TARBALL, {})
    assert in_memory.value.code == on_disk.value.code == UNSAFE_ARCHIVE
    assert in_memory.value.message == on_disk.value.message
    assert not (tmp_path / "mem").exists()


# ---------------------------------------------------------------- removal

# Runs unprivileged: root ignores permission bits, a runner may not.
_LOCKED_DOWN = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from kz_runner.workdir import remove_tree

    box = Path(sys.argv[1])
    task, outside = box / "task", box / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "dir" / "kept.txt").write_text("kept")
    (outside / "kept.txt").write_text("kept")
    for folder in ("read_only", "unreadable/sub", "unsearchable", "deep/er/est"):
        (task / folder).mkdir(parents=True)
    for name in ("read_only/f", "unreadable/sub/f", "unsearchable/f", "deep/er/est/f", "plain"):
        (task / name).write_text("x")
        (task / name).chmod(0o400)
    (task / "to_file").symlink_to(outside / "kept.txt")
    (task / "to_dir").symlink_to(outside / "dir")
    (task / "deep/er/est").chmod(0o500)
    (task / "read_only").chmod(0o555)
    (task / "unreadable").chmod(0o000)
    (task / "unsearchable").chmod(0o600)
    task.chmod(0o500)
    box.chmod(0o711)
    remove_tree(task)
    remove_tree(task)  # gone already: nothing to do
    assert not task.exists() and not task.is_symlink()
    assert (outside / "kept.txt").read_text() == "kept"
    assert (outside / "dir" / "kept.txt").read_text() == "kept"
    assert oct(box.stat().st_mode & 0o777) == "0o711", "the parent's mode must not change"
    print("removed")
    """
)


_AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


@pytest.fixture
def unprivileged_box() -> Iterator[Path]:
    """A folder an unprivileged uid owns (root's tmp_path is not reachable by it)."""
    box = Path(tempfile.mkdtemp(prefix="kz-remove-"))
    box.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(box, 65534, 65534)
    yield box
    shutil.rmtree(box, ignore_errors=True)


def test_remove_tree_removes_what_a_step_locked_down_and_follows_no_link(
    unprivileged_box: Path,
) -> None:
    """Read-only, unreadable and unsearchable folders and read-only files all go; links are
    removed, never followed; the parent's mode is left alone."""
    as_nobody = _AS_NOBODY if os.geteuid() == 0 else []
    done = subprocess.run(
        [*as_nobody, sys.executable, "-c", _LOCKED_DOWN, str(unprivileged_box)],
        env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "removed"


def test_remove_tree_removes_a_plain_file(tmp_path: Path) -> None:
    """A leftover that is a file (not a task folder) is removed too."""
    (tmp_path / "task-0000-x").write_bytes(b"partial tarball")
    remove_tree(tmp_path / "task-0000-x")
    assert list(tmp_path.iterdir()) == []
