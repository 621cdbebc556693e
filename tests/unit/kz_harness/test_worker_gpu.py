"""The worker's GPU call and the judge's bound on device times, against a fake torch (no GPU
here; docs/gpu.md says how the real path is checked on a lent GPU)."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from kz_harness.judge import device_time_problems
from kz_harness.worker import Device

pytestmark = pytest.mark.unit


WAKE_MS = 0.01  # what a device-wide synchronise and the next record cost the fake


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
        self.torch.l2 = {k: v for k, v in self.torch.l2.items() if v == "persisting"}
        return self

    def float(self) -> FakeTensor:
        return FakeTensor(self.torch, self.array.astype(np.float32), "float32", self.device)

    def cpu(self) -> FakeTensor:
        self.torch.log.append(f"d2h on {self.torch.cuda.current}")
        return FakeTensor(self.torch, self.array, self.dtype, "cpu")

    def numpy(self) -> Any:
        return self.array


class FakeEvent:
    def __init__(self, torch: FakeTorch, name: str) -> None:
        self.torch = torch
        self.name = name
        self.at = 0.0

    def record(self, stream: FakeStream) -> None:
        self.torch.log.append(f"{self.name} on {stream.name}")
        self.at = self.torch.gpu_ms

    def synchronize(self) -> None:
        self.torch.log.append(f"{self.name} sync")

    def elapsed_time(self, other: FakeEvent) -> float:
        return other.at - self.at


class FakeStream:
    def __init__(self, torch: FakeTorch, name: str, handle: int) -> None:
        self.torch = torch
        self.name = name
        self.cuda_stream = handle

    def wait_event(self, event: FakeEvent) -> None:
        self.torch.log.append(f"{self.name} waits for {event.name}")


class FakeCuda:
    """One device: `gpu_ms` is its clock; `side_ms` is work queued on another stream, which
    only a device-wide synchronise waits for."""

    def __init__(self, torch: FakeTorch, available: bool) -> None:
        self.torch = torch
        self.available = available
        self.current = "default"
        self.side_ms = 0.0
        self.streams = 0
        self.events = 0

    def is_available(self) -> bool:
        return self.available

    def current_device(self) -> int:
        return 0

    def get_device_properties(self, device: int) -> Any:
        return type("Props", (), {"L2_cache_size": 50 << 20})()

    def synchronize(self) -> None:
        self.torch.log.append("sync")
        self.torch.gpu_ms += self.side_ms + WAKE_MS
        self.side_ms = 0.0

    def Stream(self) -> FakeStream:
        self.streams += 1
        name, handle = ("worker", 0x5EED) if self.streams % 2 else ("copy", 0xC0)
        return FakeStream(self.torch, name, handle)

    @contextlib.contextmanager
    def stream(self, stream: FakeStream) -> Iterator[None]:
        before, self.current = self.current, stream.name
        try:
            yield
        finally:
            self.current = before

    def Event(self, enable_timing: bool = False) -> FakeEvent:
        self.events += 1
        return FakeEvent(self.torch, ("start", "end", "done")[(self.events - 1) % 3])


class FakeTorch:
    int32 = "int32"
    float32 = "float32"
    float64 = "float64"
    bfloat16 = "bfloat16"

    def __init__(self, available: bool = True) -> None:
        self.log: list[str] = []
        self.gpu_ms = 0.0
        self.l2: dict[str, str] = {}  # what the L2 holds: name -> "normal" or "persisting"
        self.window: int | None = None  # the worker stream's access-policy window, if any
        self.cuda = FakeCuda(self, available)
        self.Tensor = FakeTensor

    def empty(self, n: int, dtype: str, device: str) -> FakeTensor:
        return FakeTensor(self, np.zeros(n), dtype, device)

    def from_numpy(self, array: Any) -> FakeTensor:
        return FakeTensor(self, array, str(array.dtype))

    def reset(self) -> None:
        self.log.append("reset")
        self.l2 = {k: "normal" for k in self.l2}

    def clear_window(self, stream: int) -> None:
        self.log.append(f"clear_window {stream:#x}")
        self.window = None


def _device(torch: FakeTorch, device_dtype: str | None = "bfloat16") -> Device:
    device = Device(
        torch, device_dtype, reset=torch.reset, clear_window=torch.clear_window,
        find_runtime=False,
    )  # fmt: skip
    torch.log.clear()
    return device


def _doubling(torch: FakeTorch, dtype: str = "bfloat16") -> Any:
    def kernel(t: FakeTensor) -> FakeTensor:
        torch.log.append(f"kernel on {torch.cuda.current}")
        torch.gpu_ms += 0.25
        return FakeTensor(torch, t.array * 2, dtype, "cuda")

    return kernel


def test_a_gpu_call_is_cleaned_synchronised_and_timed_by_events() -> None:
    """Inputs go to the device first; then the candidate's window is removed, persisting lines
    reset and L2 flushed, a sync; the events around the call alone on the worker's stream; a
    device-wide sync and the done event; the output comes back as declared, copied on a stream
    that waits for `done` alone (nothing queued after it on the worker's stream delays it)."""
    torch = FakeTorch()
    device = _device(torch)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.full((2, 3), np.nan, dtype=np.float32)
    elapsed = device.call(_doubling(torch), [x], out)
    assert elapsed == 250_000
    assert torch.log == [
        "h2d", "clear_window 0x5eed", "reset", "flush", "sync",
        "start on worker", "kernel on worker", "end on worker",
        "sync", "done on worker", "done sync", "copy waits for done", "d2h on copy",
    ]  # fmt: skip
    assert np.array_equal(out, x * 2)


def test_persisting_lines_are_reset_before_the_flush_so_none_survives_a_call() -> None:
    """A flush evicts only normal lines: a persisting line reset after it would stay resident
    as a normal one. The candidate's buffer marked persisting in one call is gone by the next."""
    torch = FakeTorch()
    device = _device(torch, None)
    x = np.ones((2, 3), dtype=np.float32)
    out = np.zeros((2, 3), dtype=np.float32)
    seen: list[bool] = []

    def keeps_weights_resident(t: FakeTensor) -> FakeTensor:
        seen.append("weights" in torch.l2)
        torch.window = 1 << 20
        torch.l2["weights"] = "persisting"
        return FakeTensor(torch, t.array, "float32", "cuda")

    for _ in range(3):
        device.call(keeps_weights_resident, [x], out)
        assert torch.window is not None  # what the candidate left ...
    assert seen == [False, False, False]  # ... never helps the next call
    assert torch.log.index("clear_window 0x5eed") < torch.log.index("reset")
    assert torch.log.index("reset") < torch.log.index("flush")


def test_work_left_on_another_stream_is_measured() -> None:
    """A kernel queued on a side stream, the current stream not made to wait: the end event
    comes at once, but the device-wide sync waits for it, and the time past the idle tail is
    the call's too."""
    torch = FakeTorch()
    device = _device(torch, None)
    assert device.idle_tail_ms == pytest.approx(WAKE_MS)
    x = np.ones((2, 3), dtype=np.float32)
    out = np.zeros((2, 3), dtype=np.float32)

    def on_a_side_stream(t: FakeTensor) -> FakeTensor:
        torch.cuda.side_ms += 0.5
        return FakeTensor(torch, t.array, "float32", "cuda")

    assert device.call(on_a_side_stream, [x], out) == 500_000


def test_a_gpu_output_must_be_a_plain_tensor_of_the_declared_dtype() -> None:
    """A lazy stand-in, a subclass or a wider dtype is refused, as on the CPU; nothing of a
    refused object is read (a lazy one never gets to compute)."""
    torch = FakeTorch()
    device = _device(torch)
    x = np.zeros((2, 3), dtype=np.float32)
    out = np.zeros((2, 3), dtype=np.float32)

    class Lazy(FakeTensor):
        @property
        def dtype(self) -> str:
            torch.log.append("computed on access")
            return "bfloat16"

        @dtype.setter
        def dtype(self, value: str) -> None:
            pass

    with pytest.raises(TypeError, match=r"must be a torch\.Tensor"):
        device.call(lambda t: object(), [x], out)
    with pytest.raises(TypeError, match=r"must be a torch\.Tensor, got .*Lazy"):
        device.call(lambda t: Lazy(torch, t.array, "bfloat16", "cuda"), [x], out)
    assert "computed on access" not in torch.log
    with pytest.raises(TypeError, match="must be bfloat16"):
        device.call(lambda t: FakeTensor(torch, t.array, "float32", "cuda"), [x], out)
    fp32 = _device(torch, None)
    with pytest.raises(TypeError, match="must be float32"):
        fp32.call(lambda t: FakeTensor(torch, t.array, "float64", "cuda"), [x], out)


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


def test_a_worker_under_reporting_its_device_time_shows_it_in_the_gap() -> None:
    """Copies of large inputs make the no-op's gap milliseconds long; a candidate that reports
    a quarter of its 1.2 ms kernel hides 0.9 ms there, which a bound of 1.5x the gap missed and
    the spread of the no-op's own gaps does not."""
    gap, spread = 2_000_000, 10_000
    honest = [(gap + 1_200_000 + i * 100, 1_200_000) for i in range(40)]
    assert device_time_problems(honest, gap_ns=gap, spread_ns=spread) == []
    lying = [(gap + 1_200_000 + i * 100, 300_000) for i in range(40)]
    codes = [code for code, _ in device_time_problems(lying, gap_ns=gap, spread_ns=spread)]
    assert codes == ["work_outside_events"]


def test_a_window_on_a_gpu_answers_each_calls_device_time() -> None:
    """A window of three calls in the worker: each call on its own slot goes the whole device
    path (copies in, clean caches, events, copy out) and the DONE carries three device times;
    the no-op's window goes the same way around a ready tensor."""
    from kz_harness.channel import make_slots
    from kz_harness.slots import Draw, SlotSet
    from kz_harness.worker import _Worker

    torch = FakeTorch()
    layout = make_slots([("float32", (2, 3), 4)], ("float32", (2, 3), 4), count=3)
    judge = SlotSet(np, layout)
    worker = _Worker(None, np)  # type: ignore[arg-type]  # calls made directly
    worker.device = _device(torch, None)
    worker.fn = _doubling(torch, "float32")
    worker.set_slots(layout.to_dict(), [judge.fd])
    draw = Draw(np, [(np.full((2, 3), float(i), dtype=np.float32),) for i in range(3)])
    judge.prepare(draw)
    payload = worker.window((0, 1, 2))
    assert struct.unpack("<3q", payload) == (250_000, 250_000, 250_000)
    assert torch.log.count("start on worker") == 3 and torch.log.count("d2h on copy") == 3
    assert [float(judge.output[i, 0, 0]) for i in range(3)] == [0.0, 2.0, 4.0]
    noop = _Worker(None, np)  # type: ignore[arg-type]
    noop.device, noop.calibrate = _device(torch, None), True
    again = SlotSet(np, layout)
    noop.set_slots(layout.to_dict(), [again.fd])
    again.prepare(draw)
    assert len(noop.window((0, 1))) == 16
