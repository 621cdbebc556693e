"""Run one task in a backend, the candidate apart from its judge, and name how it ended.

The judge's files (main's `benchmark.py`, `build_test_env.py`, `desc.yaml` and the baseline
`bench_result.yaml`) are copied out of the work dir before any step runs, into a folder every
step sees read-only at `/kz/judge`. `build_test_env.py` runs first with the work dir as its
writable cwd. Then the judge (`benchmark.py` through `kz_harness.launch`, `python -I`) runs
in a sandbox that holds the judge's files, the harness and a scratch folder, never the
package; the candidate runs in the workers it asks the runner for (`kz_runner.supervisor`),
which see `src/` and a scratch folder only. The result comes back over an inherited pipe.
Every ending has its own reason: accepted, rejected, build_failed, benchmark_error,
invalid_result (no valid document), timed_out, cancelled. On a GPU, another compute context on
the task's GPUs raises `DeviceBusy` (kz_runner.gpuguard): the runner's fault, not an ending of
the candidate's; the runner hands the task back.
"""

from __future__ import annotations

import atexit
import platform
import random
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kz_events.errors import ConfigError, KzError
from kz_events.ids import KernelId
from kz_events.result import ResultDocument
from kz_package import PACKAGE_DIR
from kz_runner.backends.base import (
    KILLED_CANCELLED,
    KILLED_OUTPUT_LIMIT,
    Backend,
    Bind,
    Cancelled,
    StepResult,
    StepSpec,
)
from kz_runner.gpuguard import GpuGuard
from kz_runner.limits import StepLimits
from kz_runner.redact import path_redactor
from kz_runner.supervisor import HARNESS_INSIDE, HOME_INSIDE, JudgeResult, Supervisor
from kz_runner.workdir import remove_tree

__all__ = ["REASONS", "TaskOutcome", "TaskSpec", "execute_task"]

REASONS = (
    "accepted",
    "rejected",
    "build_failed",
    "benchmark_error",
    "invalid_result",
    "timed_out",
    "cancelled",
)
MAX_RESULT_BYTES = 8 * 1024 * 1024
JUDGE_INSIDE = "/kz/judge"
JUDGE_SCRIPTS = ("benchmark.py", "build_test_env.py")
BASELINE_NAME = "bench_result.yaml"
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
    incumbent: Path | None = None  # main's src/ of the kernel, measured beside the candidate
    reference: Path | None = None  # the board's pinned reference src/, measured beside it too
    confirming: bool = False  # a confirmation run: its score is what counts (KZ_CONFIRMATION)
    cpu: int | None = None  # the CPU the judge and its workers are pinned to (None: the last)
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

    def output(self, title: str, output: bytes) -> None:
        self.parts.append(f"== {title} ==\n".encode())
        self.parts.append(output if output.endswith(b"\n") or not output else output + b"\n")

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


def _base_environment(spec: TaskSpec) -> dict[str, str]:
    return {
        "KZ_KERNEL_ID": str(spec.kernel_id),
        "KZ_ARCH": spec.arch,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "HOME": HOME_INSIDE,
        "TMPDIR": "/tmp",  # noqa: S108 - the step's private tmpfs
        "LANG": "C.UTF-8",
    }


def _host_environment(backend: Backend) -> dict[str, str]:
    return {
        "backend": backend.name,
        "containment": str(getattr(backend, "containment", "the backend's own")),
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

    def step(self, script: str, step: StepSpec) -> StepResult:
        """Run `step` (its timeout set here from the step and task limits) and log it."""
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
            result = self.backend.run(replace(step, timeout_s=timeout), cancelled=self.cancelled)
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


def _supervised(
    run: _Run, step: StepSpec, supervisor: Supervisor, guard: GpuGuard | None
) -> tuple[StepResult, JudgeResult]:
    """The judge's step, then every worker killed (the GPU checked before they are, and
    after)."""
    try:
        result = run.step(_BENCHMARK, step)
        if guard is not None:
            guard.during(*supervisor.pids())
    finally:
        judged = supervisor.finish()
    if guard is not None:
        guard.after()
    return result, judged


def _gpu_guard(backend: Backend) -> GpuGuard | None:
    """The backend's check of the task's GPUs, where it has GPUs and the check."""
    make: Callable[[], GpuGuard | None] | None = getattr(backend, "gpu_guard", None)
    return make() if make is not None else None


def _script_missing(workdir: Path, script: str) -> bool:
    return not (workdir / script).is_file()


class _TaskDirs:
    """The folders of one task beside its work dir: the judge's files (read-only to every
    step), the judge's scratch, and the workers' scratch folders. Removed at the end."""

    def __init__(self, spec: TaskSpec) -> None:
        self.root = Path(f"{spec.workdir.resolve()}.kz")
        self.root.mkdir(mode=0o711)
        self.root.chmod(0o711)
        self.judge = self.root / "judge"
        self.judge.mkdir(mode=0o755)
        package = spec.workdir / PACKAGE_DIR
        for name in (*JUDGE_SCRIPTS, "desc.yaml"):
            if (package / name).is_file():
                shutil.copyfile(package / name, self.judge / name)
        if spec.baseline_path is not None and spec.baseline_path.is_file():
            shutil.copyfile(spec.baseline_path, self.judge / BASELINE_NAME)
        for path in self.judge.iterdir():
            path.chmod(0o444)
        self.judge_scratch = self.root / "judge-scratch"
        self.judge_scratch.mkdir(mode=0o755)
        self.workers = self.root / "workers"
        self.workers.mkdir(mode=0o711)
        self.workers.chmod(0o711)

    @property
    def has_baseline(self) -> bool:
        return (self.judge / BASELINE_NAME).is_file()

    def remove(self) -> None:
        remove_tree(self.root)


def _judge_step(
    run: _Run, dirs: _TaskDirs, harness: Path, validate_result: ValidateResult
) -> TaskOutcome:
    spec = run.spec
    src = spec.workdir / "src"
    if not src.is_dir():
        src.mkdir()
    implementations = {"candidate": src}
    for name, rival in (("incumbent", spec.incumbent), ("reference", spec.reference)):
        if rival is not None and rival.is_dir():
            implementations[name] = rival
    # What every Benchmark asks for first, started in a random order: no worker's start
    # (its uid, its folder's age) tells which implementation it is.
    prestart = ["calibrate", *implementations]
    random.SystemRandom().shuffle(prestart)
    guard = _gpu_guard(run.backend)
    if guard is not None:
        guard.before()
    supervisor = Supervisor(
        run.backend,
        implementations=implementations,
        scratch_root=dirs.workers,
        harness=harness,
        limits=spec.limits,
        timeout_s=spec.step_timeout_s,
        max_result_bytes=MAX_RESULT_BYTES,
        prestart=prestart,
    )
    env = {
        **_base_environment(spec),
        **supervisor.judge_environment(),
        "KZ_SEED": secrets.token_hex(16),
        "KZ_IMPLEMENTATIONS": ",".join(implementations),
    }
    if spec.cpu is not None:
        env["KZ_CPU"] = str(spec.cpu)
    if spec.confirming:
        env["KZ_CONFIRMATION"] = "1"
    if dirs.has_baseline:
        env["KZ_BASELINE_PATH"] = f"{JUDGE_INSIDE}/{BASELINE_NAME}"
    step = StepSpec(
        argv=(
            run.backend.python, "-I", f"{HARNESS_INSIDE}/kz_harness/launch.py", "judge",
            f"{JUDGE_INSIDE}/benchmark.py",
        ),
        workdir=dirs.judge_scratch,
        env=env,
        timeout_s=0.0,
        limits=spec.limits,
        binds=(
            Bind(dirs.judge, JUDGE_INSIDE),
            Bind(harness, HARNESS_INSIDE),
            Bind(dirs.judge_scratch, "/kz/scratch", writable=True),
        ),
        tmpfs=(HOME_INSIDE,),
        cwd=JUDGE_INSIDE,
        pass_fds=supervisor.judge_fds,
        package=spec.workdir,
    )  # fmt: skip
    result, judged = _supervised(run, step, supervisor, guard)
    for name, output in judged.worker_logs:
        run.log.output(f"worker {name}", output)
    reason = _failure(result, "benchmark_error")
    if reason is not None:
        return run.outcome(reason, f"{_BENCHMARK} did not succeed")
    if judged.document is None:
        problem = "; ".join(judged.problems) or "the judge sent no result document"
        return run.outcome("invalid_result", problem)
    try:
        document = validate_result(judged.document)
        view = ResultDocument.of(document)  # the report carries `document` as it came
    except (KzError, ValueError) as exc:
        return run.outcome("invalid_result", f"result document is invalid: {exc}")
    verdict = "accepted" if view.accepted is True else "rejected"
    return run.outcome(verdict, view.reason or "", document)


def execute_task(
    spec: TaskSpec,
    backend: Backend,
    *,
    cancelled: Cancelled | None = None,
    validate_result: ValidateResult,
) -> TaskOutcome:
    """Run the task's build step then its judge in `backend`; see the module docstring. The
    log names the task's folders by stable names, never by their host paths."""
    harness = harness_root(spec.harness_path)
    outcome = _execute(spec, backend, harness, cancelled, validate_result)
    return replace(outcome, log=_host_paths(spec, harness)(outcome.log))


def _host_paths(spec: TaskSpec, harness: Path) -> Callable[[bytes], bytes]:
    """What a step may print of the host (its cwd, a traceback's frames) and the names the
    log shows instead."""
    work = spec.workdir
    names = {
        work: "<work>",
        work.parent: "<task>",
        Path(f"{work.resolve()}.kz") / "judge": JUDGE_INSIDE,
        harness: HARNESS_INSIDE,
        spec.harness_path: "<kz>",
    }
    if spec.incumbent is not None:
        names[spec.incumbent] = "<incumbent>"
    if spec.reference is not None:
        names[spec.reference] = "<reference>"
    if sys.prefix != sys.base_prefix:  # the runner's virtual environment
        names[Path(sys.prefix)] = "<venv>"
    return path_redactor(names)


def _execute(
    spec: TaskSpec,
    backend: Backend,
    harness: Path,
    cancelled: Cancelled | None,
    validate_result: ValidateResult,
) -> TaskOutcome:
    run = _Run(spec, backend, cancelled)
    if _script_missing(spec.workdir, _BUILD):
        return run.outcome("build_failed", f"{_BUILD} is missing")
    if _script_missing(spec.workdir, _BENCHMARK):
        return run.outcome("benchmark_error", f"{_BENCHMARK} is missing")
    dirs = _TaskDirs(spec)
    try:
        build = StepSpec(
            argv=(backend.python, "-I", f"{JUDGE_INSIDE}/build_test_env.py"),
            workdir=spec.workdir,
            env=_base_environment(spec),
            timeout_s=0.0,
            limits=spec.limits,
            binds=(Bind(dirs.judge, JUDGE_INSIDE),),
            tmpfs=(HOME_INSIDE,),
            package=spec.workdir,
            devices=True,  # a GPU board's build compiles and tries its kernel
        )
        reason = _failure(run.step(_BUILD, build), "build_failed")
        if reason is not None:
            return run.outcome(reason, f"{_BUILD} did not succeed")
        return _judge_step(run, dirs, harness, validate_result)
    finally:
        dirs.remove()
