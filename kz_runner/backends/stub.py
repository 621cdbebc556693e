"""A backend that runs nothing and answers deterministically, for tests of the rest.

It writes version 3 result documents that pass the validity gate by default: each workload's
figures far above its resolution, timed windows and block log-ratios within half a per cent.
`src/stub.json` in the work dir may script the outcome: {"verdict": "accept" | "reject" |
"build_fail" | "error" | "hang" | "invalid", "value": float, "incumbent": float, "reference":
float, "floor": float, "confirmation_reference": float}. Without it the step accepts with a
value derived from the hash of the package's files, so the same package always gets the same
number. With `incumbent` the document carries the side-by-side figures a judge reports when
it measured the incumbent beside the candidate (block log-ratios the referee re-derives the
verdict from); with `reference`, those of the board's pinned reference and the score over it;
with `floor`, each workload's physical floor (memory-bound) and the ceilings it was taken
against. A confirmation run (`KZ_CONFIRMATION=1`) measures the reference at
`confirmation_reference` when the script gives one: another score, so it disputes.

Faults, on every attempt or, with `"faulty_attempts": n`, on the first n (`KZ_ATTEMPT`), so a
retry can come out clean: `"unsettled": true` (windows and blocks spread by 40 %: the host was
too noisy), `"unmeasured": true` (figures at the resolution: too small to measure), `"void":
"incumbent" | "reference"` (that rival voided, with its reason), `"crash": "load" | "call" |
"output" | "inputs"` (the candidate failed at that stage: no figure, its own error).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kz_events.errors import InvalidInput
from kz_harness.sidebyside import compare_side_by_side, reference_score, speedup_interval
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
MARGIN = 0.05  # the side-by-side margin the stub's judge states
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


WIGGLE = (-1.0, 0.0, 1.0, 0.5, -0.5, 0.0, 0.25, -0.25)
QUIET, NOISY = 0.005, 0.4  # how far timed windows and blocks stray, clean and faulty
CRASHES = {
    "load": "ModuleNotFoundError: No module named 'fast_kernel'",
    "call": "ZeroDivisionError: division by zero",
    "output": "ValueError: output is not a float32 array",
    "inputs": "RuntimeError: the candidate wrote into its inputs",
}


def _stats(value: float, spread: float = QUIET) -> dict[str, Any]:
    samples = [value * (1 + spread * d) for d in WIGGLE]
    ordered = sorted(samples)
    return {
        "median": value,
        "mean": sum(samples) / len(samples),
        "min": ordered[0],
        "max": ordered[-1],
        "p10": ordered[0],
        "p90": ordered[-1],
        "stdev": value * spread * 0.6,
        "samples": samples,
    }


def _blocks(speedup: float, spread: float) -> dict[str, Any]:
    """A workload's speed-up over a rival as block log-ratios (challenger over rival)."""
    ratios = [-math.log(speedup) + spread * d for d in WIGGLE]
    estimate, low, high = speedup_interval([ratios])
    return {"value": estimate, "interval": [low, high], "blocks": len(ratios), "log_ratios": ratios}


def _side_by_side(document: dict[str, Any], incumbent: float, spread: float) -> dict[str, Any]:
    """The document with the incumbent measured beside it (lower is better: speed-up =
    incumbent / candidate), as kz_harness's judge writes it."""
    groups = []
    for workload in document["workloads"]:
        workload["incumbent"] = _stats(incumbent, spread)
        workload["speedup"] = _blocks(incumbent / workload["value"], spread)
        groups.append(workload["speedup"]["log_ratios"])
    verdict = compare_side_by_side(groups, MARGIN)
    document["comparison"] = {**verdict.to_dict(), "reason": f"{verdict.reason} (stub backend)"}
    document["rivals"]["incumbent"] = {"status": "measured"}
    return document


def _beside_reference(document: dict[str, Any], reference: float, spread: float) -> dict[str, Any]:
    """The document with the board's reference measured beside it and the score over it."""
    groups = []
    for workload in document["workloads"]:
        workload["reference"] = _stats(reference, spread)
        workload["reference_speedup"] = _blocks(reference / workload["value"], spread)
        groups.append(workload["reference_speedup"]["log_ratios"])
    document["score"] = reference_score(groups)
    document["rivals"]["reference"] = {"status": "measured"}
    return document


def _voided(document: dict[str, Any], who: str) -> dict[str, Any]:
    """The document with rival `who` voided: the judge measured the candidate without it."""
    document["rivals"][who] = {
        "status": "voided",
        "code": "rival_raised",
        "reason": f"the {who} raised RuntimeError: stub fault (stub backend)",
    }
    return document


def _crashed(document: dict[str, Any], stage: str) -> dict[str, Any]:
    """What the judge reports when the candidate failed: no figure, its own error."""
    error = CRASHES[stage]
    return {
        **document,
        "accepted": False,
        "reason": f"the candidate failed ({stage}): {error}",
        "metric": {**document["metric"], "value": None},
        "workloads": [],
        "correctness": {
            "passed": False,
            "checks": [{"name": "candidate", "passed": False, "reason": error}],
        },
        "failure": {"who": "candidate", "stage": stage, "error": error},
    }


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


def _document(
    accepted: bool, value: float, kernel_id: str, faults: Faults | None = None
) -> dict[str, Any]:
    faults = faults or Faults()
    resolution = value if faults.unmeasured else value / 1000
    return {
        "schema_version": 3,
        "accepted": accepted,
        "reason": f"stub backend: {'accepted' if accepted else 'rejected'} {kernel_id}",
        "metric": {"name": "latency", "unit": "us", "better": "lower", "value": value},
        "workloads": [
            {
                "name": "stub",
                "value": value,
                "resolution": resolution,
                "batch": 16,
                "stats": _stats(value, faults.spread),
            }
        ],
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
        "timing": {"method": "batched_window"},
        "rivals": {"incumbent": {"status": "absent"}, "reference": {"status": "absent"}},
    }


@dataclass(frozen=True, slots=True)
class Faults:
    """The faults a script asks for on this attempt (none once `faulty_attempts` are past)."""

    unsettled: bool = False
    unmeasured: bool = False
    void: str | None = None
    crash: str | None = None

    @property
    def spread(self) -> float:
        return NOISY if self.unsettled else QUIET

    @classmethod
    def of(cls, script: dict[str, Any], attempt: int) -> Faults:
        if attempt > int(script.get("faulty_attempts", attempt)):
            return cls()
        return cls(
            unsettled=bool(script.get("unsettled")),
            unmeasured=bool(script.get("unmeasured")),
            void=script.get("void"),
            crash=script.get("crash"),
        )


def _measured(script: dict[str, Any], step: StepSpec, value: float, verdict: str) -> dict[str, Any]:
    """The document the judge would send for this script on this attempt."""
    faults = Faults.of(script, int(step.env.get("KZ_ATTEMPT", "1")))
    kernel_id = step.env.get("KZ_KERNEL_ID", "?")
    document = _document(verdict != "reject", value, kernel_id, faults)
    if "incumbent" in script and faults.void != "incumbent":
        document = _side_by_side(document, float(script["incumbent"]), faults.spread)
    reference = script.get("reference")
    if step.env.get("KZ_CONFIRMATION") == "1":
        reference = script.get("confirmation_reference", reference)
    if reference is not None and faults.void != "reference":
        document = _beside_reference(document, float(reference), faults.spread)
    if faults.void is not None:
        document = _voided(document, faults.void)
    if "floor" in script:
        document = _with_floor(document, float(script["floor"]))
    if faults.crash is not None:
        document = _crashed(document, faults.crash)
    return document


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
        document = _measured(script, step, value, verdict)
        _send(result_fd, json.dumps(document).encode())
        return _result(0, f"stub benchmark: {verdict} value={value}\n")
