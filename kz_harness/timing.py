"""CPU timing: one untimed call, a time-based warm-up, then adaptive timed repetitions.

Every timed call gets fresh inputs from `make_inputs()` and, before it, a pass that writes a
buffer larger than the last-level cache; the warm-up does exactly the same, only its samples
are dropped. Sampling stops when the SEM is below `target_rel_sem` of the mean (after at
least `min_samples`), when the budget is spent, or at `max_samples`. The garbage collector is
off while sampling (as `timeit` does), on the CPU and the GPU path alike.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kz_harness.errors import HarnessError
from kz_harness.stats import UNITS, Stats

__all__ = ["CacheFlusher", "as_args", "bench_cpu", "sample_adaptively"]

_DEFAULT_FLUSH_BYTES = 64 * 1024 * 1024
_LLC_SIZE = Path("/sys/devices/system/cpu/cpu0/cache/index3/size")


def as_args(inputs: Any) -> tuple[Any, ...]:
    """`make_inputs()` returns a tuple of positional arguments; anything else is one argument."""
    return inputs if isinstance(inputs, tuple) else (inputs,)


class _Welford:
    """Running mean and variance, so the stop rule costs O(1) per sample."""

    def __init__(self) -> None:
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0

    def add(self, value: float) -> None:
        self.n += 1
        delta = value - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (value - self.mean)

    def rel_sem(self) -> float:
        if self.n < 2 or self.mean == 0:
            return math.inf
        return math.sqrt(self.m2 / (self.n - 1) / self.n) / abs(self.mean)


def _check_settings(
    warmup_s: float, budget_s: float, max_samples: int, min_samples: int, target: float
) -> None:
    if min_samples < 1 or max_samples < min_samples:
        raise HarnessError(
            f"need 1 <= min_samples <= max_samples, got {min_samples} and {max_samples}"
        )
    if warmup_s < 0 or budget_s < 0 or target <= 0:
        raise HarnessError(
            "warmup_s and budget_s must be >= 0 and target_rel_sem > 0, "
            f"got {warmup_s}, {budget_s}, {target}"
        )


@contextlib.contextmanager
def _collector_off() -> Iterator[None]:
    """The garbage collector off (after one collection), and back as it was afterwards."""
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def sample_adaptively(
    timed_call: Callable[[], float],
    *,
    now: Callable[[], float],
    warmup_s: float,
    budget_s: float,
    max_samples: int,
    min_samples: int = 3,
    target_rel_sem: float = 1e-3,
) -> tuple[list[float], str]:
    """Run warm-up then timed calls; return every kept sample and why sampling stopped.

    The garbage collector is off meanwhile, as in `timeit`: a collection of the benchmark's
    own garbage never lands inside a timed call.
    """
    _check_settings(warmup_s, budget_s, max_samples, min_samples, target_rel_sem)
    with _collector_off():
        warm_start = now()
        while now() - warm_start < warmup_s:
            timed_call()
        samples: list[float] = []
        running = _Welford()
        start = now()
        while len(samples) < max_samples:
            sample = timed_call()
            samples.append(sample)
            running.add(sample)
            if len(samples) < min_samples:
                continue
            if running.rel_sem() < target_rel_sem:
                return samples, "converged"
            if now() - start >= budget_s:
                return samples, "budget"
        return samples, "max_samples"


def _llc_bytes() -> int:
    try:
        text = _LLC_SIZE.read_text().strip().upper()
    except OSError:
        return 0
    scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
    digits = text.rstrip("KM")
    return int(digits) * scale if digits.isdigit() else 0


class CacheFlusher:
    """Writes a buffer of twice the last-level cache (64 MiB when unknown) in place."""

    def __init__(self, size_bytes: int | None = None) -> None:
        llc = _llc_bytes()
        self.size_bytes = size_bytes or (2 * llc if llc else _DEFAULT_FLUSH_BYTES)
        self._buffer = ctypes.create_string_buffer(self.size_bytes)
        self._value = 0

    def __call__(self) -> None:
        self._value = (self._value + 1) % 251
        ctypes.memset(self._buffer, self._value, self.size_bytes)


def bench_cpu(
    fn: Callable[..., Any],
    make_inputs: Callable[[], Any],
    *,
    warmup_s: float = 0.2,
    budget_s: float = 2.0,
    max_samples: int = 10_000,
    min_samples: int = 3,
    target_rel_sem: float = 1e-3,
    flush_cache: bool = True,
    flush_bytes: int | None = None,
    unit: str = "us",
) -> Stats:
    """Time `fn(*make_inputs())` on the host with `perf_counter_ns`; see the module docstring."""
    if unit not in UNITS:
        raise HarnessError(f"unit must be one of {sorted(UNITS)}, got {unit!r}")
    flusher = CacheFlusher(flush_bytes) if flush_cache else None

    def timed_call() -> float:
        args = as_args(make_inputs())
        if flusher is not None:
            flusher()
        begin = time.perf_counter_ns()
        fn(*args)
        return float(time.perf_counter_ns() - begin)

    fn(*as_args(make_inputs()))
    samples, stop = sample_adaptively(
        timed_call,
        now=time.perf_counter,
        warmup_s=warmup_s,
        budget_s=budget_s,
        max_samples=max_samples,
        min_samples=min_samples,
        target_rel_sem=target_rel_sem,
    )
    return Stats.from_samples(samples, unit="ns", stop=stop).to_unit(unit)
