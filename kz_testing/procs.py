"""What runs on this host, read from `/proc` (Linux): a process's descendants, the processes
whose command line names a path, and whether a process seen earlier still lives. Tests use it
to look for what a killed process left behind.

A process is named by its pid and its start time (`Proc`), so a pid the system has since given
to another process is not mistaken for the one seen earlier.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Proc", "descendants", "naming", "survivors", "wait_gone"]

PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class Proc:
    pid: int
    started: int  # clock ticks after boot (field 22 of /proc/PID/stat)
    command: str

    def __str__(self) -> str:
        return f"{self.pid} {self.command}"


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of `pid`, or None when it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), int(fields[19])


def _command(pid: int) -> str:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def _all() -> list[tuple[int, tuple[str, int, int]]]:
    found = []
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            found.append((int(entry.name), stat))
    return found


def descendants(pid: int) -> list[Proc]:
    """Every live process below `pid` (children, their children, …), whatever their session."""
    table = _all()
    below, frontier = [], {pid}
    while frontier:
        children = [(p, s) for p, s in table if s[1] in frontier and s[0] != "Z"]
        below += [Proc(p, s[2], _command(p)) for p, s in children]
        frontier = {p for p, _ in children}
    return below


def naming(text: str) -> list[Proc]:
    """Every live process whose command line contains `text` (a test's own temporary folder,
    say, which only what it started names)."""
    return [
        Proc(p, s[2], command)
        for p, s in _all()
        if s[0] != "Z" and text in (command := _command(p))
    ]


def survivors(seen: list[Proc]) -> list[Proc]:
    """Those of `seen` still alive (a zombie counts as gone: it runs nothing)."""
    alive = []
    for proc in seen:
        stat = _stat(proc.pid)
        if stat is not None and stat[2] == proc.started and stat[0] != "Z":
            alive.append(proc)
    return alive


def wait_gone(seen: list[Proc], timeout_s: float) -> list[Proc]:
    """Wait up to `timeout_s` for every process of `seen` to end; those still alive then."""
    deadline = time.monotonic() + timeout_s
    while (left := survivors(seen)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left
