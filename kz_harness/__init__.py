"""The trusted timing and comparison harness that every benchmark imports as `kz_harness`.

It depends on the standard library only; numpy speeds up comparisons, torch enables
`bench_gpu` and PyYAML `baseline_best`; none is required to import it.
"""

from __future__ import annotations

from kz_harness.checks import TOLERANCES, Check, compare, tolerance_for
from kz_harness.errors import HarnessError, HarnessUnavailable
from kz_harness.gpu import bench_gpu
from kz_harness.judge import Benchmark, CandidateFailed, Output, Timing, Workload, call_once
from kz_harness.result import RESULT_FD_ENV, build_result, write_result
from kz_harness.stats import Stats, below_physical_floor, percentile, physical_floor, tie
from kz_harness.timing import CacheFlusher, bench_cpu, sample_adaptively
from kz_harness.verdict import BASELINE_PATH_ENV, baseline_best, geomean, verdict

__all__ = [
    "BASELINE_PATH_ENV",
    "RESULT_FD_ENV",
    "TOLERANCES",
    "Benchmark",
    "CacheFlusher",
    "CandidateFailed",
    "Check",
    "HarnessError",
    "HarnessUnavailable",
    "Output",
    "Stats",
    "Timing",
    "Workload",
    "baseline_best",
    "below_physical_floor",
    "bench_cpu",
    "bench_gpu",
    "build_result",
    "call_once",
    "compare",
    "geomean",
    "percentile",
    "physical_floor",
    "sample_adaptively",
    "tie",
    "tolerance_for",
    "verdict",
    "write_result",
]
