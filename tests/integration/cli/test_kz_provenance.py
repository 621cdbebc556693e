"""The CLI path an agent takes without MCP, and provenance end to end: `kz boards`, `kz new`,
`kz submit --agent/--model/...` to a commit whose trailers, detail, index.json entry and list
filters carry who made it; a bad value is refused naming the field and leaves no trace."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kz_events.server import free_port
from kz_package import pack_directory
from kz_testing import KzProcess, kz_argv

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
RMSNORM = REPO / "examples/kernels/cpu/Norm/RMSNorm/fp32/numpy_ref"
BOARD = "cpu/Norm/RMSNorm/fp32"


def kz(*args: str, url: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "kz_cli.main", *args, "--server", url, "--json"],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, (done.stdout, done.stderr)
    return done.returncode, json.loads(lines[0])


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`kz up --no-demo --backend stub` with the RMSNorm example submitted as its board's first."""
    tmp = tmp_path_factory.mktemp("prov-stack")
    port = free_port()
    argv = kz_argv("up", "--no-demo", "--backend", "stub", "--port", str(port),
                   "--data-dir", str(tmp / "kz"))  # fmt: skip
    up = KzProcess("kz up", argv, dict(os.environ), tmp / "up.log", cwd=tmp).start()
    url = f"http://127.0.0.1:{port}"
    try:
        up.wait_healthy(url, timeout_s=60)
        code, doc = kz("submit", str(RMSNORM), "--submitter", "examples", url=url)
        assert code == 0 and doc["status"] == "committed", doc
        yield url
    finally:
        up.signal(signal.SIGINT)
        up.wait_or_kill(30)


def test_from_the_boards_to_a_commit_that_says_who_made_it(stack: str, tmp_path: Path) -> None:
    """Four commands: boards, new, (edit), submit with provenance; the commit, the detail,
    index.json and the filters all carry it."""
    code, boards = kz("boards", url=stack)
    assert code == 0 and BOARD in [b["board"] for b in boards["boards"]]
    target = tmp_path / "mine"
    code, new = kz("new", f"{BOARD}/cli_agent", str(target), "--submitter", "bot", url=stack)
    assert code == 0 and new["judge_kernel"] == f"{BOARD}/numpy_ref"
    assert (target / "src/rmsnorm.py").read_bytes() == (RMSNORM / "src/rmsnorm.py").read_bytes()
    made = ["--agent", "cli-agent", "--model", "model-c", "--tokens", "42", "--cost-usd", "0.5",
            "--transcript-url", "https://example.org/run/1"]  # fmt: skip
    code, done = kz("submit", str(target), "--submitter", "bot", *made, url=stack)
    assert code == 0 and done["status"] == "committed"
    assert done["provenance"] == {
        "agent": "cli-agent",
        "model": "model-c",
        "tokens": 42,
        "cost_usd": 0.5,
        "transcript_url": "https://example.org/run/1",
    }

    commit = httpx.get(f"{stack}/api/commits/{done['commits']['source']}").json()
    assert commit["trailers"]["Kz-Model"] == "model-c"
    assert commit["trailers"]["Kz-Agent"] == "cli-agent"
    assert commit["trailers"]["Kz-Tokens"] == "42"
    assert commit["trailers"]["Kz-Cost-USD"] == "0.5"
    assert commit["trailers"]["Kz-Transcript"] == "https://example.org/run/1"
    first = httpx.get(f"{stack}/api/submissions", params={"submitter_id": "examples"}).json()
    first_commit = first["items"][0]["commits"]["source"]
    plain = httpx.get(f"{stack}/api/commits/{first_commit}").json()["trailers"]
    assert not any(k in plain for k in ("Kz-Model", "Kz-Agent"))  # none given, none written

    index = httpx.get(f"{stack}/api/index.json").json()
    entry = next(k for k in index["kernels"] if k["id"] == f"{BOARD}/cli_agent")
    assert entry["current"]["provenance"]["model"] == "model-c"
    by_model = httpx.get(f"{stack}/api/kernels", params={"model": "model-c"}).json()
    assert [k["id"] for k in by_model["items"]] == [f"{BOARD}/cli_agent"]
    by_agent = httpx.get(f"{stack}/api/submissions", params={"agent": "cli-agent"}).json()
    assert [s["submission_id"] for s in by_agent["items"]] == [done["submission_id"]]
    code, ranked = kz("boards", BOARD, "--model", "model-c", url=stack)
    assert code == 0 and [r["kernel_id"] for r in ranked["ranking"]] == [f"{BOARD}/cli_agent"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("tokens", "-1"), ("transcript_url", "javascript:alert(1)"), ("model", "x" * 101)],
)
def test_bad_provenance_is_refused_by_the_api_and_leaves_no_trace(
    stack: str, field: str, value: str, tmp_path: Path
) -> None:
    """The form field is refused with invalid_provenance naming it; no submission is made."""
    before = httpx.get(f"{stack}/api/submissions").json()["total"]
    tarball = tmp_path / "p.tar.gz"
    pack_directory(RMSNORM, tarball)
    answer = httpx.post(
        f"{stack}/api/submissions",
        headers={"X-Submitter-Id": "eve"},
        data={"kernel_id": f"{BOARD}/numpy_ref", field: value},
        files={"package": ("p.tar.gz", tarball.read_bytes(), "application/gzip")},
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "invalid_provenance" and error["details"]["field"] == field
    assert error["message"].startswith(f"{field}: expected ")
    assert httpx.get(f"{stack}/api/submissions").json()["total"] == before


def test_kz_submit_refuses_bad_provenance_before_sending(stack: str) -> None:
    """Checked locally: exit 2, the field named, nothing submitted."""
    before = httpx.get(f"{stack}/api/submissions").json()["total"]
    code, doc = kz("submit", str(RMSNORM), "--cost-usd", "cheap", url=stack)
    assert code == 2 and doc["error"]["code"] == "invalid_provenance"
    assert doc["error"]["details"]["field"] == "cost_usd"
    assert httpx.get(f"{stack}/api/submissions").json()["total"] == before
