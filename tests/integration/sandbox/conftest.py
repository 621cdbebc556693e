"""Helpers for running small packages through the real sandbox backend."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kz_events.ids import KernelId
from kz_runner.backends import SandboxBackend
from kz_runner.execute import TaskOutcome, TaskSpec, execute_task
from kz_runner.limits import MIB, StepLimits
from kz_testing.judging import judge_task
from kz_testing.lanes import lane_cpu

REPO_ROOT = Path(__file__).resolve().parents[3]
KERNEL_ID = KernelId.parse("cpu/Norm/RMSNorm/fp32/sandbox_test")
RESULT_KEYS = {"schema_version", "accepted", "reason", "metric", "workloads", "correctness"}


def check_document(data: bytes) -> dict[str, Any]:
    """A small stand-in for the package validator: JSON object with the required keys."""
    document = json.loads(data)
    if not isinstance(document, dict) or not document.keys() >= RESULT_KEYS:
        raise ValueError(f"result document must hold {sorted(RESULT_KEYS)}")
    if not isinstance(document["accepted"], bool):
        raise ValueError("accepted must be a boolean")
    return document


RunPackage = Callable[..., TaskOutcome]


def _lane(worker_id: str) -> int:
    """This test process's number among parallel ones (pytest-xdist's gwN; 0 alone)."""
    return int(worker_id.removeprefix("gw")) if worker_id.startswith("gw") else 0


@pytest.fixture(scope="session")
def sandbox(worker_id: str) -> SandboxBackend:
    """The sandbox with uids of this test process's own (process limits count per uid, and
    the layers run in parallel processes)."""
    lane = _lane(worker_id)
    backend = SandboxBackend(
        sandbox_uid=64000 - 100 * lane, sandbox_gid=64000 - 100 * lane,
        worker_uid_base=63000 - 100 * lane,
    )  # fmt: skip
    backend.check_available()
    return backend


@pytest.fixture
def run_package(tmp_path: Path, sandbox: SandboxBackend) -> RunPackage:
    """Write a package with the given benchmark (and build) source and execute it."""

    def run(
        benchmark: str,
        *,
        build: str = "print('build ok')",
        step_timeout_s: float = 20.0,
        limits: StepLimits | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> TaskOutcome:
        workdir = tmp_path / "work"
        (workdir / ".kernel_package").mkdir(parents=True)
        (workdir / ".kernel_package" / "build_test_env.py").write_text(textwrap.dedent(build))
        (workdir / ".kernel_package" / "benchmark.py").write_text(textwrap.dedent(benchmark))
        spec = TaskSpec(
            kernel_id=KERNEL_ID,
            arch="cpu",
            workdir=workdir,
            harness_path=REPO_ROOT,
            cpu=lane_cpu(),
            step_timeout_s=step_timeout_s,
            task_timeout_s=60.0,
            limits=limits or StepLimits(memory_bytes=2048 * MIB, max_output_bytes=256 * 1024),
        )
        return execute_task(spec, sandbox, cancelled=cancelled, validate_result=check_document)

    return run


@pytest.fixture
def judge_cpu() -> int:
    """The CPU this test process's judges and workers are pinned to (parallel ones apart, and
    the same one its `kz up` stacks' runners use)."""
    return lane_cpu()


@pytest.fixture
def judge_package(tmp_path: Path, sandbox: SandboxBackend, judge_cpu: int) -> RunPackage:
    """Run a judge (benchmark.py source) on a candidate (src files) through the real sandbox."""

    def run(
        benchmark: str,
        src: dict[str, str],
        *,
        baseline: str | None = None,
        incumbent: dict[str, str] | None = None,
        reference: dict[str, str] | None = None,
        confirming: bool = False,
        step_timeout_s: float = 60.0,
        limits: StepLimits | None = None,
    ) -> TaskOutcome:
        return judge_task(
            sandbox, tmp_path, benchmark, src, kernel_id=KERNEL_ID, baseline=baseline,
            incumbent=incumbent, reference=reference, confirming=confirming,
            cpu=judge_cpu,
            step_timeout_s=step_timeout_s,
            limits=limits or StepLimits(memory_bytes=2048 * MIB, max_output_bytes=256 * 1024),
        )  # fmt: skip

    return run
