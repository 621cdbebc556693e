"""Canonical packing and streaming unpacking of real directories."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
from package_builders import KERNEL_ID, Entry, package_targz, valid_files

from kz_package import pack_directory, unpack_tarball, validate_tarball

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[3] / "examples/kernels/cpu/Norm/RMSNorm/fp32/numpy_ref"


def _write_tree(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def test_canonical_sha256_is_stable_across_copies(tmp_path: Path) -> None:
    """Packing a tree twice, and a copy with other mtimes and junk, gives one sha256."""
    first = pack_directory(EXAMPLE, tmp_path / "a.tar.gz")
    again = pack_directory(EXAMPLE, io.BytesIO())
    copy = tmp_path / "elsewhere" / "checkout"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for path in copy.rglob("*"):
        os.utime(path, (1_000_000, 1_000_000))
    (copy / "src" / "__pycache__").mkdir()
    (copy / "src" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"junk")
    (copy / ".git").mkdir()
    (copy / ".git" / "HEAD").write_text("ref: x\n")
    assert first == again == pack_directory(copy, tmp_path / "b.tar.gz")
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()


def test_canonical_tarball_is_sorted_and_normalised(tmp_path: Path) -> None:
    """Entries are sorted, owned by 0:0 with empty names, mtime 0, modes 0644/0755."""
    _write_tree(tmp_path / "pkg", valid_files())
    (tmp_path / "pkg" / "src" / "kernel.py").chmod(0o700)
    out = tmp_path / "p.tar.gz"
    pack_directory(tmp_path / "pkg", out)
    with tarfile.open(out) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert {(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in members} == {(0, 0, "", "", 0)}
    modes = {m.name: m.mode for m in members}
    assert modes["src/kernel.py"] == 0o755
    assert modes[".kernel_package/desc.yaml"] == 0o644
    assert out.read_bytes()[4:8] == b"\x00\x00\x00\x00"  # gzip header mtime


def test_pack_refuses_symlinks(tmp_path: Path) -> None:
    """A directory holding a symlink cannot be packed: the server would refuse it anyway."""
    _write_tree(tmp_path / "pkg", valid_files())
    (tmp_path / "pkg" / "src" / "link").symlink_to("/etc/passwd")
    with pytest.raises(Exception, match="only regular files and directories") as caught:
        pack_directory(tmp_path / "pkg", io.BytesIO())
    assert getattr(caught.value, "code", None) == "unsafe_archive"


def test_pack_then_validate_round_trips(tmp_path: Path) -> None:
    """A packed valid tree validates and keeps its kernel id and files."""
    _write_tree(tmp_path / "pkg", valid_files())
    pack_directory(tmp_path / "pkg", tmp_path / "p.tar.gz")
    package = validate_tarball(tmp_path / "p.tar.gz")
    assert str(package.kernel_id) == KERNEL_ID
    assert package.bench_result is None
    assert not package.root.exists()


def test_unpack_accepts_one_top_level_folder(tmp_path: Path) -> None:
    """A package wrapped in one top-level folder unpacks with that folder stripped."""
    (tmp_path / "p.tar.gz").write_bytes(package_targz(prefix="my-kernel/"))
    unpack_tarball(tmp_path / "p.tar.gz", tmp_path / "out")
    assert (tmp_path / "out" / ".kernel_package" / "desc.yaml").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "p.tar.gz"]


def test_unpack_refuses_an_existing_destination(tmp_path: Path) -> None:
    """The destination must not exist, so nothing already there is ever overwritten."""
    (tmp_path / "out").mkdir()
    with pytest.raises(FileExistsError):
        unpack_tarball(io.BytesIO(package_targz()), tmp_path / "out")


def test_unpack_from_a_stream_drops_exec_bits_it_does_not_need(tmp_path: Path) -> None:
    """Unpacking from a file object writes files 0644 and directories 0755."""
    unpack_tarball(
        io.BytesIO(package_targz(extra=[Entry("src/sub/x.py", data=b"x")])), tmp_path / "out"
    )
    assert (tmp_path / "out" / "src" / "sub" / "x.py").stat().st_mode & 0o777 == 0o644


_MEASURE = textwrap.dedent("""
    import sys
    from pathlib import Path
    from kz_package import unpack_tarball
    def status_kib(key):  # VmHWM is this process's peak RSS (ru_maxrss survives exec)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    before = status_kib("VmRSS")
    unpack_tarball(Path(sys.argv[1]), Path(sys.argv[2]))
    print(status_kib("VmHWM") - before)
""")


class _Compressible:
    """Reads `size` bytes: in every 32 KiB, 2 KiB of random bytes then zeros (ratio about 15)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        out = bytearray()
        while len(out) < n:
            out += os.urandom(2048) + bytes(30 * 1024)
        self.left -= n
        return bytes(out[:n])


def test_unpacking_200_mib_stays_under_64_mib_of_extra_memory(tmp_path: Path) -> None:
    """A valid 200 MiB package unpacks in a fresh process with under 64 MiB of extra RSS."""
    files = valid_files()
    tarball = tmp_path / "big.tar.gz"
    with tarfile.open(tarball, "w:gz", compresslevel=1) as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for i in range(13):
            info = tarfile.TarInfo(f"src/data/blob{i:02d}.bin")
            info.size = 200 * 1024 * 1024 // 13
            tar.addfile(info, _Compressible(info.size))  # type: ignore[arg-type]
    assert tarball.stat().st_size < 32 * 1024 * 1024
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(tarball), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    extra_mib = int(proc.stdout.strip()) / 1024
    unpacked = sum(p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert unpacked > 199 * 1024 * 1024
    assert extra_mib < 64, f"unpacking used {extra_mib:.1f} MiB extra"
    print(f"200 MiB unpack: {extra_mib:.1f} MiB extra RSS")
