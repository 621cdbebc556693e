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
    "Cancelled",
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


@dataclass(frozen=True, slots=True, kw_only=True)
class StepSpec:
    """One command to run isolated: only `workdir` is writable, `readonly_paths` are visible."""

    argv: tuple[str, ...]
    workdir: Path
    env: Mapping[str, str]
    timeout_s: float
    limits: StepLimits = field(default_factory=StepLimits)
    readonly_paths: tuple[Path, ...] = ()


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


class Backend(Protocol):
    """Runs steps isolated. `python` is the interpreter path to use inside the backend."""

    name: str
    python: str

    def check_available(self) -> None:
        """Raise `BackendUnavailable` with one line saying what is missing and how to fix it."""

    def run(self, step: StepSpec, *, cancelled: Cancelled | None = None) -> StepResult:
        """Run the step to its end, its timeout, its output limit or cancellation."""
