"""The adaptive sampling loop and `bench_cpu`, driven by a fake clock where timing matters."""

from __future__ import annotations

import gc

import pytest

from kz_harness.errors import HarnessError
from kz_harness.timing import CacheFlusher, bench_cpu, sample_adaptively

pytestmark = pytest.mark.unit


class FakeClock:
    """A clock that advances by `step` each time a timed call runs."""

    def __init__(self, step: float) -> None:
        self.t = 0.0
        self.step = step

    def now(self) -> float:
        return self.t


def make_call(clock: FakeClock, values: list[float]) -> tuple[list[float], object]:
    produced: list[float] = []

    def timed_call() -> float:
        clock.t += clock.step
        value = values[len(produced) % len(values)]
        produced.append(value)
        return value

    return produced, timed_call


def test_identical_samples_converge_at_the_minimum_count() -> None:
    """Samples with no spread stop as converged after min_samples."""
    clock = FakeClock(0.01)
    _, call = make_call(clock, [100.0])
    samples, stop = sample_adaptively(
        call, now=clock.now, warmup_s=0.0, budget_s=10.0, max_samples=100
    )  # type: ignore[arg-type]
    assert (samples, stop) == ([100.0, 100.0, 100.0], "converged")


def test_warm_up_calls_run_for_the_warm_up_time_and_are_dropped() -> None:
    """Warm-up calls go through the same timed path but none is kept."""
    clock = FakeClock(0.1)
    produced, call = make_call(clock, [100.0])
    samples, _ = sample_adaptively(
        call, now=clock.now, warmup_s=0.5, budget_s=10.0, max_samples=100
    )  # type: ignore[arg-type]
    assert len(produced) == 5 + len(samples)


def test_noisy_samples_stop_at_the_budget_with_at_least_three() -> None:
    """Spread that never converges stops once the budget is spent, keeping every sample."""
    clock = FakeClock(1.0)
    _, call = make_call(clock, [1.0, 100.0])
    samples, stop = sample_adaptively(
        call, now=clock.now, warmup_s=0.0, budget_s=2.0, max_samples=100
    )  # type: ignore[arg-type]
    assert stop == "budget" and len(samples) == 3


def test_the_hard_cap_bounds_the_sample_count() -> None:
    """With an endless budget, sampling stops at max_samples."""
    clock = FakeClock(0.0)
    _, call = make_call(clock, [1.0, 2.0])
    samples, stop = sample_adaptively(
        call, now=clock.now, warmup_s=0.0, budget_s=1e9, max_samples=7
    )  # type: ignore[arg-type]
    assert (len(samples), stop) == (7, "max_samples")


def test_inconsistent_settings_are_refused() -> None:
    """max_samples below min_samples is an error."""
    with pytest.raises(HarnessError):
        sample_adaptively(lambda: 1.0, now=lambda: 0.0, warmup_s=0, budget_s=1, max_samples=2)


def test_bench_cpu_gives_fresh_inputs_to_every_call() -> None:
    """Each call gets the object from its own make_inputs() call, never a reused one."""
    made: list[list[int]] = []
    seen: list[int] = []

    def make_inputs() -> tuple[list[int]]:
        made.append([len(made)])
        return (made[-1],)

    stats = bench_cpu(lambda x: seen.append(id(x)), make_inputs, warmup_s=0.0, budget_s=0.01,
                      max_samples=20, flush_bytes=4096)  # fmt: skip
    assert len(seen) == len(made) == stats.n + 1  # one untimed call, then the samples
    assert len({id(x) for x in made}) == len(made)
    assert stats.unit == "us" and stats.min > 0


def test_the_cache_flusher_writes_its_whole_buffer() -> None:
    """Each flush writes a new value over every byte of the buffer."""
    flusher = CacheFlusher(1024)
    flusher()
    first = flusher._buffer.raw
    flusher()
    assert len(set(first)) == 1 and first != flusher._buffer.raw


def test_the_collector_is_off_while_timing_and_back_on_after() -> None:
    """No garbage collection runs inside a timed call; the collector's state is restored."""
    states: list[bool] = []
    bench_cpu(
        lambda: states.append(gc.isenabled()),
        tuple,
        warmup_s=0.0,
        budget_s=0.01,
        max_samples=5,
        flush_cache=False,
    )
    assert states and not any(states[1:])  # the first, untimed call may run with it on
    assert gc.isenabled()


def test_sampling_itself_turns_the_collector_off_for_every_timing_path() -> None:
    """`sample_adaptively`, which the GPU path shares, runs its calls with the collector off."""
    states: list[bool] = []

    def timed_call() -> float:
        states.append(gc.isenabled())
        return 1.0

    sample_adaptively(timed_call, now=lambda: 0.0, warmup_s=0.0, budget_s=1.0, max_samples=4)
    assert states and not any(states)
    assert gc.isenabled()
