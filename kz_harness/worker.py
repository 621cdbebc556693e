"""The candidate worker: imports the submitted entry point and runs calls when the judge says.

It runs in its own sandbox under its own uid, with `python -I`, a private HOME and TMPDIR,
the candidate's `src/` and a scratch folder, and one socket to the judge (`KZ_CHANNEL_FD`).
Nothing here is trusted: the judge reads its own clock, owns the inputs, checks the outputs
and asks the runner, not the worker, how many threads and processes the worker has. This
module only makes an honest candidate easy to run: fresh array objects over the judge's
slots for every call, the output copied into the slot as a plain array of the declared dtype
and shape, and any failure reported with its reason.
"""

from __future__ import annotations

import importlib
import mmap
import os
import struct
import sys
import traceback
from collections.abc import Callable
from typing import Any

from kz_harness.channel import Channel, ChannelClosed, Op, decode_json, slot_index

__all__ = ["CALIBRATE", "DEVICE_TIME", "Device", "main"]

CALIBRATE = "@calibrate"  # the trusted no-op the judge times to learn the channel's cost
DEVICE_TIME = struct.Struct("<q")  # a DONE's payload on a GPU: the CUDA events' time in ns
_MAX_ERROR = 4000


class Device:
    """A call on a CUDA device, on a stream of the worker's own.

    In order, each step and what it defends:

    1. fresh device tensors from the slot's inputs (new objects every call; the judge drew
       new contents);
    2. the access-policy window of the worker's stream removed (one the candidate set in an
       earlier call must not mark the judge's flush, or anything else, as persisting), then
       the persisting-L2 lines reset (a flush does not evict persisting lines, so the reset
       comes first), then an L2 flush (nothing of an earlier call is left in the cache) and a
       device-wide synchronise;
    3. a start event, the call with the worker's stream as the current one, an end event;
    4. a device-wide synchronise (work the call left on another stream, or queued by a
       thread before it returned, is waited for), then a `done` event: the time from `end`
       to `done` beyond the idle tail (the same steps with nothing left to wait for,
       measured once) is work the call left behind and is added to the call's device time,
       so a kernel on a side stream is measured for what it costs;
    5. the output checked to be exactly a `torch.Tensor` (no subclass, nothing lazy) of the
       declared dtype and shape, then copied back at once on a copy stream that waits for
       `done` alone: a thread that writes the output later is too late, and nothing queued
       after `done`, on the worker's stream or any other, orders the copy behind it.

    The worker is untrusted: a candidate can patch all of this in its own process. What
    counts is the judge's bound on the reported times (`device_time_problems`).

    `device_dtype` ("bfloat16") is the dtype the candidate gets and must return when the
    slots hold float32 (numpy has no bfloat16). `torch`, the persisting-L2 `reset` and the
    access-policy `clear_window` (found in the CUDA runtime unless `find_runtime` is false)
    are injectable for tests.
    """

    def __init__(
        self,
        torch: Any,
        device_dtype: str | None = None,
        reset: Callable[[], None] | None = None,
        *,
        clear_window: Callable[[int], None] | None = None,
        find_runtime: bool = True,
    ) -> None:
        from kz_harness.gpu import access_policy_clearer, persisting_l2_resetter

        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device: torch.cuda.is_available() returned False")
        self.torch = torch
        self.cuda = torch.cuda
        self.device = self.cuda.current_device()
        self.device_dtype = getattr(torch, device_dtype) if device_dtype else None
        l2 = int(getattr(self.cuda.get_device_properties(self.device), "L2_cache_size", 0) or 0)
        self.flush = torch.empty(max(2 * l2, 1 << 20) // 4, dtype=torch.int32, device="cuda")
        if find_runtime:
            reset = reset if reset is not None else persisting_l2_resetter()
            clear_window = clear_window if clear_window is not None else access_policy_clearer()
        self.reset = reset
        self.clear_window = clear_window
        self.stream = self.cuda.Stream()
        self.copy_stream = self.cuda.Stream()
        self.start = self.cuda.Event(enable_timing=True)
        self.end = self.cuda.Event(enable_timing=True)
        self.done = self.cuda.Event(enable_timing=True)
        self.idle_tail_ms = self._idle_tail_ms()

    def _to_device(self, array: Any) -> Any:
        tensor = self.torch.from_numpy(array.copy()).to("cuda")
        return tensor.to(self.device_dtype) if self.device_dtype is not None else tensor

    def _clean_caches(self) -> None:
        """No window of the candidate's, no persisting line, nothing in L2 (in that order)."""
        if self.clear_window is not None:
            self.clear_window(int(self.stream.cuda_stream))
        if self.reset is not None:
            self.reset()
        self.flush.zero_()

    def _tail_ms(self) -> float:
        """After `end` is recorded: wait for the whole device, record `done`; end to done."""
        self.cuda.synchronize()
        self.done.record(self.stream)
        self.done.synchronize()
        return float(self.end.elapsed_time(self.done))

    def _idle_tail_ms(self, rounds: int = 25) -> float:
        """The median end-to-done time when nothing is left to wait for."""
        tails = []
        with self.cuda.stream(self.stream):
            for _ in range(rounds):
                self.cuda.synchronize()
                self.end.record(self.stream)
                tails.append(self._tail_ms())
        tails.sort()
        return tails[len(tails) // 2]

    def call(self, fn: Callable[..., Any], inputs: list[Any], out: Any) -> int:
        """Run `fn` on device copies of `inputs`, write its output into `out`; device ns."""
        with self.cuda.stream(self.stream):
            tensors = [self._to_device(array) for array in inputs]
            self._clean_caches()
            self.cuda.synchronize()
            self.start.record(self.stream)
            result = fn(*tensors)
            self.end.record(self.stream)
            left_behind = max(self._tail_ms() - self.idle_tail_ms, 0.0)
            elapsed = float(self.start.elapsed_time(self.end)) + left_behind
            self._copy_out(result, out)
        return int(elapsed * 1e6)

    def _copy_out(self, result: Any, out: Any) -> None:
        torch = self.torch
        if type(result) is not torch.Tensor:
            raise TypeError(f"the output must be a torch.Tensor, got {_describe(result)}")
        want = (
            self.device_dtype
            if self.device_dtype is not None
            else getattr(torch, out.dtype.name, None)
        )
        if result.dtype != want or tuple(result.shape) != tuple(out.shape):
            raise TypeError(
                f"the output must be {want} of shape {tuple(out.shape)}, "
                f"got {result.dtype} of shape {tuple(result.shape)}"
            )
        with self.cuda.stream(self.copy_stream):
            self.copy_stream.wait_event(self.done)
            host = result.float() if self.device_dtype is not None else result
            out[...] = host.cpu().numpy()


class _Slot:
    device_blank: Any = None

    def __init__(self, memory: mmap.mmap, layout: dict[str, Any], np: Any) -> None:
        self.memory = memory
        self.inputs = [
            (np.dtype(s["dtype"]), tuple(s["shape"]), s["offset"]) for s in layout["inputs"]
        ]
        out = layout["output"]
        self.output = (np.dtype(out["dtype"]), tuple(out["shape"]), out["offset"])
        self.blank = np.zeros(self.output[1], dtype=self.output[0])


def _returning(value: Any) -> Callable[..., Any]:
    """The calibration's stand-in for a kernel: takes the inputs, returns a ready array."""
    return lambda *_inputs: value


def _describe(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


class _Worker:
    def __init__(self, channel: Channel, np: Any) -> None:
        self.channel = channel
        self.np = np
        self.fn: Callable[..., Any] | None = None
        self.calibrate = False
        self.device: Device | None = None
        self.slots: list[_Slot] = []

    def load(self, document: dict[str, Any]) -> None:
        cpu = document.get("cpu")
        if isinstance(cpu, int) and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {cpu})
        entry = str(document["entry"])
        if document.get("device") == "cuda":
            self.device = Device(importlib.import_module("torch"), document.get("device_dtype"))
        if document.get("framework") is not None:  # a problem set's convention on torch
            from kz_harness.frameworks import load_candidate, prime

            if entry == CALIBRATE:
                prime(document)
                self.calibrate = True
            else:
                self.fn = load_candidate(document, on_device=self.device is not None)
            return
        if entry == CALIBRATE:
            self.calibrate = True
            return
        module_name, _, function = entry.partition(":")
        sys.path.insert(0, str(document["path"]))
        module = importlib.import_module(module_name)
        fn = getattr(module, function, None)
        if not callable(fn):
            raise TypeError(f"{entry}: {function!r} is not a function of {module_name}")
        self.fn = fn

    def set_slots(self, document: dict[str, Any], fds: list[int]) -> None:
        layouts = document["slots"]
        if len(layouts) != len(fds):
            raise ValueError(f"{len(layouts)} slot layouts came with {len(fds)} descriptors")
        slots = []
        for layout, fd in zip(layouts, fds, strict=True):
            try:
                slots.append(_Slot(mmap.mmap(fd, int(layout["size"])), layout, self.np))
            finally:
                os.close(fd)
        self.slots = slots

    def call(self, index: int) -> bytes:
        """Run one call in slot `index`; the DONE payload (the device time on a GPU)."""
        np = self.np
        slot = self.slots[index]
        out_dtype, out_shape, out_offset = slot.output
        if self.device is not None:
            inputs = [
                np.ndarray(shape, dtype=dtype, buffer=slot.memory, offset=offset)
                for dtype, shape, offset in slot.inputs
            ]
            out = np.ndarray(out_shape, dtype=out_dtype, buffer=slot.memory, offset=out_offset)
            on_device = self.fn if self.fn is not None else (lambda *_: self._blank(slot))
            return DEVICE_TIME.pack(self.device.call(on_device, inputs, out))
        # The no-op goes the candidate's whole way but for the work: fresh input views, a
        # call, the checks and the copy, so what is subtracted is the channel's whole cost.
        fn: Callable[..., Any]
        if self.calibrate:
            fn = _returning(slot.blank)
        else:
            assert self.fn is not None
            fn = self.fn
        inputs = []
        for dtype, shape, offset in slot.inputs:
            array = np.ndarray(shape, dtype=dtype, buffer=slot.memory, offset=offset)
            array.flags.writeable = False
            inputs.append(array)
        result = fn(*inputs)
        del inputs
        if type(result) is not np.ndarray:
            raise TypeError(f"the output must be a numpy.ndarray, got {_describe(result)}")
        if result.dtype != out_dtype or result.shape != out_shape:
            raise TypeError(
                f"the output must be {out_dtype} of shape {out_shape}, "
                f"got {result.dtype} of shape {result.shape}"
            )
        out = np.ndarray(out_shape, dtype=out_dtype, buffer=slot.memory, offset=out_offset)
        np.copyto(out, result, casting="no")
        del out, result
        return b""

    def _blank(self, slot: _Slot) -> Any:
        """The calibration no-op on a GPU: a device tensor of the output's dtype and shape."""
        assert self.device is not None
        cached = getattr(slot, "device_blank", None)
        if cached is None:
            cached = self.device._to_device(slot.blank)
            slot.device_blank = cached
        return cached

    def ceilings(self, document: dict[str, Any]) -> dict[str, Any]:
        """The device's measured ceilings; only the trusted calibration worker measures."""
        if not self.calibrate:
            raise PermissionError("only the calibration worker measures the ceilings")
        from kz_harness.ceilings import measure

        torch = self.device.torch if self.device is not None else None
        return measure(self.np, str(document.get("dtype", "fp32")), torch).to_dict()

    def serve(self) -> int:
        handlers: dict[int, Callable[[bytes, list[int]], None]] = {
            Op.LOAD: lambda payload, _fds: self.load(decode_json(payload)),
            Op.SLOTS: lambda payload, fds: self.set_slots(decode_json(payload), fds),
        }
        while True:
            op, payload, fds = self.channel.receive()
            try:
                if op == Op.EXIT:
                    return 0
                if op == Op.CALL:
                    self.channel.send(Op.DONE, self.call(slot_index(payload)))
                    continue
                if op == Op.CEILINGS:
                    self.channel.send_json(Op.OK, self.ceilings(decode_json(payload)))
                    continue
                handlers[op](payload, fds)
                self.channel.send(Op.OK)
            except ChannelClosed:
                raise
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    message = f"the candidate stopped the worker ({type(exc).__name__})"
                else:
                    message = "".join(traceback.format_exception_only(exc)).strip()
                self.channel.send_json(Op.ERROR, {"message": message[-_MAX_ERROR:]})


def main() -> int:
    """Serve the judge on the inherited channel until it says EXIT or goes away."""
    fd = int(os.environ.pop("KZ_CHANNEL_FD"))
    import numpy

    channel = Channel.from_fd(fd)
    try:
        return _Worker(channel, numpy).serve()
    except ChannelClosed:
        return 0
