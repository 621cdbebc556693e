"""A backend that runs nothing and answers deterministically, for tests of the rest.

`src/stub.json` in the work dir may script the outcome: {"verdict": "accept" | "reject" |
"build_fail" | "error" | "hang" | "invalid", "value": float, "incumbent": float, "reference":
float, "floor": float, "confirmation_reference": float}. Without it the step accepts with a
value derived from the hash of the package's files, so the same package always gets the same
number. With `incumbent` the document carries the side-by-side figures a judge reports when
it measured the incumbent beside the candidate; with `reference`, those of the board's pinned
reference and the score over it; with `floor`, each workload's physical floor (memory-bound)
and the ceilings it was taken against. A confirmation run (`KZ_CONFIRMATION=1`) measures the
reference at `confirmation_reference` when the script gives one: another score, so it disputes.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kz_events.errors import InvalidInput
from kz_runner.backends.base import (
    KILLED_TIMEOUT,
    BackendUnavailable,
    Cancelled,
    Spawned,
    StepResult,
    StepSpec,
)

__all__ = ["VERDICTS", "StubBackend", "package_value"]

VERDICTS = ("accept", "reject", "build_fail", "error", "hang", "invalid")
_SCRIPT = Path("src") / "stub.json"


def _files(folder: str, prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str]]:
    """(path parts, path) of each file under `folder`, as `Path.rglob` finds them: links to
    files count, links to folders are not entered."""
    with os.scandir(folder) as entries:
        listed = list(entries)
    for entry in listed:
        parts = (*prefix, entry.name)
        if entry.is_dir() and not entry.is_symlink():
            yield from _files(entry.path, parts)
        elif entry.is_file():
            yield parts, entry.path


def package_value(workdir: Path, *, skip: Path | None = None) -> float:
    """A number in [1, 1000) from the sha256 of every file's path and bytes, in path order."""
    digest = hashlib.sha256()
    skipped = None if skip is None else str(skip)
    for parts, path in sorted(_files(str(workdir), ())):
        if path != skipped:
            digest.update("/".join(parts).encode() + b"\0")
            with open(path, "rb") as data:
                digest.update(data.read())
    return 1.0 + int.from_bytes(digest.digest()[:8], "big") % 999_000 / 1000.0


def _script(workdir: Path) -> dict[str, Any]:
    path = workdir / _SCRIPT
    if not path.is_file():
        return {}
    try:
        script = json.loads(path.read_text())
    except ValueError as exc:
        raise InvalidInput(f"{_SCRIPT} must be a JSON object, got invalid JSON: {exc}") from exc
    if not isinstance(script, dict) or script.get("verdict", "accept") not in VERDICTS:
        raise InvalidInput(f"{_SCRIPT} verdict must be one of {list(VERDICTS)}, got {script!r}")
    return script


def _stats(value: float) -> dict[str, Any]:
    return {
        **dict.fromkeys(("median", "mean", "min", "max", "p10", "p90"), value),
        "stdev": 0.0,
        "samples": [value],
    }


def _side_by_side(document: dict[str, Any], incumbent: float) -> dict[str, Any]:
    """The document with the incumbent measured beside it (lower is better: speed-up =
    incumbent / candidate), as kz_harness's judge writes it."""
    speedup = incumbent / document["metric"]["value"]
    interval = [speedup * 0.95, speedup * 1.05]
    outcome = (
        "faster" if interval[0] > 1.05 else "not_faster" if interval[1] < 1.05 else "inconclusive"
    )
    for workload in document["workloads"]:
        workload["incumbent"] = _stats(incumbent)
        workload["speedup"] = {"value": speedup, "interval": interval, "blocks": 6}
    reason = f"{outcome.replace('_', ' ')}: {speedup:.3g}x the incumbent's speed (stub backend)"
    document["comparison"] = {
        "against": "incumbent", "outcome": outcome, "speedup": speedup, "interval": interval,
        "confidence": 0.95, "margin": 0.05, "reason": reason,
    }  # fmt: skip
    return document


def _beside_reference(document: dict[str, Any], reference: float) -> dict[str, Any]:
    """The document with the board's reference measured beside it and the score over it."""
    speedup = reference / document["metric"]["value"]
    interval = [speedup * 0.95, speedup * 1.05]
    for workload in document["workloads"]:
        workload["reference"] = _stats(reference)
        workload["reference_speedup"] = {"value": speedup, "interval": interval, "blocks": 6}
    document["score"] = {
        "against": "reference", "speedup": speedup, "interval": interval, "confidence": 0.95,
        "blocks": 6 * len(document["workloads"]),
    }  # fmt: skip
    return document


def _with_floor(document: dict[str, Any], floor: float) -> dict[str, Any]:
    """The document with a memory-bound floor on each workload, at 1 TB/s and 10 TFLOP/s."""
    for workload in document["workloads"]:
        workload["floor"] = {
            "value": floor, "bound": "memory", "bytes_moved": int(floor * 1e6), "flops": 0,
            "attained": floor / workload["value"],
        }  # fmt: skip
    document["ceilings"] = {
        "bytes_per_s": 1e12, "flops_per_s": 1e13, "dtype": "float32", "device": "stub",
    }  # fmt: skip
    return document


def _document(accepted: bool, value: float, kernel_id: str) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "accepted": accepted,
        "reason": f"stub backend: {'accepted' if accepted else 'rejected'} {kernel_id}",
        "metric": {"name": "latency", "unit": "us", "better": "lower", "value": value},
        "workloads": [{"name": "stub", "value": value, "stats": _stats(value)}],
        "correctness": {
            "passed": True,
            "checks": [
                {
                    "name": "stub",
                    "max_abs_err": 0.0,
                    "max_rel_err": 0.0,
                    "atol": 0.0,
                    "rtol": 0.0,
                    "passed": True,
                }
            ],
        },
        "environment": {"device": "stub", "driver": "stub", "runtime": "stub"},
    }


def _send(fd: int, data: bytes) -> None:
    """Write the whole document to the judge's result descriptor (the runner's own pipe)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _result(exit_code: int | None, output: str, *, timed_out: bool = False) -> StepResult:
    return StepResult(
        exit_code=exit_code,
        timed_out=timed_out,
        killed_reason=KILLED_TIMEOUT if timed_out else None,
        output=output.encode(),
        output_truncated=False,
        wall_s=0.0,
    )


class StubBackend:
    """Deterministic answers to `build_test_env.py` and `benchmark.py`; runs nothing."""

    name = "stub"
    python = sys.executable

    def check_available(self) -> None:
        """Always available."""

    def spawn(self, step: StepSpec) -> Spawned:
        """The stub answers for the judge, so it never starts a worker."""
        raise BackendUnavailable("the stub backend runs no workers")

    def run(self, step: StepSpec, *, cancelled: Cancelled | None = None) -> StepResult:
        package = step.package or step.workdir
        script = _script(package)
        verdict = script.get("verdict", "accept")
        is_build = any(arg.endswith("build_test_env.py") for arg in step.argv)
        if is_build:
            failed = verdict == "build_fail"
            return _result(1 if failed else 0, f"stub build: {'failed' if failed else 'ok'}\n")
        if verdict == "hang":
            return _result(None, "stub benchmark: hanging\n", timed_out=True)
        if verdict == "error":
            return _result(1, "stub benchmark: error\n")
        result_fd = int(step.env["KZ_RESULT_FD"])
        if verdict == "invalid":
            _send(result_fd, b'{"schema_version": 1, "accepted": "maybe"}')
            return _result(0, "stub benchmark: wrote an invalid document\n")
        value = float(script.get("value", package_value(package)))
        document = _document(verdict != "reject", value, step.env.get("KZ_KERNEL_ID", "?"))
        if "incumbent" in script:
            document = _side_by_side(document, float(script["incumbent"]))
        reference = script.get("reference")
        if step.env.get("KZ_CONFIRMATION") == "1":
            reference = script.get("confirmation_reference", reference)
        if reference is not None:
            document = _beside_reference(document, float(reference))
        if "floor" in script:
            document = _with_floor(document, float(script["floor"]))
        _send(result_fd, json.dumps(document).encode())
        return _result(0, f"stub benchmark: {verdict} value={value}\n")
