"""The worker's GPU call and the judge's bound on device times, against a fake torch (no GPU
here; docs/gpu.md says how the real path is checked on a lent GPU)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kz_harness.judge import device_time_problems
from kz_harness.worker import Device

pytestmark = pytest.mark.unit


class FakeTensor:
    def __init__(self, torch: FakeTorch, array: Any, dtype: str, device: str = "cpu") -> None:
        self.torch = torch
        self.array = np.asarray(array)
        self.dtype = dtype
        self.device = device
        self.shape = self.array.shape

    def to(self, target: str) -> FakeTensor:
        if target == "cuda":
            self.torch.log.append("h2d")
            return FakeTensor(self.torch, self.array.copy(), self.dtype, "cuda")
        return FakeTensor(self.torch, self.array, target, self.device)

    def zero_(self) -> FakeTensor:
        self.torch.log.append("flush")
        return self

    def float(self) -> FakeTensor:
        return FakeTensor(self.torch, self.array.astype(np.float32), "float32", self.device)

    def cpu(self) -> FakeTensor:
        self.torch.log.append("d2h")
        return FakeTensor(self.torch, self.array, self.dtype, "cpu")

    def numpy(self) -> Any:
        return self.array


class FakeEvent:
    def __init__(self, torch: FakeTorch) -> None:
        self.torch = torch
        self.at = 0.0

    def record(self, stream: object) -> None:
        self.torch.log.append("event")
        self.at = self.torch.gpu_ms

    def elapsed_time(self, other: FakeEvent) -> float:
        return other.at - self.at


class FakeCuda:
    def __init__(self, torch: FakeTorch, available: bool) -> None:
        self.torch = torch
        self.available = available

    def is_available(self) -> bool:
        return self.available

    def current_device(self) -> int:
        return 0

    def get_device_properties(self, device: int) -> Any:
        return type("Props", (), {"L2_cache_size": 50 << 20})()

    def synchronize(self) -> None:
        self.torch.log.append("sync")

    def current_stream(self) -> object:
        return "stream"

    def Event(self, enable_timing: bool = False) -> FakeEvent:
        return FakeEvent(self.torch)


class FakeTorch:
    int32 = "int32"
    float32 = "float32"
    bfloat16 = "bfloat16"

    def __init__(self, available: bool = True) -> None:
        self.log: list[str] = []
        self.gpu_ms = 0.0
        self.cuda = FakeCuda(self, available)
        self.Tensor = FakeTensor

    def empty(self, n: int, dtype: str, device: str) -> FakeTensor:
        return FakeTensor(self, np.zeros(n), dtype, device)

    def from_numpy(self, array: Any) -> FakeTensor:
        return FakeTensor(self, array, str(array.dtype))


def test_a_gpu_call_is_flushed_synchronised_and_timed_by_events() -> None:
    """Inputs go to the device first, then the flush and a sync, the events around the call
    alone, a device-wide sync, and the output comes back as declared."""
    torch = FakeTorch()
    device = Device(torch, "bfloat16", reset=lambda: torch.log.append("reset"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.full((2, 3), np.nan, dtype=np.float32)

    def kernel(t: FakeTensor) -> FakeTensor:
        torch.log.append("kernel")
        torch.gpu_ms += 0.25
        return FakeTensor(torch, t.array * 2, "bfloat16", "cuda")

    elapsed = device.call(kernel, [x], out)
    assert elapsed == 250_000
    assert torch.log == ["h2d", "flush", "reset", "sync", "event", "kernel", "event", "sync", "d2h"]
    assert np.array_equal(out, x * 2)


def test_a_gpu_output_must_be_a_plain_tensor_of_the_declared_dtype() -> None:
    """A lazy stand-in or a wider dtype is refused, as on the CPU."""
    torch = FakeTorch()
    device = Device(torch, "bfloat16", find_reset=False)
    x = np.zeros((2, 3), dtype=np.float32)
    out = np.zeros((2, 3), dtype=np.float32)
    with pytest.raises(TypeError, match=r"must be a torch\.Tensor"):
        device.call(lambda t: object(), [x], out)
    with pytest.raises(TypeError, match="must be bfloat16"):
        device.call(lambda t: FakeTensor(torch, t.array, "float32", "cuda"), [x], out)


def test_no_cuda_device_is_said_in_one_line() -> None:
    with pytest.raises(RuntimeError, match="no CUDA device"):
        Device(FakeTorch(available=False))


def test_honest_device_times_stay_within_the_judges_bound() -> None:
    """Device time under the wall time, the rest close to the calibrated gap: no problem."""
    pairs = [(150_000 + i, 100_000) for i in range(50)]
    assert device_time_problems(pairs, gap_ns=48_000) == []


def test_device_times_over_the_wall_clock_break_the_bound() -> None:
    """A worker claiming more device time than the judge saw is lying about its clock."""
    pairs = [(100_000, 150_000)] + [(150_000, 100_000)] * 9
    codes = [code for code, _ in device_time_problems(pairs, gap_ns=50_000)]
    assert codes == ["timing_bound_broken"]


def test_work_outside_the_events_is_seen_in_the_gap() -> None:
    """Work on another stream (or launched after the end event) is waited for by the device-
    wide sync: the judge's clock sees it, the events do not."""
    pairs = [(900_000, 10_000)] * 20
    codes = [code for code, _ in device_time_problems(pairs, gap_ns=50_000)]
    assert codes == ["work_outside_events"]
