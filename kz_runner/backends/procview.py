"""A step's processes as the host's /proc shows them: how many, their threads, their CPU time.

The judge asks the runner, never the worker, so these are read from outside the worker's
sandbox. `main_cpu_ns` is the first process's main thread (a worker's serving loop); the rest
of `cpu_ns` is everything else the step runs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["cpu_ns", "proc_view", "threads"]

_CLOCK_TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def threads(status: str) -> int:
    for line in status.splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 1


def cpu_ns(proc: str) -> int:
    """CPU time of a process (exited threads included) or of one task, `proc` its /proc dir.

    utime + stime count in clock ticks; where the kernel keeps schedstat, it is exact to the
    nanosecond (for a process: its living threads), so the larger of the two is taken.
    """
    fields = Path(f"{proc}/stat").read_text().rsplit(")", 1)[-1].split()
    ticks_ns = (int(fields[11]) + int(fields[12])) * _CLOCK_TICK_NS
    exact = 0
    tasks = [proc] if "/task/" in proc else [f"{proc}/task/{t}" for t in _listdir(f"{proc}/task")]
    for task in tasks:
        with contextlib.suppress(OSError, ValueError, IndexError):
            exact += int(Path(f"{task}/schedstat").read_text().split()[0])
    return max(ticks_ns, exact)


def _listdir(path: str) -> list[str]:
    try:
        return [entry.name for entry in Path(path).iterdir()]
    except OSError:
        return []


def proc_view(pids: Sequence[int]) -> dict[str, int]:
    """{processes, threads, cpu_ns, main_cpu_ns} of `pids` (ones gone meanwhile are skipped)."""
    processes = thread_count = used_ns = 0
    main_cpu_ns = -1
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            used = cpu_ns(f"/proc/{pid}")
        except OSError:
            continue
        processes += 1
        thread_count += threads(status)
        used_ns += used
        if main_cpu_ns < 0:
            with contextlib.suppress(OSError):
                main_cpu_ns = cpu_ns(f"/proc/{pid}/task/{pid}")
    return {
        "processes": processes,
        "threads": thread_count,
        "cpu_ns": used_ns,
        "main_cpu_ns": max(main_cpu_ns, 0),
    }
