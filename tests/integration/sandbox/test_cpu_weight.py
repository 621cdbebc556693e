"""A step's cgroup outweighs everything else on the host for the CPU: a measurement shares
its CPU with nothing it can avoid sharing it with (busy neighbours get what the step leaves)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kz_runner.backends.cgroups import find_hierarchy

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("mode", ["v1", "v2"])
def test_a_steps_group_takes_the_cpu_before_a_busy_neighbour(mode: str) -> None:
    """Given a busy loop and a step's group pinned to one CPU, the loop in the group gets
    nearly all of it: its weight is the most the hierarchy allows."""
    hierarchy = find_hierarchy(mode)
    if hierarchy is None or os.geteuid() != 0:
        pytest.skip(f"no writable cgroup {mode} hierarchy here")
    group = hierarchy.group()
    cpu = max(os.sched_getaffinity(0))
    spin = [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile 1: pass"]
    neighbour = subprocess.Popen(spin)
    inside = subprocess.Popen([*group.join_argv(), *spin])
    try:
        weights = [
            group.folders.get("cpu", group.main) / name for name in ("cpu.shares", "cpu.weight")
        ]
        if not any(w.exists() for w in weights):
            pytest.skip(f"the {mode} hierarchy here has no cpu controller for the step's group")
        time.sleep(1.5)
        before = group.cpu_ns()
        time.sleep(1.0)
        share = (group.cpu_ns() - before) / 1e9
        assert share > 0.9, f"the step's group got {share:.0%} of its CPU beside a busy loop"
    finally:
        for process in (neighbour, inside):
            process.kill()
            process.wait()
        group.kill()
        group.remove()
