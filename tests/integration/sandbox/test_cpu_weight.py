"""A step's cgroup outweighs everything else on the host for the CPU: a measurement shares
its CPU with nothing it can avoid sharing it with (busy neighbours get what the step leaves)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kz_runner.backends.cgroups import find_hierarchy

pytestmark = pytest.mark.integration


def _cpu_ns(pid: int) -> int:
    """A process's CPU time so far, user and system, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("mode", ["v1", "v2"])
def test_a_steps_group_takes_the_cpu_before_a_busy_neighbour(mode: str) -> None:
    """Given a busy loop and a step's group pinned to one CPU, the loop in the group runs over
    twenty times as long as its neighbour: its weight is the most the hierarchy allows (the
    default weight would share the CPU half and half)."""
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
        time.sleep(1.0)
        before = group.cpu_ns(), _cpu_ns(neighbour.pid)
        time.sleep(2.0)
        ours = group.cpu_ns() - before[0]
        theirs = _cpu_ns(neighbour.pid) - before[1]
        # Against the neighbour alone: other processes of a busy host take from both.
        assert ours > 20 * theirs, (
            f"the group ran {ours / 1e6:.0f} ms, its neighbour {theirs / 1e6:.0f} ms"
        )
    finally:
        for process in (neighbour, inside):
            process.kill()
            process.wait()
        group.kill()
        group.remove()
