"""What the GPU suite's modules share: whether this process can run them at all."""

from __future__ import annotations

from collections.abc import Callable

from kz_runner.execute import TaskOutcome

__all__ = ["GPU_VARIANTS", "RunPackage", "cuda_missing"]

RunPackage = Callable[..., TaskOutcome]  # the `judge_gpu_package` fixture of conftest.py

# The sm90 example packages' variants (examples/variants/<variant>/src) and the verdict each
# must get as a first result: right ones accepted, wrong ones rejected by the checks.
GPU_VARIANTS: dict[str, dict[str, str]] = {
    "sm90/Norm/RMSNorm/bf16/triton_rowwise": {
        "rmsnorm_sm90_wrong": "rejected",
    },
    "sm90/GEMM/GEMM/bf16/torch_matmul": {
        "gemm_sm90_triton": "accepted",
        "gemm_sm90_wrong": "rejected",
    },
    "sm90/Softmax/Softmax/fp32/torch_softmax": {
        "softmax_sm90_triton": "accepted",
        "softmax_sm90_wrong": "rejected",
    },
}


def cuda_missing() -> str | None:
    """Why this process cannot run GPU tests, or None when torch sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return "torch is not installed: the GPU suite runs on a GPU machine (docs/gpu.md)"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device: the GPU suite runs on a GPU machine (docs/gpu.md)"
    return None
