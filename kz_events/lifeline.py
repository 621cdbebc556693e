"""Child processes that die with the process that started them, however it dies.

On Linux the child asks the kernel, before it runs its program, for SIGTERM when its parent
ends (`prctl(PR_SET_PDEATHSIG)`): a SIGKILL of the parent, which runs no cleanup, still stops
the child. The kernel sends that signal when the *thread* that forked the child ends, not the
process, so every such child is forked from one thread kept for the purpose, which lives as
long as the process (a worker thread of an executor may end while its child should run on).
Elsewhere the children start as usual and are stopped by the parent's own cleanup only.
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

__all__ = ["spawn_tied"]

PR_SET_PDEATHSIG = 1

_Job = tuple[Callable[[], "subprocess.Popen[bytes]"], "Future[subprocess.Popen[bytes]]"]
_jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
_started = threading.Lock()
_thread: threading.Thread | None = None


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - every Linux libc has prctl
        return None
    function: Callable[..., int] = libc.prctl
    return function


_PRCTL = _prctl()


def _tie_to(parent: int, sig: int) -> Callable[[], None]:
    """What the child runs before its program: ask for `sig` when the parent ends, and end at
    once if it ended already (between the fork and this call)."""
    prctl = _PRCTL
    assert prctl is not None

    def tie() -> None:
        prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return tie


def _serve() -> None:
    while True:
        start, done = _jobs.get()
        try:
            done.set_result(start())
        except BaseException as exc:  # handed to the caller, who raises it
            done.set_exception(exc)


def _launcher() -> None:
    global _thread
    with _started:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_serve, name="kz-lifeline", daemon=True)
            _thread.start()


def spawn_tied(
    argv: Sequence[str], *, sig: int = signal.SIGTERM, **popen: Any
) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(argv, **popen)` whose process gets `sig` when this process ends (on
    Linux; elsewhere a plain `Popen`)."""
    if _PRCTL is None:
        return subprocess.Popen(list(argv), **popen)
    tie = _tie_to(os.getpid(), sig)

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(list(argv), preexec_fn=tie, **popen)

    done: Future[subprocess.Popen[bytes]] = Future()
    _launcher()
    _jobs.put((start, done))
    return done.result()
