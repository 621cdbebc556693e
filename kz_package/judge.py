"""The judge stays fixed: which judge parts a submitted package changes against main's current one.

The judge is `benchmark.py`, `build_test_env.py` and the metric in `desc.yaml`; a submission that
changes any of them is refused unless its submitter is a maintainer (the API decides that). A new
kernel on an existing board must carry the board's judge scripts (`board_judge_changes`): its
desc.yaml and bench_result.yaml are its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kz_package.archive import PACKAGE_DIR
from kz_package.limits import Limits
from kz_package.memo import by_content
from kz_package.memread import PackageFiles
from kz_package.yaml_safe import load_yaml

__all__ = [
    "BOARD_JUDGE_FILES",
    "JUDGE_FILES",
    "JUDGE_PARTS",
    "REFERENCE_DIR",
    "board_judge_changes",
    "judge_changes",
]

JUDGE_PARTS = ("benchmark.py", "build_test_env.py", "desc.yaml:metric")
# What every kernel of one board shares byte for byte: the board's judge.
BOARD_JUDGE_FILES = ("benchmark.py", "build_test_env.py")
# The files of `.kernel_package/` that main's judge bundle carries to runners (the judge parts
# plus the baseline to beat).
JUDGE_FILES = ("desc.yaml", "bench_result.yaml", "benchmark.py", "build_test_env.py")
# The folder of a bundle that holds the board's pinned reference (its `src/`), which runners
# measure beside every challenger for the board's score.
REFERENCE_DIR = "reference"


def _file_bytes(root: Path | PackageFiles, name: str) -> bytes | None:
    if isinstance(root, PackageFiles):
        return root.data(f"{PACKAGE_DIR}/{name}")
    path = root / PACKAGE_DIR / name
    return path.read_bytes() if path.is_file() else None


def _metric(root: Path | PackageFiles) -> Any:
    data = _file_bytes(root, "desc.yaml")
    if data is None:
        return None
    return _metric_of(data)


# Every submission of a kernel is compared with the same judge, and most carry the same
# desc.yaml: the metric of the same bytes is kept (it is only compared, never changed).
@by_content(64 * 1024)
def _metric_of(data: bytes) -> Any:
    desc = load_yaml(data, path=f"{PACKAGE_DIR}/desc.yaml", limits=Limits())
    return desc.get("metric") if isinstance(desc, dict) else None


def judge_changes(current: Path | PackageFiles, submitted: Path | PackageFiles) -> list[str]:
    """Names from JUDGE_PARTS that differ between two packages (empty: judge unchanged).

    Each package is a root directory or a tree read into memory (`read_package`).

    Scripts compare byte for byte; the metric compares as data, so reformatting desc.yaml or
    editing its other fields is not a change. A missing file differs from a present one.
    """
    changed = [
        name
        for name in JUDGE_PARTS[:2]
        if _file_bytes(current, name) != _file_bytes(submitted, name)
    ]
    if _metric(current) != _metric(submitted):
        changed.append("desc.yaml:metric")
    return changed


def board_judge_changes(board: Path | PackageFiles, submitted: Path | PackageFiles) -> list[str]:
    """Names from BOARD_JUDGE_FILES in which a new kernel's package differs from the board's
    judge (`board`: the judge bundle or package of the board's judge kernel); empty: same judge."""
    return [
        name
        for name in BOARD_JUDGE_FILES
        if _file_bytes(board, name) != _file_bytes(submitted, name)
    ]
