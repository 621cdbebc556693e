"""One judge task as a runner runs it, from sources: the judge's files, the candidate's src/,
optionally main's incumbent, the board's reference and the scoreboard's baseline, written into
a fresh task folder and executed through `kz_runner.execute.execute_task` on a backend. The
sandbox, container and GPU suites and the GPU check share it."""

from __future__ import annotations

import tempfile
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kz_events.ids import KernelId
from kz_package import validate_result_document
from kz_runner.backends.base import Backend
from kz_runner.execute import TaskOutcome, TaskSpec, execute_task
from kz_runner.limits import StepLimits
from kz_testing.lanes import runner_cpu

__all__ = ["REPO", "judge_task"]

REPO = Path(__file__).resolve().parents[1]


def _write(folder: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(textwrap.dedent(text))


def judge_task(
    backend: Backend,
    root: Path,
    benchmark: str,
    src: Mapping[str, str],
    *,
    kernel_id: KernelId,
    baseline: str | None = None,
    incumbent: Mapping[str, str] | None = None,
    reference: Mapping[str, str] | None = None,
    confirming: bool = False,
    build: str = "print('build ok')\n",
    cpu: int | None = None,
    step_timeout_s: float = 60.0,
    task_timeout_s: float | None = None,
    limits: StepLimits | None = None,
    validate: Callable[[bytes], Any] = validate_result_document,
) -> TaskOutcome:
    """Judge `src` with the `benchmark` source, in a new folder under `root`; the outcome."""
    root.mkdir(parents=True, exist_ok=True)
    task = Path(tempfile.mkdtemp(prefix="task-", dir=root))
    task.chmod(0o755)
    workdir = task / "work"
    _write(workdir / ".kernel_package", {"build_test_env.py": build, "benchmark.py": benchmark})
    _write(workdir / "src", src)
    rivals: dict[str, Path | None] = {"incumbent": None, "reference": None}
    for name, files in (("incumbent", incumbent), ("reference", reference)):
        if files is not None:
            rivals[name] = task / name / "src"
            _write(task / name / "src", files)
    baseline_path = None
    if baseline is not None:
        baseline_path = task / "bench_result.yaml"
        baseline_path.write_text(baseline)
    spec = TaskSpec(
        kernel_id=kernel_id,
        arch=kernel_id.arch,
        workdir=workdir,
        harness_path=REPO,
        baseline_path=baseline_path,
        incumbent=rivals["incumbent"],
        reference=rivals["reference"],
        confirming=confirming,
        cpu=cpu if cpu is not None else runner_cpu(),
        step_timeout_s=step_timeout_s,
        task_timeout_s=task_timeout_s if task_timeout_s is not None else 2 * step_timeout_s,
        limits=limits or StepLimits(),
    )
    return execute_task(spec, backend, validate_result=validate)
