"""Run a child process group with a wall-clock timeout, cancellation and capped output.

Output is read incrementally; once it passes the limit the group is killed, so a step that
prints a gigabyte costs the host no more than the limit in memory.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kz_runner.backends.base import (
    KILLED_CANCELLED,
    KILLED_OUTPUT_LIMIT,
    KILLED_TIMEOUT,
    Cancelled,
    StepResult,
)

__all__ = ["POLL_S", "OutputBuffer", "run_capped", "why_stop"]

POLL_S = 0.2
_CHUNK = 1 << 16
_DRAIN_AFTER_EXIT_S = 0.5


class OutputBuffer:
    """Keeps the first `limit` bytes of a stream and notes whether more came."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.truncated = False

    def add(self, chunk: bytes) -> bool:
        """Append a chunk; return False once the limit is exceeded."""
        room = self.limit - len(self.data)
        if len(chunk) > room:
            self.data += chunk[: max(room, 0)]
            self.truncated = True
            return False
        self.data += chunk
        return True

    def finish(self, killed_reason: str | None) -> bytes:
        if not self.truncated:
            return bytes(self.data)
        marker = f"\n[kz: output truncated at {self.limit} bytes"
        marker += "; step killed]\n" if killed_reason == KILLED_OUTPUT_LIMIT else "]\n"
        return bytes(self.data) + marker.encode()


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def why_stop(deadline: float, cancelled: Cancelled | None) -> str | None:
    if cancelled is not None and cancelled():
        return KILLED_CANCELLED
    if time.monotonic() >= deadline:
        return KILLED_TIMEOUT
    return None


def _pump(
    process: subprocess.Popen[bytes],
    buffer: OutputBuffer,
    deadline: float,
    cancelled: Cancelled | None,
) -> str | None:
    """Read output until EOF or a reason to kill; return that reason (None: ended by itself)."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    os.set_blocking(fd, False)
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            reason = why_stop(deadline, cancelled)
            if reason is not None:
                return reason
            for _ in selector.select(POLL_S):
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    return None
                if not buffer.add(chunk):
                    return KILLED_OUTPUT_LIMIT
            if exited_at is None and process.poll() is not None:
                exited_at = time.monotonic()
            if exited_at is not None and time.monotonic() - exited_at > _DRAIN_AFTER_EXIT_S:
                return None  # a leftover child holds the pipe open: stop reading


def _await_exit(
    process: subprocess.Popen[bytes], deadline: float, cancelled: Cancelled | None
) -> str | None:
    """Wait for the leader to exit after its output closed, still honouring time and cancel."""
    while True:
        try:
            process.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            reason = why_stop(deadline, cancelled)
            if reason is not None:
                return reason
        else:
            return None


def run_capped(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    timeout_s: float,
    max_output_bytes: int,
    cancelled: Cancelled | None = None,
    pass_fds: Sequence[int] = (),
    close_after_start: Sequence[int] = (),
    after_kill: Callable[[], None] | None = None,
) -> StepResult:
    """Run `argv` in its own session; kill the whole group on timeout, cancel or flood.

    `pass_fds` are inherited by the child; those of them in `close_after_start` are closed
    here once it started, the others stay the caller's. `after_kill` runs after the group is
    gone, to reap what lives outside it (a sandbox's namespace).
    """
    started = time.monotonic()
    buffer = OutputBuffer(max_output_bytes)
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )
    for fd in close_after_start:
        os.close(fd)
    try:
        reason = _pump(process, buffer, started + timeout_s, cancelled)
        if reason is None:
            reason = _await_exit(process, started + timeout_s, cancelled)
    finally:
        _kill_group(process)  # ends leftovers of the group even when the leader exited
        if after_kill is not None:
            after_kill()
        if process.stdout is not None:
            process.stdout.close()
    return StepResult(
        exit_code=None if reason else process.returncode,
        timed_out=reason == KILLED_TIMEOUT,
        killed_reason=reason,
        output=buffer.finish(reason),
        output_truncated=buffer.truncated,
        wall_s=time.monotonic() - started,
    )
