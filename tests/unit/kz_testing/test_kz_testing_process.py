"""`KzProcess` and `wait_healthy`: a health wait that fails early with the log's tail, and a
stop that ends the process whether or not it obeys SIGTERM.

Marked `integration`: each test starts a short-lived Python process.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from kz_events.server import free_port
from kz_testing import KzProcess, ProcessError, kz_argv, stop_all

pytestmark = pytest.mark.integration


def python(tmp_path: Path, name: str, *argv: str) -> KzProcess:
    """`python <argv>` run in `tmp_path`, logging to `<name>.log` there."""
    log = tmp_path / f"{name}.log"
    return KzProcess(name, [sys.executable, *argv], dict(os.environ), log, cwd=tmp_path)


def wait_for_line(proc: KzProcess, line: str) -> None:
    """Wait until the log holds `line` as a whole line (the start header quotes the argv)."""
    deadline = time.monotonic() + 30
    while line not in proc.tail().splitlines():
        assert time.monotonic() < deadline, proc.tail()
        time.sleep(0.05)


def test_an_early_exit_is_reported_with_the_log_tail(tmp_path: Path) -> None:
    """A process that dies before answering fails the wait with its exit code and last output."""
    proc = python(tmp_path, "boom", "-c", "import sys; print('boom'); sys.exit(3)").start()
    with pytest.raises(ProcessError, match=r"boom exited \(3\)") as failure:
        proc.wait_healthy(f"http://127.0.0.1:{free_port()}", timeout_s=30)
    assert "\nboom" in str(failure.value)


def test_a_healthy_server_is_waited_for_and_stopped(tmp_path: Path) -> None:
    """A server answering 200 on /api/health ends the wait; stop ends it with SIGTERM."""
    (tmp_path / "site" / "api").mkdir(parents=True)
    (tmp_path / "site" / "api" / "health").write_text("ok")
    port = free_port()
    args = ["-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", "site"]
    with python(tmp_path, "web", *args) as proc:
        proc.wait_healthy(f"http://127.0.0.1:{port}", timeout_s=30)
        assert proc.alive and proc.starts == 1
    assert not proc.alive and proc.returncode == -signal.SIGTERM


def test_a_silent_process_fails_the_wait_at_its_deadline(tmp_path: Path) -> None:
    """A process that runs but never serves fails the wait once the deadline passes."""
    proc = python(tmp_path, "mute", "-c", "import time; time.sleep(60)").start()
    try:
        with pytest.raises(ProcessError, match="did not answer 200 in"):
            proc.wait_healthy(f"http://127.0.0.1:{free_port()}", timeout_s=0.5)
    finally:
        assert proc.stop() == -signal.SIGTERM


def test_stop_kills_what_ignores_sigterm(tmp_path: Path) -> None:
    """A process that ignores SIGTERM is SIGKILLed after the timeout; stop_all does the same."""
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    code += "print('ready', flush=True); time.sleep(60)"
    stubborn = [python(tmp_path, f"stubborn-{i}", "-c", code).start() for i in range(2)]
    for proc in stubborn:
        wait_for_line(proc, "ready")
    assert stubborn[0].stop(timeout_s=0.5) is None
    stop_all(stubborn[1:], timeout_s=0.5)
    assert [proc.returncode for proc in stubborn] == [-signal.SIGKILL] * 2


def test_kz_argv_runs_kz_with_this_interpreter() -> None:
    """`kz_argv` needs no `kz` on PATH: it runs the CLI module with the current Python."""
    assert kz_argv("api", "--port", "1") == [
        sys.executable,
        "-m",
        "kz_cli.main",
        "api",
        "--port",
        "1",
    ]
