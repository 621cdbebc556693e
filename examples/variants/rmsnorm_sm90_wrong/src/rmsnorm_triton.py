"""RMSNorm in Triton, slightly wrong: the per-column scale w is never applied (y = x / rms).

Every output is off by its column's factor w in [0.5, 1.5]: far outside bfloat16 tolerances, so
the judge rejects it. The sm90 board's wrong variant, for the GPU check.
"""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    inv = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * stride + cols, (x * inv).to(tl.bfloat16), mask=mask)  # w forgotten


def rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    assert x.is_contiguous() and x.dtype == torch.bfloat16
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    _rmsnorm_kernel[(rows,)](x, w, y, x.stride(0), cols, EPS, BLOCK=block, num_warps=8)
    return y
