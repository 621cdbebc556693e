"""Building the result document of CONTRACTS.md and sending it to the runner.

The runner gives the judge the write end of a pipe as `KZ_RESULT_FD`; no worker holds it. A
path may be given instead, for tools that run a judge's pieces outside a runner.
"""

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

__all__ = ["RESULT_FD_ENV", "SCHEMA_VERSION", "build_result", "write_result"]

RESULT_FD_ENV = "KZ_RESULT_FD"
SCHEMA_VERSION = 3  # of the result document; docs/judging.md says what each version adds
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
    """Send the document as JSON to `path`, or else to the runner's `$KZ_RESULT_FD`; return it.

    The descriptor is closed afterwards: a judge sends one document.
    """
    document = build_result(
        accepted=accepted,
        reason=reason,
        metric=metric,
        workloads=workloads,
        checks=checks,
        environment=environment,
    )
    text = json.dumps(document, allow_nan=False, indent=1) + "\n"
    if path is not None:
        destination = Path(path)
        partial = destination.with_name(destination.name + ".partial")
        partial.write_text(text)
        partial.replace(destination)
        return document
    fd = os.environ.get(RESULT_FD_ENV, "")
    if not fd.isdigit():
        raise HarnessError(f"no result channel: pass path or run under a runner ({RESULT_FD_ENV})")
    with os.fdopen(int(fd), "w") as channel:
        channel.write(text)
    return document
