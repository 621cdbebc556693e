"""GEMM in Triton for Hopper, with a bug: the k loop stops one tile early.

The same kernel as the gemm_sm90_triton variant but for its loop bound, `range(0, k - BLOCK_K,
BLOCK_K)`: the last BLOCK_K columns of a (rows of b) are never added. Every element of c misses
a slice of its sum (64 of k = 2048 on both workloads, about 3 %), far outside the board's
bfloat16 tolerance: the judge must reject it.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _gemm_kernel(
    a_ptr, b_ptr, c_ptr, m, n, k,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(m, BLOCK_M)
    tiles_n = tl.cdiv(n, BLOCK_N)
    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    group_m = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start in range(0, k - BLOCK_K, BLOCK_K):  # the last slice of k is never added
        left = k - start
        a = tl.load(a_ptrs, mask=(rows[:, None] < m) & (ks[None, :] < left), other=0.0)
        b = tl.load(b_ptrs, mask=(ks[:, None] < left) & (cols[None, :] < n), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.bfloat16), mask=(rows[:, None] < m) & (cols[None, :] < n))


# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages)
_SQUARE = (128, 256, 64, 8, 8, 3)
_SKINNY = (16, 32, 256, 1, 4, 4)


def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    assert a.dtype == b.dtype == torch.bfloat16 and a.shape[1] == b.shape[0]
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=torch.bfloat16)
    block_m, block_n, block_k, group_m, warps, stages = _SKINNY if m <= 64 else _SQUARE
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
    _gemm_kernel[grid](
        a, b, c, m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m,
        num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return c
