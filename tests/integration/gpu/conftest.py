"""Running GPU judges on candidates through the real sandbox, with the GPUs shown to the
workers and the build (`SandboxBackend(gpus="all")`). Every test here needs torch with a CUDA
device; the modules skip themselves without one (`gpu_helpers.cuda_missing`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kz_events.ids import KernelId
from kz_runner.backends import SandboxBackend
from kz_runner.execute import TaskOutcome
from kz_runner.limits import MIB, StepLimits
from kz_testing.judging import judge_task
from tests.integration.gpu.gpu_helpers import RunPackage

KERNEL_ID = KernelId.parse("sm90/GEMM/matmul/fp32/gpu_test")


@pytest.fixture(scope="session")
def gpu_sandbox() -> SandboxBackend:
    """The sandbox with every GPU shown to the workers and the build."""
    backend = SandboxBackend(gpus="all")
    backend.check_available()
    return backend


@pytest.fixture
def judge_gpu_package(tmp_path: Path, gpu_sandbox: SandboxBackend) -> RunPackage:
    """Run a GPU judge (benchmark.py source) on a candidate (src files) through the sandbox."""

    def run(
        benchmark: str,
        src: dict[str, str],
        *,
        kernel_id: KernelId = KERNEL_ID,
        build: str = "print('build ok')\n",
        step_timeout_s: float = 180.0,
    ) -> TaskOutcome:
        return judge_task(
            gpu_sandbox, tmp_path, benchmark, src, kernel_id=kernel_id, build=build,
            cpu=(os.cpu_count() or 1) - 1, step_timeout_s=step_timeout_s,
            limits=StepLimits(memory_bytes=8192 * MIB, max_output_bytes=1024 * 1024),
        )  # fmt: skip

    return run
