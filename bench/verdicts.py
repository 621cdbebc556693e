"""How the side-by-side verdict holds on this noisy host: false accepts, power, repeatability
and cost, each measured through the real sandbox and the real judge.

(a) false accepts: N resubmissions of the incumbent's own source (target: at most 1 in 100);
(b) power: a challenger doing 3 % less work by construction (target: at least 95 % faster);
(c) repeatability: the same challenger/incumbent pair in separate tasks: the spread of the
    speed-up, beside the spread of the challenger's absolute medians in the same tasks
    (target: speed-up spread at most 2 %);
(d) cost: runner seconds per verdict (the judge step), median and p90.

    .venv/bin/python bench/verdicts.py [--same 100] [--power 40] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kz_events.ids import KernelId  # noqa: E402
from kz_package import validate_result_document  # noqa: E402
from kz_runner.backends import SandboxBackend  # noqa: E402
from kz_runner.execute import TaskOutcome, TaskSpec, execute_task  # noqa: E402

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
    timing=Timing(warmup_s=0.05, budget_s={budget}, calibration_calls=50), margin={margin},
)
raise SystemExit(BENCHMARK.main())
"""

# `times` passes over the rows: work proportional to `times`, the same code otherwise.
KERNEL = """
import numpy as np

def scan(x):
    out = None
    for _ in range({times}):
        out = np.cumsum(x, axis=1, dtype=np.float32)
    return out
"""
BASELINE = "schema_version: 1\nkernel_id: cpu/Scan/row/fp32/bench\nbest:\n  value: 1.0\n"
KERNEL_ID = KernelId.parse("cpu/Scan/row/fp32/bench")


MARGIN = [0.01]  # the board's margin this run judges with (--margin)
BUDGET = [0.5]  # the board's sampling budget per workload, in seconds (--budget)


def judge(backend: SandboxBackend, candidate: str, incumbent: str) -> TaskOutcome:
    with tempfile.TemporaryDirectory(prefix="kz-verdicts-") as tmp:
        root = Path(tmp)
        root.chmod(0o755)
        work = root / "work"
        (work / ".kernel_package").mkdir(parents=True)
        (work / ".kernel_package" / "build_test_env.py").write_text("pass\n")
        judge_source = (
            textwrap.dedent(JUDGE)
            .replace("{margin}", repr(MARGIN[0]))
            .replace("{budget}", repr(BUDGET[0]))
        )
        (work / ".kernel_package" / "benchmark.py").write_text(judge_source)
        (work / "src").mkdir()
        (work / "src" / "kernel.py").write_text(candidate)
        inc = root / "incumbent" / "src"
        inc.mkdir(parents=True)
        (inc / "kernel.py").write_text(incumbent)
        baseline = root / "bench_result.yaml"
        baseline.write_text(BASELINE)
        spec = TaskSpec(kernel_id=KERNEL_ID, arch="cpu", workdir=work, harness_path=REPO,
                        baseline_path=baseline, incumbent=inc, step_timeout_s=120,
                        task_timeout_s=240)  # fmt: skip
        return execute_task(spec, backend, validate_result=validate_result_document)


def _comparison(outcome: TaskOutcome) -> dict[str, object]:
    if outcome.result is None or "comparison" not in outcome.result:
        raise SystemExit(f"no comparison: {outcome.reason}: {outcome.message}")
    return dict(outcome.result["comparison"])


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--same", type=int, default=100, help="resubmissions of identical code")
    parser.add_argument("--power", type=int, default=40, help="runs of the 3 %% faster kernel")
    parser.add_argument("--repeat", type=int, default=5, help="tasks of one fixed pair")
    parser.add_argument("--passes", type=int, default=33, help="the incumbent's passes")
    parser.add_argument("--margin", type=float, default=0.01, help="the board's margin")
    parser.add_argument("--budget", type=float, default=0.5, help="the board's budget_s")
    args = parser.parse_args()
    MARGIN[0], BUDGET[0] = args.margin, args.budget
    print(f"margin {args.margin:.0%}, budget_s {args.budget}; "
          f"this host's load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    backend = SandboxBackend()
    backend.check_available()
    base = KERNEL.format(times=args.passes)
    faster = KERNEL.format(times=round(args.passes * 0.97))
    costs: list[float] = []
    started = time.monotonic()

    outcomes = {"faster": 0, "not_faster": 0, "inconclusive": 0}
    for _ in range(args.same):
        outcome = judge(backend, base, base)
        outcomes[str(_comparison(outcome)["outcome"])] += 1
        costs.append(outcome.timings.get("benchmark_s", 0.0))
    accepted = outcomes["faster"]
    allowed = max(1, args.same // 100)
    print(f"(a) identical resubmissions: {args.same}, accepted {accepted} "
          f"(not faster {outcomes['not_faster']}, inconclusive {outcomes['inconclusive']}); "
          f"target <= {allowed}: {'PASS' if accepted <= allowed else 'MISS'}")  # fmt: skip

    judged_faster = 0
    speedups = []
    for _ in range(args.power):
        outcome = judge(backend, faster, base)
        comparison = _comparison(outcome)
        judged_faster += comparison["outcome"] == "faster"
        speedups.append(float(comparison["speedup"]))  # type: ignore[arg-type]
        costs.append(outcome.timings.get("benchmark_s", 0.0))
    share = judged_faster / max(args.power, 1)
    print(f"(b) a kernel {args.passes}/{round(args.passes * 0.97)} passes "
          f"({args.passes / round(args.passes * 0.97) - 1:.1%} faster by construction): "
          f"judged faster {judged_faster} of {args.power} ({share:.0%}), median speed-up "
          f"{statistics.median(speedups):.3f}x; "
          f"target >= 95 %: {'PASS' if share >= 0.95 else 'MISS'}")  # fmt: skip

    ratios, medians = [], []
    for _ in range(args.repeat):
        outcome = judge(backend, faster, base)
        ratios.append(float(_comparison(outcome)["speedup"]))  # type: ignore[arg-type]
        assert outcome.result is not None
        medians.append(float(outcome.result["metric"]["value"]))
        costs.append(outcome.timings.get("benchmark_s", 0.0))
    spread = (max(ratios) - min(ratios)) / min(ratios)
    absolute = (max(medians) - min(medians)) / min(medians)
    print(f"(c) the same pair in {args.repeat} tasks: "
          f"speed-up {min(ratios):.3f}-{max(ratios):.3f}x "
          f"(spread {spread:.1%}; target <= 2 %: {'PASS' if spread <= 0.02 else 'MISS'}), beside "
          f"the challenger's absolute medians {min(medians):.1f}-{max(medians):.1f} us "
          f"(spread {absolute:.1%})")  # fmt: skip
    print(f"(d) runner seconds per verdict (judge step): median {statistics.median(costs):.2f} s, "
          f"p90 {_p(costs, 0.9):.2f} s over {len(costs)} tasks")  # fmt: skip
    print(f"total {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
