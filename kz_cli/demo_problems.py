"""The problem-set part of `kz up`'s demo: the sets of examples/problem_sets (KernelBench, GPU
MODE, FlashInfer Trace, all written for kernel zoo) imported as boards through the log, then a
few candidates in each set's own convention submitted through the API, so imported boards are
judged on this CPU. Only where torch is installed (`make setup` installs its CPU build)."""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import httpx

from kz_events.port import LogPort
from kz_package import pack_files
from kz_problems import BoardPackage, board_package, build_boards, import_boards, read_set
from kz_problems.boards import candidate_files

__all__ = ["CANDIDATES", "PROBLEM_SETS", "ProblemCandidate", "import_problem_sets",
           "submit_problem_candidates", "torch_available"]  # fmt: skip

PROBLEM_SETS = Path(__file__).resolve().parents[1] / "examples" / "problem_sets"
SETS = ("kernelbench", "gpumode", "flashinfer")


@dataclass(frozen=True)
class ProblemCandidate:
    """A kernel submitted to an imported board: `src` maps a path under `src/` to a file of
    examples/problem_sets (none: the reference itself, for a first measured value)."""

    problem: str
    name: str
    submitter: str
    message: str
    src: dict[str, str] = field(default_factory=dict)


CANDIDATES = (
    ProblemCandidate("level2/1_Linear_GELU_Scale", "reference", "examples", "reference run"),
    ProblemCandidate(
        "level2/1_Linear_GELU_Scale", "addmm_gelu", "ada", "addmm, then GELU and scale in place",
        {"model_new.py": "kernelbench/solutions/L2_1_Linear_GELU_Scale/fused.py"},
    ),
    ProblemCandidate(
        "kz_demo/matmul_py", "into_buffer", "grace", "the product into the task's own buffer",
        {"submission.py": "gpumode/solutions/matmul_py/into_buffer.py"},
    ),
    ProblemCandidate(
        "gemm_n1024_k1024", "torch_matmul_t", "linus", "a FlashInfer Solution, as it is",
        {"solution.json": "flashinfer/solutions/gemm/gemm_n1024_k1024/torch_matmul_t.json"},
    ),
)  # fmt: skip


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


async def import_problem_sets(
    elog: LogPort, *, clock: Callable[[], datetime], arch: str = "cpu"
) -> dict[str, BoardPackage]:
    """Import the example sets; each problem's board package at the version it got."""
    boards: dict[str, BoardPackage] = {}
    for fmt in SETS:
        problems, _skipped = read_set(fmt, PROBLEM_SETS / fmt)
        outcomes = await import_boards(elog, build_boards(problems, arch), arch=arch,
                                       submitter="examples", clock=clock)  # fmt: skip
        for problem, outcome in zip(problems, outcomes, strict=True):
            boards[problem.problem_id] = board_package(problem, arch, outcome.version)
    return boards


def submit_problem_candidates(base_url: str, boards: dict[str, BoardPackage]) -> list[str]:
    """Submit every demo candidate whose board was imported; returns the submission ids."""
    ids: list[str] = []
    with httpx.Client(base_url=base_url, timeout=60) as client:
        for candidate in CANDIDATES:
            board = boards.get(candidate.problem)
            if board is None:
                continue
            src = {dest: (PROBLEM_SETS / path).read_bytes() for dest, path in candidate.src.items()}
            files = candidate_files(board, candidate.name, src)
            kernel_id = f"{board.kernel_id.group}/{candidate.name}"
            tarball = _tarball(files)
            response = client.post(
                "/api/submissions",
                headers={"X-Submitter-Id": candidate.submitter},
                data={
                    "kernel_id": kernel_id,
                    "submitter_id": candidate.submitter,
                    "message": candidate.message,
                },
                files={"package": ("package.tar.gz", tarball, "application/gzip")},
            )
            if response.status_code == 202:
                ids.append(response.json()["submission_id"])
            else:
                print(f"demo: {kernel_id} refused: {response.text[:200]}", flush=True)
    return ids


def _tarball(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    pack_files({path: (0o644, data) for path, data in files.items()}, out)
    return out.getvalue()
