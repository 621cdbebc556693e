"""`kz up` and `kz submit` as a user runs them: real processes, real HTTP, real git."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kz_events.server import free_port
from kz_package import pack_directory
from kz_testing import KzProcess, kz_argv

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
RMSNORM = REPO / "examples/kernels/cpu/Norm/RMSNorm/fp32/numpy_ref"
KID = "cpu/Norm/RMSNorm/fp32/numpy_ref"


def kz(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kz_cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or dict(os.environ),
    )


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[str]:
    """`kz up --no-demo --backend stub` on a free port; yields its base URL."""
    port = free_port()
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
    up = KzProcess("kz up", argv, dict(os.environ), tmp_path / "up.log", cwd=tmp_path).start()
    url = f"http://127.0.0.1:{port}"
    try:
        up.wait_healthy(url, timeout_s=60)
        yield url
    finally:
        up.signal(signal.SIGINT)  # what Ctrl-C sends: kz up's own way down
        up.wait_or_kill(30)


def test_commands_next_to_kz_up_find_its_nats_server(stack: str, tmp_path: Path) -> None:
    """`kz up` writes its embedded server's URL into its data dir; `kz events tail` run with
    the same data dir needs no --nats-url (the port changes every start)."""
    env = {**os.environ, "KZ_DATA_DIR": str(tmp_path / "kz")}
    env.pop("KZ_NATS_URL", None)
    tail = kz("events", "tail", "--from-seq", "1", "--count", "1", env=env, timeout=60)
    assert tail.returncode == 0, tail.stderr
    assert tail.stdout.split()[0] == "1"  # the first event of the log, with its sequence
    assert "following the event log from seq 1" in tail.stderr

    elsewhere = {**env, "KZ_DATA_DIR": str(tmp_path / "nothing-here")}
    lost = kz("events", "tail", "--count", "1", env=elsewhere)
    assert lost.returncode != 0
    assert "KZ_NATS_URL" in lost.stderr and "nats.url" in lost.stderr


def test_kz_submit_follows_a_package_to_its_commits(stack: str) -> None:
    """`kz submit --json` of a valid package exits 0 with the committed status and both commits."""
    done = kz(
        "submit",
        str(RMSNORM),
        "--kernel-id",
        KID,
        "--server",
        stack,
        "--submitter",
        "alice",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout.strip().splitlines()[-1])
    assert status["status"] == "committed"
    assert len(status["commits"]["source"]) == 40 and len(status["commits"]["bench_result"]) == 40


def test_a_broken_package_gets_the_same_lines_locally_and_from_the_server(
    stack: str, tmp_path: Path
) -> None:
    """The problems `kz submit` prints for a broken package are the server's, word for word."""
    broken = tmp_path / "broken"
    shutil.copytree(RMSNORM, broken)
    desc = broken / ".kernel_package" / "desc.yaml"
    desc.write_text(desc.read_text().replace("better: lower", "better: faster"))
    local = kz("submit", str(broken), "--kernel-id", KID, "--server", stack, "--submitter", "bob")
    assert local.returncode == 2
    local_lines = [line.strip() for line in local.stderr.splitlines()[1:]]
    tarball = tmp_path / "broken.tar.gz"
    pack_directory(broken, tarball)
    answer = httpx.post(
        f"{stack}/api/submissions",
        headers={"X-Submitter-Id": "bob"},
        data={"kernel_id": KID, "submitter_id": "bob"},
        files={"package": ("p.tar.gz", tarball.read_bytes(), "application/gzip")},
    )
    assert answer.status_code == 400
    problems = answer.json()["error"]["details"]["problems"]
    server_lines = [f"{p['path']}: {p['field']}: {p['message']}" for p in problems]
    assert local_lines == server_lines
    assert any("metric.better" in line for line in local_lines)


def test_a_crashing_candidate_reads_the_same_in_kz_submit_the_api_and_the_log(
    stack: str, tmp_path: Path
) -> None:
    """A candidate that raised is `rejected` with its own error, in the same words in what
    `kz submit` prints, the status the API answers, and `kz status`; the runner's log states no
    verdict of its own (the regression: the log said rejected where the status said failed)."""
    package = tmp_path / "crashing"
    shutil.copytree(RMSNORM, package)
    (package / "src" / "stub.json").write_text(json.dumps({"value": 12.0, "crash": "call"}))
    done = kz("submit", str(package), "--kernel-id", KID, "--server", stack, "--submitter", "eve")
    assert done.returncode == 1, done.stdout + done.stderr
    words = "the candidate failed in a call: ZeroDivisionError: division by zero"
    assert f"  rejected: {words}\n" in done.stdout
    sid = done.stdout.split()[1]  # "submitted <id> for <kernel>"
    status = httpx.get(
        f"{stack}/api/submissions/{sid}/status", headers={"X-Submitter-Id": "eve"}
    ).json()
    assert status["status"] == "rejected"
    assert status["error"] == {"code": "candidate_error", "message": words}
    shown = kz("status", sid, "--server", stack, "--submitter", "eve")
    assert shown.stdout.startswith(f"rejected: {words}\n")
    log = httpx.get(f"{stack}/api/submissions/{sid}/logs", headers={"X-Submitter-Id": "eve"}).text
    assert "result sent to the referee, which gives the verdict" in log
    assert "== rejected:" not in log
