"""The device's measured ceilings, and each workload's physical floor against them.

A floor is the least time a call can take: its bytes at the device's copy bandwidth or its
floating-point operations at the device's matrix rate, whichever is longer. Datasheet rates
are not what a kernel can reach, so both ceilings are measured, in the trusted calibration
worker, with the candidate and its rivals stopped, on the device the board runs on:

- bandwidth: a copy of a buffer well beyond the last-level cache, counting the bytes read
  and the bytes written, the best of a few;
- rate: a square matrix product in the board's dtype through the framework's library
  (numpy's BLAS on a CPU; torch on a GPU, TF32 off for float32), the best of a few.

A kernel can beat a measured ceiling by a little (a library copy or product is not the last
word); it cannot beat physics by a third. A median under `SUSPECT_SHARE` of the floor marks
the result suspect: something was not measured, or the declared work is wrong.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kz_harness.stats import physical_floor

__all__ = ["SUSPECT_SHARE", "Ceilings", "floor_s", "measure"]

SUSPECT_SHARE = 0.75
_CPU_COPY_BYTES = 64 * 1024 * 1024  # twice this host's last-level cache and more
_CPU_MATMUL_N = 512
_GPU_COPY_BYTES = 1 << 30
_GPU_MATMUL_N = 8192
_REPEATS = 5


@dataclass(frozen=True, slots=True)
class Ceilings:
    """What the device reached: bytes per second (read plus written), FLOP per second."""

    bytes_per_s: float
    flops_per_s: float
    dtype: str
    device: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "bytes_per_s": self.bytes_per_s,
            "flops_per_s": self.flops_per_s,
            "dtype": self.dtype,
            "device": self.device,
        }

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> Ceilings:
        return cls(
            float(document["bytes_per_s"]),
            float(document["flops_per_s"]),
            str(document["dtype"]),
            str(document["device"]),
        )


def floor_s(ceilings: Ceilings, *, bytes_moved: int, flops: int) -> tuple[float, str]:
    """(the least seconds a call takes, `kz_harness.stats.physical_floor` at these ceilings;
    "memory" or "compute": which term bounds it)."""
    if not (bytes_moved or flops):
        return 0.0, "memory"
    seconds = physical_floor(
        bytes_moved=bytes_moved,
        flops=flops,
        peak_bytes_per_s=ceilings.bytes_per_s,
        peak_flops_per_s=ceilings.flops_per_s,
    )
    return seconds, "memory" if bytes_moved / ceilings.bytes_per_s >= seconds else "compute"


def _best(run: Callable[[], float]) -> float:
    return min(run() for _ in range(_REPEATS))


def _cpu(np: Any, dtype: str) -> Ceilings:
    source = np.ones(_CPU_COPY_BYTES // 8, dtype=np.float64)
    target = np.empty_like(source)

    def copy() -> float:
        began = time.perf_counter()
        np.copyto(target, source)
        return time.perf_counter() - began

    np.copyto(target, source)
    matmul_dtype = np.float64 if dtype == "fp64" else np.float32
    n = _CPU_MATMUL_N
    a = np.random.default_rng(0).standard_normal((n, n)).astype(matmul_dtype)
    b = np.random.default_rng(1).standard_normal((n, n)).astype(matmul_dtype)

    def product() -> float:
        began = time.perf_counter()
        np.matmul(a, b)
        return time.perf_counter() - began

    product()
    return Ceilings(
        2 * source.nbytes / _best(copy),
        2 * n**3 / _best(product),
        np.dtype(matmul_dtype).name,
        "cpu",
    )


def _gpu(torch: Any, dtype: str) -> Ceilings:
    cuda = torch.cuda
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)

    def timed(work: Callable[[], Any]) -> float:
        start.record()
        work()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3

    bandwidth = _gpu_bandwidth(torch, timed)  # its buffers are freed before the product
    kind = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp64": torch.float64}
    matmul_dtype = kind.get(dtype, torch.float32)
    allowed = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # the honest float32 rate
    try:
        n = _GPU_MATMUL_N
        generator = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(n, n, device="cuda", generator=generator).to(matmul_dtype)
        b = torch.randn(n, n, device="cuda", generator=generator).to(matmul_dtype)
        timed(lambda: torch.matmul(a, b))
        rate = 2 * n**3 / _best(lambda: timed(lambda: torch.matmul(a, b)))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allowed
    name = str(cuda.get_device_name(cuda.current_device()))
    return Ceilings(bandwidth, rate, str(matmul_dtype).removeprefix("torch."), name)


def _gpu_bandwidth(torch: Any, timed: Callable[[Callable[[], Any]], float]) -> float:
    source = torch.ones(_GPU_COPY_BYTES // 4, dtype=torch.int32, device="cuda")
    target = torch.empty_like(source)
    timed(lambda: target.copy_(source))
    return 2 * _GPU_COPY_BYTES / _best(lambda: timed(lambda: target.copy_(source)))


def measure(np: Any, dtype: str, torch: Any = None) -> Ceilings:
    """The ceilings of the device this worker runs on: the GPU when `torch` is given."""
    ceilings = _gpu(torch, dtype) if torch is not None else _cpu(np, dtype)
    if not (math.isfinite(ceilings.bytes_per_s) and math.isfinite(ceilings.flops_per_s)):
        raise ValueError(f"the ceilings could not be measured: {ceilings}")
    return ceilings
