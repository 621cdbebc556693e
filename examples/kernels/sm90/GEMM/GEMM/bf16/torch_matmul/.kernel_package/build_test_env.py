"""Prepares the environment for sm90/GEMM/GEMM/bf16: checks for a Hopper GPU, torch and
triton, then runs the kernel once on a small product so a compile error fails the build, not the
benchmark (whether it is right is the benchmark's to say).
"""

from __future__ import annotations

import sys
from pathlib import Path

# The build step runs in the package's work dir (the judge's copy of this file lives apart).
sys.path.insert(0, str(Path.cwd() / "src"))


def main() -> int:
    try:
        import torch
        import triton
    except ImportError as exc:
        print(f"missing dependency: {exc.name} (needs torch and triton)", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("no CUDA device visible: this package runs only on an sm90 GPU", file=sys.stderr)
        return 1
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) != (9, 0):
        print(f"needs compute capability 9.0 (sm90), got {major}.{minor}", file=sys.stderr)
        return 1
    from gemm import gemm

    a = torch.randn(64, 128, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(128, 96, device="cuda", dtype=torch.bfloat16)
    c = gemm(a, b)
    torch.cuda.synchronize()
    if type(c) is not torch.Tensor or c.dtype != torch.bfloat16 or tuple(c.shape) != (64, 96):
        print(f"64x128 @ 128x96 must give a bfloat16 tensor of 64x96, got {c!r:.200}",
              file=sys.stderr)  # fmt: skip
        return 1
    print(
        f"ready: torch {torch.__version__}, triton {triton.__version__}, "
        f"{torch.cuda.get_device_name()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
