"""`execute_task` maps every way a task ends to its reason code (driven by the stub backend)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kz_events.ids import KernelId
from kz_runner.backends.base import StepResult, StepSpec
from kz_runner.backends.stub import StubBackend
from kz_runner.execute import TaskSpec, execute_task

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parents[3]


def check(data: bytes) -> dict[str, Any]:
    document = json.loads(data)
    if not isinstance(document.get("accepted"), bool):
        raise ValueError("accepted must be a boolean")
    return dict(document)


def _package(tmp_path: Path, script: dict[str, Any] | None = None) -> Path:
    workdir = tmp_path / "pkg"
    (workdir / ".kernel_package").mkdir(parents=True)
    for name in ("build_test_env.py", "benchmark.py"):
        (workdir / ".kernel_package" / name).write_text("pass\n")
    if script is not None:
        (workdir / "src").mkdir()
        (workdir / "src" / "stub.json").write_text(json.dumps(script))
    return workdir


def _spec(workdir: Path, **overrides: Any) -> TaskSpec:
    return TaskSpec(kernel_id=KernelId.parse("sm90/GEMM/dense/fp8/t"), arch="sm90", workdir=workdir,
                    harness_path=REPO_ROOT, **overrides)  # fmt: skip


@pytest.mark.parametrize(
    ("verdict", "reason"),
    [("accept", "accepted"), ("reject", "rejected"), ("build_fail", "build_failed"),
     ("error", "benchmark_error"), ("hang", "timed_out"), ("invalid", "invalid_result")],
)  # fmt: skip
def test_each_ending_has_its_reason(tmp_path: Path, verdict: str, reason: str) -> None:
    """The stub's scripted endings map to the six reason codes. A measured result's log line
    does not state a verdict the referee may not give: it says the referee gives it, and
    quotes the judge's own reading as such."""
    outcome = execute_task(_spec(_package(tmp_path, {"verdict": verdict})), StubBackend(),
                           validate_result=check)  # fmt: skip
    assert outcome.reason == reason
    measured = reason in ("accepted", "rejected")
    assert (outcome.result is not None) is measured
    assert outcome.environment["backend"] == "stub"
    if measured:
        line = "== result sent to the referee, which gives the verdict (kz status); the judge's "
        assert f"{line}own reading: {reason}: stub backend".encode() in outcome.log
        assert f"== {reason}:".encode() not in outcome.log
    else:
        assert f"== {reason}:".encode() in outcome.log


class RecordingBackend(StubBackend):
    """The stub, remembering every step it was given."""

    def __init__(self) -> None:
        self.steps: list[StepSpec] = []

    def run(self, step: StepSpec, *, cancelled: Any = None) -> StepResult:
        self.steps.append(step)
        return super().run(step, cancelled=cancelled)


def test_the_steps_get_the_contract_environment(tmp_path: Path) -> None:
    """The build runs in the work dir; the judge runs apart from it, with the judge's files,
    the baseline and the harness read-only at fixed paths, and its channels inherited."""
    baseline = tmp_path / "bench_result.yaml"
    baseline.write_text("schema_version: 1\n")
    backend = RecordingBackend()
    workdir = _package(tmp_path)
    outcome = execute_task(_spec(workdir, baseline_path=baseline), backend, validate_result=check)
    assert outcome.reason == "accepted"
    build, bench = backend.steps
    assert build.argv[1:] == ("-I", "/kz/judge/build_test_env.py")
    assert build.workdir == workdir and "KZ_SEED" not in build.env
    assert bench.argv[1:] == (
        "-I",
        "/kz/harness/kz_harness/launch.py",
        "judge",
        "/kz/judge/benchmark.py",
    )
    env = bench.env
    assert env["KZ_KERNEL_ID"] == "sm90/GEMM/dense/fp8/t" and env["KZ_ARCH"] == "sm90"
    assert env["KZ_BASELINE_PATH"] == "/kz/judge/bench_result.yaml"
    assert len(env["KZ_SEED"]) == 32 and env["HOME"] == "/home/kz"
    assert {int(env["KZ_CONTROL_FD"]), int(env["KZ_RESULT_FD"])} == set(bench.pass_fds)
    shown = {bind.inside: bind for bind in bench.binds}
    assert not shown["/kz/judge"].writable and not shown["/kz/harness"].writable
    assert workdir not in {bind.host for bind in bench.binds}  # the judge never sees the package
    harness = shown["/kz/harness"].host
    assert sorted(p.name for p in harness.iterdir()) == ["kz_harness"]  # nothing else to see
    assert (harness / "kz_harness" / "__init__.py").stat().st_mode & 0o777 == 0o444


def test_every_task_gets_its_own_secret_seed(tmp_path: Path) -> None:
    """Two tasks never share the judge's seed."""
    backend = RecordingBackend()
    execute_task(_spec(_package(tmp_path / "a")), backend, validate_result=check)
    execute_task(_spec(_package(tmp_path / "b")), backend, validate_result=check)
    assert backend.steps[1].env["KZ_SEED"] != backend.steps[3].env["KZ_SEED"]


def test_tasks_share_one_harness_copy(tmp_path: Path) -> None:
    """The harness is copied once per process, not once per task."""
    backend = RecordingBackend()
    execute_task(_spec(_package(tmp_path / "a")), backend, validate_result=check)
    execute_task(_spec(_package(tmp_path / "b")), backend, validate_result=check)
    judges = backend.steps[1::2]
    roots = {b.host for step in judges for b in step.binds if b.inside == "/kz/harness"}
    assert len(roots) == 1


def test_no_baseline_means_no_baseline_variable(tmp_path: Path) -> None:
    """KZ_BASELINE_PATH is absent for a new kernel."""
    backend = RecordingBackend()
    execute_task(_spec(_package(tmp_path)), backend, validate_result=check)
    assert "KZ_BASELINE_PATH" not in backend.steps[1].env


def test_a_spent_task_budget_times_out_before_the_step(tmp_path: Path) -> None:
    """With no task time left, the step is not started and the task times out."""
    backend = RecordingBackend()
    outcome = execute_task(
        _spec(_package(tmp_path), task_timeout_s=0.0), backend, validate_result=check
    )
    assert outcome.reason == "timed_out" and backend.steps == []


def test_a_missing_script_fails_the_right_step(tmp_path: Path) -> None:
    """No build script is build_failed; no benchmark script is benchmark_error."""
    workdir = _package(tmp_path)
    (workdir / ".kernel_package" / "benchmark.py").unlink()
    assert (
        execute_task(_spec(workdir), StubBackend(), validate_result=check).reason
        == "benchmark_error"
    )
    (workdir / ".kernel_package" / "build_test_env.py").unlink()
    assert (
        execute_task(_spec(workdir), StubBackend(), validate_result=check).reason == "build_failed"
    )


def test_a_validator_refusal_is_an_invalid_result(tmp_path: Path) -> None:
    """A document the injected validator rejects gives invalid_result with its message."""

    def refuse(data: bytes) -> dict[str, Any]:
        raise ValueError("metric does not fit the kernel")

    outcome = execute_task(_spec(_package(tmp_path)), StubBackend(), validate_result=refuse)
    assert outcome.reason == "invalid_result" and "metric does not fit" in outcome.message


class TracebackBackend(StubBackend):
    """The stub, whose build step fails printing what a real one prints of the host: its
    cwd, a traceback through its own files and the runner's Python, the judge's folder."""

    def run(self, step: StepSpec, *, cancelled: Any = None) -> StepResult:
        if not any(arg.endswith("build_test_env.py") for arg in step.argv):
            return super().run(step, cancelled=cancelled)
        judge = next(b.host for b in step.binds if b.inside == "/kz/judge")
        output = (
            f"cwd {step.workdir.resolve()}\n"
            "Traceback (most recent call last):\n"
            f'  File "{judge}/build_test_env.py", line 3, in <module>\n'
            f'  File "{step.workdir}/src/kernel.py", line 1, in <module>\n'
            f'  File "{sys.prefix}/lib/python3.11/site-packages/numpy/core.py", line 9\n'
            f"ImportError: no {step.workdir}2 either\n"
        )
        return replace(super().run(step, cancelled=cancelled), exit_code=1, output=output.encode())


def test_the_log_names_the_task_folders_instead_of_host_paths(tmp_path: Path) -> None:
    """A step printing the host's paths leaves stable names in the log: `<work>/src/...`,
    `/kz/judge/...`, `<venv>/...` (when the runner runs in one); no host path is stored."""
    workdir = _package(tmp_path / "runner" / "task-1234")
    outcome = execute_task(_spec(workdir), TracebackBackend(), validate_result=check)
    log = outcome.log.decode()
    assert outcome.reason == "build_failed"
    assert str(tmp_path) not in log and str(tmp_path.resolve()) not in log
    assert "cwd <work>\n" in log
    assert 'File "<work>/src/kernel.py"' in log and 'File "/kz/judge/build_test_env.py"' in log
    assert "no <task>/pkg2 either" in log  # a sibling is not taken for the work dir
    if sys.prefix != sys.base_prefix:
        assert 'File "<venv>/lib/python3.11/' in log and sys.prefix not in log
