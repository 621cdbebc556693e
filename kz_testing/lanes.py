"""Which parallel test process this is, and the CPU its judges get.

pytest-xdist runs the suite in worker processes `gw0`, `gw1`, ...; every judge pins itself and
its workers to one CPU, and two judges on one CPU measure each other. Each test process (a
*lane*) therefore gets a CPU of its own, counted from the last, and hands it to every runner and
judge it starts through `KZ_RUNNER_CPU`, the setting a runner host uses for the same purpose.
"""

from __future__ import annotations

import os

__all__ = ["CPU_ENV", "lane", "lane_cpu", "runner_cpu"]

CPU_ENV = "KZ_RUNNER_CPU"


def lane() -> int:
    """This test process's number among parallel ones (pytest-xdist's gwN; 0 alone)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker.removeprefix("gw")) if worker.startswith("gw") else 0


def lane_cpu() -> int:
    """The CPU of this lane: the last usable CPU for lane 0, the one before it for lane 1, ..."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[-1 - lane() % len(cpus)]


def runner_cpu() -> int | None:
    """The CPU `KZ_RUNNER_CPU` names, as a judge started here should use (None: unset)."""
    value = os.environ.get(CPU_ENV, "")
    return int(value) if value.isdigit() else None
