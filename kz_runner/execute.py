"""Run one task's two scripts in a backend and turn how they ended into a reason code.

`build_test_env.py` runs first, then `benchmark.py`, both with the work dir as cwd and the
environment of CONTRACTS.md; the harness is copied read-only once per process and put on
PYTHONPATH. Every ending has its own reason: accepted, rejected, build_failed,
benchmark_error, invalid_result (exit 0 but no valid document), timed_out, cancelled.
"""

from __future__ import annotations

import atexit
import os
import platform
import shutil
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kz_events.errors import ConfigError, KzError
from kz_events.ids import KernelId
from kz_runner.backends.base import (
    KILLED_CANCELLED,
    KILLED_OUTPUT_LIMIT,
    Backend,
    Cancelled,
    StepResult,
    StepSpec,
)
from kz_runner.limits import StepLimits

__all__ = ["REASONS", "RESULT_FILE", "TaskOutcome", "TaskSpec", "execute_task"]

REASONS = (
    "accepted",
    "rejected",
    "build_failed",
    "benchmark_error",
    "invalid_result",
    "timed_out",
    "cancelled",
)
RESULT_FILE = ".kz_result.json"
MAX_RESULT_BYTES = 8 * 1024 * 1024
_BUILD = ".kernel_package/build_test_env.py"
_BENCHMARK = ".kernel_package/benchmark.py"

ValidateResult = Callable[[bytes], dict[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskSpec:
    """One unpacked package to run; `harness_path` is the directory holding `kz_harness/`."""

    kernel_id: KernelId
    arch: str
    workdir: Path
    harness_path: Path
    baseline_path: Path | None = None
    step_timeout_s: float = 300.0
    task_timeout_s: float = 600.0
    limits: StepLimits = field(default_factory=StepLimits)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskOutcome:
    """How a task ended: a reason code, the validated document if any, the capped log."""

    reason: str
    result: dict[str, Any] | None = None
    log: bytes = b""
    message: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @classmethod
    def failed(cls, reason: str, message: str) -> TaskOutcome:
        """An outcome decided before any step ran (e.g. the package could not be unpacked)."""
        return cls(reason=reason, message=message, log=(message + "\n").encode())


class _Log:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def step(self, script: str, result: StepResult) -> None:
        ending = f"killed ({result.killed_reason})" if result.killed_reason else "exit"
        code = "" if result.killed_reason else f" {result.exit_code}"
        self.parts.append(f"== {script}: {ending}{code} in {result.wall_s:.2f} s ==\n".encode())
        self.parts.append(
            result.output
            if result.output.endswith(b"\n") or not result.output
            else result.output + b"\n"
        )

    def note(self, message: str) -> None:
        self.parts.append(f"== {message} ==\n".encode())

    def bytes(self) -> bytes:
        return b"".join(self.parts)


_HARNESS_COPIES: dict[Path, Path] = {}


def _remove_copy(root: Path) -> None:
    for path in (root, *root.rglob("*")):
        if path.is_dir():
            path.chmod(0o755)
    shutil.rmtree(root, ignore_errors=True)


def harness_root(harness_path: Path) -> Path:
    """A private, world-readable, read-only copy of kz_harness, so the sandbox sees nothing
    else; made once per process and source, shared by its tasks, removed at exit."""
    source = (harness_path / "kz_harness").resolve()
    if source in _HARNESS_COPIES and _HARNESS_COPIES[source].is_dir():
        return _HARNESS_COPIES[source]
    if not (source / "__init__.py").is_file():
        raise ConfigError(f"harness_path must hold kz_harness/__init__.py, got {harness_path}")
    root = Path(tempfile.mkdtemp(prefix="kz-harness-"))
    shutil.copytree(
        source, root / "kz_harness", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    for path in sorted((root, *root.rglob("*")), reverse=True):
        path.chmod(0o555 if path.is_dir() else 0o444)
    atexit.register(_remove_copy, root)
    _HARNESS_COPIES[source] = root
    return root


def _environment(spec: TaskSpec, harness_root: Path) -> dict[str, str]:
    workdir = spec.workdir.resolve()
    env = {
        "KZ_RESULT_PATH": str(workdir / RESULT_FILE),
        "KZ_KERNEL_ID": str(spec.kernel_id),
        "KZ_ARCH": spec.arch,
        "PYTHONPATH": str(harness_root),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "HOME": str(workdir),
        "TMPDIR": "/tmp",  # noqa: S108 - the step's private tmpfs
        "LANG": "C.UTF-8",
    }
    if spec.baseline_path is not None:
        env["KZ_BASELINE_PATH"] = str(spec.baseline_path.resolve())
    return env


def _host_environment(backend: Backend) -> dict[str, str]:
    return {
        "backend": backend.name,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }


def _failure(result: StepResult, failed_reason: str) -> str | None:
    """The task's reason code when a step did not succeed, else None."""
    if result.killed_reason == KILLED_CANCELLED:
        return "cancelled"
    if result.timed_out:
        return "timed_out"
    if result.killed_reason == KILLED_OUTPUT_LIMIT or result.exit_code != 0:
        return failed_reason
    return None


def _read_regular_file(path: Path, limit: int) -> bytes | None:
    """The file's bytes if it is a regular file (never a link or FIFO) within `limit`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None
        return handle.read(limit + 1)


def _read_result(path: Path, validate_result: ValidateResult) -> tuple[dict[str, Any] | None, str]:
    data = _read_regular_file(path, MAX_RESULT_BYTES)
    if data is None:
        return None, "benchmark.py exited 0 without writing the result document as a plain file"
    if len(data) > MAX_RESULT_BYTES:
        return None, f"result document is over {MAX_RESULT_BYTES} bytes"
    try:
        return validate_result(data), ""
    except (KzError, ValueError) as exc:
        return None, f"result document is invalid: {exc}"


class _Run:
    """The state of one task's execution: its deadline, log and timings."""

    def __init__(self, spec: TaskSpec, backend: Backend, cancelled: Cancelled | None) -> None:
        self.spec = spec
        self.backend = backend
        self.cancelled = cancelled
        self.started = time.monotonic()
        self.deadline = self.started + spec.task_timeout_s
        self.log = _Log()
        self.timings: dict[str, float] = {}

    def step(self, script: str, env: dict[str, str], readonly: tuple[Path, ...]) -> StepResult:
        timeout = min(self.spec.step_timeout_s, self.deadline - time.monotonic())
        name = Path(script).name
        if timeout <= 0:
            result = StepResult(
                exit_code=None,
                timed_out=True,
                killed_reason="timeout",
                output=b"task time limit reached before the step\n",
                output_truncated=False,
                wall_s=0.0,
            )
        else:
            result = self.backend.run(
                StepSpec(
                    argv=(self.backend.python, script),
                    workdir=self.spec.workdir,
                    env=env,
                    timeout_s=timeout,
                    limits=self.spec.limits,
                    readonly_paths=readonly,
                ),
                cancelled=self.cancelled,
            )
        self.log.step(name, result)
        self.timings[name.removesuffix(".py") + "_s"] = round(result.wall_s, 3)
        return result

    def outcome(
        self, reason: str, message: str, result: dict[str, Any] | None = None
    ) -> TaskOutcome:
        self.log.note(f"{reason}: {message}")
        self.timings["total_s"] = round(time.monotonic() - self.started, 3)
        return TaskOutcome(
            reason=reason,
            result=result,
            log=self.log.bytes(),
            message=message,
            environment=_host_environment(self.backend),
            timings=self.timings,
        )


def _script_missing(workdir: Path, script: str) -> bool:
    return not (workdir / script).is_file()


def execute_task(
    spec: TaskSpec,
    backend: Backend,
    *,
    cancelled: Cancelled | None = None,
    validate_result: ValidateResult,
) -> TaskOutcome:
    """Run the task's build step then its benchmark in `backend`; see the module docstring."""
    run = _Run(spec, backend, cancelled)
    result_path = spec.workdir / RESULT_FILE
    harness = harness_root(spec.harness_path)
    env = _environment(spec, harness)
    readonly = (harness, *([spec.baseline_path] if spec.baseline_path else []))
    if _script_missing(spec.workdir, _BUILD):
        return run.outcome("build_failed", f"{_BUILD} is missing")
    reason = _failure(run.step(_BUILD, env, readonly), "build_failed")
    if reason is not None:
        return run.outcome(reason, f"{_BUILD} did not succeed")
    if _script_missing(spec.workdir, _BENCHMARK):
        return run.outcome("benchmark_error", f"{_BENCHMARK} is missing")
    result_path.unlink(missing_ok=True)
    reason = _failure(run.step(_BENCHMARK, env, readonly), "benchmark_error")
    if reason is not None:
        return run.outcome(reason, f"{_BENCHMARK} did not succeed")
    document, problem = _read_result(result_path, validate_result)
    if document is None:
        return run.outcome("invalid_result", problem)
    verdict = "accepted" if document.get("accepted") is True else "rejected"
    return run.outcome(verdict, str(document.get("reason", "")), document)
