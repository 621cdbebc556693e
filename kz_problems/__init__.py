"""Problem sets in and traces out: KernelBench, GPU MODE reference-kernels and FlashInfer Trace
problems made into boards (`kz problems import`), and accepted results written as FlashInfer
Trace lines (`kz export`). docs/problem_sets.md maps each format, field by field.
"""

from __future__ import annotations

from pathlib import Path

from kz_problems import flashinfer, gpumode, kernelbench
from kz_problems.boards import (
    REFERENCE_NAME,
    BoardPackage,
    board_package,
    candidate_files,
    kernel_id,
)
from kz_problems.errors import INVALID_PROBLEM, ProblemError, Skipped
from kz_problems.importer import Outcome, build_boards, import_boards
from kz_problems.model import FORMATS, Licence, Problem, Provenance

__all__ = [
    "FORMATS",
    "INVALID_PROBLEM",
    "REFERENCE_NAME",
    "BoardPackage",
    "Licence",
    "Outcome",
    "Problem",
    "ProblemError",
    "Provenance",
    "Skipped",
    "board_package",
    "build_boards",
    "candidate_files",
    "import_boards",
    "kernel_id",
    "read_set",
]


def read_set(
    fmt: str, path: Path, *, max_workloads: int = flashinfer.MAX_WORKLOADS
) -> tuple[list[Problem], list[Skipped]]:
    """Every problem of a set at `path` in format `fmt`, and those it cannot import, with why.
    Where nothing can be imported and `path` held one problem, its error is raised."""
    if not path.exists():
        raise ProblemError(str(path), "PATH: expected a checkout, a folder or a file, found "
                           "nothing there")  # fmt: skip
    if fmt == "kernelbench":
        problems, skipped = kernelbench.read(path)
    elif fmt == "gpumode":
        problems, skipped = gpumode.read(path)
    elif fmt == "flashinfer":
        problems, skipped = flashinfer.read(path, max_workloads=max_workloads)
    else:
        raise ProblemError("--format", f"expected one of {', '.join(FORMATS)}, got {fmt!r}")
    if not problems and len(skipped) == 1:
        raise ProblemError(skipped[0].where or str(path), skipped[0].reason)
    return problems, skipped
