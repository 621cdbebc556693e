"""The ceilings and the floor: which term bounds a call, and the CPU measurement's shape."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from kz_harness.ceilings import Ceilings, floor_s, measure

pytestmark = pytest.mark.unit

H200ISH = Ceilings(bytes_per_s=4.0e12, flops_per_s=8.0e14, dtype="bfloat16", device="gpu")


def test_a_copy_heavy_call_is_memory_bound() -> None:
    seconds, bound = floor_s(H200ISH, bytes_moved=4_000_000, flops=1_000)
    assert bound == "memory" and seconds == pytest.approx(1e-6)


def test_a_large_product_is_compute_bound() -> None:
    n = 4096
    seconds, bound = floor_s(H200ISH, bytes_moved=3 * n * n * 2, flops=2 * n**3)
    assert bound == "compute" and seconds == pytest.approx(2 * n**3 / 8.0e14)


def test_undeclared_work_has_a_zero_floor() -> None:
    assert floor_s(H200ISH, bytes_moved=0, flops=0) == (0.0, "memory")


def test_ceilings_round_trip_through_the_document() -> None:
    assert Ceilings.from_dict(H200ISH.to_dict()) == H200ISH


def test_the_cpu_ceilings_are_measured_in_the_boards_dtype() -> None:
    measured = measure(np, "fp64")
    assert measured.device == "cpu" and measured.dtype == "float64"
    assert measured.bytes_per_s > 1e8 and measured.flops_per_s > 1e7
    assert measure(np, "bf16").dtype == "float32"  # numpy has no bfloat16


class _Event:
    """A device event on the fake's clock (milliseconds)."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.at = 0.0

    def record(self, stream: object = None) -> None:
        self.at = self.clock[0]

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: _Event) -> float:
        return end.at - self.at


class _Tensor:
    def __init__(self, torch: _FakeTorch, nbytes: int, dtype: str = "float32") -> None:
        self.torch, self.nbytes, self.dtype = torch, nbytes, dtype

    def copy_(self, other: _Tensor) -> _Tensor:
        self.torch.clock[0] += 2 * other.nbytes / 4e12 * 1e3  # 4 TB/s, read plus written
        return self

    def to(self, dtype: str) -> _Tensor:
        return _Tensor(self.torch, self.nbytes, dtype)


class _FakeTorch:
    """Just enough of torch for the GPU ceilings: events on a fake clock, a copy at 4 TB/s, a
    product at 800 TFLOP/s in bfloat16 and at 50 in float32 (TF32 off)."""

    bfloat16, float16, float32, float64, int32 = (
        "bfloat16",
        "float16",
        "float32",
        "float64",
        "int32",
    )
    RATES = {"bfloat16": 8e14, "float32": 5e13}

    def __init__(self) -> None:
        self.clock = [0.0]
        self.seen: list[tuple[str, bool]] = []
        matmul = SimpleNamespace(allow_tf32=True)
        self.backends = SimpleNamespace(cuda=SimpleNamespace(matmul=matmul))
        self.cuda = SimpleNamespace(
            Event=lambda enable_timing=False: _Event(self.clock),
            get_device_name=lambda index: "Fake H200",
            current_device=lambda: 0,
        )
        self.Generator = lambda device: SimpleNamespace(manual_seed=lambda seed: None)

    def ones(self, n: int, dtype: str, device: str) -> _Tensor:
        return _Tensor(self, 4 * n, dtype)

    def empty_like(self, tensor: _Tensor) -> _Tensor:
        return _Tensor(self, tensor.nbytes, tensor.dtype)

    def randn(self, rows: int, cols: int, device: str, generator: object) -> _Tensor:
        return _Tensor(self, 4 * rows * cols)

    def matmul(self, a: _Tensor, b: _Tensor) -> _Tensor:
        self.seen.append((a.dtype, self.backends.cuda.matmul.allow_tf32))
        self.clock[0] += 2 * 8192**3 / self.RATES[a.dtype] * 1e3
        return a


def test_the_gpu_ceilings_time_a_copy_and_a_product_on_device_events() -> None:
    """On a GPU: bytes read plus written over the copy's event time, and the product's FLOPs
    over its event time in the board's dtype, TF32 off for float32 and put back after."""
    torch = _FakeTorch()
    measured = measure(np, "bf16", torch)
    assert measured.device == "Fake H200" and measured.dtype == "bfloat16"
    assert measured.bytes_per_s == pytest.approx(4e12)
    assert measured.flops_per_s == pytest.approx(8e14)
    assert measure(np, "fp32", torch).flops_per_s == pytest.approx(5e13)
    assert {tf32 for _, tf32 in torch.seen} == {False}
    assert torch.backends.cuda.matmul.allow_tf32 is True
