"""Support code for kernel zoo's tests and benchmarks: a command (usually `kz …`) run as its own
process group with its output in a log file, a wait for `GET /api/health`, and a stop that
sends SIGTERM, then SIGKILL, to the whole group. The command also gets SIGTERM when the process
that started it dies (kz_events.lifeline), so a test run that is killed leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from kz_events.lifeline import spawn_tied

__all__ = [
    "HEALTH_PATH",
    "KZ",
    "KzProcess",
    "ProcessError",
    "kz_argv",
    "stop_all",
    "wait_healthy",
]

KZ = (sys.executable, "-m", "kz_cli.main")
HEALTH_PATH = "/api/health"


class ProcessError(RuntimeError):
    """A process did not come up: it exited early, or a deadline passed before it answered."""


def kz_argv(*args: str) -> list[str]:
    """The command line of `kz <args>` run by this interpreter, whatever PATH holds."""
    return [*KZ, *args]


@dataclass
class KzProcess:
    """One OS process in its own process group, its output appended to `log_path`.

    It may be started again after it ended (`starts` counts the starts); each start writes a
    header line to the log.
    """

    name: str
    argv: list[str]
    env: Mapping[str, str]
    log_path: Path
    cwd: Path | None = None
    popen: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    starts: int = field(default=0, init=False)

    def start(self) -> KzProcess:
        if self.alive:
            raise ProcessError(f"{self.name} is already running")
        self.starts += 1
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as sink:
            sink.write(f"\n=== start #{self.starts}: {' '.join(self.argv)}\n".encode())
            sink.flush()
            self.popen = spawn_tied(
                self.argv,
                env=dict(self.env),
                cwd=self.cwd,
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return self

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    @property
    def returncode(self) -> int | None:
        return self.popen.poll() if self.popen else None

    def wait_healthy(self, base_url: str, timeout_s: float = 60.0) -> None:
        """Wait until `base_url` answers `GET /api/health` with 200 while this process runs."""
        wait_healthy(base_url, timeout_s, [self])

    def signal(self, sig: int) -> None:
        """Send `sig` to the whole process group (the process and anything it started)."""
        if self.popen is not None and self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)

    def kill(self) -> None:
        """SIGKILL the group, as a crash would, and reap the process."""
        self.signal(signal.SIGKILL)
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=10)

    def stop(self, timeout_s: float = 20.0) -> int | None:
        """SIGTERM, wait up to `timeout_s`, then SIGKILL; the exit code when SIGTERM ended it."""
        self.signal(signal.SIGTERM)
        return self.wait_or_kill(timeout_s)

    def wait_or_kill(self, timeout_s: float) -> int | None:
        """Wait up to `timeout_s` for the process to end, else SIGKILL it; its exit code if it
        ended in time. Whatever it left running in its group is killed either way."""
        if self.popen is None:
            return None
        try:
            return self.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)

    def tail(self, lines: int = 40) -> str:
        """The last `lines` lines of the log."""
        if not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def errors(self, keep: int = 3) -> str:
        """The last `keep` tracebacks and error lines of the log, which a tail may miss."""
        if not self.log_path.exists():
            return ""
        found: list[list[str]] = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith(("Traceback", "kz:")) or " ERROR " in line:
                found.append([line])
            elif found and len(found[-1]) < 60 and (line.startswith(" ") or "Error" in line):
                found[-1].append(line)
        return "\n".join("\n".join(block) for block in found[-keep:])

    def __enter__(self) -> KzProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_healthy(
    base_url: str, timeout_s: float, watch: Iterable[KzProcess], *, every_s: float = 0.1
) -> None:
    """Poll `GET base_url/api/health` until it answers 200.

    Fails with the log's tail as soon as a process of `watch` is not running, and with every
    watched log's tail when `timeout_s` passes.
    """
    url = base_url.rstrip("/") + HEALTH_PATH
    watched = list(watch)
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while True:
        for proc in watched:
            if not proc.alive:
                raise ProcessError(
                    f"{proc.name} exited ({proc.returncode}) before {url} answered 200; "
                    f"the end of {proc.log_path}:\n{proc.tail()}"
                )
        try:
            status = httpx.get(url, timeout=5).status_code
        except httpx.HTTPError as exc:
            last = repr(exc)
        else:
            if status == 200:
                return
            last = f"status {status}"
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {proc.name}\n{proc.tail()}" for proc in watched)
            raise ProcessError(f"{url} did not answer 200 in {timeout_s:.0f} s ({last})\n{tails}")
        time.sleep(every_s)


def stop_all(procs: Iterable[KzProcess], timeout_s: float = 10.0) -> None:
    """SIGTERM every process first, then wait for each (SIGKILL what lingers), so the
    processes shut down side by side rather than one after another."""
    ordered = list(procs)
    for proc in ordered:
        proc.signal(signal.SIGTERM)
    for proc in ordered:
        proc.wait_or_kill(timeout_s)
