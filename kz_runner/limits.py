"""The bounds a task's steps run under: memory, processes, file size, output and time."""

from __future__ import annotations

from dataclasses import dataclass

from kz_events.errors import ConfigError

__all__ = ["MIB", "StepLimits"]

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class StepLimits:
    """Per-step resource limits; `memory_bytes=None` leaves address space unbounded.

    CUDA maps far more virtual memory than it uses, so GPU hosts running the sandbox set
    `memory_bytes=None` and rely on the docker backend's cgroup memory limit instead.
    """

    memory_bytes: int | None = 4096 * MIB
    max_pids: int = 256
    max_file_bytes: int = 1024 * MIB
    max_output_bytes: int = 4 * MIB

    def __post_init__(self) -> None:
        if self.memory_bytes is not None and self.memory_bytes < 16 * MIB:
            raise ConfigError(f"memory_bytes must be at least 16 MiB, got {self.memory_bytes}")
        for name in ("max_pids", "max_file_bytes", "max_output_bytes"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be a positive integer, got {getattr(self, name)}")
