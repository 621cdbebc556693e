"""Accepted results as FlashInfer Trace: the format's field names and nothing else, a FlashInfer
board's own definition and workloads, Solutions with the sources that were judged, and the
accepted results of the log less the disqualified and the confirmation runs."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kz_events.events import (
    SubmissionAccepted,
    SubmissionDisqualified,
    SubmissionSubmitted,
)
from kz_events.memlog import MemoryLog
from kz_problems import board_package, candidate_files, read_set
from kz_problems.exporter import accepted_in_log
from kz_problems.traces import Accepted, export_traces, write_export

pytestmark = pytest.mark.unit

Copy = Callable[[str], Path]
AT = datetime(2026, 6, 2, 12, 30, tzinfo=UTC)
TRACE_KEYS = ["definition", "workload", "solution", "evaluation"]
EVALUATION_KEYS = ["status", "log", "correctness", "performance", "environment", "timestamp"]


def _result(workloads: list[str]) -> dict[str, Any]:
    """A result document as the judge writes one, in microseconds."""
    return {
        "accepted": True,
        "reason": "first result for this kernel: 2000 us",
        "metric": {"name": "latency", "unit": "us", "better": "lower", "value": 2000.0},
        "workloads": [
            {"name": name, "value": 2000.0, "stats": {"median": 2000.0, "mean": 2100.0,
             "unit": "us"}, "reference": {"median": 4000.0, "mean": 4200.0, "unit": "us"}}
            for name in workloads
        ],
        "correctness": {"passed": True, "checks": [
            {"name": name, "passed": True, "max_abs_err": 1e-6, "max_rel_err": 2e-6,
             "atol": 0.01, "rtol": 0.01} for name in workloads]},
        "environment": {"device": "cpu", "python": "3.11.7", "numpy": "2.4", "torch": "2.13"},
    }  # fmt: skip


def _accepted(fmt: str, problem_id: str, name: str, src: dict[str, bytes], copy: Copy) -> Any:
    problem = next(p for p in read_set(fmt, copy(fmt))[0] if p.problem_id == problem_id)
    board = board_package(problem, "cpu")
    files = candidate_files(board, name, src)
    digest = hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()
    sid = str(uuid.uuid5(uuid.NAMESPACE_URL, name))
    accepted = Accepted(sid, f"{board.kernel_id.group}/{name}", "ada",
                        _result([w["name"] for w in problem.workloads]), digest, AT,
                        {"device": "cpu (this host)"})  # fmt: skip
    return accepted, {digest: files}, problem


def test_a_flashinfer_boards_traces_name_its_definition_and_workloads(example_set: Copy) -> None:
    solution = json.loads((example_set("flashinfer") / "solutions/gemm/gemm_n1024_k1024/"
                           "torch_matmul_t.json").read_text())  # fmt: skip
    accepted, packages, problem = _accepted(
        "flashinfer", "gemm_n1024_k1024", "mm_t",
        {"solution.json": json.dumps(solution).encode()}, example_set,
    )  # fmt: skip
    export = export_traces([accepted], packages)
    assert [list(t) for t in export.traces] == [TRACE_KEYS, TRACE_KEYS]
    first = export.traces[0]
    assert first["definition"] == "gemm_n1024_k1024"
    assert first["workload"] == problem.workloads[0]["params"]
    assert list(first["evaluation"]) == EVALUATION_KEYS
    evaluation = first["evaluation"]
    assert evaluation["status"] == "PASSED" and evaluation["timestamp"] == "2026-06-02T12:30:00Z"
    assert evaluation["performance"] == {"latency_ms": 2.1, "reference_latency_ms": 4.2,
                                         "speedup_factor": 2.0}  # fmt: skip
    assert evaluation["correctness"] == {"max_relative_error": 2e-6, "max_absolute_error": 1e-6}
    assert evaluation["environment"] == {"hardware": "cpu (this host)", "libs": {
        "python": "3.11.7", "numpy": "2.4", "torch": "2.13"}}  # fmt: skip
    (made,) = export.solutions
    assert first["solution"] == made["name"] and made["definition"] == "gemm_n1024_k1024"
    assert made["spec"]["entry_point"] == "kernel.py::run"
    assert made["sources"] == solution["sources"]  # what was judged: the Solution's own files
    assert export.definitions == [problem.extra["definition"]]


def test_other_boards_name_the_board_and_keep_workload_ids_fixed(example_set: Copy) -> None:
    source = b"class ModelNew: ...\n"
    accepted, packages, _ = _accepted("kernelbench", "level2/1_Linear_GELU_Scale", "fused",
                                      {"model_new.py": source}, example_set)  # fmt: skip
    one = export_traces([accepted], packages)
    two = export_traces([accepted], packages)
    (trace,) = one.traces
    assert trace["definition"] == "KernelBench.L2_1_Linear_GELU_Scale.fp32"
    assert trace["workload"] == two.traces[0]["workload"]
    assert trace["workload"]["axes"] == {"batch_size": 256, "in_features": 1024,
                                         "out_features": 1024}  # fmt: skip
    assert one.definitions == []
    solution = one.solutions[0]
    assert solution["spec"]["entry_point"] == "model_new.py::ModelNew"
    assert solution["sources"] == [{"path": "model_new.py", "content": source.decode()}]


def test_a_board_filter_and_a_missing_package_leave_results_out(example_set: Copy) -> None:
    accepted, packages, _ = _accepted("gpumode", "kz_demo/matmul_py", "mm",
                                      {"submission.py": b"def custom_kernel(d): ...\n"},
                                      example_set)  # fmt: skip
    assert export_traces([accepted], packages, board="cpu/Other/x/fp32").traces == []
    assert export_traces([accepted], {}).traces == []
    kept = export_traces([accepted], packages, board="cpu/GPUMODE/kz_demo.matmul_py/fp32")
    assert [t["workload"]["axes"] for t in kept.traces] == [
        {"m": 512, "n": 512, "k": 512}, {"m": 384, "n": 768, "k": 512}]  # fmt: skip


def test_the_export_is_written_as_jsonl_and_as_a_data_set(
    example_set: Copy, tmp_path: Path
) -> None:
    accepted, packages, _ = _accepted("flashinfer", "rmsnorm_h4096", "norm",
                                      {"main.py": b"def run(input, weight, eps): ...\n"},
                                      example_set)  # fmt: skip
    folder = write_export(export_traces([accepted], packages), tmp_path / "out" / "t.jsonl")
    lines = (tmp_path / "out" / "t.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["definition"] == "rmsnorm_h4096"
    assert folder == tmp_path / "out" / "t"
    assert (folder / "definitions" / "rmsnorm" / "rmsnorm_h4096.json").is_file()
    assert (folder / "traces" / "rmsnorm" / "rmsnorm_h4096.jsonl").read_text().splitlines() == lines
    assert len(list((folder / "solutions" / "rmsnorm" / "rmsnorm_h4096").glob("*.json"))) == 1


async def test_the_log_gives_accepted_results_less_disqualified_and_confirmations() -> None:
    log = MemoryLog()
    kid = "cpu/KernelBench/L1_1_Row_Softmax/fp32/fast"
    ids = {name: str(uuid.uuid5(uuid.NAMESPACE_DNS, name)) for name in "abcd"}

    def fields(name: str) -> dict[str, Any]:
        return {"event_id": str(uuid.uuid4()), "occurred_at": AT, "actor": "t",
                "submission_id": ids[name], "kernel_id": kid}  # fmt: skip

    for name in "abcd":
        confirms = ids["a"] if name == "d" else None
        submitted = SubmissionSubmitted(
            **fields(name), submitter_id="ada", package_digest="d" * 64, package_size=1,
            confirms=confirms,
        )  # fmt: skip
        await log.append(submitted)
        accepted = SubmissionAccepted(
            **fields(name), submitter_id="ada", runner_id="r", attempt=1,
            package_digest="d" * 64, result={}, result_seq=1,
        )  # fmt: skip
        await log.append(accepted)
    await log.append(SubmissionDisqualified(**fields("b"), reason="cheat"))
    found = [a.submission_id for a in await accepted_in_log(log)]
    assert found == [ids["a"], ids["c"]]
