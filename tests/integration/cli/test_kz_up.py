"""`kz up` stopped with Ctrl-C and started again, as a person at a terminal does it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from kz_cli.cmd_up import RUNNER_ID_FILE
from kz_events.server import free_port
from kz_testing import KzProcess, kz_argv

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
RMSNORM = REPO / "examples/kernels/cpu/Norm/RMSNorm/fp32/numpy_ref"


def start_up(tmp_path: Path, port: int, log: Path) -> KzProcess:
    argv = kz_argv(
        "up",
        "--no-demo",
        "--backend",
        "stub",
        "--port",
        str(port),
        "--data-dir",
        str(tmp_path / "kz"),
    )
    up = KzProcess("kz up", argv, dict(os.environ), log, cwd=tmp_path).start()
    up.wait_healthy(f"http://127.0.0.1:{port}", timeout_s=60)
    return up


def _registered(url: str, timeout_s: float = 60.0) -> list[dict[str, str]]:
    """`GET /api/runners` once no runner there is deregistered (the runner registers beside
    the API, so a restart may answer before its registration is folded)."""
    deadline = time.monotonic() + timeout_s
    while True:
        runners: list[dict[str, str]] = httpx.get(f"{url}/api/runners").json()["items"]
        if runners and all(r["state"] != "deregistered" for r in runners):
            return runners
        assert time.monotonic() < deadline, runners
        time.sleep(0.1)


def ctrl_c(up: KzProcess) -> int | None:
    """What a terminal does on Ctrl-C: SIGINT to the whole foreground process group."""
    up.signal(signal.SIGINT)  # KzProcess runs in its own group and signals all of it
    up.wait_or_kill(30)
    return up.returncode


def test_ctrl_c_is_quiet_and_a_restart_shows_the_old_runner_gone(tmp_path: Path) -> None:
    """`kz submit` next to it finds its API; Ctrl-C stops kz up without NATS warnings (the
    embedded server is in its own group and stopped last, so the runner deregisters); the
    restart says nothing of the commit the log announced already, and is the same runner
    again (one id per data dir), counted once."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    first_log, second_log = tmp_path / "up1.log", tmp_path / "up2.log"
    up = start_up(tmp_path, port, first_log)
    try:
        env = {**os.environ, "KZ_DATA_DIR": str(tmp_path / "kz")}
        env.pop("KZ_SERVER_URL", None)
        done = subprocess.run(  # no --server: kz up wrote its address into the data dir
            [sys.executable, "-m", "kz_cli.main", "submit", str(RMSNORM), "--submitter", "alice"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        code = ctrl_c(up)
    first = first_log.read_text()
    assert code == 0, first
    warnings = [line for line in first.splitlines() if "WARNING" in line or "nats: " in line]
    assert warnings == []
    assert "httpx" not in first
    assert first.count("git projector: committed") == 1
    assert not (tmp_path / "kz" / "api.url").exists()

    up = start_up(tmp_path, port, second_log)
    try:
        runners = _registered(url)
        health = httpx.get(f"{url}/api/health").json()
    finally:
        ctrl_c(up)
    second = second_log.read_text()
    assert "re-announced" not in second
    assert "git projector: committed" not in second
    runner_id = (tmp_path / "kz" / RUNNER_ID_FILE).read_text().strip()
    assert [(r["runner_id"], r["state"]) for r in runners] == [(runner_id, "idle")]
    assert health["runners"] == 1


def test_a_closed_terminal_stops_kz_up_and_its_nats_server(tmp_path: Path) -> None:
    """SIGHUP (the terminal went away) stops kz up as Ctrl-C does: the embedded server, in
    its own group so the hangup does not reach it, is stopped and its URL file removed."""
    up = start_up(tmp_path, free_port(), tmp_path / "up.log")
    url_file = tmp_path / "kz" / "nats.url"
    assert url_file.is_file()
    up.signal(signal.SIGHUP)
    up.wait_or_kill(30)
    assert up.returncode == 0, (tmp_path / "up.log").read_text()
    assert not url_file.exists()
