"""Isolation backends behind one small interface: sandbox (bubblewrap), docker, and stub."""

from __future__ import annotations

from typing import Any

from kz_events.errors import ConfigError
from kz_runner.backends.base import (
    KILLED_CANCELLED,
    KILLED_OUTPUT_LIMIT,
    KILLED_TIMEOUT,
    Backend,
    BackendUnavailable,
    Cancelled,
    StepResult,
    StepSpec,
)
from kz_runner.backends.docker_engine import DockerBackend
from kz_runner.backends.sandbox import SandboxBackend
from kz_runner.backends.stub import StubBackend

__all__ = [
    "BACKENDS",
    "KILLED_CANCELLED",
    "KILLED_OUTPUT_LIMIT",
    "KILLED_TIMEOUT",
    "Backend",
    "BackendUnavailable",
    "Cancelled",
    "DockerBackend",
    "SandboxBackend",
    "StepResult",
    "StepSpec",
    "StubBackend",
    "get_backend",
]

BACKENDS: dict[str, type[Any]] = {
    "sandbox": SandboxBackend,
    "docker": DockerBackend,
    "stub": StubBackend,
}


def get_backend(name: str, **settings: Any) -> Backend:
    """Build the named backend from its settings (e.g. `image=` for docker)."""
    if name not in BACKENDS:
        raise ConfigError(f"KZ_RUNNER_BACKEND must be one of {sorted(BACKENDS)}, got {name!r}")
    try:
        backend: Backend = BACKENDS[name](**settings)
    except TypeError as exc:
        raise ConfigError(f"bad settings for the {name} backend: {exc}") from exc
    return backend
