"""Run every pytest layer once with coverage, then apply the coverage gates.

Gates: the whole project >= 80 %, and each pure core (kz_events and the pure modules of the
other packages) >= 90 %. pytest's "no tests collected" (exit 5) counts as a failure here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TOTAL_GATE = 80
PURE_GATE = 90
PURE_CORES = [
    "kz_events/*",
    "kz_projector/index.py",
    "kz_projector/scoreboard.py",
    "kz_package/yaml_safe.py",
    "kz_harness/stats.py",
]


def run(*argv: str) -> int:
    print("+", " ".join(argv), flush=True)
    return subprocess.call(argv)


def main() -> int:
    py = sys.executable
    workers = os.environ.get("KZ_TEST_WORKERS", "2")
    common = ["--cov", "--cov-report=", "-q", "-p", "no:cacheprovider"]
    # Fast layers in parallel. The browser tests run on their own: Playwright's sync API
    # keeps an event loop running in the test thread, which asyncio tests cannot share.
    # The system layer runs last and alone: its processes and faults need the cores.
    code = run(
        py,
        "-m",
        "pytest",
        "-m",
        "unit or integration",
        "-n",
        workers,
        "--dist",
        "loadfile",
        *common,
    )
    if code != 0:
        return code
    for layer in ("webui", "system"):
        code = run(py, "-m", "pytest", "-m", layer, "--cov-append", *common)
        if code != 0:
            return code
    code = run(py, "-m", "coverage", "report", f"--fail-under={TOTAL_GATE}", "--skip-covered")
    if code != 0:
        print(f"coverage gate: the project must be covered >= {TOTAL_GATE} %", file=sys.stderr)
        return code
    present = [pattern for pattern in PURE_CORES if _exists(pattern)]
    code = run(
        py,
        "-m",
        "coverage",
        "report",
        f"--fail-under={PURE_GATE}",
        "--include=" + ",".join(present),
    )
    if code != 0:
        print(f"coverage gate: pure cores must be covered >= {PURE_GATE} %", file=sys.stderr)
    return code


def _exists(pattern: str) -> bool:
    return any(Path().glob(pattern))


if __name__ == "__main__":
    sys.exit(main())
