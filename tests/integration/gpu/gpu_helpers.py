"""What the GPU suite's modules share: whether this process can run them at all."""

from __future__ import annotations

from collections.abc import Callable

from kz_runner.execute import TaskOutcome

__all__ = ["RunPackage", "cuda_missing"]

RunPackage = Callable[..., TaskOutcome]  # the `judge_gpu_package` fixture of conftest.py


def cuda_missing() -> str | None:
    """Why this process cannot run GPU tests, or None when torch sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return "torch is not installed: the GPU suite runs on a GPU machine (docs/gpu.md)"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device: the GPU suite runs on a GPU machine (docs/gpu.md)"
    return None
