"""A private Docker engine for the session, the runner image built on it, and tasks run
through the docker backend.

`dockerd` runs on its own socket, data root and exec root, with no bridge and no iptables
rules, so the host's network is never touched; it is stopped by its pid at the end. Without
root or without `dockerd` the whole folder is skipped, saying which.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from docker_support import Engine, build_runner_image

from kz_events.ids import KernelId
from kz_package import validate_result_document
from kz_runner.backends import DockerBackend
from kz_runner.execute import TaskOutcome, TaskSpec, execute_task
from kz_runner.limits import MIB, StepLimits
from kz_testing.lanes import lane_cpu

REPO_ROOT = Path(__file__).resolve().parents[3]
KERNEL_ID = KernelId.parse("cpu/Norm/RMSNorm/fp32/docker_test")
IMAGE = "kz-runner-test"

RunPackage = Callable[..., TaskOutcome]


def _why_no_engine() -> str | None:
    if os.geteuid() != 0:
        return "the docker tests start their own dockerd, which needs root"
    if shutil.which("dockerd") is None:
        return "dockerd is not installed (apt-get install docker.io; scripts/system-deps.sh)"
    return None


@pytest.fixture(scope="session")
def engine() -> Iterator[Engine]:
    """A private dockerd for the session (skipped with the reason where it cannot start)."""
    reason = _why_no_engine()
    if reason is not None:
        pytest.skip(reason)
    started = Engine(Path(tempfile.mkdtemp(prefix="kzd-")))
    try:
        started.start()
    except (OSError, RuntimeError) as exc:
        pytest.skip(f"dockerd could not start here: {exc}")
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="session")
def image(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The runner image, built once per session from a root filesystem made here."""
    build_runner_image(engine.client, tmp_path_factory.mktemp("image"), IMAGE)
    return IMAGE


@pytest.fixture(scope="session")
def docker_backend(engine: Engine, image: str) -> DockerBackend:
    backend = DockerBackend(image=image, base_url=engine.url, gpus=None)
    backend.check_available()
    return backend


def _write_package(workdir: Path, benchmark: str, build: str, src: dict[str, str]) -> None:
    (workdir / ".kernel_package").mkdir(parents=True)
    (workdir / ".kernel_package" / "build_test_env.py").write_text(textwrap.dedent(build))
    (workdir / ".kernel_package" / "benchmark.py").write_text(textwrap.dedent(benchmark))
    for rel, text in src.items():
        (workdir / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (workdir / "src" / rel).write_text(textwrap.dedent(text))


@pytest.fixture
def run_in_docker(tmp_path: Path, docker_backend: DockerBackend) -> RunPackage:
    """Write a package (benchmark.py and build source, src files) and execute it in docker."""

    def run(
        benchmark: str,
        src: dict[str, str] | None = None,
        *,
        build: str = "print('build ok')\n",
        baseline: str | None = None,
        step_timeout_s: float = 60.0,
        limits: StepLimits | None = None,
        validate: Callable[[bytes], dict[str, Any]] = validate_result_document,
        cancelled: Callable[[], bool] | None = None,
    ) -> TaskOutcome:
        workdir = tmp_path / "work"
        _write_package(workdir, benchmark, build, src or {})
        baseline_path = None
        if baseline is not None:
            baseline_path = tmp_path / "bench_result.yaml"
            baseline_path.write_text(baseline)
        spec = TaskSpec(
            kernel_id=KERNEL_ID,
            arch="cpu",
            workdir=workdir,
            harness_path=REPO_ROOT,
            cpu=lane_cpu(),
            baseline_path=baseline_path,
            step_timeout_s=step_timeout_s,
            task_timeout_s=2 * step_timeout_s,
            limits=limits or StepLimits(memory_bytes=1024 * MIB, max_output_bytes=256 * 1024),
        )
        return execute_task(spec, docker_backend, cancelled=cancelled, validate_result=validate)

    return run
