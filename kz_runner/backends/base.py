"""The one small interface every isolation backend implements, and the values it passes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kz_events.errors import KzError
from kz_runner.limits import StepLimits

__all__ = [
    "KILLED_CANCELLED",
    "KILLED_OUTPUT_LIMIT",
    "KILLED_TIMEOUT",
    "Backend",
    "BackendUnavailable",
    "Bind",
    "Cancelled",
    "Spawned",
    "StepResult",
    "StepSpec",
]

KILLED_TIMEOUT = "timeout"
KILLED_CANCELLED = "cancelled"
KILLED_OUTPUT_LIMIT = "output_limit"

Cancelled = Callable[[], bool]


class BackendUnavailable(KzError):
    """The backend cannot run here (missing tool, engine unreachable); says how to fix it."""

    code = "backend_unavailable"


@dataclass(frozen=True, slots=True)
class Bind:
    """A host path shown at `inside` in the step's view, read-only unless `writable`."""

    host: Path
    inside: str
    writable: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class StepSpec:
    """One command to run isolated.

    Its view: `workdir` writable at its own path, `readonly_paths` read-only at theirs, each
    of `binds` at its `inside` path, `tmpfs` as private writable folders, and `cwd` (inside
    path; default the work dir) as its current folder. `pass_fds` are inherited at the same
    numbers by `Backend.run`, at 3, 4, … by `Backend.spawn` (so every worker finds its channel
    at the same number), and stay the caller's to close. `uid` overrides the backend's
    unprivileged uid. `package` is the task's package folder, for backends that answer
    without running it. `devices` marks a step that may use the runner's GPUs (a GPU board's
    build and its candidate's workers; never the judge), for backends that show them per step.
    """

    argv: tuple[str, ...]
    workdir: Path
    env: Mapping[str, str]
    timeout_s: float
    limits: StepLimits = field(default_factory=StepLimits)
    readonly_paths: tuple[Path, ...] = ()
    binds: tuple[Bind, ...] = ()
    tmpfs: tuple[str, ...] = ()
    cwd: str | None = None
    pass_fds: tuple[int, ...] = ()
    uid: int | None = None
    package: Path | None = None
    devices: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class StepResult:
    """How a step ended; `output` is stdout and stderr together, capped with a marker."""

    exit_code: int | None
    timed_out: bool
    killed_reason: str | None
    output: bytes
    output_truncated: bool
    wall_s: float

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0 and self.killed_reason is None


class Spawned(Protocol):
    """A process started with `Backend.spawn` and everything it started, in its own sandbox.

    A backend that cannot pass `pass_fds` down (a container) also sets `channel`: a socket it
    accepted from the step, standing for the step's first passed descriptor.
    """

    def members(self) -> list[int]:
        """Host pids of the processes the step is made of now (the sandbox's init excluded)."""

    def inspect(self) -> dict[str, int]:
        """{processes, threads, cpu_ns} of the step's processes, read by the host."""

    def signal(self, signum: int) -> None:
        """Send `signum` to every process of the step."""

    def kill(self) -> None:
        """Kill every process of the step and wait until none is left."""

    def output(self) -> bytes:
        """What the step printed (capped), once it is dead."""


class Backend(Protocol):
    """Runs steps isolated. `python` is the interpreter path to use inside the backend."""

    name: str
    python: str

    def check_available(self) -> None:
        """Raise `BackendUnavailable` with one line saying what is missing and how to fix it."""

    def run(self, step: StepSpec, *, cancelled: Cancelled | None = None) -> StepResult:
        """Run the step to its end, its timeout, its output limit or cancellation."""

    def spawn(self, step: StepSpec) -> Spawned:
        """Start the step and return at once (a judge's worker); raise BackendUnavailable
        where the backend cannot run workers."""
