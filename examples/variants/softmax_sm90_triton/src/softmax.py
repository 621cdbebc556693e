"""Row softmax in Triton: one program per row, float32 throughout.

A row that fits in one block (up to 8192 columns) is read once: its max, the exponentials,
their sum and the quotients all in registers. A longer row is walked twice in blocks: the
first pass keeps a running max and a running sum per lane (online softmax: the sum is rescaled
by exp(old max - new max) whenever the max grows), the second writes exp(x - max) / sum.
"""

import torch
import triton
import triton.language as tl

_ONE_BLOCK = 8192  # columns a single block holds
_BLOCK = 4096  # the block of the two-pass walk


@triton.jit
def _softmax_row(x_ptr, y_ptr, stride, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * stride + offsets, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + offsets, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def _softmax_online(x_ptr, y_ptr, stride, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    offsets = tl.arange(0, BLOCK)
    running_max = tl.full((BLOCK,), -float("inf"), tl.float32)
    running_sum = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, cols, BLOCK):
        mask = start + offsets < cols
        x = tl.load(x_row + start + offsets, mask=mask, other=-float("inf"))
        new_max = tl.maximum(running_max, x)
        empty = new_max == -float("inf")  # a lane that has seen only masked columns
        scale = tl.where(empty, 0.0, tl.exp(running_max - new_max))
        running_sum = running_sum * scale + tl.where(empty, 0.0, tl.exp(x - new_max))
        running_max = new_max
    row_max = tl.max(running_max, axis=0)
    row_sum = tl.sum(running_sum * tl.exp(running_max - row_max), axis=0)
    for start in range(0, cols, BLOCK):
        mask = start + offsets < cols
        x = tl.load(x_row + start + offsets, mask=mask, other=-float("inf"))
        tl.store(y_ptr + row * stride + start + offsets, tl.exp(x - row_max) / row_sum, mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    assert x.dtype == torch.float32 and x.dim() == 2 and x.is_contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    if cols <= _ONE_BLOCK:
        block = triton.next_power_of_2(cols)
        warps = 4 if block <= 1024 else 8 if block <= 4096 else 16
        _softmax_row[(rows,)](x, y, x.stride(0), cols, BLOCK=block, num_warps=warps)
    else:
        _softmax_online[(rows,)](x, y, x.stride(0), cols, BLOCK=_BLOCK, num_warps=16)
    return y
