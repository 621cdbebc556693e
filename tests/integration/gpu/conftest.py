"""Running GPU judges on candidates through the real sandbox, with the GPUs shown to the
workers and the build (`SandboxBackend(gpus="all")`). Every test here needs torch with a CUDA
device; the modules skip themselves without one (`gpu_helpers.cuda_missing`)."""

from __future__ import annotations

import os
import tempfile
import textwrap
from pathlib import Path

import pytest

from kz_events.ids import KernelId
from kz_package import validate_result_document
from kz_runner.backends import SandboxBackend
from kz_runner.execute import TaskOutcome, TaskSpec, execute_task
from kz_runner.limits import MIB, StepLimits
from tests.integration.gpu.gpu_helpers import RunPackage

REPO_ROOT = Path(__file__).resolve().parents[3]
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
        root = Path(tempfile.mkdtemp(prefix="task-", dir=tmp_path))
        root.chmod(0o755)
        workdir = root / "work"
        (workdir / ".kernel_package").mkdir(parents=True)
        (workdir / ".kernel_package" / "build_test_env.py").write_text(build)
        (workdir / ".kernel_package" / "benchmark.py").write_text(textwrap.dedent(benchmark))
        for rel, text in src.items():
            (workdir / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
            (workdir / "src" / rel).write_text(textwrap.dedent(text))
        spec = TaskSpec(
            kernel_id=kernel_id,
            arch=kernel_id.arch,
            workdir=workdir,
            harness_path=REPO_ROOT,
            cpu=(os.cpu_count() or 1) - 1,
            step_timeout_s=step_timeout_s,
            task_timeout_s=2 * step_timeout_s,
            limits=StepLimits(memory_bytes=8192 * MIB, max_output_bytes=1024 * 1024),
        )
        return execute_task(spec, gpu_sandbox, validate_result=validate_result_document)

    return run
