"""`kz problems import` and `kz export` as agents call them: one JSON document, the contract's
exit codes (0 done, 2 refused, 3 transient) and an error that says what to fix; and the
demo's problem-set candidates, which must be valid packages on their boards."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from kz_cli.demo_problems import CANDIDATES, PROBLEM_SETS, SETS
from kz_cli.main import main
from kz_package import pack_files, read_package, validate_package_files
from kz_problems import board_package, read_set
from kz_problems.boards import candidate_files

pytestmark = pytest.mark.unit


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(list(argv))
    out = capsys.readouterr().out.strip().splitlines()
    return code, json.loads(out[-1]) if out else {}


def test_import_to_a_folder_lists_what_it_made(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """--out writes each board's reference package in the kernel repo's layout; --json says
    which boards, and which problems were skipped and why."""
    code, doc = _run(capsys, "problems", "import", "--format", "gpumode", "--arch", "sm90",
                     "--json", "--out", str(tmp_path), str(PROBLEM_SETS / "gpumode"))  # fmt: skip
    assert code == 0 and doc["command"] == "problems import" and doc["schema_version"] == 1
    assert [b["kernel_id"] for b in doc["boards"]] == [
        "sm90/GPUMODE/kz_demo.matmul_py/fp32/reference",
        "sm90/GPUMODE/kz_demo.prefixsum_py/fp64/reference",
    ]
    assert doc["counts"] == {"imported": 0, "unchanged": 0, "written": 2}
    assert doc["skipped"][0]["problem"] == "kz_demo/allgather_py"
    desc = tmp_path / "sm90/GPUMODE/kz_demo.matmul_py/fp32/reference/.kernel_package/desc.yaml"
    assert "x-problem:" in desc.read_text()


@pytest.mark.parametrize(
    ("argv", "code", "error"),
    [
        (["problems", "import", "--format", "kernelbench", "nowhere"], 2, "invalid_problem"),
        (["problems", "import", "--format", "kernelbench", "--arch", "sm 90", "."], 2,
         "invalid_kernel_id"),
        (["problems", "import", "--format", "flashinfer", "--max-workloads", "0", "."], 2,
         "invalid_input"),
        (["export", "--format", "flashinfer-trace", "--board", "cpu/x", "out.jsonl"], 2,
         "invalid_input"),
    ],
)  # fmt: skip
def test_refusals_exit_2_with_an_error_document(
    capsys: pytest.CaptureFixture[str], argv: list[str], code: int, error: str
) -> None:
    got, doc = _run(capsys, *argv, "--json")
    assert got == code and doc["error"]["code"] == error
    assert doc["error"]["message"] and doc["error"]["fix"]


def test_without_a_stack_the_error_says_how_to_find_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KZ_NATS_URL", raising=False)
    monkeypatch.setenv("KZ_DATA_DIR", str(tmp_path / "no-stack"))
    code, doc = _run(capsys, "problems", "import", "--format", "kernelbench", "--json",
                     str(PROBLEM_SETS / "kernelbench"))  # fmt: skip
    assert code == 2 and doc["error"]["code"] == "invalid_config"
    assert "KZ_NATS_URL" in doc["error"]["message"]
    assert "kz up" in doc["error"]["fix"]


@pytest.mark.parametrize("candidate", CANDIDATES, ids=lambda c: f"{c.problem}:{c.name}")
def test_the_demo_candidates_are_valid_packages_on_their_boards(candidate: Any) -> None:
    problems = [p for fmt in SETS for p in read_set(fmt, PROBLEM_SETS / fmt)[0]]
    problem = next(p for p in problems if p.problem_id == candidate.problem)
    board = board_package(problem, "cpu")
    src = {dest: (PROBLEM_SETS / path).read_bytes() for dest, path in candidate.src.items()}
    files = candidate_files(board, candidate.name, src)
    out = io.BytesIO()
    pack_files({p: (0o644, d) for p, d in files.items()}, out)
    package = validate_package_files(read_package(out.getvalue()))
    assert package.kernel_id.group == board.kernel_id.group
    assert files[".kernel_package/benchmark.py"] == board.files[".kernel_package/benchmark.py"]
