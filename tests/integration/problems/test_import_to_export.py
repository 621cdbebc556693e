"""A problem set's way onto the boards and back, in each format, as a user runs it: `kz problems
import` of a set written for kernel zoo into a running stack with the real sandbox, the
reference committed and pinned, `kz new` on its board, a correct candidate in the set's own
convention accepted, a wrong one rejected with the reason, and `kz export` (and its API
endpoint) writing Trace lines that carry the judged source and, for FlashInfer, import back as
the same board."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from kz_events.server import free_port
from kz_problems import read_set
from kz_testing import KzProcess, kz_argv

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SETS = Path(__file__).resolve().parents[3] / "examples" / "problem_sets"
PUBLISHED = {
    "trace": ["definition", "workload", "solution", "evaluation"],
    "evaluation": ["status", "log", "correctness", "performance", "environment", "timestamp"],
    "performance": ["latency_ms", "reference_latency_ms", "speedup_factor"],
    "correctness": ["max_relative_error", "max_absolute_error"],
    "workload": ["uuid", "axes", "inputs"],
}


@dataclass(frozen=True)
class Case:
    fmt: str
    path: str  # one problem of the set, under examples/problem_sets/<fmt>
    correct: tuple[str, str]  # (src/ path, file under the set)
    wrong: tuple[str, str]
    why: str  # what the wrong one's rejection says


CASES = [
    Case(
        "kernelbench",
        "KernelBench/level2/1_Linear_GELU_Scale.py",
        ("model_new.py", "solutions/L2_1_Linear_GELU_Scale/fused.py"),
        ("model_new.py", "solutions/L2_1_Linear_GELU_Scale/wrong_no_scale.py"),
        "elements outside atol=0.0001 rtol=0.0001",
    ),
    Case(
        "gpumode",
        "problems/kz_demo/matmul_py",
        ("submission.py", "solutions/matmul_py/into_buffer.py"),
        ("submission.py", "solutions/matmul_py/wrong_half_precision.py"),
        "elements outside atol=0.0001 rtol=0.0001",
    ),
    Case(
        "flashinfer",
        "definitions/gemm/gemm_n1024_k1024.json",
        ("solution.json", "solutions/gemm/gemm_n1024_k1024/torch_matmul_t.json"),
        ("solution.json", "solutions/gemm/gemm_n1024_k1024/wrong_no_transpose.json"),
        "elements outside atol=0.01 rtol=0.01",
    ),
]


@dataclass(frozen=True)
class Stack:
    url: str
    env: dict[str, str]
    root: Path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """`kz up --no-demo` with the sandbox runner, on a free port and a private data dir."""
    root = tmp_path_factory.mktemp("problems")
    port = free_port()
    data = root / "kz"
    argv = kz_argv(
        "up", "--no-demo", "--backend", "sandbox", "--port", str(port), "--data-dir", str(data)
    )
    env = {**os.environ, "KZ_DATA_DIR": str(data)}
    env.pop("KZ_NATS_URL", None)
    env.pop("KZ_SERVER_URL", None)
    up = KzProcess("kz up", argv, env, root / "up.log", cwd=root).start()
    url = f"http://127.0.0.1:{port}"
    try:
        up.wait_healthy(url, timeout_s=90)
        yield Stack(url, env, root)
    finally:
        up.signal(signal.SIGINT)
        up.wait_or_kill(30)


def kz(stack: Stack, *args: str, timeout: float = 600) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "kz_cli.main", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=stack.env,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr
    return done.returncode, json.loads(lines[-1])


def _wait(check: Any, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.3)


def _candidate(case: Case, stack: Stack, board: str, name: str, src: tuple[str, str]) -> Path:
    """`kz new BOARD/NAME DIR` (the board's judge from the server, src/ from its pinned
    reference), then the solution, as the set writes it, into src/."""
    folder = stack.root / f"{case.fmt}-{name}"
    code, started = kz(stack, "new", f"{board}/{name}", str(folder), "--server", stack.url)
    assert code == 0 and started["judge_kernel"].endswith("/reference"), started
    (folder / "src" / src[0]).write_bytes((SETS / case.fmt / src[1]).read_bytes())
    return folder


def _published(trace: dict[str, Any]) -> None:
    """The trace has the format's published fields, and no others."""
    assert list(trace) == PUBLISHED["trace"]
    evaluation = trace["evaluation"]
    assert list(evaluation) == PUBLISHED["evaluation"] and evaluation["status"] == "PASSED"
    assert list(evaluation["performance"]) == PUBLISHED["performance"]
    assert list(evaluation["correctness"]) == PUBLISHED["correctness"]
    assert list(trace["workload"]) == PUBLISHED["workload"]
    assert evaluation["performance"]["latency_ms"] > 0 and evaluation["timestamp"].endswith("Z")
    assert set(evaluation["environment"]) == {"hardware", "libs"}


@pytest.mark.parametrize("case", CASES, ids=[c.fmt for c in CASES])
def test_import_submit_and_export(stack: Stack, case: Case) -> None:
    code, imported = kz(
        stack, "problems", "import", "--format", case.fmt, str(SETS / case.fmt / case.path)
    )
    assert code == 0 and imported["counts"]["imported"] == 1, imported
    (board,) = imported["boards"]
    reference = board["kernel_id"]

    detail = _wait(
        lambda: (
            (r := httpx.get(f"{stack.url}/api/kernels/{reference}")).status_code == 200
            and r.json().get("head_commit")
            and r.json()
        )
    )
    assert detail, f"{reference} was not committed"
    assert detail["desc"]["x-problem"]["format"] == case.fmt
    pinned = httpx.get(f"{stack.url}/api/boards/{board['board']}").json()["reference"]
    assert pinned["kernel_id"] == reference

    right = _candidate(case, stack, board["board"], "correct", case.correct)
    code, status = kz(stack, "submit", str(right), "--server", stack.url, "--submitter", "ada")
    assert code == 0 and status["status"] == "committed", (status.get("error"), status)
    wrong = _candidate(case, stack, board["board"], "wrong", case.wrong)
    code, status = kz(stack, "submit", str(wrong), "--server", stack.url, "--submitter", "eve")
    assert code == 1 and status["status"] == "rejected", status
    assert case.why in status["result"]["reason"]

    out = stack.root / f"{case.fmt}.jsonl"
    code, exported = kz(
        stack, "export", "--format", "flashinfer-trace", "--board", board["board"], str(out)
    )
    assert code == 0 and exported["traces"] == len(
        read_set(case.fmt, SETS / case.fmt / case.path)[0][0].workloads
    )
    traces = [json.loads(line) for line in out.read_text().splitlines()]
    for trace in traces:
        _published(trace)
    (solution_file,) = Path(exported["folder"]).glob("solutions/*/*/correct-*.json")
    solution = json.loads(solution_file.read_text())
    assert {t["solution"] for t in traces} == {solution["name"]}
    judged = (SETS / case.fmt / case.correct[1]).read_text()
    if case.fmt == "flashinfer":
        for source in json.loads(judged)["sources"]:  # src/ also holds kz new's main.py
            assert source in solution["sources"]
        assert [t["workload"]["uuid"] for t in traces] == [
            "5f0c4e9a-1b6e-4f55-9a7e-0d9c1f3e2a01",
            "8d21b7c3-44a0-4e0b-b2f1-6c7e9a5d3b02",
        ]
        code, again = kz(stack, "problems", "import", "--format", "flashinfer", exported["folder"])
        assert code == 0 and [b["state"] for b in again["boards"]] == ["unchanged"]
    else:
        assert {"path": case.correct[0], "content": judged} in solution["sources"]

    served = httpx.get(f"{stack.url}/api/export/flashinfer-trace", params={"board": board["board"]})
    assert served.status_code == 200
    assert served.headers["content-type"].startswith("application/x-ndjson")
    assert [json.loads(line) for line in served.text.splitlines()] == traces

    code, again = kz(
        stack, "problems", "import", "--format", case.fmt, str(SETS / case.fmt / case.path)
    )
    assert code == 0 and again["counts"] == {"imported": 0, "unchanged": 1, "written": 0}


def test_an_unreachable_log_is_transient(tmp_path: Path) -> None:
    """With no server at the given address the import exits 3, to be retried."""
    port = free_port()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kz_cli.main",
            "problems",
            "import",
            "--format",
            "kernelbench",
            "--nats-url",
            f"nats://127.0.0.1:{port}",
            "--json",
            str(SETS / "kernelbench"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "log_unreachable"
