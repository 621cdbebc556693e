"""Browser tests of what a new user meets first, against the real stack: one status per run,
a rejected run set against the incumbent workload by workload, a new kernel's page before any
result is accepted, commit ids as links, the kernel page's workloads, a narrow boards table."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from kz_cli.demo import EXAMPLES

from .stack import pack_variant, submit_package, wait_terminal

pytestmark = pytest.mark.webui

SOFTMAX = "cpu/Softmax/row/fp32"


def _new_kernel(tmp_path: Path, name: str, stub: dict[str, Any], metric: str | None = None) -> Path:
    """A package for a kernel nobody sent before, on the softmax board, packed with the stub's
    script; `metric` replaces desc.yaml's metric block."""
    pkg = tmp_path / "pkg"
    shutil.copytree(EXAMPLES / SOFTMAX / "numpy_ref", pkg)
    for file in ("desc.yaml", "bench_result.yaml"):
        path = pkg / ".kernel_package" / file
        path.write_text(path.read_text().replace(f"{SOFTMAX}/numpy_ref", f"{SOFTMAX}/{name}"))
    if metric is not None:
        desc = pkg / ".kernel_package" / "desc.yaml"
        text = re.sub(r"metric:\n(  .*\n)+", metric, desc.read_text())
        desc.write_text(text)
    return pack_variant(pkg, tmp_path / "package.tar.gz", stub)


def _send(base: str, tarball: Path, kernel_id: str, message: str) -> str:
    with httpx.Client(base_url=base, timeout=30) as client:
        sid = submit_package(client, tarball, kernel_id, "newcomer", message)
        wait_terminal(client, [sid])
    return sid


def test_a_refused_first_submission_shows_one_status_and_its_kernel_has_a_page(
    page: Any, webui_base_url: str, tmp_path: Path
) -> None:
    """A new kernel's first run whose document the referee refuses (the judge said rejected,
    its metric does not fit the kernel's) reads `failed` in the header and the result box
    alike; its kernel link opens a page for the kernel, with the attempt, not unknown_kernel."""
    kernel_id = f"{SOFTMAX}/first_try"
    metric = "metric:\n  name: throughput\n  unit: GB/s\n  better: higher\n"
    tarball = _new_kernel(tmp_path, "first_try", {"verdict": "reject", "value": 80.0}, metric)
    sid = _send(webui_base_url, tarball, kernel_id, "my first kernel")
    page.goto(f"{webui_base_url}/webui/#/submission/{sid}")
    page.wait_for_selector("section.card:has(h2:text-is('Result')) .verdict")
    assert page.locator("#sub-status").inner_text().strip() == "failed"
    result = page.locator("section.card:has(h2:text-is('Result'))")
    assert result.locator(".verdict .badge").all_inner_texts() == ["failed"]
    assert page.locator("main .badge", has_text="rejected").count() == 0
    page.locator("dl.kv a", has_text=kernel_id).click()
    page.wait_for_selector(".pending-kernel")
    assert "Not on main yet" in page.locator(".pending-kernel").inner_text()
    attempts = page.locator("section.card:has(h2:has-text('Attempts')) tbody tr")
    assert attempts.count() == 1
    assert "failed" in attempts.inner_text() and "invalid_result" in attempts.inner_text()
    assert page.locator(".stats").inner_text().count("no accepted result yet") == 1


def test_a_rejected_run_shows_each_workload_against_the_incumbent(
    page: Any, webui_base_url: str, tmp_path: Path
) -> None:
    """A run the judge measured beside the incumbent and rejected shows, per workload, its
    value, the incumbent's, the speed-up and its interval, and the overall outcome."""
    kernel_id = f"{SOFTMAX}/slow_try"
    stub = {"verdict": "reject", "value": 250.0, "incumbent": 125.0}
    sid = _send(webui_base_url, _new_kernel(tmp_path, "slow_try", stub), kernel_id, "slower")
    page.goto(f"{webui_base_url}/webui/#/submission/{sid}")
    page.wait_for_selector(".comparison table.compare tbody tr")
    assert page.locator("#sub-status").inner_text().strip() == "rejected"
    box = page.locator(".comparison")
    assert "Side by side with the incumbent" in box.inner_text()
    assert "0.50\u00d7" in box.locator("p").inner_text() and "not faster" in box.inner_text()
    cells = box.locator("tbody tr").first.locator("td").all_inner_texts()
    assert cells[:4] == ["stub", "250", "125", "0.50\u00d7"]
    assert re.fullmatch("0.(49|50)\u20130.5[01]\u00d7", cells[4])  # settled: within 1 %


def test_commit_ids_link_to_the_commit_page(page: Any, webui_base_url: str, api_get: Any) -> None:
    """A committed submission's commit ids are links; the commit page names its submission,
    kernel, parent and the paths it changed."""
    done = next(
        s for s in api_get("/api/submissions?status=committed&limit=50")["items"] if s["commits"]
    )
    page.goto(f"{webui_base_url}/webui/#/submission/{done['submission_id']}")
    link = page.locator("dl.kv a.commit-link").first
    link.wait_for()
    assert link.inner_text() == done["commits"]["source"]
    link.click()
    page.wait_for_selector("#commit-id")
    assert page.locator("#commit-id").inner_text() == done["commits"]["source"]
    details = page.locator("section.card:has(h2:text-is('Details'))").inner_text()
    assert done["submission_id"] in details and done["kernel_id"] in details
    assert page.locator("ul.changes li").count() >= 1
    page.goto(f"{webui_base_url}/webui/#/kernel/{done['kernel_id']}")
    page.wait_for_selector("ul.commits a.commit-link")
    attempts = page.locator("section.card:has(h2:has-text('Attempts')) a.commit-link")
    assert attempts.count() >= 1


def test_the_kernel_page_shows_each_workload_statistic_once(page: Any, webui_base_url: str) -> None:
    """The workloads table has one best column (the best result's median), no second median."""
    page.goto(f"{webui_base_url}/webui/#/kernel/{SOFTMAX}/numpy_ref")
    table = page.locator("section.card:has(h2:text-is('Workloads')) thead")
    table.wait_for()
    headers = [t.strip().lower() for t in table.locator("th").all_inner_texts()]
    assert headers == [
        "workload", "params", "best (us)", "p10", "p90", "stdev", "samples", "current (us)",
    ]  # fmt: skip


@pytest.mark.parametrize("width", [320, 400, 480, 560, 700, 900])
def test_the_boards_table_keeps_every_shown_column_whole(
    new_page: Any, webui_base_url: str, width: int
) -> None:
    """At phone and tablet widths no board table is wider than its card: low-priority columns
    hide instead of the last one being cut."""
    page = new_page(viewport={"width": width, "height": 800})
    page.goto(f"{webui_base_url}/webui/#/")
    page.wait_for_selector("a.kname")
    cut = page.evaluate(
        "[...document.querySelectorAll('.table-wrap')]"
        ".filter((t) => t.scrollWidth > t.clientWidth).length"
    )
    assert cut == 0
    visible = page.locator("table.board").first.locator("thead th:visible").all_inner_texts()
    assert any("SPEED-UP" in t.upper() for t in visible)
