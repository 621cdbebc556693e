"""The harness's GPU figures, measured where a candidate's worker runs (the sandbox, the
runner's Python, the harness at /kz/harness): prints one JSON document.

- the CUDA event timer: the smallest step between distinct readings (resolution) and the
  median of an empty start/end pair (overhead), in µs;
- the L2 flush's effect: a kernel reading half the L2 timed after the harness's flush and
  without it (warm), and their ratio;
- the persisting-L2 reset: whether `cudaCtxResetPersistingL2Cache` was found and ran, and
  whether the worker's `Device` (flush, reset, events) timed a call;
- whether Triton compiles and runs a kernel here (its compiler, the driver's library).

Run as `python -I probe_gpu.py`; it reads only torch, triton, numpy and kz_harness.
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
import traceback
from collections.abc import Callable
from typing import Any

HARNESS = "/kz/harness"
SAMPLES = 400


def _events(torch: Any) -> tuple[Any, Any]:
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def event_timer(torch: Any) -> dict[str, float]:
    """Resolution and overhead of an empty start/end event pair, in µs."""
    start, end = _events(torch)
    readings = []
    for _ in range(SAMPLES):
        start.record()
        end.record()
        end.synchronize()
        readings.append(start.elapsed_time(end) * 1000.0)
    distinct = sorted(set(readings))
    steps = [b - a for a, b in itertools.pairwise(distinct) if b > a]
    return {
        "resolution_us": min(steps) if steps else 0.0,
        "overhead_us": statistics.median(readings),
        "max_empty_us": max(readings),
    }


def _timed(torch: Any, call: Callable[[], Any], before: Callable[[], None] | None) -> float:
    start, end = _events(torch)
    values = []
    for _ in range(SAMPLES // 2):
        if before is not None:
            before()
        torch.cuda.synchronize()
        start.record()
        call()
        end.record()
        end.synchronize()
        values.append(start.elapsed_time(end) * 1000.0)
    return float(statistics.median(values))


def l2_flush(torch: Any, reset: Callable[[], None] | None) -> dict[str, float]:
    """A read of half the L2 after the harness's flush (and reset) and without it."""
    l2 = int(torch.cuda.get_device_properties(0).L2_cache_size)
    data = torch.ones(max(l2 // 2, 1 << 20) // 4, dtype=torch.float32, device="cuda")
    flush = torch.empty(max(2 * l2, 1 << 20) // 4, dtype=torch.int32, device="cuda")

    def flushed() -> None:
        flush.zero_()
        if reset is not None:
            reset()

    data.sum()  # warm: compiled, and the data in L2
    cold = _timed(torch, data.sum, flushed)
    warm = _timed(torch, data.sum, None)
    return {"l2_bytes": l2, "flushed_us": cold, "warm_us": warm, "ratio": cold / warm}


def persisting_reset(torch: Any) -> dict[str, Any]:
    """Whether the harness found the reset and ran it, and a call through the worker's Device."""
    import numpy as np

    from kz_harness.gpu import persisting_l2_resetter
    from kz_harness.worker import Device

    reset = persisting_l2_resetter()
    found = reset is not None
    ran = False
    if reset is not None:
        reset()
        ran = True
    device = Device(torch, None)
    out = np.zeros((256, 256), dtype=np.float32)
    ns = device.call(lambda x: x * 2.0, [np.ones((256, 256), dtype=np.float32)], out)
    return {
        "found": found,
        "ran": ran,
        "device_reset": device.reset is not None,
        "device_call_ns": ns,
        "device_output_ok": bool((out == 2.0).all()),
    }


def triton_kernel(torch: Any) -> dict[str, Any]:
    import triton
    import triton.language as tl

    @triton.jit  # type: ignore[untyped-decorator]
    def double(x_ptr: Any, n: Any, block: tl.constexpr) -> None:
        offsets = tl.program_id(0) * block + tl.arange(0, block)
        mask = offsets < n
        tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)

    x = torch.ones(1000, device="cuda")
    double[(4,)](x, 1000, block=256)
    torch.cuda.synchronize()
    return {"version": triton.__version__, "ok": bool((x == 2).all().item())}


def main() -> int:
    sys.path.insert(0, HARNESS)
    figures: dict[str, Any] = {}
    try:
        import torch

        props = torch.cuda.get_device_properties(0)
        figures["device"] = {
            "name": props.name,
            "capability": list(torch.cuda.get_device_capability()),
            "multiprocessors": props.multi_processor_count,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
        }
    except Exception:
        figures["error"] = traceback.format_exc(limit=3)
        print(json.dumps(figures))
        return 1
    from kz_harness.gpu import persisting_l2_resetter

    parts: dict[str, Callable[[], Any]] = {
        "event_timer": lambda: event_timer(torch),
        "l2_flush": lambda: l2_flush(torch, persisting_l2_resetter()),
        "persisting_l2": lambda: persisting_reset(torch),
        "triton": lambda: triton_kernel(torch),
    }
    for name, part in parts.items():
        try:
            figures[name] = part()
        except Exception:
            figures[name] = {"error": traceback.format_exc(limit=4)}
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
