"""Browser tests of the web UI's views in headless Chromium against the real stack: boards,
filters, sorting, kernel page and chart, submission page, activity, time travel, layouts."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .build_js_fixtures import BOARD
from .indexes import render_accepted

pytestmark = pytest.mark.webui

SOFTMAX_REF = "cpu/Softmax/row/fp32/numpy_ref"
NORM = "cpu/Norm/RMSNorm/fp32"


def _open(page: Any, base: str, route: str) -> None:
    page.goto(f"{base}/webui/{route}")


def _valued_rows(page: Any) -> int:
    return int(
        page.evaluate(
            "[...document.querySelectorAll('table.board td.value')]"
            ".filter(td => td.textContent.trim() !== '—').length"
        )
    )


def test_boards_overview_opens_with_ranked_rows(
    page: Any, webui_base_url: str, api_get: Any, shot: Any
) -> None:
    """The overview shows one card per board, ranked as the projection ranks, with units."""
    index = api_get("/api/index.json")
    _open(page, webui_base_url, "#/")
    page.wait_for_selector("[data-board] table.board tbody tr")
    for group, ranked in index["leaderboards"].items():
        card = page.locator(f"section[data-board='{group}']")
        names = card.locator("a.kname").all_inner_texts()
        assert names[: len(ranked)] == [r["kernel_id"].split("/")[4] for r in ranked]
        assert "best (us)" in card.locator("thead").inner_text().lower()
        reference = index["boards"][group]["reference"]["kernel_id"]
        ref_row = card.locator(f"tr[data-kernel='{reference}']")
        assert ref_row.locator(".badge", has_text="ref").count() == 1
        assert card.locator(".badge:text-is('ref')").count() == 1, "only the pinned reference"
        speedup = next(r for r in ranked if r["kernel_id"] == reference)["score"]["speedup"]
        assert f"{speedup:.2f}\u00d7" in ref_row.locator("td.col-score").inner_text()
        assert card.locator(".board-head a.ref-link").inner_text() == reference.split("/")[4]
    assert str(index["log_seq"]) in page.locator("#foot-index").inner_text().replace(",", "")
    page.wait_for_selector("#live-indicator[data-state='open']")  # opened after the first page
    shot(page, "board.png", full_page=True)


def test_overview_draws_its_boards_before_loading_the_other_views(
    page: Any, webui_base_url: str
) -> None:
    """The first boards wait for index.json and the boards' modules only; the rest loads after."""
    _open(page, webui_base_url, "#/")
    page.wait_for_selector("[data-board] a.kname")
    early = page.evaluate(
        "(() => { const drawn = performance.getEntriesByName('kz:boards-rendered')[0].startTime;"
        " return performance.getEntriesByType('resource').filter((r) => r.startTime < drawn)"
        ".map((r) => new URL(r.name).pathname); })()"
    )
    assert {"/api/index.json", "/webui/js/views/boards.js", "/webui/js/lib/model.js"} <= set(early)
    later = r"/views/(kernel|submission|activity|chart)\.js$"
    assert [path for path in early if re.search(later, path)] == []
    page.wait_for_function(
        "performance.getEntriesByType('resource').some((r) => r.name.endsWith('/views/kernel.js'))"
    )


def test_filter_by_arch_and_search_narrows_the_boards(page: Any, webui_base_url: str) -> None:
    """Choosing an arch keeps only its boards; a search keeps only matching kernels."""
    _open(page, webui_base_url, "#/")
    page.wait_for_selector("[data-board]")
    page.select_option("#f-arch", "sm90")
    page.wait_for_function(
        "[...document.querySelectorAll('[data-board]')]"
        ".every(b => b.dataset.board.startsWith('sm90/'))"
    )
    assert "arch=sm90" in page.url
    page.select_option("#f-arch", "cpu")
    page.wait_for_selector("[data-board='cpu/GEMM/dense/fp32']")
    page.fill("#search", "blas")
    page.wait_for_function("document.querySelectorAll('a.kname').length === 1")
    assert page.locator("a.kname").inner_text() == "blas_matmul"
    assert page.evaluate("document.activeElement.id") == "search"
    assert "q=blas" in page.url


def test_sortable_columns_reorder_and_keep_the_sort_in_the_url(
    page: Any, webui_base_url: str
) -> None:
    """Clicking a column header sorts by it, a second click reverses it."""
    _open(page, webui_base_url, f"#/board/{NORM}")
    page.wait_for_selector("table.board tbody tr")
    page.get_by_role("button", name=re.compile("^best")).click()
    page.wait_for_function("location.hash.includes('sort=value')")
    page.get_by_role("button", name=re.compile("^best")).click()
    page.wait_for_function("location.hash.includes('dir=desc')")
    values = page.locator("table.board tbody td.value").all_inner_texts()
    numbers = [float(v.replace(",", "")) for v in values if v != "—"]
    assert len(numbers) == 3
    assert numbers == sorted(numbers, reverse=True)
    assert page.locator("th[aria-sort='descending']").count() == 1


def test_board_marks_ties_reference_and_disqualified(page: Any, webui_base_url: str) -> None:
    """A projected board: ranked by score as index.json ranks it, the two kernels whose
    settled intervals overlap share a rank with a tie mark, the reference says so, an estimate
    is listed unranked, and a disqualified kernel is last, struck; sorting by speed-up keeps
    the disqualified last."""
    body = render_accepted(BOARD)
    page.route(
        "**/api/index.json*",
        lambda route: route.fulfill(status=200, content_type="application/json", body=body),
    )
    _open(page, webui_base_url, "#/board/sm90/Attention/MHA/fp16")
    page.wait_for_selector("table.board tbody tr")
    rows = page.locator("table.board tbody tr")
    names = rows.locator("a.kname").all_inner_texts()
    assert names == [
        "flash_v3", "tilelang_fa", "triton_fa_v2", "torch_sdpa_ref", "naive_fa", "cutlass_fmha",
    ]  # fmt: skip
    ranks = [r.split()[0] for r in rows.locator("td.col-rank").all_inner_texts()]
    assert ranks == ["1", "2", "2", "4", "\u2014", "\u2014"]
    estimate = rows.nth(4).locator("td.col-rank")
    assert "unranked" in estimate.inner_text()
    assert "not ranked: no interval" in (estimate.get_attribute("title") or "")
    assert "DQ" in rows.last.inner_text()
    assert "struck" in (rows.last.locator("td.value").get_attribute("class") or "")
    ties = page.locator(".tie")
    assert ties.all_inner_texts() == ["tie", "tie"]
    assert "shares rank 2 with tilelang_fa" in (ties.last.get_attribute("title") or "")

    def score(name: str) -> str:
        return str(page.locator(f"tr[data-kernel$='/{name}'] td.col-score").inner_text())

    assert score("flash_v3").strip() == "2.18\u00d7 (2.10\u20132.27)"
    assert score("torch_sdpa_ref").split() == ["1.00\u00d7", "reference"]
    assert score("naive_fa").split() == ["\u2248", "0.50\u00d7", "estimate"]
    assert "\u00b13.0%" in page.locator("tr[data-kernel$='/tilelang_fa']").inner_text()
    value = page.locator("tr[data-kernel$='/flash_v3'] td.value")
    assert "on test" in (value.get_attribute("title") or "")
    assert "torch_sdpa_ref" in page.locator(".board-head .reference").inner_text()
    page.get_by_role("button", name=re.compile("^speed-up")).click()
    page.wait_for_function("location.hash.includes('sort=speedup')")
    assert rows.locator("a.kname").all_inner_texts()[::5] == ["naive_fa", "cutlass_fmha"]


def test_kernel_page_draws_the_history_chart_with_hover_and_files(
    page: Any, webui_base_url: str, api_get: Any, shot: Any
) -> None:
    """The kernel page shows stats, a dot per accepted result with a hover card, and files."""
    history = api_get(f"/api/kernels/{SOFTMAX_REF}/bench-history")["history"]
    _open(page, webui_base_url, f"#/kernel/{SOFTMAX_REF}")
    page.wait_for_selector("svg.chart circle.pt")
    assert page.locator("svg.chart circle.pt").count() == len(history) == 2
    assert page.locator("svg.chart circle.record").count() == 2
    assert page.locator("svg.chart path.frontier").get_attribute("d")
    axis = page.locator("svg.chart text.axis-label").first.text_content() or ""
    assert "latency (us)" in axis
    assert page.locator("svg.chart .tick text").count() >= 4
    page.locator("svg.chart circle.pt").last.hover()
    tip = page.locator(".chart-tip")
    tip.wait_for(state="visible")
    assert history[-1]["commit"][:10] in tip.inner_text()
    assert history[-1]["submitter_id"] in tip.inner_text()
    assert page.locator(".stats .stat").count() == 5
    assert "#1" in page.locator(".stats").inner_text()  # the other kernel's estimate ranks nothing
    workloads = page.locator("section.card:has(h2:text-is('Workloads'))").inner_text()
    assert "rows=128 cols=2048" in workloads
    assert page.locator("section.card:has(h2:has-text('Attempts')) tbody tr").count() == 2
    page.locator(".file-btn", has_text="src/softmax.py").click()
    page.wait_for_function("document.querySelector('pre.file-view').textContent.includes('def ')")
    page.mouse.move(0, 0)
    page.locator(".file-btn", has_text="desc.yaml").click()
    page.wait_for_function(
        "document.querySelector('pre.file-view').textContent.includes('kernel_id:')"
    )
    shot(page, "kernel.png", full_page=True)


def test_submission_page_shows_status_timeline_result_and_log(
    page: Any, webui_base_url: str, api_get: Any, shot: Any
) -> None:
    """A finished submission shows its status, every event in order, its workloads and its log."""
    subs = api_get(f"/api/submissions?kernel_id={SOFTMAX_REF}")["items"]
    done = next(s for s in subs if s["submitter_id"] == "grace")
    detail = api_get(f"/api/submissions/{done['submission_id']}")
    _open(page, webui_base_url, f"#/submission/{done['submission_id']}")
    page.wait_for_selector("ol.timeline li")
    assert page.locator("#sub-status").inner_text().strip() == "committed"
    items = page.locator("ol.timeline li")
    assert items.count() == len(detail["events"]) == 5
    assert done["commits"]["source"][:10] in items.last.inner_text()
    result = page.locator("section.card:has(h2:text-is('Result'))")
    assert result.locator("tbody tr").count() >= 1
    assert "131.7" in result.inner_text()
    page.wait_for_selector("pre.log")
    assert "benchmark.py" in page.locator("pre.log").inner_text()
    assert "vectorise the reference" in page.locator("dl.kv").inner_text()
    shot(page, "submission.png", full_page=True)


def test_activity_shows_feed_queue_and_runners(page: Any, webui_base_url: str, shot: Any) -> None:
    """The activity view lists recent events, queue depth per arch and runners with devices."""
    _open(page, webui_base_url, "#/activity")
    page.wait_for_selector(".feed .feed-row")
    page.wait_for_selector(".queue .stat")
    runners = page.locator("section.card:has(h2:text-is('Runners')) tbody tr")
    runners.first.wait_for()
    assert "cpu (this host)" in runners.first.inner_text()
    assert re.search(r"ago|never", runners.first.inner_text())
    assert "cpu" in page.locator(".queue").inner_text().lower()
    page.locator(".feed-row:has-text('submission.committed')").first.wait_for()  # as replayed
    subs = page.locator("section.card:has(h2:text-is('Latest submissions')) tbody tr")
    assert subs.count() >= 8
    shot(page, "activity.png", full_page=True)


def test_time_travel_shows_the_board_as_it_stood(
    page: Any, webui_base_url: str, api_get: Any
) -> None:
    """With at=<seq> the boards come from index.json?at= and say so; back to live restores them."""
    past = api_get("/api/index.json?at=12")
    valued_then = sum(1 for k in past["kernels"] if k["best"])
    _open(page, webui_base_url, "#/?at=12")
    page.wait_for_selector(".travel-banner")
    assert "#12" in page.locator(".travel-banner").inner_text()
    page.wait_for_selector("a.kname")
    assert _valued_rows(page) == valued_then
    page.get_by_role("button", name="Back to live").click()
    page.wait_for_function("!document.querySelector('.travel-banner')")
    page.wait_for_function("document.querySelectorAll('table.board td.value').length > 0")
    assert _valued_rows(page) > valued_then


def test_keyboard_slash_focuses_search_and_enter_opens_a_kernel(
    page: Any, webui_base_url: str
) -> None:
    """'/' focuses the search box; a kernel link reached by keyboard opens the kernel page."""
    _open(page, webui_base_url, "#/")
    page.wait_for_selector("a.kname")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "search"
    page.locator("a.kname").first.focus()
    page.keyboard.press("Enter")
    page.wait_for_function("location.hash.startsWith('#/kernel/')")
    page.wait_for_selector(".stats")


def test_phone_layout_fits_the_screen(new_page: Any, webui_base_url: str, shot: Any) -> None:
    """On a 390 px wide phone the page does not scroll sideways; wide tables scroll in place."""
    page = new_page(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    _open(page, webui_base_url, "#/")
    page.wait_for_selector("a.kname")
    assert page.evaluate("document.documentElement.scrollWidth") <= 392
    shot(page, "board-phone.png")


def test_dark_scheme_is_applied(new_page: Any, webui_base_url: str, shot: Any) -> None:
    """With prefers-color-scheme: dark the page uses the dark palette."""
    page = new_page(color_scheme="dark")
    _open(page, webui_base_url, "#/")
    page.wait_for_selector("a.kname")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(15, 19, 24)"
    shot(page, "board-dark.png")


def test_unknown_kernel_says_so(page: Any, webui_base_url: str, page_problems: Any) -> None:
    """A kernel id the API does not know shows an empty state naming it (the API answers 404)."""
    page_problems.allow()
    _open(page, webui_base_url, "#/kernel/cpu/Norm/RMSNorm/fp32/nope")
    page.wait_for_selector(".state-empty")
    assert "cpu/Norm/RMSNorm/fp32/nope" in page.locator(".state-empty").inner_text()
    assert json.dumps(page_problems.items).count("404") >= 1


def test_an_imported_board_says_where_its_problem_came_from_and_its_licence(
    page: Any, webui_base_url: str
) -> None:
    """A board whose reference kernel index.json marks as imported names its set and problem
    and shows the licence's conditions, from index.json alone (no request per board)."""
    index = json.loads(render_accepted(BOARD))
    reference = "sm90/Attention/MHA/fp16/torch_sdpa_ref"
    for kernel in index["kernels"]:
        if kernel["id"] == reference:
            kernel["problem"] = {
                "format": "gpumode",
                "id": "matmul_py",
                "licence": {"spdx": "LicenseRef-x", "conditions": "Attribute the authors."},
            }
    body = json.dumps(index)
    page.route(
        "**/api/index.json*",
        lambda route: route.fulfill(status=200, content_type="application/json", body=body),
    )
    _open(page, webui_base_url, "#/board/sm90/Attention/MHA/fp16")
    note = page.locator(".problem-note .licence-conditions")
    note.wait_for()
    text = note.inner_text()
    assert "Imported from GPU MODE (matmul_py)" in text
    assert "Attribute the authors." in text
