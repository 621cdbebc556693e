"""The side-by-side verdict through the real sandbox: the candidate and main's incumbent are
timed in interleaved blocks on the same inputs, and the verdict is a speed-up with an
interval, never a comparison with a number measured earlier."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kz_runner.execute import TaskOutcome

pytestmark = pytest.mark.integration

JudgePackage = Callable[..., TaskOutcome]

JUDGE = """
import numpy as np
from kz_harness import Benchmark, Timing, Workload

def make_inputs(workload, rng):
    return (rng.standard_normal((workload["rows"], 256), dtype=np.float32),)

def reference(x):
    return np.cumsum(x.astype(np.float64), axis=1)

BENCHMARK = Benchmark(
    entry="kernel:scan",
    workloads=[Workload("r64", {"rows": 64}), Workload("r128", {"rows": 128})],
    make_inputs=make_inputs, reference=reference, dtype="fp32",
    timing=Timing(warmup_s=0.02, budget_s=0.6, calibration_calls=40),
)
raise SystemExit(BENCHMARK.main())
"""

# The work repeated `times` times: a kernel k/n slower than another by construction.
KERNEL = """
import numpy as np

def scan(x):
    for _ in range({times} - 1):
        np.cumsum(x, axis=1, dtype=np.float32)
    return np.cumsum(x, axis=1, dtype=np.float32)
"""


# Main's scoreboard already has a best (the incumbent was measured): side by side decides.
BASELINE = "schema_version: 1\nkernel_id: cpu/Norm/RMSNorm/fp32/sandbox_test\nbest:\n  value: 1.0\n"


def _comparison(outcome: TaskOutcome) -> dict[str, object]:
    assert outcome.result is not None, outcome.log.decode()[-3000:]
    comparison = outcome.result.get("comparison")
    assert isinstance(comparison, dict), outcome.result
    return comparison


def test_the_incumbents_own_source_is_never_accepted(judge_package: JudgePackage) -> None:
    """Byte-identical resubmissions, ten times: each judged not faster (or at worst
    inconclusive, which is rejected too), never accepted."""
    same = KERNEL.format(times=3)
    outcomes = [
        judge_package(JUDGE, {"kernel.py": same}, incumbent={"kernel.py": same}, baseline=BASELINE)
        for _ in range(10)
    ]
    for outcome in outcomes:
        comparison = _comparison(outcome)
        assert outcome.reason == "rejected", comparison
        assert comparison["outcome"] in ("not_faster", "inconclusive")
        low, _high = comparison["interval"]  # type: ignore[misc]
        assert low <= 1.0 + 0.05  # the interval reaches the tie


def test_a_kernel_faster_by_construction_is_accepted_with_its_speedup(
    judge_package: JudgePackage,
) -> None:
    """The incumbent does the work four times, the challenger three: about 1.33x, inside the
    interval, judged faster."""
    outcome = judge_package(
        JUDGE,
        {"kernel.py": KERNEL.format(times=3)},
        incumbent={"kernel.py": KERNEL.format(times=4)},
        baseline=BASELINE,
    )
    comparison = _comparison(outcome)
    assert outcome.reason == "accepted", comparison
    low, high = comparison["interval"]  # type: ignore[misc]
    assert comparison["outcome"] == "faster" and 1.05 < low <= high
    # The construction is about 4/3 (less the call's fixed cost); a busy host widens the
    # interval, which must still reach it.
    assert low < 4 / 3 * 1.2 and high > 4 / 3 * 0.8
    assert outcome.result is not None
    for workload in outcome.result["workloads"]:  # one sample per window, one window a round
        assert workload["incumbent"]["n"] == workload["speedup"]["blocks"] >= 6
    assert str(comparison["reason"]).startswith("faster: ")


def test_a_new_kernel_is_scored_against_the_boards_reference_alone(
    judge_package: JudgePackage,
) -> None:
    """A kernel main does not hold yet has no incumbent: it takes its first result, and its
    score is its speed-up over the board's pinned reference, measured in the same blocks."""
    outcome = judge_package(
        JUDGE,
        {"kernel.py": KERNEL.format(times=2)},
        reference={"kernel.py": KERNEL.format(times=3)},
    )
    assert outcome.reason == "accepted", outcome.log.decode()[-3000:]
    assert outcome.result is not None
    score = outcome.result["score"]
    low, high = score["interval"]
    assert score["against"] == "reference" and low <= score["speedup"] <= high
    assert low < 1.5 * 1.2 and high > 1.5 * 0.8  # 3/2 by construction, less the fixed cost
    assert "comparison" not in outcome.result
    for workload in outcome.result["workloads"]:
        assert workload["reference"]["n"] == len(workload["reference_speedup"]["log_ratios"]) >= 6


def test_incumbent_and_reference_are_measured_in_the_same_blocks(
    judge_package: JudgePackage,
) -> None:
    """Three implementations side by side: the verdict is against the incumbent, the score
    against the reference, each from as many block pairs as the other."""
    outcome = judge_package(
        JUDGE,
        {"kernel.py": KERNEL.format(times=2)},
        incumbent={"kernel.py": KERNEL.format(times=3)},
        reference={"kernel.py": KERNEL.format(times=4)},
        baseline=BASELINE,
    )
    assert outcome.reason == "accepted", outcome.log.decode()[-3000:]
    assert outcome.result is not None
    assert _comparison(outcome)["outcome"] == "faster"
    assert outcome.result["score"]["speedup"] > _comparison(outcome)["speedup"]  # type: ignore[operator]
    for workload in outcome.result["workloads"]:
        assert workload["speedup"]["blocks"] == workload["reference_speedup"]["blocks"]


def test_a_confirmation_run_samples_until_its_score_is_settled(
    judge_package: JudgePackage,
) -> None:
    """A confirmation run measures as the run it confirms did (incumbent and reference beside
    it), its incumbent being the same source: the tie against it stops nothing, the judge
    samples until the interval against the reference is narrower than the margin (or the
    budget is spent)."""
    same = KERNEL.format(times=2)
    outcome = judge_package(
        JUDGE,
        {"kernel.py": same},
        incumbent={"kernel.py": same},
        reference={"kernel.py": KERNEL.format(times=3)},
        baseline=BASELINE,
        confirming=True,
    )
    assert outcome.result is not None, outcome.log.decode()[-3000:]
    assert outcome.result["score"]["against"] == "reference"
    for workload in outcome.result["workloads"]:
        low, high = workload["reference_speedup"]["interval"]
        stop = workload["stats"]["stop"]
        assert high <= low * 1.05 or stop in ("budget", "max_samples", "time_limit")


def test_a_kernel_never_measured_takes_its_first_result_whatever_the_incumbent(
    judge_package: JudgePackage,
) -> None:
    """An imported kernel has an incumbent but no best yet: its first correct run is its
    first result (the comparison is recorded all the same)."""
    same = KERNEL.format(times=2)
    outcome = judge_package(JUDGE, {"kernel.py": same}, incumbent={"kernel.py": same})
    assert outcome.reason == "accepted", outcome.log.decode()[-3000:]
    assert outcome.result is not None
    assert str(outcome.result["reason"]).startswith("first result for this kernel")
    assert _comparison(outcome)["against"] == "incumbent"


def test_an_incumbent_that_no_longer_loads_leaves_the_verdict_to_the_baseline(
    judge_package: JudgePackage,
) -> None:
    """Main's source without the board's entry point: the candidate is still judged, and
    the result says why there was no side-by-side comparison."""
    outcome = judge_package(
        JUDGE, {"kernel.py": KERNEL.format(times=1)}, incumbent={"other.py": "x = 1\n"}
    )
    assert outcome.reason == "accepted", outcome.log.decode()[-3000:]
    comparison = _comparison(outcome)
    assert comparison["against"] is None and "incumbent" in str(comparison["reason"])


def test_a_challenger_cannot_load_the_machine_while_the_incumbent_is_timed(
    judge_package: JudgePackage,
) -> None:
    """A challenger that spins a thread to slow its rival down: it is stopped whenever the
    incumbent is timed, so the incumbent is measured on a quiet machine, the challenger is
    not judged faster, and its thread is flagged."""
    same = KERNEL.format(times=3)
    saboteur = (
        same
        + """
import threading

def _spin():
    while True:
        sum(range(1000))

threading.Thread(target=_spin, daemon=True).start()
print("TRIED sabotage", flush=True)
"""
    )
    outcome = judge_package(
        JUDGE, {"kernel.py": saboteur}, incumbent={"kernel.py": same}, baseline=BASELINE
    )
    assert b"TRIED sabotage" in outcome.log
    comparison = _comparison(outcome)
    assert outcome.reason == "rejected" and comparison["outcome"] != "faster", comparison
    assert outcome.result is not None
    assert {"extra_threads", "background_work"} <= {f["code"] for f in outcome.result["flags"]}
