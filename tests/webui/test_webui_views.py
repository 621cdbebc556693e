"""Browser tests of the web UI's views in headless Chromium: boards, filters, kernel, submission."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytestmark = pytest.mark.webui


def _best_kernel(index: dict[str, Any]) -> dict[str, Any]:
    kernels = (
        index["kernels"] if isinstance(index["kernels"], list) else list(index["kernels"].values())
    )
    return max(kernels, key=lambda k: (k.get("accepted_count", 0), k.get("id", "")))


def _open(page: Any, base: str, route: str) -> None:
    page.goto(f"{base}/webui/{route}")


def test_boards_overview_opens_with_ranked_rows(
    page: Any, webui_base_url: str, api_get: Any, shot: Any
) -> None:
    """The overview shows one card per board, each with ranked rows, values and units."""
    index = api_get("/api/index.json")
    _open(page, webui_base_url, "#/")
    page.wait_for_selector("[data-board] table.board tbody tr")
    boards = page.locator("section[data-board]")
    assert boards.count() >= 1
    first = boards.first
    assert first.locator("tbody tr").count() >= 1
    assert re.search(r"value \(", first.locator("thead").inner_text(), re.IGNORECASE)
    assert str(index["log_seq"]) in page.locator("#foot-index").inner_text().replace(",", "")
    shot(page, "board.png", full_page=True)


def test_filter_by_arch_and_search_narrows_the_boards(
    page: Any, webui_base_url: str, api_get: Any
) -> None:
    """Choosing an arch keeps only its boards; a search keeps only matching kernels."""
    index = api_get("/api/index.json")
    kernel = _best_kernel(index)
    arch, name = kernel["id"].split("/")[0], kernel["id"].split("/")[4]
    _open(page, webui_base_url, "#/")
    page.wait_for_selector("[data-board]")
    page.select_option("#f-arch", arch)
    page.wait_for_function(
        "a => [...document.querySelectorAll('[data-board]')]"
        ".every(b => b.dataset.board.startsWith(a + '/'))",
        arg=arch,
    )
    assert f"arch={arch}" in page.url
    page.fill("#search", name)
    page.wait_for_function(
        "n => document.querySelectorAll('a.kname').length > 0 && [...document.querySelectorAll"
        "('tbody tr')].every(r => r.textContent.toLowerCase().includes(n.toLowerCase()))",
        arg=name,
    )
    assert page.locator(f"a.kname:text-is('{name}')").count() >= 1
    assert page.evaluate("document.activeElement.id") == "search"


def test_board_page_marks_ties_reference_and_disqualified(
    page: Any, webui_base_url: str, fixture_api: Any
) -> None:
    """A full board shows the tie marker, the reference at 1.00x and the disqualified entry last."""
    _open(page, webui_base_url, "#/board/sm90/Attention/MHA/fp16")
    rows = page.locator("table.board tbody tr")
    page.wait_for_selector("table.board tbody tr")
    names = rows.locator("a.kname").all_inner_texts()
    assert names[0] == "flash_v3"
    assert names[-1] == "cutlass_fmha"
    assert "DQ" in rows.last.inner_text()
    assert page.locator(".tie").count() == 2
    ref = page.locator("tr[data-kernel$='/torch_sdpa_ref']")
    assert "1.00\u00d7" in ref.inner_text()


def test_sortable_columns_reorder_and_keep_the_sort_in_the_url(
    page: Any, webui_base_url: str, fixture_api: Any
) -> None:
    """Clicking a column header sorts by it, a second click reverses; missing values stay last."""
    _open(page, webui_base_url, "#/board/sm90/Attention/MHA/fp16")
    page.wait_for_selector("table.board tbody tr")
    page.get_by_role("button", name=re.compile("^value")).click()
    page.wait_for_function("location.hash.includes('sort=value')")
    page.get_by_role("button", name=re.compile("^value")).click()
    page.wait_for_function("location.hash.includes('dir=desc')")
    values = page.locator("table.board tbody td.value").all_inner_texts()
    numbers = [float(v.replace(",", "")) for v in values if v != "—"]
    assert numbers == sorted(numbers, reverse=True)
    assert page.locator("th[aria-sort='descending']").count() == 1


def test_kernel_page_draws_the_history_chart_with_hover(
    page: Any, webui_base_url: str, api_get: Any, shot: Any
) -> None:
    """The kernel page shows stats, an SVG chart with a dot per accepted result, a hover card."""
    kernel = _best_kernel(api_get("/api/index.json"))
    history = api_get(f"/api/kernels/{kernel['id']}/bench-history")
    points = history.get("history") or history.get("accepted") or []
    _open(page, webui_base_url, f"#/kernel/{kernel['id']}")
    page.wait_for_selector("svg.chart circle.pt")
    assert page.locator("svg.chart circle.pt").count() == len(points)
    assert page.locator("svg.chart path.frontier").get_attribute("d")
    assert re.search(
        r"\(.+\)", page.locator("svg.chart text.axis-label").first.text_content() or ""
    )
    page.locator("svg.chart circle.pt").last.hover()
    tip = page.locator(".chart-tip")
    tip.wait_for(state="visible")
    assert "commit" in tip.inner_text()
    assert page.locator(".stats .stat").count() == 5
    page.locator(".file-btn").first.click()
    assert page.locator("pre.file-view").inner_text().strip() != ""
    page.mouse.move(0, 0)
    shot(page, "kernel.png", full_page=True)


def test_submission_page_shows_status_timeline_result_and_log(
    page: Any, webui_base_url: str, api_get: Any, shot: Any
) -> None:
    """A finished submission shows its status, every event in order, its workloads and its log."""
    subs = api_get("/api/submissions?limit=100")
    done = next(s for s in subs["submissions"] if s["status"] == "committed")
    detail = api_get(f"/api/submissions/{done['submission_id']}")
    _open(page, webui_base_url, f"#/submission/{done['submission_id']}")
    page.wait_for_selector("ol.timeline li")
    assert page.locator("#sub-status").inner_text().strip() == "committed"
    assert page.locator("ol.timeline li").count() == len(detail["events"])
    assert page.locator("section.card:has(h2:text-is('Result')) tbody tr").count() >= 1
    page.wait_for_selector("pre.log")
    assert page.locator("pre.log").inner_text().strip() != ""
    shot(page, "submission.png", full_page=True)


def test_activity_shows_feed_queue_and_runners(page: Any, webui_base_url: str, shot: Any) -> None:
    """The activity view lists live events, queue depth per arch and runners with heartbeat age."""
    _open(page, webui_base_url, "#/activity")
    page.wait_for_selector(".feed .feed-row")
    page.wait_for_selector(".queue .stat")
    page.wait_for_selector("section.card:has(h2:text-is('Runners')) tbody tr")
    assert page.locator("#live-indicator").get_attribute("data-state") == "open"
    assert re.search(
        r"ago|never",
        page.locator("section.card:has(h2:text-is('Runners')) tbody tr").first.inner_text(),
    )
    shot(page, "activity.png", full_page=True)


def test_time_travel_shows_the_board_as_it_stood(
    page: Any, webui_base_url: str, fixture_api: Any
) -> None:
    """With at=<seq> the boards come from index.json?at= and say so; back to live restores them."""
    _open(page, webui_base_url, "#/?at=69")
    page.wait_for_selector(".travel-banner")
    past = page.locator("a.kname").count()
    assert "#69" in page.locator(".travel-banner").inner_text()
    page.get_by_role("button", name="Back to live").click()
    page.wait_for_function("!document.querySelector('.travel-banner')")
    assert page.locator("a.kname").count() > past


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
