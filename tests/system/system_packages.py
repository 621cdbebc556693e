"""Kernel packages for the system tests, as real gzip tarballs: scripted stub packages for a fake
GPU architecture, small real benchmarks for the sandboxed `cpu` runners, and invalid ones.

Each valid package carries a random salt in `src/` so no two submissions share a digest.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from kz_package import PACKAGE_DIR
from kz_testing import package_files, package_tarball

__all__ = [
    "BENCHMARK",
    "INVALID_KINDS",
    "OUTCOMES",
    "Planned",
    "build",
    "expected_status",
    "invalid_package",
    "valid_package",
]

# The judge of the `cpu` kernels: a real judge run in the sandbox. It asks the candidate (in
# its own worker, as every judge must) which verdict the package wants and sends a valid result
# document (or fails, or hangs).
BENCHMARK = '''"""System-test judge: obey the candidate's plan()."""
import sys
import time

import numpy as np

from kz_harness import Output, call_once, write_result

VERDICTS = ("accept", "reject", "error", "hang")
plan = call_once("kernel:plan", (np.zeros(1),), Output((2,), "float64"))
verdict, value = VERDICTS[int(plan[0])], float(plan[1])
if verdict == "error":
    sys.exit("benchmark error on purpose")
if verdict == "hang":
    time.sleep(3600)
stats = {k: value for k in ("median", "mean", "min", "max", "p10", "p90")}
samples = [value] * 5  # equal samples: a settled interval, as the validity gate asks
write_result(
    accepted=verdict == "accept",
    reason="system test verdict " + verdict,
    metric={"name": "latency", "unit": "us", "better": "lower", "value": value},
    workloads=[{"name": "tiny", "value": value, "stats": dict(stats, stdev=0.0, samples=samples)}],
    checks=[{"name": "tiny", "max_abs_err": 0.0, "max_rel_err": 0.0, "atol": 0.0, "rtol": 0.0,
             "passed": True}],
    environment={"device": "cpu", "driver": "none", "runtime": "python"},
)
'''

# The candidate of the `cpu` kernels: its plan() tells the judge what to do.
KERNEL = """import numpy as np

def plan(x):
    return np.array([{code}, {value!r}])
"""
_CODES = {"accept": 0, "reject": 1, "error": 2, "hang": 3, "build_fail": 0}

BUILD = '''"""System-test build step: fail when src/verdict.json asks for it."""
import json
import sys

if json.load(open("src/verdict.json"))["verdict"] == "build_fail":
    sys.exit("build failed on purpose")
print("build ok")
'''

# Verdict the package asks for → the status its submission must end in.
OUTCOMES = {
    "accept": "committed",
    "reject": "rejected",
    "build_fail": "failed",
    "error": "failed",
    "hang": "failed",
}
INVALID_KINDS = ("wrong_kernel_id", "bad_yaml", "not_gzip")


@dataclass(frozen=True)
class Planned:
    """One submission a test means to make."""

    kernel_id: str
    verdict: str  # a key of OUTCOMES, or "invalid:<kind>"
    value: float
    submitter: str

    @property
    def invalid(self) -> bool:
        return self.verdict.startswith("invalid:")


def expected_status(plan: Planned) -> str | None:
    return None if plan.invalid else OUTCOMES[plan.verdict]


def _files(kernel_id: str, verdict: str, value: float) -> dict[str, bytes]:
    script = json.dumps({"verdict": verdict, "value": value})
    return package_files(
        kernel_id,
        title=f"System test kernel {kernel_id.rsplit('/', 1)[-1]}",
        workload="tiny",
        benchmark=BENCHMARK,
        build_test_env=BUILD,
        src={
            "stub.json": script,
            "verdict.json": script,
            "kernel.py": KERNEL.format(code=_CODES[verdict], value=float(value)),
        },
        salt=uuid.uuid4().hex,
    )


def valid_package(kernel_id: str, verdict: str, value: float) -> bytes:
    """A package for `kernel_id` whose benchmark (stub or real) answers `verdict`, built in
    memory."""
    return package_tarball(_files(kernel_id, verdict, value))


def invalid_package(kernel_id: str, kind: str) -> bytes:
    """A package the API must refuse at the door."""
    if kind == "not_gzip":
        return b"this is not a gzip tarball " + uuid.uuid4().bytes
    files = _files(kernel_id, "accept", 1.0)
    desc = f"{PACKAGE_DIR}/desc.yaml"
    if kind == "wrong_kernel_id":
        files[desc] = files[desc].replace(kernel_id.encode(), kernel_id.encode() + b"_other")
    elif kind == "bad_yaml":
        files[desc] = b"schema_version: 1\nkernel_id: [unclosed\n"
    else:
        raise ValueError(f"invalid kind: expected one of {INVALID_KINDS}, got {kind!r}")
    return package_tarball(files)


def build(plan: Planned) -> bytes:
    if plan.invalid:
        return invalid_package(plan.kernel_id, plan.verdict.split(":", 1)[1])
    return valid_package(plan.kernel_id, plan.verdict, plan.value)
