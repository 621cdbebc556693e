"""The candidate worker: imports the submitted entry point and runs calls when the judge says.

It runs in its own sandbox under its own uid, with `python -I`, a private HOME and TMPDIR,
the candidate's `src/` and a scratch folder, and one socket to the judge (`KZ_CHANNEL_FD`).
Nothing here is trusted: the judge reads its own clock, owns the inputs, checks the outputs
and asks the runner, not the worker, how many threads and processes the worker has. This
module only makes an honest candidate easy to run: a timed window of calls back to back, each
on fresh array objects over its own slot, the output copied into that slot as a plain array of
the declared dtype and shape, and any failure reported with its exception and the step it
happened in (load, call or output).
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

from kz_harness.channel import (
    Channel,
    ChannelClosed,
    Op,
    c_strides,
    decode_json,
    slot_indices,
)

__all__ = ["CALIBRATE", "DEVICE_TIME", "Device", "keep_freed_memory", "main"]

CALIBRATE = "@calibrate"  # the trusted no-op: what a call that does nothing measures as
DEVICE_TIME = struct.Struct("<q")  # one call's CUDA events' time in ns, in a DONE on a GPU
_MAX_ERROR = 2000  # a result document's reason holds at most 2,000 characters


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
        self.stage = "call"  # the step a failure happened in: the call, or its output

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
            self.stage = "call"
            self.start.record(self.stream)
            result = fn(*tensors)
            self.end.record(self.stream)
            left_behind = max(self._tail_ms() - self.idle_tail_ms, 0.0)
            elapsed = float(self.start.elapsed_time(self.end)) + left_behind
            self.stage = "output"
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
    """One slot of the judge's layout: where its inputs and its output lie in the mapping."""

    def __init__(self, memory: mmap.mmap, layout: dict[str, Any], index: int, np: Any) -> None:
        self.memory = memory
        self.index = index
        self.inputs = [
            (np.dtype(s["dtype"]), tuple(s["shape"]), int(s["offset"]) + index * int(s["stride"]))
            for s in layout["inputs"]
        ]
        out = layout["output"]
        offset = int(out["offset"]) + index * int(out["stride"])
        self.output = (np.dtype(out["dtype"]), tuple(out["shape"]), offset)


def _every_slot(np: Any, memory: mmap.mmap, spec: dict[str, Any], count: int) -> Any:
    """One array's copies in every slot as one view (slot, *shape): indexing it gives a new
    array object over one slot's copy."""
    dtype = np.dtype(spec["dtype"])
    shape = tuple(int(n) for n in spec["shape"])
    return np.ndarray(
        (count, *shape),
        dtype=dtype,
        buffer=memory,
        offset=int(spec["offset"]),
        strides=(int(spec["stride"]), *c_strides(shape, dtype.itemsize)),
    )


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
        self.inputs: list[Any] = []  # each input in every slot, (slot, *shape)
        self.outputs: Any = None  # the output in every slot
        self.blank: Any = None  # the no-op's ready output (on a GPU, a device tensor)
        self.stage = "load"  # what the worker was doing when something failed

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
        """Map the one file of this workload's slots (the judge's layout says where each lies)."""
        try:
            if len(fds) != 1:
                raise ValueError(f"the slots came with {len(fds)} descriptors, not 1")
            memory = mmap.mmap(fds[0], int(document["size"]))
        finally:
            for fd in fds:
                os.close(fd)
        count = int(document["count"])
        self.slots = [_Slot(memory, document, i, self.np) for i in range(count)]
        self.inputs = [_every_slot(self.np, memory, s, count) for s in document["inputs"]]
        self.outputs = _every_slot(self.np, memory, document["output"], count)
        out = document["output"]
        self.blank = self.np.zeros(tuple(out["shape"]), dtype=self.np.dtype(out["dtype"]))
        if self.device is not None and self.calibrate:
            self.blank = self.device._to_device(self.blank)

    def window(self, indices: tuple[int, ...]) -> bytes:
        """One call in each slot named, back to back; the DONE payload (on a GPU, each call's
        device time in ns)."""
        slots = [self.slots[index] for index in indices]
        if self.device is not None:
            times = [self._on_device(slot) for slot in slots]
            return struct.pack(f"<{len(times)}q", *times)
        for slot in slots:
            self.call(slot.index)
        return b""

    def _on_device(self, slot: _Slot) -> int:
        assert self.device is not None
        inputs = [view[slot.index] for view in self.inputs]
        out = self.outputs[slot.index]
        blank = self.blank
        on_device = self.fn if self.fn is not None else (lambda *_: blank)
        try:
            return self.device.call(on_device, inputs, out)
        finally:
            self.stage = self.device.stage

    def call(self, index: int) -> None:
        """One call on a CPU: fresh read-only views over the slot's inputs, the call, the
        output checked to be exactly the declared array and copied into the slot.

        The trusted no-op goes the same way but for the work and the output's copy: what it
        costs is what a call that does nothing measures as (the workload's resolution)."""
        np = self.np
        out = self.outputs[index]
        out_dtype, out_shape = out.dtype, out.shape
        fn: Callable[..., Any]
        if self.calibrate:
            fn = _returning(self.blank)
        else:
            assert self.fn is not None
            fn = self.fn
        inputs = []
        for view in self.inputs:
            array = view[index]
            array.flags.writeable = False
            inputs.append(array)
        self.stage = "call"
        result = fn(*inputs)
        del inputs
        self.stage = "output"
        if type(result) is not np.ndarray:
            raise TypeError(f"the output must be a numpy.ndarray, got {_describe(result)}")
        if result.dtype != out_dtype or result.shape != out_shape:
            raise TypeError(
                f"the output must be {out_dtype} of shape {out_shape}, "
                f"got {result.dtype} of shape {result.shape}"
            )
        if self.calibrate:
            return
        np.copyto(out, result, casting="no")
        del out, result

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
            self.stage = "load" if op == Op.LOAD else "call"
            try:
                if op == Op.EXIT:
                    return 0
                if op == Op.CALLS:
                    self.channel.send(Op.DONE, self.window(slot_indices(payload)))
                    continue
                if op == Op.CEILINGS:
                    self.channel.send_json(Op.OK, self.ceilings(decode_json(payload)))
                    continue
                handlers[op](payload, fds)
                self.channel.send(Op.OK)
            except ChannelClosed:
                raise
            except BaseException as exc:
                self.channel.send_json(Op.ERROR, {"message": _error(exc), "stage": self.stage})


def _error(exc: BaseException) -> str:
    """`ExcType: message`, as a traceback's last line says it (at most `_MAX_ERROR` long)."""
    if isinstance(exc, KeyboardInterrupt | SystemExit):
        message = f"{type(exc).__name__}: the candidate stopped the worker"
    else:
        message = "".join(traceback.format_exception_only(exc)).strip()
    return message[:_MAX_ERROR]  # the head: the exception's type comes first


# glibc's mallopt parameters: freed memory below these sizes stays in the process's heap.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_KEEP_BYTES = 1 << 30
_MMAP_BYTES = 32 << 20  # glibc's largest dynamic threshold on 64-bit


def keep_freed_memory() -> None:
    """Keep freed memory in the heap instead of returning it after every call.

    A fresh process's glibc maps a temporary of a MiB or more and unmaps it when freed, or
    trims the heap's top after the call, so every call page-faults its temporaries again: a
    vectorised RMSNorm of 128 x 2048 took 3.6 ms a call in a worker (480 page faults) against
    0.2 ms in a process that had kept its heap. The same setting for every worker (candidate,
    rivals, the no-op) measures kernels, not the allocator's defaults. Nothing where the C
    library is not glibc."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, _MMAP_BYTES)
    mallopt(_M_TRIM_THRESHOLD, _KEEP_BYTES)


def main() -> int:
    """Serve the judge on the inherited channel until it says EXIT or goes away."""
    fd = int(os.environ.pop("KZ_CHANNEL_FD"))
    keep_freed_memory()
    import numpy

    channel = Channel.from_fd(fd)
    try:
        return _Worker(channel, numpy).serve()
    except ChannelClosed:
        return 0
