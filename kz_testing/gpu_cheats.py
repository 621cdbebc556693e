"""The GPU cheating families of JUDGING.md, each a candidate that really attempts its trick.

Two small GPU judges (sources of benchmark.py): an fp32 matmul board, whose tolerance a TF32
or bfloat16 product fails at this k, and a bfloat16 matmul board. `GPU_CASES` holds an honest
candidate for each and one candidate per family; each prints `TRIED <family>` once it has
really attempted its trick, so a cheat that broke itself cannot pass for a defence.
`defended()` reads a task's outcome: the GPU check (scripts/gpu_check) and
tests/integration/gpu/test_gpu_cheats.py run every case through the real sandbox on a GPU.

How each family is defended (docs/judging.md, docs/harness.md "On a GPU"):

- other_stream: the worker's device-wide synchronise after the end event waits for the side
  stream, and the time past the idle tail is added to the call: measured for what it costs;
- background_thread: the output is copied back as soon as the window ends, on the worker's
  stream, which nothing of the thread's orders it behind: a later write is too late and the
  checks see a stale or empty output: rejected;
- lazy_tensor: only exactly `torch.Tensor` crosses, checked before anything of the object is
  read (so nothing lazy runs): rejected;
- cache_by_address: device inputs are fresh tensors every call, whose addresses the allocator
  reuses while their contents are new: stale outputs fail the checks: rejected;
- persisting_l2: the worker removes its stream's access-policy window, resets persisting lines
  and only then flushes L2 before every call: nothing stays resident, measured;
- tf32, bf16_compute: the fp32 board's tolerance against a float64 reference: rejected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "FAMILIES",
    "GPU_CASES",
    "JUDGE_BF16",
    "JUDGE_FP32",
    "GpuCase",
    "defended",
    "least_plausible_us",
]


@dataclass(frozen=True)
class GpuCase:
    family: str  # e.g. "other_stream"
    judge: str  # benchmark.py source
    files: dict[str, str]  # src/ files of the candidate
    defended_by: str  # "rejected" | "flagged:<code>" | "measured" (accepted for its real cost)
    why: str  # one line: which mechanism defends it


# --- the judges --------------------------------------------------------------------------

_JUDGE = """
import numpy as np
from kz_harness import Benchmark, Output, Timing, Workload

M, N, K = {m}, {n}, {k}
BYTES = {bytes}  # per element on the device


def make_inputs(workload, rng):
    scale = np.float32(workload["k"] ** -0.25)  # so that the products are about unit size
    a = rng.standard_normal((workload["m"], workload["k"]), dtype=np.float32) * scale
    b = rng.standard_normal((workload["k"], workload["n"]), dtype=np.float32) * scale
    return a, b


def reference(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def output(workload, inputs):
    return Output((workload["m"], workload["n"]), "float32")


BENCHMARK = Benchmark(
    entry="kernel:matmul",
    workloads=[
        Workload(
            "m{m}_n{n}_k{k}", {{"m": M, "n": N, "k": K}},
            bytes_moved=BYTES * (M * K + K * N + M * N), flops=2 * M * N * K,
        ),
    ],
    make_inputs=make_inputs, reference=reference, output=output,
    dtype="{dtype}", device="cuda",{device_dtype}
    timing=Timing(warmup_s=0.05, budget_s=0.3, min_samples=10, checked_calls=4,
                  calibration_calls=20),
)
raise SystemExit(BENCHMARK.main())
"""

# fp32, default fp32 tolerances (1e-4, 1e-4): a float32 product is within about 2e-6 of the
# float64 reference; TF32 (10-bit mantissas) misses it on half the elements, bfloat16 on all.
JUDGE_FP32 = _JUDGE.format(m=1024, n=1024, k=4096, bytes=4, dtype="fp32", device_dtype="")
JUDGE_BF16 = _JUDGE.format(
    m=2048, n=2048, k=2048, bytes=2, dtype="bf16", device_dtype='\n    device_dtype="bfloat16",'
)

# The least a workload's median can honestly be, in microseconds: half the time its flops take
# at the H100/H200's dense peak (67 TFLOP/s in fp32 without tensor cores, 990 in bfloat16).
_LEAST_US: dict[str, dict[str, float]] = {
    JUDGE_FP32: {"m1024_n1024_k4096": 0.5 * 2 * 1024 * 1024 * 4096 / 67e12 * 1e6},
    JUDGE_BF16: {"m2048_n2048_k2048": 0.5 * 2 * 2048**3 / 990e12 * 1e6},
}


def least_plausible_us(judge: str) -> dict[str, float]:
    """Each workload of `judge` and the least median (us) that can be an honest measurement."""
    return dict(_LEAST_US[judge])


# --- the candidates ----------------------------------------------------------------------

HONEST = """
import torch

print("TRIED honest", flush=True)


def matmul(a, b):
    return torch.matmul(a, b)
"""

HONEST_BF16 = HONEST.replace("TRIED honest", "TRIED honest_bf16")

# The product on a side stream; the current stream is never made to wait for it, so the end
# event is recorded at once.
OTHER_STREAM = """
import torch

_side = []


def matmul(a, b):
    if not _side:
        _side.append(torch.cuda.Stream())
    side = _side[0]
    side.wait_stream(torch.cuda.current_stream())  # the inputs are ready
    with torch.cuda.stream(side):
        c = torch.matmul(a, b)
    if len(_side) == 1:
        _side.append(True)
        print("TRIED other_stream", flush=True)
    return c
"""

# An empty output returned at once; a thread fills it once the call's timer has ended.
BACKGROUND_THREAD = """
import threading
import time

import torch

_tried = []


def matmul(a, b):
    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)

    def later():
        time.sleep(0.005)
        torch.matmul(a, b, out=c)
        torch.cuda.synchronize()

    threading.Thread(target=later, daemon=True).start()
    if not _tried:
        _tried.append(True)
        print("TRIED background_thread", flush=True)
    return c
"""

# A tensor subclass that computes the product only when something reads it.
LAZY_TENSOR = """
import torch

_tried = []


class Lazy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for arg in args:
            pending = getattr(arg, "_kz_pending", None) if isinstance(arg, Lazy) else None
            if pending is not None:
                arg._kz_pending = None
                with torch._C.DisableTorchFunctionSubclass():
                    torch.matmul(*pending, out=arg)
        return super().__torch_function__(func, types, args, kwargs or {})


def matmul(a, b):
    empty = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)
    lazy = torch.Tensor._make_subclass(Lazy, empty)
    lazy._kz_pending = (a, b)
    if not _tried:
        _tried.append(True)
        print("TRIED lazy_tensor", flush=True)
    return lazy
"""

# Outputs memoised by the inputs' device addresses (which the allocator hands out again).
CACHE_BY_ADDRESS = """
import torch

_cache = {}
_tried = []


def matmul(a, b):
    key = (a.data_ptr(), b.data_ptr(), tuple(a.shape), tuple(b.shape))
    hit = _cache.get(key)
    if hit is not None:
        if not _tried:
            _tried.append(True)
            print("TRIED cache_by_address", flush=True)
        return hit
    c = torch.matmul(a, b)
    _cache[key] = c
    return c
"""

# A persisting-L2 set-aside as large as the device allows, and an access-policy window over b
# (the "weights") on the current stream, hoping b stays in L2 from one call to the next.
PERSISTING_L2 = """
import ctypes

import torch

LIMIT_PERSISTING_L2 = 6  # cudaLimitPersistingL2CacheSize
ATTR_MAX_PERSISTING_L2 = 108  # cudaDevAttrMaxPersistingL2CacheSize
ATTR_MAX_WINDOW = 109  # cudaDevAttrMaxAccessPolicyWindowSize
STREAM_ATTR_WINDOW = 1  # cudaStreamAttributeAccessPolicyWindow
PERSISTING, STREAMING = 2, 1  # cudaAccessProperty


class Window(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t),
                ("hit_ratio", ctypes.c_float), ("hit_prop", ctypes.c_int),
                ("miss_prop", ctypes.c_int)]


class Value(ctypes.Union):
    _fields_ = [("window", Window), ("pad", ctypes.c_char * 64)]


def _runtime():
    major = (torch.version.cuda or "12").partition(".")[0]  # the runtime torch loaded
    for name in (f"libcudart.so.{major}", "libcudart.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    raise RuntimeError("no CUDA runtime library found")


_rt = _runtime()
_state = {}


def _attribute(attribute):
    value = ctypes.c_int()
    device = torch.cuda.current_device()
    status = _rt.cudaDeviceGetAttribute(ctypes.byref(value), attribute, device)
    if status != 0:
        raise RuntimeError(f"cudaDeviceGetAttribute({attribute}) failed: {status}")
    return value.value


def matmul(a, b):
    if not _state:
        _state["window"] = _attribute(ATTR_MAX_WINDOW)
        set_aside = ctypes.c_size_t(_attribute(ATTR_MAX_PERSISTING_L2))
        status = _rt.cudaDeviceSetLimit(LIMIT_PERSISTING_L2, set_aside)
        if status != 0:
            raise RuntimeError(f"cudaDeviceSetLimit(persisting L2) failed: {status}")
    value = Value()
    value.window.base_ptr = b.data_ptr()
    value.window.num_bytes = min(b.numel() * b.element_size(), _state["window"])
    value.window.hit_ratio = 1.0
    value.window.hit_prop = PERSISTING
    value.window.miss_prop = STREAMING
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    status = _rt.cudaStreamSetAttribute(stream, STREAM_ATTR_WINDOW, ctypes.byref(value))
    if status != 0:
        raise RuntimeError(f"cudaStreamSetAttribute(access policy window) failed: {status}")
    if "tried" not in _state:
        _state["tried"] = True
        print("TRIED persisting_l2", flush=True)
    return torch.matmul(a, b)
"""

# TF32 tensor cores for an fp32 product, through every switch torch has had for it.
TF32 = """
import torch

switched = []
try:
    torch.backends.cuda.matmul.allow_tf32 = True
    switched.append("allow_tf32")
except Exception as exc:
    print("allow_tf32 refused:", exc, flush=True)
try:
    torch.set_float32_matmul_precision("high")
    switched.append("precision=high")
except Exception as exc:
    print("set_float32_matmul_precision refused:", exc, flush=True)
if switched:
    print("TRIED tf32", switched, flush=True)


def matmul(a, b):
    return torch.matmul(a, b)
"""

# The product computed in bfloat16 and widened back to float32.
BF16_COMPUTE = """
import torch

print("TRIED bf16_compute", flush=True)


def matmul(a, b):
    return torch.matmul(a.bfloat16(), b.bfloat16()).float()
"""

# The honest product, but the worker's clock patched in its own process: every CUDA event
# interval reads a tenth of what it was. The worker is the candidate's process; only the
# judge's checks on the figure can catch it.
PATCHED_CLOCK = """
import torch

_elapsed = torch.cuda.Event.elapsed_time
torch.cuda.Event.elapsed_time = lambda self, end: _elapsed(self, end) / 10
print("TRIED patched_clock", flush=True)


def matmul(a, b):
    return torch.matmul(a, b)
"""

GPU_CASES: list[GpuCase] = [
    GpuCase("honest", JUDGE_FP32, {"kernel.py": HONEST}, "measured",
            "the reference shape: accepted for its real device time"),
    GpuCase("honest_bf16", JUDGE_BF16, {"kernel.py": HONEST_BF16}, "measured",
            "the bfloat16 path (device_dtype) accepts an honest kernel"),
    GpuCase("other_stream", JUDGE_FP32, {"kernel.py": OTHER_STREAM}, "measured",
            "the device-wide sync after the end event waits for the side stream; its tail "
            "past the idle one is added to the call"),
    GpuCase("background_thread", JUDGE_FP32, {"kernel.py": BACKGROUND_THREAD}, "rejected",
            "the output is copied back when the window ends, on the worker's own stream: the "
            "thread's later write is too late and the checks fail"),
    GpuCase("lazy_tensor", JUDGE_FP32, {"kernel.py": LAZY_TENSOR}, "rejected",
            "only exactly torch.Tensor crosses, checked before anything of it is read"),
    GpuCase("cache_by_address", JUDGE_FP32, {"kernel.py": CACHE_BY_ADDRESS}, "rejected",
            "fresh inputs every call at reused addresses: stale outputs fail the checks"),
    GpuCase("persisting_l2", JUDGE_FP32, {"kernel.py": PERSISTING_L2}, "measured",
            "the worker removes the stream's window, resets persisting lines, then flushes "
            "L2 before every call"),
    GpuCase("patched_clock", JUDGE_FP32, {"kernel.py": PATCHED_CLOCK},
            "flagged:below_physical_floor",
            "a tenth of a product's time is under its floor at the ceilings the trusted worker "
            "measured (the judge's wall-clock bound sees the rest only beyond the copies' gap)"),
    GpuCase("tf32", JUDGE_FP32, {"kernel.py": TF32}, "rejected",
            "fp32 tolerance against a float64 reference: TF32's 10-bit mantissas miss it"),
    GpuCase("bf16_compute", JUDGE_FP32, {"kernel.py": BF16_COMPUTE}, "rejected",
            "fp32 tolerance against a float64 reference: a bfloat16 product misses it"),
]  # fmt: skip

# Every GPU family the suite must attempt (issue 18); honest cases come beside them.
FAMILIES = frozenset(
    {"other_stream", "background_thread", "lazy_tensor", "cache_by_address", "persisting_l2",
     "patched_clock", "tf32", "bf16_compute"}
)  # fmt: skip


# Flags that say a figure is not the work's cost: a "measured" case must carry none of them.
_TIMING_FLAGS = frozenset({"timing_bound_broken", "work_outside_events", "below_physical_floor"})


def defended(
    case: GpuCase, outcome_reason: str, result: dict[str, Any] | None, log: bytes
) -> tuple[bool, str]:
    """(True, figure/why) when the outcome shows the family defended AND the log shows TRIED.

    `outcome_reason` is the task's outcome (`accepted`, `rejected`, or a failure such as
    `benchmark_error`), `result` its result document, `log` the task's log.
    """
    if f"TRIED {case.family}".encode() not in log:
        return False, f"the candidate never printed TRIED {case.family}: its attempt did not run"
    if result is None:
        return False, f"no result document ({outcome_reason})"
    if case.defended_by == "rejected":
        return _rejected(outcome_reason, result)
    if case.defended_by.startswith("flagged:"):
        return _flagged(case.defended_by.removeprefix("flagged:"), result)
    if case.defended_by == "measured":
        return _measured(case, outcome_reason, result)
    raise ValueError(f"{case.family}: unknown defended_by {case.defended_by!r}")


def _rejected(outcome_reason: str, result: dict[str, Any]) -> tuple[bool, str]:
    passed = bool(result.get("correctness", {}).get("passed"))
    if outcome_reason != "rejected" or result.get("accepted") or passed:
        return False, f"not rejected as incorrect: {outcome_reason}, {result.get('reason')}"
    return True, f"rejected: {result.get('reason')}"


def _flagged(code: str, result: dict[str, Any]) -> tuple[bool, str]:
    flags = {flag.get("code"): flag.get("message") for flag in result.get("flags", [])}
    if code not in flags:
        return False, f"not flagged {code} (flags: {sorted(map(str, flags))})"
    return True, f"flagged {code}: {flags[code]}"


def _measured(case: GpuCase, outcome_reason: str, result: dict[str, Any]) -> tuple[bool, str]:
    """Accepted, correct, no flag saying its times are not the work's, and every workload's
    median no less than it can honestly be."""
    if outcome_reason != "accepted" or not result.get("correctness", {}).get("passed"):
        return False, f"not accepted as correct: {outcome_reason}, {result.get('reason')}"
    timing_flags = {flag.get("code") for flag in result.get("flags", [])} & _TIMING_FLAGS
    if timing_flags:
        return False, f"accepted, but its times are flagged: {sorted(map(str, timing_flags))}"
    least = least_plausible_us(case.judge)
    medians = {w["name"]: float(w["value"]) for w in result.get("workloads", [])}
    if set(medians) != set(least):
        return False, f"workloads {sorted(medians)}, expected {sorted(least)}"
    unit = result.get("metric", {}).get("unit")
    if unit != "us":
        return False, f"the metric is in {unit!r}, expected us"
    short = {name: value for name, value in medians.items() if value < least[name]}
    if short:
        return False, f"measured under what the work can take: {short} (least {least} us)"
    figures = ", ".join(f"{name} {value:.1f} us" for name, value in sorted(medians.items()))
    return True, f"measured: {figures}"
