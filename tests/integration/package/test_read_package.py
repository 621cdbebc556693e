"""Reading a package into memory gives the files, checks and messages that unpacking gives."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from package_builders import DESC, KERNEL_ID, Entry, package_targz, targz, valid_files
from test_hostile_inputs import CASES, Case, _matches

from kz_events.ids import KernelId
from kz_package import (
    Limits,
    MemoryBudgetExceeded,
    PackageError,
    judge_changes,
    pack_directory,
    pack_files,
    read_package,
    read_package_files,
    unpack_tarball,
    validate_package_files,
    validate_tarball,
)

pytestmark = pytest.mark.integration


def _disk_files(root: Path) -> dict[str, tuple[int, bytes]]:
    out: dict[str, tuple[int, bytes]] = {}
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = Path(dirpath) / name
            mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
            out[path.relative_to(root).as_posix()] = (mode, path.read_bytes())
    return dict(sorted(out.items()))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_memory_validation_refuses_every_hostile_input_like_disk(case: Case) -> None:
    """Each hostile tarball read in memory fails with the same code and message as on disk."""
    expected = KernelId.parse(case.expected_id) if case.expected_id else None
    with pytest.raises(PackageError) as on_disk:
        validate_tarball(io.BytesIO(case.build()), expected_kernel_id=expected, limits=case.limits)
    with pytest.raises(PackageError) as in_memory:
        package = read_package(case.build(), case.limits)
        validate_package_files(package, expected_kernel_id=expected, limits=case.limits)
    assert in_memory.value.code == on_disk.value.code == case.code
    assert in_memory.value.message == on_disk.value.message
    assert _matches(case.message, in_memory.value.message)


@pytest.mark.parametrize("prefix", ["", "my-kernel/"])
def test_files_in_memory_equal_the_unpacked_tree(prefix: str, tmp_path: Path) -> None:
    """read_package_files returns the unpacked tree's files, modes and bytes, top folder cut."""
    data = package_targz(prefix=prefix, extra=[Entry(f"{prefix}src/empty", kind="dir")])
    unpack_tarball(io.BytesIO(data), tmp_path / "pkg")
    assert read_package_files(data) == _disk_files(tmp_path / "pkg")
    assert "src/empty" in read_package(data).dirs


def test_executable_bit_is_kept(tmp_path: Path) -> None:
    """A file packed executable reads back with mode 0o755, others with 0o644."""
    root = tmp_path / "pkg"
    for name, content in valid_files().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    (root / "src/kernel.py").chmod(0o755)
    out = io.BytesIO()
    pack_directory(root, out)
    files = read_package_files(out.getvalue())
    assert files["src/kernel.py"][0] == 0o755
    assert files[".kernel_package/desc.yaml"] == (0o644, DESC.encode())


def test_valid_package_validates_in_memory() -> None:
    """A valid package read in memory validates to the same kernel id and desc as on disk."""
    data = package_targz()
    expected = KernelId.parse(KERNEL_ID)
    package = validate_package_files(read_package(data), expected_kernel_id=expected)
    on_disk = validate_tarball(io.BytesIO(data))
    assert (package.kernel_id, package.desc, package.bench_result) == (
        on_disk.kernel_id,
        on_disk.desc,
        on_disk.bench_result,
    )
    assert str(package.kernel_id) == KERNEL_ID


@pytest.mark.parametrize(
    "entries",
    [
        [Entry("a", data=b"x"), Entry("a/b", data=b"y")],
        [Entry("a", data=b"x"), Entry("a", kind="dir")],
        [Entry("a/b", data=b"y"), Entry("a", data=b"x")],
        [Entry("a/b", kind="dir"), Entry("a/b", data=b"x")],
    ],
    ids=["file-then-child", "file-then-dir", "child-then-file", "dir-then-file"],
)
def test_colliding_paths_are_refused_like_disk(entries: list[Entry], tmp_path: Path) -> None:
    """Entries whose paths collide raise the same error in memory as when unpacked."""
    data = targz(entries)
    with pytest.raises(PackageError) as on_disk:
        unpack_tarball(io.BytesIO(data), tmp_path / "pkg")
    with pytest.raises(PackageError) as in_memory:
        read_package(data)
    assert in_memory.value.message == on_disk.value.message


def test_memory_cap_raises_its_own_error() -> None:
    """A package whose files outgrow max_memory_bytes raises MemoryBudgetExceeded, not a refusal."""
    data = package_targz(extra=[Entry("src/big.bin", data=os.urandom(64 * 1024))])
    with pytest.raises(MemoryBudgetExceeded):
        read_package(data, Limits(), max_memory_bytes=32 * 1024)
    assert "src/big.bin" in read_package(data, Limits()).files


def test_judge_changes_compares_memory_trees_like_directories(tmp_path: Path) -> None:
    """judge_changes gives the same answer for trees in memory as for unpacked directories."""
    current = package_targz()
    files = valid_files()
    files[".kernel_package/benchmark.py"] = b"print('changed')\n"
    submitted = package_targz(files)
    unpack_tarball(io.BytesIO(current), tmp_path / "cur")
    unpack_tarball(io.BytesIO(submitted), tmp_path / "sub")
    on_disk = judge_changes(tmp_path / "cur", tmp_path / "sub")
    assert judge_changes(read_package(current), read_package(submitted)) == on_disk
    assert on_disk == ["benchmark.py"]


def test_pack_files_makes_the_bytes_pack_directory_makes(tmp_path: Path) -> None:
    """pack_files of a tree in memory gives the same tarball bytes as packing it from disk."""
    root = tmp_path / "pkg"
    files = {name: (0o644, content) for name, content in valid_files().items()}
    files[".kernel_package/benchmark.py"] = (0o755, files[".kernel_package/benchmark.py"][1])
    for name, (mode, content) in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
        (root / name).chmod(mode)
    on_disk, in_memory = io.BytesIO(), io.BytesIO()
    assert pack_files(files, in_memory) == pack_directory(root, on_disk)
    assert in_memory.getvalue() == on_disk.getvalue()
    assert read_package_files(in_memory.getvalue()) == files
