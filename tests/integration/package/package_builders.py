"""Builders of package tarballs for the package tests: valid ones, and every kind of broken one."""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass

KERNEL_ID = "cpu/Norm/RMSNorm/fp32/test_pkg"

DESC = f"""\
schema_version: 1
kernel_id: {KERNEL_ID}
title: Test RMSNorm
description: A package built by the tests.
authors: [Test Author <t@example.org>]
language: python
metric: {{name: latency, unit: us, better: lower}}
workloads:
  - name: small
    params: {{rows: 4, cols: 8}}
"""

BENCH_RESULT = f"schema_version: 1\nkernel_id: {KERNEL_ID}\n"
SCRIPT = "import sys\n\nsys.exit(0)\n"


def valid_files() -> dict[str, bytes]:
    """The files of a small valid package, by path."""
    return {
        ".kernel_package/desc.yaml": DESC.encode(),
        ".kernel_package/bench_result.yaml": BENCH_RESULT.encode(),
        ".kernel_package/build_test_env.py": SCRIPT.encode(),
        ".kernel_package/benchmark.py": SCRIPT.encode(),
        "src/kernel.py": b"def kernel(x):\n    return x\n",
    }


@dataclass(frozen=True)
class Entry:
    """One tar entry: kind is file, dir, symlink, hardlink, chr, blk or fifo."""

    name: str
    kind: str = "file"
    data: bytes = b""
    target: str = ""


_TYPES = {
    "file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
    "hardlink": tarfile.LNKTYPE, "chr": tarfile.CHRTYPE, "blk": tarfile.BLKTYPE,
    "fifo": tarfile.FIFOTYPE,
}  # fmt: skip


def tar_bytes(entries: Iterable[Entry]) -> bytes:
    """An uncompressed tar of the entries, exactly as given (no sanitising)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry.name)
            info.type = _TYPES[entry.kind]
            info.linkname = entry.target
            info.mode = 0o755 if entry.kind == "dir" else 0o644
            if entry.kind == "file":
                info.size = len(entry.data)
                tar.addfile(info, io.BytesIO(entry.data))
            else:
                tar.addfile(info)
    return buf.getvalue()


def targz(entries: Iterable[Entry]) -> bytes:
    return gzip.compress(tar_bytes(entries), mtime=0)


def package_targz(
    files: dict[str, bytes] | None = None, *, extra: Iterable[Entry] = (), prefix: str = ""
) -> bytes:
    """A gzip tarball of `files` (default: a valid package) plus `extra` entries."""
    files = valid_files() if files is None else files
    entries = [Entry(prefix + name, data=data) for name, data in sorted(files.items())]
    return targz([*entries, *extra])


def with_file(name: str, data: bytes | str) -> bytes:
    """A valid package with one file replaced (or added)."""
    files = valid_files()
    files[name] = data.encode() if isinstance(data, str) else data
    return package_targz(files)


def without_file(name: str) -> bytes:
    files = valid_files()
    del files[name]
    return package_targz(files)


def billion_laughs() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        lines.append(f"{name}: &{name} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]")
    return "\n".join(lines) + "\n"
