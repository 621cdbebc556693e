"""The GPU cheating suite's data, checked without a GPU: every source parses, every family of
the issue is there, the fp32 judge's tolerance really separates fp32 from TF32 and bfloat16,
and `defended()` reads outcomes as it should (a case without TRIED is never defended)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kz_harness.checks import compare
from kz_package.pyparse import parse_python
from kz_testing.gpu_cheats import (
    FAMILIES,
    GPU_CASES,
    JUDGE_BF16,
    JUDGE_FP32,
    GpuCase,
    defended,
    least_plausible_us,
)

pytestmark = pytest.mark.unit

ISSUE_FAMILIES = {
    "other_stream", "background_thread", "lazy_tensor", "cache_by_address", "persisting_l2",
    "patched_clock", "tf32", "bf16_compute",
}  # fmt: skip


def _judge_namespace(judge: str) -> dict[str, Any]:
    """The judge's module globals, run as far as `BENCHMARK.main()` (which refuses to run
    outside a runner and exits 2)."""
    namespace: dict[str, Any] = {"__name__": "benchmark"}
    with pytest.raises(SystemExit) as stopped:
        exec(compile(judge, "benchmark.py", "exec"), namespace)
    assert stopped.value.code == 2
    return namespace


@pytest.mark.parametrize("case", GPU_CASES, ids=lambda case: case.family)
def test_every_judge_and_candidate_parses_and_says_it_tried(case: GpuCase) -> None:
    parse_python(case.judge, "benchmark.py")
    assert case.files, case.family
    for name, source in case.files.items():
        parse_python(source, name)
    assert any(f"TRIED {case.family}" in source for source in case.files.values())
    assert case.why and "\n" not in case.why
    assert case.defended_by in ("rejected", "measured") or case.defended_by.startswith("flagged:")


def test_every_family_of_the_issue_is_attempted_once_beside_an_honest_kernel() -> None:
    families = [case.family for case in GPU_CASES]
    assert len(families) == len(set(families))
    assert FAMILIES == ISSUE_FAMILIES
    assert set(families) >= ISSUE_FAMILIES
    assert {"honest", "honest_bf16"} <= set(families)
    honest = [c for c in GPU_CASES if c.family.startswith("honest")]
    assert all(c.defended_by == "measured" for c in honest)


@pytest.mark.parametrize("judge", [JUDGE_FP32, JUDGE_BF16], ids=["fp32", "bf16"])
def test_the_judges_declare_a_gpu_board_with_its_floor(judge: str) -> None:
    """Each judge builds its Benchmark (no typo in an argument), on CUDA, every workload with
    its bytes and flops, and a least plausible median for each."""
    bench = _judge_namespace(judge)["BENCHMARK"]
    assert bench.device == "cuda"
    assert all(w.bytes_moved > 0 and w.flops > 0 for w in bench.workloads)
    least = least_plausible_us(judge)
    assert set(least) == {w.name for w in bench.workloads}
    assert all(value > 1.0 for value in least.values())


def _round_mantissa(array: Any, bits: int) -> Any:
    """float32 values rounded to `bits` mantissa bits (ties to even): 10 for TF32, 7 for bf16."""
    drop = 23 - bits
    raw = array.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (raw + (1 << (drop - 1)) - 1 + ((raw >> drop) & 1)) >> drop << drop
    return rounded.astype(np.uint32).view(np.float32)


def test_the_fp32_judges_tolerance_passes_fp32_and_fails_tf32_and_bf16() -> None:
    """On the judge's own inputs (fewer rows and columns, the same k): a float32 product
    passes the fp32 check, the same product of TF32- or bfloat16-rounded inputs does not."""
    namespace = _judge_namespace(JUDGE_FP32)
    bench = namespace["BENCHMARK"]
    workload = bench.workloads[0]
    small = type(workload)("small", {**workload.params, "m": 64, "n": 64})
    a, b = bench.make_inputs(small, np.random.default_rng(7))
    reference = bench.reference(a, b)

    def check(out: Any) -> bool:
        return compare(out, reference, dtype=bench.dtype, atol=bench.atol, rtol=bench.rtol).passed

    assert check(a @ b)
    for bits in (10, 7):
        wide = _round_mantissa(a, bits).astype(np.float64) @ _round_mantissa(b, bits)
        assert not check(wide.astype(np.float32)), bits


# --- defended() on synthetic outcomes ------------------------------------------------------


def _case(family: str) -> GpuCase:
    return next(case for case in GPU_CASES if case.family == family)


def _result(
    *, accepted: bool, passed: bool, median: float = 150.0, flags: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {
        "accepted": accepted,
        "reason": "1 of 4 checked calls failed" if not passed else "first result",
        "metric": {"name": "latency", "unit": "us", "better": "lower", "value": median},
        "workloads": [{"name": "m1024_n1024_k4096", "value": median}],
        "correctness": {"passed": passed, "checks": []},
        "flags": [{"code": code, "message": f"{code} seen"} for code in flags],
    }


def test_without_tried_nothing_counts_as_defended() -> None:
    """A cheat that broke itself (no TRIED in the log) is never taken for a defence."""
    case = _case("tf32")
    ok, why = defended(case, "rejected", _result(accepted=False, passed=False), b"ImportError")
    assert not ok and "TRIED tf32" in why


def test_a_rejected_family_needs_a_rejection_for_incorrectness() -> None:
    case = _case("lazy_tensor")
    log = b"...TRIED lazy_tensor\n"
    assert defended(case, "rejected", _result(accepted=False, passed=False), log)[0]
    assert not defended(case, "accepted", _result(accepted=True, passed=True), log)[0]
    assert not defended(case, "benchmark_error", None, log)[0]


def test_a_measured_family_must_be_accepted_and_no_faster_than_the_work_can_be() -> None:
    case = _case("other_stream")
    log = b"TRIED other_stream\n"
    ok, why = defended(case, "accepted", _result(accepted=True, passed=True, median=150.0), log)
    assert ok and "150.0 us" in why
    fast = _result(accepted=True, passed=True, median=12.0)  # the side stream's work unseen
    ok, why = defended(case, "accepted", fast, log)
    assert not ok and "under what the work can take" in why
    assert not defended(case, "rejected", _result(accepted=False, passed=False), log)[0]
    floor = _result(accepted=True, passed=True, median=150.0, flags=("below_physical_floor",))
    ok, why = defended(case, "accepted", floor, log)
    assert not ok and "below_physical_floor" in why


def test_a_flagged_family_needs_its_flag() -> None:
    case = GpuCase("x", JUDGE_FP32, {"kernel.py": ""}, "flagged:work_outside_events", "why")
    log = b"TRIED x\n"
    flagged = _result(accepted=True, passed=True, flags=("work_outside_events",))
    assert defended(case, "accepted", flagged, log)[0]
    other = _result(accepted=True, passed=True, flags=("extra_threads",))
    ok, why = defended(case, "accepted", other, log)
    assert not ok and "extra_threads" in why
