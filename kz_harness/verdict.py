"""The verdict every benchmark ends with: correct, and better than main's best by a margin.

`baseline_best()` reads the value to beat from main's `bench_result.yaml` (the runner puts it
at `KZ_BASELINE_PATH`; absent for a new kernel), `verdict(...)` turns correctness, the
measured value and that baseline into `(accepted, reason)` in the metric's direction, and
`geomean(...)` folds several workloads into one headline value.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path

from kz_harness.errors import HarnessError, HarnessUnavailable

__all__ = ["BASELINE_PATH_ENV", "baseline_best", "geomean", "verdict"]

BASELINE_PATH_ENV = "KZ_BASELINE_PATH"


def baseline_best(path: str | Path | None = None) -> float | None:
    """`best.value` of main's bench_result.yaml at `path` (default: `$KZ_BASELINE_PATH`);
    None for a new kernel (no file) or a kernel without a best yet. Needs PyYAML."""
    where = path if path is not None else os.environ.get(BASELINE_PATH_ENV)
    if not where or not Path(where).is_file():
        return None
    try:
        import yaml
    except ImportError as exc:
        raise HarnessUnavailable(
            "baseline_best needs PyYAML to read bench_result.yaml; install it in "
            "build_test_env.py or read the file yourself"
        ) from exc
    document = yaml.safe_load(Path(where).read_text()) or {}
    best = document.get("best") if isinstance(document, dict) else None
    value = best.get("value") if isinstance(best, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def geomean(values: Iterable[float]) -> float:
    """The geometric mean of positive values: one workload twice as fast counts as much as
    another twice as slow, whatever their sizes."""
    items = [float(v) for v in values]
    if not items or any(not math.isfinite(v) or v <= 0 for v in items):
        raise HarnessError(f"geomean needs finite positive values, got {items}")
    return math.exp(sum(math.log(v) for v in items) / len(items))


def verdict(
    passed: bool,
    value: float,
    best: float | None,
    *,
    better: str = "lower",
    margin: float = 0.05,
    unit: str = "us",
) -> tuple[bool, str]:
    """(accepted, reason): rejected when incorrect; accepted when there is no best yet or
    `value` beats `best` by `margin` (a fraction) in the `better` direction."""
    if better not in ("lower", "higher"):
        raise HarnessError(f"better must be 'lower' or 'higher', got {better!r}")
    if not 0 <= margin < 1:
        raise HarnessError(f"margin must be a fraction in [0, 1), got {margin}")
    if not passed:
        return False, "output does not match the reference"
    if best is None:
        return True, f"first result for this kernel: {value:.4g} {unit}"
    if better == "lower":
        wins, ratio = value <= best * (1 - margin), best / value if value else math.inf
    else:
        wins, ratio = value >= best * (1 + margin), value / best if best else math.inf
    word = "faster" if better == "lower" else "better"
    if wins:
        return True, f"{ratio:.2f}x {word} than current best ({value:.4g} vs {best:.4g} {unit})"
    return False, (f"not {margin:.0%} {word} than current best ({value:.4g} vs {best:.4g} {unit})")
