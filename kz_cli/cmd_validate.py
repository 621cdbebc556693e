"""`kz validate PATH [--kernel-id ID] [--json]`: check a package directory or tarball the way the
server will, and print every problem.

A directory is first packed canonically, exactly as `kz submit` sends it, so the archive limits
apply locally too and the summary shows the sha256 the server will store.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from kz_events.errors import InvalidInput
from kz_events.ids import KernelId
from kz_package import Package, PackageError, pack_directory, validate_tarball

__all__ = ["register", "run_validate"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate", help="check a kernel package (directory or .tar.gz) like the server does"
    )
    parser.add_argument("path", type=Path, help="package directory or gzip tarball")
    parser.add_argument("--kernel-id", help="the kernel id the package must declare")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run_validate)


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def _check(path: Path, expected: KernelId | None) -> tuple[Package, str]:
    if path.is_dir():
        with tempfile.TemporaryDirectory(prefix="kz-validate-") as tmp:
            tarball = Path(tmp) / "package.tar.gz"
            digest = pack_directory(path, tarball)
            return validate_tarball(tarball, expected_kernel_id=expected), digest
    if path.is_file():
        return validate_tarball(path, expected_kernel_id=expected), _sha256_of(path)
    raise InvalidInput(f"PATH must be a package directory or a .tar.gz file, got {str(path)!r}")


def _summary(package: Package, digest: str) -> str:
    desc = package.desc
    metric = f"{desc.metric.name} in {desc.metric.unit}, {desc.metric.better} is better"
    return (
        f"valid: {package.kernel_id} ({desc.language}; {metric}; "
        f"{len(desc.workloads)} workloads; sha256 {digest})"
    )


def run_validate(args: argparse.Namespace) -> int:
    expected = KernelId.parse(args.kernel_id) if args.kernel_id else None
    try:
        package, digest = _check(args.path, expected)
    except PackageError as exc:
        if args.json:
            error = {"code": exc.code, "message": exc.message, "details": exc.details}
            print(json.dumps({"valid": False, "error": error}, indent=2))
        else:
            for problem in exc.problems:
                print(problem)
        return 1
    if args.json:
        print(json.dumps({"valid": True, "kernel_id": str(package.kernel_id), "sha256": digest}))
    else:
        print(_summary(package, digest))
    return 0
