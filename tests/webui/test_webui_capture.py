"""A headless capture of any page settles on its data: `chromium --headless
--virtual-time-budget=5000 --dump-dom URL`, as a screenshot tool, a crawler or a link preview
runs it, returns the rendered page (the live feed's stream is held by a worker, the page's own
requests all end), not "Loading…" and not never."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from kz_cli.demo import EXAMPLES

from .conftest import CHROMIUM
from .stack import pack_variant, submit_package

pytestmark = pytest.mark.webui

CAPTURE_TIMEOUT_S = 60  # a page that never settles fails here instead of hanging the suite
SOFTMAX_REF = "cpu/Softmax/row/fp32/numpy_ref"
QUEUED = "sm90/Norm/RMSNorm/bf16/triton_rowwise"  # no sm90 runner: it stays queued


def _capture(url: str) -> str:
    chromium = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if chromium is None:
        pytest.skip(f"the capture test needs Chromium at {CHROMIUM} (apt-get install chromium)")
    argv = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--virtual-time-budget=5000", "--dump-dom", url,
    ]  # fmt: skip
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=CAPTURE_TIMEOUT_S, check=True
    )
    return done.stdout


@pytest.fixture(scope="module")
def queued_submission(webui_base_url: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A submission no runner takes (its arch has none), cancelled after the module."""
    folder = tmp_path_factory.mktemp("queued")
    shutil.copytree(EXAMPLES / QUEUED, folder / "pkg")
    tarball = pack_variant(folder / "pkg", folder / "package.tar.gz")
    with httpx.Client(base_url=webui_base_url, timeout=30) as client:
        sid = submit_package(client, tarball, QUEUED, "capture", "waits for a runner")
        yield sid
        client.post(f"/api/submissions/{sid}/cancel", headers={"X-Submitter-Id": "capture"})


def test_a_capture_of_the_boards_shows_the_ranked_kernels(webui_base_url: str) -> None:
    """The overview's capture holds every board's kernels, no loading state."""
    dom = _capture(f"{webui_base_url}/webui/#/")
    assert dom.count('class="kname"') >= 8
    assert "Loading" not in dom and "numpy_vectorized" in dom


def test_a_capture_of_a_kernel_page_shows_its_scoreboard(webui_base_url: str) -> None:
    """The kernel page's capture holds its stats, chart and workloads."""
    dom = _capture(f"{webui_base_url}/webui/#/kernel/{SOFTMAX_REF}")
    assert "<h2>Workloads</h2>" in dom and 'class="stat-value"' in dom
    assert "<circle" in dom and "Loading" not in dom


def test_a_capture_of_a_finished_and_of_a_queued_submission(
    webui_base_url: str, api_get: Any, queued_submission: str
) -> None:
    """A finished submission's capture shows its status and log; a queued one, followed while
    it waits, shows its status too: following does not hold the capture."""
    done = next(
        s for s in api_get(f"/api/submissions?kernel_id={SOFTMAX_REF}")["items"]
        if s["status"] == "committed"
    )  # fmt: skip
    dom = _capture(f"{webui_base_url}/webui/#/submission/{done['submission_id']}")
    assert 'id="sub-status"' in dom and ">committed<" in dom and 'class="log"' in dom
    queued = _capture(f"{webui_base_url}/webui/#/submission/{queued_submission}")
    assert ">queued<" in queued and "following live" in queued and "Loading" not in queued


def test_a_capture_of_the_activity_page_shows_queue_runners_and_submissions(
    webui_base_url: str,
) -> None:
    """The activity page's capture holds the queue, the runners and the latest submissions."""
    dom = _capture(f"{webui_base_url}/webui/#/activity")
    assert "cpu (this host)" in dom and 'class="queue"' in dom
    assert dom.count("#/submission/") >= 8 and "Loading" not in dom
