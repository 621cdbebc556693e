"""`bench_gpu`'s procedure against a fake torch-like device module (no GPU here)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

import kz_harness.gpu as gpu
from kz_harness.errors import HarnessUnavailable
from kz_harness.gpu import bench_gpu, load_torch

pytestmark = pytest.mark.unit

L2_BYTES = 50 * 1024 * 1024


class FakeCuda:
    """Records every device operation in order; each kernel call takes 0.25 ms of GPU time."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.gpu_ms = 0.0
        self.stream_obj = object()

    def is_available(self) -> bool:
        return True

    def current_device(self) -> int:
        return 0

    def current_stream(self, device: int = 0) -> object:
        return self.stream_obj

    def get_device_properties(self, device: int) -> Any:
        return SimpleNamespace(L2_cache_size=L2_BYTES)

    def synchronize(self, device: int = 0) -> None:
        self.log.append("sync")

    @contextlib.contextmanager
    def stream(self, stream: object) -> Iterator[None]:
        assert stream is self.stream_obj
        yield

    def Event(self, enable_timing: bool = False) -> FakeEvent:
        assert enable_timing
        return FakeEvent(self)


class FakeEvent:
    def __init__(self, cuda: FakeCuda) -> None:
        self.cuda = cuda
        self.at = 0.0

    def record(self, stream: object) -> None:
        assert stream is self.cuda.stream_obj
        self.at = self.cuda.gpu_ms
        self.cuda.log.append("record")

    def synchronize(self) -> None:
        self.cuda.log.append("event_sync")

    def elapsed_time(self, end: FakeEvent) -> float:
        return end.at - self.at


class FakeBuffer:
    def __init__(self, log: list[str], elements: int) -> None:
        self.log = log
        self.elements = elements

    def zero_(self) -> None:
        self.log.append("flush")


def fake_torch(log: list[str]) -> Any:
    cuda = FakeCuda(log)
    torch = SimpleNamespace(cuda=cuda, int32="int32")
    torch.empty = lambda n, dtype, device: FakeBuffer(log, n)
    return torch


def test_each_timed_call_resets_persisting_lines_then_flushes_l2_and_uses_events() -> None:
    """Per call: fresh inputs, persisting reset, L2 flush, start event, kernel, end event, wait."""
    log: list[str] = []
    torch = fake_torch(log)

    def kernel(x: int) -> None:
        torch.cuda.gpu_ms += 0.25
        log.append("kernel")

    def make_inputs() -> tuple[int]:
        log.append("inputs")
        return (1,)

    stats = bench_gpu(kernel, make_inputs, warmup_s=0.0, torch_module=torch,
                      reset_persisting_l2=lambda: log.append("reset"))  # fmt: skip
    assert log[:3] == ["inputs", "kernel", "sync"]  # the untimed first call
    per_call = ["inputs", "reset", "flush", "record", "kernel", "record", "event_sync"]
    assert log[3:10] == per_call
    assert stats.n == 3 and stats.stop == "converged"
    assert stats.median == pytest.approx(250.0)  # 0.25 ms in microseconds
    assert stats.notes == ()


def test_the_flush_buffer_is_twice_the_l2() -> None:
    """The flush buffer holds 2x the device's L2 bytes as int32 elements."""
    log: list[str] = []
    torch = fake_torch(log)
    sizes: list[int] = []
    torch.empty = lambda n, dtype, device: sizes.append(n) or FakeBuffer(log, n)
    bench_gpu(
        lambda: None, tuple, warmup_s=0.0, torch_module=torch, reset_persisting_l2=lambda: None
    )
    assert sizes == [2 * L2_BYTES // 4]


def test_a_missing_runtime_is_noted_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the CUDA runtime library the persisting reset is skipped and noted in Stats."""
    import kz_harness.gpu as gpu

    monkeypatch.setattr(gpu, "persisting_l2_resetter", lambda: None)
    log: list[str] = []
    stats = bench_gpu(lambda: None, tuple, warmup_s=0.0, torch_module=fake_torch(log))
    assert any("persisting-L2" in note for note in stats.notes)


def test_without_torch_or_a_gpu_the_error_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Using the GPU path where torch or CUDA is missing raises one clear error."""
    import kz_harness.gpu as gpu

    def no_torch(name: str) -> Any:
        raise ImportError(name)

    monkeypatch.setattr(gpu.importlib, "import_module", no_torch)
    with pytest.raises(HarnessUnavailable, match="no CUDA device: torch is not installed"):
        load_torch()
    no_cuda = SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: False))
    monkeypatch.setattr(gpu.importlib, "import_module", lambda name: no_cuda)
    with pytest.raises(HarnessUnavailable, match="no CUDA device"):
        bench_gpu(lambda: None, tuple)


def test_the_runtime_of_torchs_cuda_is_tried_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """With torch loaded, its CUDA major's soname comes first (the library torch loaded);
    without it, or without a CUDA build, the plain list."""
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(version=SimpleNamespace(cuda="13.0")))
    names = gpu._cudart_names()
    assert names[0] == "libcudart.so.13" and len(names) == len(set(names))
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(version=SimpleNamespace(cuda=None)))
    assert gpu._cudart_names() == gpu._CUDART_NAMES
