"""Support code for kernel zoo's tests and benchmarks: the files of a small valid kernel
package, packed into the canonical tarball in memory or written out as a folder.

A package is a mapping of paths inside the package to bytes, so a caller can change one file
(a broken desc.yaml, a scripted src/stub.json) before packing it.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

from kz_package import PACKAGE_DIR, pack_files

__all__ = [
    "TRIVIAL_BENCHMARK",
    "TRIVIAL_BUILD",
    "package_files",
    "package_tarball",
    "write_package",
]

TRIVIAL_BENCHMARK = "print('bench')\n"
TRIVIAL_BUILD = "print('ok')\n"
FILE_MODE = 0o644

DESC = """schema_version: 1
kernel_id: {kernel_id}
title: {title}
description: A small kernel package for kernel zoo's tests and benchmarks.
authors: [Kernel Zoo Tests <tests@kernel-zoo.invalid>]
language: python
metric: {{name: latency, unit: us, better: {better}}}
workloads: [{{name: {workload}}}]
"""


def package_files(
    kernel_id: str,
    *,
    title: str = "Test kernel",
    better: str = "lower",
    workload: str = "w",
    benchmark: str = TRIVIAL_BENCHMARK,
    build_test_env: str = TRIVIAL_BUILD,
    src: Mapping[str, str] | None = None,
    salt: str | None = None,
) -> dict[str, bytes]:
    """The files of a valid package for `kernel_id`, keyed by their path in the package.

    `better` goes into the metric as given (so a test may pass an invalid direction); `src`
    maps file names under `src/` to their text (default: one `kernel.py`); a `salt` adds
    `src/salt.txt`, so packages that differ only by salt have different digests.
    """
    desc = DESC.format(kernel_id=kernel_id, title=title, better=better, workload=workload)
    files = {
        f"{PACKAGE_DIR}/desc.yaml": desc,
        f"{PACKAGE_DIR}/bench_result.yaml": f"schema_version: 1\nkernel_id: {kernel_id}\n",
        f"{PACKAGE_DIR}/benchmark.py": benchmark,
        f"{PACKAGE_DIR}/build_test_env.py": build_test_env,
    }
    files.update({f"src/{name}": text for name, text in (src or {"kernel.py": "x = 1\n"}).items()})
    if salt is not None:
        files["src/salt.txt"] = salt
    return {path: text.encode() for path, text in files.items()}


def package_tarball(files: Mapping[str, bytes]) -> bytes:
    """The canonical gzip tarball of `files`: the bytes `pack_directory` makes of the same tree."""
    out = io.BytesIO()
    pack_files({path: (FILE_MODE, data) for path, data in files.items()}, out)
    return out.getvalue()


def write_package(root: Path, files: Mapping[str, bytes]) -> Path:
    """Write `files` as a package folder at `root` (for code that runs or packs a folder)."""
    for path, data in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root
