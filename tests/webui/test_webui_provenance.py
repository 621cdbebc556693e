"""Provenance in the browser: the board's model and agent filters, and who made a result on
the submission page (the transcript as a link), against its own `kz up --backend stub`."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kz_events.server import free_port
from kz_testing import KzProcess, kz_argv

from .stack import pack_variant, wait_terminal

pytestmark = pytest.mark.webui

REPO = Path(__file__).resolve().parents[2]
RMSNORM = REPO / "examples/kernels/cpu/Norm/RMSNorm/fp32/numpy_ref"
BOARD = "cpu/Norm/RMSNorm/fp32"
MADE = {"agent": "ui-agent", "model": "ui-model", "tokens": "900", "cost_usd": "0.2",
        "transcript_url": "https://example.org/transcripts/9"}  # fmt: skip


def _submit(client: httpx.Client, tmp: Path, name: str, value: float, **form: str) -> str:
    folder = tmp / name
    shutil.copytree(RMSNORM, folder)
    kid = f"{BOARD}/{name}"
    desc = folder / ".kernel_package/desc.yaml"
    desc.write_text(desc.read_text().replace(f"{BOARD}/numpy_ref", kid))
    (folder / ".kernel_package/bench_result.yaml").write_text(
        f"schema_version: 1\nkernel_id: {kid}\n"
    )
    tarball = pack_variant(folder, tmp / f"{name}.tar.gz", {"verdict": "accept", "value": value})
    answer = client.post(
        "/api/submissions",
        headers={"X-Submitter-Id": "ui-tester"},
        data={"kernel_id": kid, **form},
        files={"package": ("p.tar.gz", tarball.read_bytes(), "application/gzip")},
    )
    assert answer.status_code == 202, answer.text
    return str(answer.json()["submission_id"])


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """Two kernels on the RMSNorm board, one with provenance; yields (URL, its submission)."""
    tmp = tmp_path_factory.mktemp("webui-prov")
    port = free_port()
    argv = kz_argv("up", "--no-demo", "--backend", "stub", "--port", str(port),
                   "--data-dir", str(tmp / "kz"))  # fmt: skip
    up = KzProcess("kz up", argv, dict(os.environ), tmp / "up.log", cwd=tmp).start()
    url = f"http://127.0.0.1:{port}"
    try:
        up.wait_healthy(url, timeout_s=60)
        with httpx.Client(base_url=url, timeout=30) as client:
            plain = _submit(client, tmp, "plain", 300.0)
            wait_terminal(client, [plain])
            made = _submit(client, tmp, "made", 200.0, **MADE)
            wait_terminal(client, [made])
        yield url, made
    finally:
        up.signal(signal.SIGINT)
        up.wait_or_kill(30)


def test_the_board_filters_by_model_and_agent(stack: tuple[str, str], new_page: Any) -> None:
    """The model filter lists the model; picking it leaves the kernel that model made."""
    url, _ = stack
    page = new_page()
    page.goto(f"{url}/webui/#/board/{BOARD}")
    page.wait_for_selector("table.board tbody tr")
    assert page.locator("table.board tbody tr").count() == 2
    assert "ui-agent · ui-model" in page.locator("table.board").inner_text()
    page.select_option("#f-model", "ui-model")
    page.wait_for_function("document.querySelectorAll('table.board tbody tr').length === 1")
    assert "made" in page.locator("table.board tbody tr").inner_text()
    assert "model=ui-model" in page.url
    page.select_option("#f-agent", "ui-agent")
    assert page.locator("table.board tbody tr").count() == 1


def test_the_submission_page_says_who_made_it(stack: tuple[str, str], new_page: Any) -> None:
    """*made by*: agent, model, tokens, cost and the transcript as an https link."""
    url, made = stack
    page = new_page()
    page.goto(f"{url}/webui/#/submission/{made}")
    page.wait_for_selector(".provenance")
    text = page.locator(".provenance").inner_text()
    for part in ("ui-agent", "ui-model", "tokens 900", "cost $0.2000", "transcript"):
        assert part in text
    link = page.locator(".provenance a")
    assert link.get_attribute("href") == MADE["transcript_url"]
    assert "noopener" in (link.get_attribute("rel") or "")
