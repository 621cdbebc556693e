"""Browser tests of the board of speed-ups against the real stack: a result scored side by side
against the board's pinned reference shows its ratio and interval on the board, its interval on
the kernel page's chart and the reference beside each workload on its submission page; the
activity page takes runners' liveness from /api/runners alone."""

from __future__ import annotations

import json
import re
import shutil
from typing import Any

import httpx
import pytest

from kz_cli.demo import EXAMPLES

from .stack import pack_variant, submit_package, wait_terminal

pytestmark = pytest.mark.webui

GEMM = "cpu/GEMM/dense/fp32"
SCORED = f"{GEMM}/scored_tile"


@pytest.fixture(scope="module")
def scored(webui_base_url: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A new kernel on the GEMM board whose judge measured the pinned reference beside it
    (stub: 100 us against the reference's 1840 us, a speed-up of 18.4 with a settled interval;
    a floor of 40 us at the stub's ceilings)."""
    folder = tmp_path_factory.mktemp("scored")
    pkg = folder / "pkg"
    shutil.copytree(EXAMPLES / GEMM / "numpy_ref", pkg)
    for file in ("desc.yaml", "bench_result.yaml"):
        path = pkg / ".kernel_package" / file
        path.write_text(path.read_text().replace(f"{GEMM}/numpy_ref", SCORED))
    stub = {"verdict": "accept", "value": 100.0, "reference": 1840.0, "floor": 40.0}
    tarball = pack_variant(pkg, folder / "package.tar.gz", stub)
    with httpx.Client(base_url=webui_base_url, timeout=30) as client:
        sid = submit_package(client, tarball, SCORED, "ada", "tiled, scored side by side")
        wait_terminal(client, [sid])
        for _ in range(100):  # the index folds the commit right after
            if any(k["id"] == SCORED for k in client.get("/api/index.json").json()["kernels"]):
                break
    return sid


def test_the_board_shows_the_score_with_its_interval_and_names_its_reference(
    page: Any, webui_base_url: str, api_get: Any, scored: str
) -> None:
    """The board lists the kernels as index.json ranks them, each score as ratio (interval),
    the basis where it is not side by side, the best value with its device, and the heading
    names the pinned reference as a link to its kernel."""
    index = api_get("/api/index.json")
    page.goto(f"{webui_base_url}/webui/#/board/{GEMM}")
    row = page.locator(f"tr[data-kernel='{SCORED}']")
    row.wait_for()
    names = page.locator("table.board a.kname").all_inner_texts()
    assert names == [r["kernel_id"].split("/")[4] for r in index["leaderboards"][GEMM]]
    score = row.locator("td.col-score")
    # the first scored result of its board: run again, so its confirmation mark follows
    assert score.inner_text().strip().startswith("18.40\u00d7 (18.35\u201318.45)")
    assert score.get_attribute("data-basis") == "side_by_side"
    assert "95 % interval" in (score.get_attribute("title") or "")
    assert row.locator("td.value").inner_text() == "100"
    assert row.locator("td.device").inner_text() == "stub"
    reference = page.locator(f"tr[data-kernel='{GEMM}/numpy_ref'] td.col-score")
    assert reference.inner_text().split() == ["1.00\u00d7", "reference"]
    estimate = page.locator(f"tr[data-kernel='{GEMM}/blas_matmul'] td.col-score")
    assert estimate.inner_text().startswith("\u2248 ") and "estimate" in estimate.inner_text()
    head = page.locator(".board-head .reference")
    assert "pinned reference numpy_ref" in head.inner_text()
    head.locator("a.ref-link").click()
    page.wait_for_function(f"location.hash === '#/kernel/{GEMM}/numpy_ref'")


def test_the_kernel_page_draws_the_score_interval_on_its_chart(
    page: Any, webui_base_url: str, scored: str
) -> None:
    """The kernel's history chart draws its scored result's interval as a bar, and the stats
    give the speed-up with its interval, measured side by side over the reference."""
    page.goto(f"{webui_base_url}/webui/#/kernel/{SCORED}")
    page.wait_for_selector("svg.chart circle.pt")
    bar = page.locator("svg.chart g.band-score line").first
    y1, y2 = (float(bar.get_attribute(a) or 0) for a in ("y1", "y2"))
    assert y1 - y2 > 4, "the interval spans some height"
    stats = page.locator(".stats").inner_text()
    assert "18.40\u00d7 (18.35\u201318.45)" in stats
    assert "over numpy_ref \u00b7 measured side by side" in stats
    page.locator("svg.chart circle.pt").first.hover()
    tip = page.locator(".chart-tip")
    tip.wait_for(state="visible")
    assert "speed-up 18.40\u00d7 (18.35\u201318.45) over the reference" in tip.inner_text()


def test_the_submission_page_sets_each_workload_beside_the_reference(
    page: Any, webui_base_url: str, scored: str
) -> None:
    """A new kernel measured against the reference alone: per workload the reference's value,
    the speed-up over it and its interval, and the score over the board's reference."""
    page.goto(f"{webui_base_url}/webui/#/submission/{scored}")
    page.wait_for_selector(".comparison table.compare tbody tr")
    box = page.locator(".comparison")
    assert "Side by side with the board's reference" in box.inner_text()
    heads = box.locator("thead th").all_inner_texts()
    assert [h.lower() for h in heads] == [
        "workload", "this run (us)", "reference (us)", "vs reference", "interval",
    ]  # fmt: skip
    cells = box.locator("tbody tr").first.locator("td").all_inner_texts()
    assert cells == ["stub", "100", "1840", "18.40\u00d7", "18.35\u201318.45\u00d7"]
    assert "score 18.40\u00d7 (interval 18.35\u201318.45\u00d7) over the board's reference" in (
        box.inner_text()
    )


def _runners(items: list[dict[str, Any]]) -> bytes:
    return json.dumps({"items": items}).encode()


def test_runners_liveness_comes_from_the_api_alone(
    page: Any, webui_base_url: str, api_get: Any, page_problems: Any
) -> None:
    """A runner /api/runners says is gone shows as gone whatever index.json lists; when
    /api/runners fails the page says so instead of showing the index's runners as alive."""
    [listed] = api_get("/api/index.json")["runners"]
    gone = {
        "runner_id": listed["id"], "arches": ["cpu"], "device": "cpu (this host)",
        "backend": "stub", "labels": {}, "registered_at": listed["registered_at"],
        "last_heartbeat": "2026-01-01T00:00:00Z", "busy_with": None, "state": "gone",
    }  # fmt: skip
    answer = {"body": _runners([gone]), "status": 200}
    page.route(
        "**/api/runners*",
        lambda route: route.fulfill(
            status=answer["status"], content_type="application/json", body=answer["body"]
        ),
    )
    page.goto(f"{webui_base_url}/webui/#/activity")
    runners = page.locator("section.card:has(h2:text-is('Runners'))")
    runners.locator("tbody tr").first.wait_for()
    row = runners.locator("tbody tr").first.inner_text()
    assert "gone" in row and "idle" not in row and "registered" not in row
    assert "tone-bad" in (runners.locator("tbody .badge").first.get_attribute("class") or "")
    page_problems.allow()  # the 503 below is provoked
    error = {"error": {"code": "log_unavailable", "message": "the log is unreachable"}}
    answer.update(status=503, body=json.dumps(error).encode())
    page.goto(f"{webui_base_url}/webui/#/")
    page.goto(f"{webui_base_url}/webui/#/activity")
    runners.locator(".state-error").wait_for()
    assert runners.locator("tbody tr").count() == 0
    assert re.search("503|log_unavailable", runners.inner_text())


def test_the_submission_page_shows_each_workloads_physical_floor(
    page: Any, webui_base_url: str, scored: str
) -> None:
    """Where the benchmark declares the work, each workload's floor at the measured ceilings
    and how near the median came to it (40 us of 100 us: 40 %), with the ceilings named."""
    page.goto(f"{webui_base_url}/webui/#/submission/{scored}")
    page.wait_for_selector("table.workloads tbody tr")
    table = page.locator("table.workloads")
    heads = [h.lower() for h in table.locator("thead th").all_inner_texts()]
    assert heads[-2:] == ["floor (us)", "of floor"]
    cells = table.locator("tbody tr").first.locator("td").all_inner_texts()
    assert cells[-2:] == ["40 mem", "40 %"]
    ceilings = page.locator(".ceilings").inner_text()
    assert "measured ceilings of stub" in ceilings and "1.00 TB/s" in ceilings
