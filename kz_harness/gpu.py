"""GPU timing with CUDA events on the kernel's stream, an L2 flush and fresh inputs per call.

Imports without torch or a GPU; calling `bench_gpu` there raises `HarnessUnavailable`. Before
every timed call (warm-up included) it resets the persisting-L2 lines (a flush does not evict
them) and writes a buffer of twice the device's L2, then records a start event, calls the
kernel, records an end event on the same stream and waits for it.

`persisting_l2_resetter` and `access_policy_clearer` reach the CUDA runtime that torch loaded
through ctypes; the candidate worker uses them too (`kz_harness.worker.Device`).
"""

from __future__ import annotations

import ctypes
import importlib
import sys
import time
from collections.abc import Callable
from typing import Any

from kz_harness.errors import HarnessUnavailable
from kz_harness.stats import Stats
from kz_harness.timing import as_args, sample_adaptively

__all__ = ["access_policy_clearer", "bench_gpu", "load_torch", "persisting_l2_resetter"]

_CUDART_NAMES = ("libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0")
_FALLBACK_L2_BYTES = 128 * 1024 * 1024
# cudaStreamAttrID: cudaStreamAttributeAccessPolicyWindow (= cudaLaunchAttributeAccessPolicyWindow).
_ACCESS_POLICY_WINDOW = 1
# sizeof(cudaStreamAttrValue) is 64 bytes in CUDA 12 and 13 (a union padded to 64); all zeros
# is a window of 0 bytes, which CUDA reads as "no window".
_ATTR_VALUE_BYTES = 64


def load_torch() -> Any:
    """Import torch and check a CUDA device is present, or say clearly why not."""
    try:
        torch = importlib.import_module("torch")
    except ImportError as exc:
        raise HarnessUnavailable("no CUDA device: torch is not installed") from exc
    if not torch.cuda.is_available():
        raise HarnessUnavailable("no CUDA device: torch.cuda.is_available() returned False")
    return torch


def _cudart_names() -> tuple[str, ...]:
    """The runtime's sonames to try, the one of torch's CUDA first when torch is loaded (the
    same soname finds the library torch loaded, not another copy on the library path)."""
    torch = sys.modules.get("torch")
    version = getattr(getattr(torch, "version", None), "cuda", None)
    if not isinstance(version, str) or not version.partition(".")[0].isdigit():
        return _CUDART_NAMES
    first = f"libcudart.so.{version.partition('.')[0]}"
    return (first, *(name for name in _CUDART_NAMES if name != first))


def _runtime_function(name: str) -> Any:
    """`name` from the CUDA runtime library (the one torch loaded, by its soname), or None."""
    for library in _cudart_names():
        try:
            runtime = ctypes.CDLL(library)
        except OSError:
            continue
        function = getattr(runtime, name, None)
        if function is not None:
            return function
    return None


def persisting_l2_resetter() -> Callable[[], None] | None:
    """`cudaCtxResetPersistingL2Cache` from the loaded CUDA runtime, or None if not found."""
    reset = _runtime_function("cudaCtxResetPersistingL2Cache")
    if reset is None:
        return None
    return lambda: _check_cuda(reset(), "cudaCtxResetPersistingL2Cache")


def access_policy_clearer() -> Callable[[int], None] | None:
    """A function that removes the access-policy window of a stream (its `cuda_stream`
    handle), through `cudaStreamSetAttribute`; None if the runtime is not found."""
    set_attribute = _runtime_function("cudaStreamSetAttribute")
    if set_attribute is None:
        return None
    set_attribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    set_attribute.restype = ctypes.c_int
    empty = ctypes.create_string_buffer(_ATTR_VALUE_BYTES)

    def clear(stream: int) -> None:
        status = set_attribute(stream, _ACCESS_POLICY_WINDOW, ctypes.addressof(empty))
        _check_cuda(status, "cudaStreamSetAttribute(accessPolicyWindow)")

    return clear


def _check_cuda(status: int, call: str) -> None:
    if status != 0:
        raise HarnessUnavailable(f"{call} failed with CUDA error {status}")


def _l2_flush_buffer(torch: Any, device: Any) -> tuple[Any, list[str]]:
    props = torch.cuda.get_device_properties(device)
    l2_bytes = int(getattr(props, "L2_cache_size", 0) or 0)
    notes = []
    if l2_bytes <= 0:
        l2_bytes = _FALLBACK_L2_BYTES
        notes.append(f"device L2 size unknown: flushing {2 * l2_bytes} bytes")
    return torch.empty(2 * l2_bytes // 4, dtype=torch.int32, device=device), notes


def bench_gpu(
    fn: Callable[..., Any],
    make_inputs: Callable[[], Any],
    *,
    warmup_s: float = 0.1,
    budget_s: float = 2.0,
    max_samples: int = 10_000,
    min_samples: int = 3,
    target_rel_sem: float = 1e-3,
    flush_l2: bool = True,
    stream: Any = None,
    unit: str = "us",
    torch_module: Any = None,
    reset_persisting_l2: Callable[[], None] | None = None,
) -> Stats:
    """Time `fn(*make_inputs())` on the GPU; `torch_module` and the resetter are for tests."""
    torch = torch_module if torch_module is not None else load_torch()
    device = torch.cuda.current_device()
    stream = stream if stream is not None else torch.cuda.current_stream(device)
    flush_buffer, notes = _l2_flush_buffer(torch, device) if flush_l2 else (None, [])
    reset = reset_persisting_l2 or persisting_l2_resetter()
    if reset is None:
        notes.append("persisting-L2 reset unavailable: CUDA runtime library not found")
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)

    def timed_call() -> float:
        args = as_args(make_inputs())
        if reset is not None:  # first: persisting lines survive a flush
            reset()
        if flush_buffer is not None:
            flush_buffer.zero_()
        with torch.cuda.stream(stream):
            start.record(stream)
            fn(*args)
            end.record(stream)
        end.synchronize()
        return float(start.elapsed_time(end)) * 1e6

    fn(*as_args(make_inputs()))
    torch.cuda.synchronize(device)
    samples, stop = sample_adaptively(
        timed_call,
        now=time.perf_counter,
        warmup_s=warmup_s,
        budget_s=budget_s,
        max_samples=max_samples,
        min_samples=min_samples,
        target_rel_sem=target_rel_sem,
    )
    return Stats.from_samples(samples, unit="ns", stop=stop, notes=notes).to_unit(unit)
