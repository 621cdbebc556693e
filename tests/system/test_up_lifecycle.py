"""`kz up` leaves nothing behind, however it ends: SIGINT and SIGTERM stop it cleanly, SIGKILL
(which runs no cleanup) still ends its nats-server, and started again on the same data dir it
is one runner in `/api/health`, not two. A busy port is one line and exit 2."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

import httpx
import pytest
from system_stack import wait_for

from kz_events.server import free_port
from kz_testing import KzProcess, kz_argv
from kz_testing.procs import descendants, naming, wait_gone

pytestmark = pytest.mark.system

GONE_WITHIN_S = 30.0  # a bound on the wait, not a measured figure


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KZ_")}
    env["KZ_HEARTBEAT_S"] = "0.5"
    return env


def _up(root: Path, port: int) -> KzProcess:
    argv = kz_argv(
        "up", "--backend", "stub", "--no-demo", "--port", str(port), "--data-dir", str(root)
    )
    return KzProcess("kz up", argv, _env(), root.parent / f"{root.name}.log").start()


def _health(port: int) -> dict[str, object]:
    answer = httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=10).json()
    assert isinstance(answer, dict)
    return answer


def _wait_runner(up: KzProcess, port: int) -> None:
    """Healthy, with its runner registered (the runner starts beside the API)."""
    up.wait_healthy(f"http://127.0.0.1:{port}", timeout_s=90)
    wait_for("a runner in /api/health", lambda: _health(port).get("runners"), 90)


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name
)
def test_nothing_outlives_kz_up(tmp_path: Path, sig: signal.Signals) -> None:
    """Whatever signal ends `kz up` (sent to it alone, not its group), no process it started
    survives it: not its nats-server, which runs in a session of its own. After a SIGKILL,
    `kz up` on the same data dir counts one runner, not the killed one beside it."""
    root, port = tmp_path / "up", free_port()
    up = _up(root, port)
    try:
        _wait_runner(up, port)
        started = descendants(up.pid or 0)
        assert any("nats-server" in p.command for p in started), started

        os.kill(up.pid or 0, sig)
        up.wait_or_kill(GONE_WITHIN_S)

        assert [str(p) for p in wait_gone(started, GONE_WITHIN_S)] == []
        assert naming(str(tmp_path)) == []
        if sig is signal.SIGKILL:
            again = _up(root, port)
            try:
                _wait_runner(again, port)
                assert _health(port)["runners"] == 1
            finally:
                assert again.stop() == 0, again.tail()
            assert naming(str(tmp_path)) == []
        else:
            assert up.returncode == 0, up.tail()
    finally:
        up.kill()


def test_a_busy_port_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """`kz up` on a port something listens on says so in one line, exits 2 and starts
    nothing: no nats-server, no data dir."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        root = tmp_path / "up"
        done = subprocess.run(
            kz_argv("up", "--no-demo", "--port", str(port), "--data-dir", str(root)),
            env=_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr == f"kz: port {port} is in use; use --port or KZ_PORT\n"
    assert done.stdout == ""
    assert not root.exists()
    assert naming(str(tmp_path)) == []
