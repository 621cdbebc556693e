"""Writing the result document of CONTRACTS.md to the path the runner gives in KZ_RESULT_PATH."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kz_harness.checks import Check
from kz_harness.errors import HarnessError
from kz_harness.stats import Stats

__all__ = ["RESULT_PATH_ENV", "SCHEMA_VERSION", "build_result", "write_result"]

RESULT_PATH_ENV = "KZ_RESULT_PATH"
SCHEMA_VERSION = 1
_METRIC_FIELDS = ("name", "unit", "better", "value")


def _workload(entry: Mapping[str, Any]) -> dict[str, Any]:
    if "name" not in entry or "value" not in entry:
        raise HarnessError(f"a workload needs name and value, got keys {sorted(entry)}")
    stats = entry.get("stats")
    document = dict(entry)
    document["value"] = float(entry["value"])
    if isinstance(stats, Stats):
        document["stats"] = stats.to_dict()
    return document


def _check(entry: Check | Mapping[str, Any]) -> dict[str, Any]:
    return entry.to_dict() if isinstance(entry, Check) else dict(entry)


def _metric(metric: Mapping[str, Any]) -> dict[str, Any]:
    missing = [key for key in _METRIC_FIELDS if key not in metric]
    if missing:
        raise HarnessError(f"metric needs {list(_METRIC_FIELDS)}, missing {missing}")
    if metric["better"] not in ("lower", "higher"):
        raise HarnessError(f"metric.better must be lower or higher, got {metric['better']!r}")
    value = float(metric["value"])
    if not math.isfinite(value):
        raise HarnessError(f"metric.value must be a finite number, got {value}")
    return {**metric, "value": value}


def build_result(
    *,
    accepted: bool,
    reason: str,
    metric: Mapping[str, Any],
    workloads: Sequence[Mapping[str, Any]],
    checks: Sequence[Check | Mapping[str, Any]],
    environment: Mapping[str, str],
) -> dict[str, Any]:
    """The result document; correctness passes only when there are checks and all pass."""
    check_docs = [_check(c) for c in checks]
    return {
        "schema_version": SCHEMA_VERSION,
        "accepted": bool(accepted),
        "reason": str(reason),
        "metric": _metric(metric),
        "workloads": [_workload(w) for w in workloads],
        "correctness": {
            "passed": bool(check_docs) and all(c.get("passed") is True for c in check_docs),
            "checks": check_docs,
        },
        "environment": {str(k): str(v) for k, v in environment.items()},
    }


def write_result(
    path: str | os.PathLike[str] | None = None,
    *,
    accepted: bool,
    reason: str,
    metric: Mapping[str, Any],
    workloads: Sequence[Mapping[str, Any]],
    checks: Sequence[Check | Mapping[str, Any]],
    environment: Mapping[str, str],
) -> dict[str, Any]:
    """Write the document as JSON (atomically) to `path` or `$KZ_RESULT_PATH`; return it."""
    target = path if path is not None else os.environ.get(RESULT_PATH_ENV)
    if not target:
        raise HarnessError(f"no result path: pass path or set {RESULT_PATH_ENV}")
    document = build_result(
        accepted=accepted,
        reason=reason,
        metric=metric,
        workloads=workloads,
        checks=checks,
        environment=environment,
    )
    destination = Path(target)
    partial = destination.with_name(destination.name + ".partial")
    partial.write_text(json.dumps(document, allow_nan=False, indent=1) + "\n")
    partial.replace(destination)
    return document
