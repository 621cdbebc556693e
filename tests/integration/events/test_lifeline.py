"""Children started with `spawn_tied`, and the embedded nats-server, end when the process that
started them is SIGKILLed; a child started from a thread that ended lives on meanwhile."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kz_testing.procs import Proc, descendants, survivors, wait_gone

pytestmark = pytest.mark.integration

GONE_WITHIN_S = 20.0  # a bound on the wait, not a measured figure


def _parent(script: str, tmp: Path) -> tuple[subprocess.Popen[str], list[Proc]]:
    """A Python process running `script`, which prints one line once its children started;
    with those children."""
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp,
        start_new_session=True,
    )
    assert parent.stdout is not None
    line = parent.stdout.readline()
    assert line.startswith("ready"), line
    return parent, descendants(parent.pid)


def _kill(parent: subprocess.Popen[str]) -> None:
    if parent.poll() is None:
        os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=30)
    if parent.stdout is not None:
        parent.stdout.close()


def test_a_tied_child_outlives_the_thread_that_started_it_and_ends_with_its_process(
    tmp_path: Path,
) -> None:
    """A child started from a worker thread that has ended since still runs; SIGKILL of its
    parent process ends it (PR_SET_PDEATHSIG follows the thread that forked, so a long-lived
    thread forks every tied child)."""
    parent, children = _parent(
        """
        import os, threading, time
        from kz_events.lifeline import spawn_tied
        started = []

        def start():
            started.append((threading.get_native_id(), spawn_tied(["sleep", "600"])))

        worker = threading.Thread(target=start)
        worker.start()
        worker.join()
        tid, child = started[0]
        while os.path.exists(f"/proc/self/task/{tid}"):  # the thread has ended, in the kernel
            time.sleep(0.01)
        print("ready", child.pid, flush=True)
        time.sleep(600)
        """,
        tmp_path,
    )
    try:
        assert [c.command for c in children] == ["sleep 600"]
        assert survivors(children) == children
        _kill(parent)
        assert wait_gone(children, GONE_WITHIN_S) == []
    finally:
        _kill(parent)
        for proc in survivors(children):
            os.kill(proc.pid, signal.SIGKILL)


def test_the_embedded_server_ends_with_the_process_that_started_it(tmp_path: Path) -> None:
    """A SIGKILLed owner of an EmbeddedServer, which ran no cleanup, leaves no nats-server."""
    parent, children = _parent(
        f"""
        import time
        from pathlib import Path
        from kz_events.server import EmbeddedServer
        EmbeddedServer(Path({str(tmp_path / "store")!r}), own_session=True).start()
        print("ready", flush=True)
        time.sleep(600)
        """,
        tmp_path,
    )
    try:
        assert len(children) == 1 and "nats-server" in children[0].command
        _kill(parent)
        assert wait_gone(children, GONE_WITHIN_S) == []
    finally:
        _kill(parent)
        for proc in survivors(children):
            os.kill(proc.pid, signal.SIGKILL)
