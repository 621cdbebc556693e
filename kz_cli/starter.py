"""A ready package for a new kernel on a board (`kz new`, the MCP `start_kernel` tool).

From the board's judge bundle (`GET /api/kernels/{new id}/judge`): the board's judge scripts
byte for byte, its desc.yaml with the new kernel id, title and author (the metric and workloads
are the board's), an empty scoreboard, and `src/` as the board's pinned reference has it
(the bundle's `reference/` folder). The result passes the server's own checks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from kz_events.errors import InvalidInput
from kz_events.ids import KernelId
from kz_package import PACKAGE_DIR, Limits, load_yaml, validate_package_files
from kz_package.judge import BOARD_JUDGE_FILES, REFERENCE_DIR
from kz_package.memread import PackageFiles, read_package_files

__all__ = ["Starter", "starter_package"]

FileMap = dict[str, tuple[int, bytes]]
PINNED = f"{REFERENCE_DIR}/PINNED.json"


@dataclass(frozen=True)
class Starter:
    """A new kernel's package: path → (mode, bytes), and where its judge and `src/` came from."""

    kernel_id: KernelId
    files: FileMap
    judge_kernel: str
    reference: dict[str, Any]


def _desc(kernel_id: KernelId, data: bytes, author: str, reference: str | None) -> bytes:
    desc = load_yaml(data, path=f"{PACKAGE_DIR}/desc.yaml")
    if not isinstance(desc, dict):
        raise InvalidInput("the board's desc.yaml is not a mapping")
    board = "/".join(kernel_id.parts[:4])
    desc["kernel_id"] = str(kernel_id)
    desc["title"] = f"{kernel_id.name} on {board}"
    desc["description"] = (
        f"A new kernel on board {board}, started from the board's pinned reference"
        + (f" ({reference})" if reference else "")
        + ". Edit src/; the judge files in .kernel_package/ are the board's."
    )
    desc["authors"] = [author]
    return yaml.safe_dump(desc, sort_keys=False, allow_unicode=True, width=100).encode()


def _empty_scoreboard(kernel_id: KernelId) -> bytes:
    return f"schema_version: 1\nkernel_id: {kernel_id}\n".encode()


def starter_package(
    kernel_id: KernelId,
    bundle: bytes,
    *,
    author: str,
    judge_kernel: str,
    reference_src: FileMap | None = None,
) -> Starter:
    """The new kernel's package from the board's judge bundle; `reference_src` (paths under
    `src/`) stands in for a bundle without a `reference/` folder."""
    found = read_package_files(bundle, Limits())
    judge = {f"{PACKAGE_DIR}/{n}": found.get(f"{PACKAGE_DIR}/{n}") for n in BOARD_JUDGE_FILES}
    desc = found.get(f"{PACKAGE_DIR}/desc.yaml")
    if desc is None or any(entry is None for entry in judge.values()):
        raise InvalidInput(f"the judge bundle of {judge_kernel} lacks its judge files")
    pinned = json.loads(found[PINNED][1]) if PINNED in found else {}
    src = {
        path.removeprefix(f"{REFERENCE_DIR}/"): entry
        for path, entry in found.items()
        if path.startswith(f"{REFERENCE_DIR}/src/")
    } or dict(reference_src or {})
    if not src:
        raise InvalidInput(
            f"the judge bundle of {judge_kernel} carries no pinned reference src/",
            code="no_reference",
        )
    reference = pinned.get("kernel_id")
    files: FileMap = {
        **{path: entry for path, entry in judge.items() if entry is not None},
        f"{PACKAGE_DIR}/desc.yaml": (0o644, _desc(kernel_id, desc[1], author, reference)),
        f"{PACKAGE_DIR}/bench_result.yaml": (0o644, _empty_scoreboard(kernel_id)),
        **src,
    }
    dirs = {"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)}
    validate_package_files(PackageFiles(files=files, dirs=dirs), expected_kernel_id=kernel_id)
    return Starter(kernel_id, dict(sorted(files.items())), judge_kernel, pinned)
