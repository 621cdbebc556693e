"""Browser tests of the review marks: the demo boards come up reviewed; an unreviewed board is
marked and listed apart; a suspect result carries its badge on the board, the kernel page and
the submission page (the documents are the stack's own, with the marks put in)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

pytestmark = pytest.mark.webui

FRESH_BOARD = "cpu/Fresh/new/fp32"
FRESH = f"{FRESH_BOARD}/first"
REASONS = [
    {"source": "tripwire", "code": "gc", "message": "uses gc", "path": "src/k.py", "line": 3},
    {
        "source": "runtime",
        "code": "extra_threads",
        "message": "a thread outlived the call",
        "path": None,
        "line": None,
    },
]


def _serve(page: Any, pattern: str, doc: Any) -> None:
    body = json.dumps(doc)
    page.route(
        pattern, lambda route: route.fulfill(status=200, content_type="application/json", body=body)
    )


def _marked_index(index: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The stack's index with one more kernel on a new, unreviewed board, and the best of a
    reviewed board's leader marked suspect; returns it and the suspect kernel's id."""
    doc = copy.deepcopy(index)
    ranked = next(iter(doc["leaderboards"].values()))
    leader = ranked[0]["kernel_id"]
    kernels = {k["id"]: k for k in doc["kernels"]}
    kernels[leader]["best"]["suspect"] = True
    fresh = copy.deepcopy(kernels[leader])
    fresh |= {
        "id": FRESH,
        "op_class": "Fresh",
        "sub_class": "new",
        "name": "first",
        "board_reviewed": False,
    }
    fresh["best"].pop("suspect", None)
    doc["kernels"].append(fresh)
    doc["unreviewed_leaderboards"] = {
        FRESH_BOARD: [{"kernel_id": FRESH, "rank": 1, "value": fresh["best"]["value"]}]
    }
    doc["boards"][FRESH_BOARD] = {
        "board": FRESH_BOARD,
        "reviewed": False,
        "kernels": [FRESH],
        "judge_kernel": FRESH,
    }
    return doc, leader


def test_the_demo_boards_come_up_reviewed(page: Any, webui_base_url: str, api_get: Any) -> None:
    """kz up's imported example kernels sit on reviewed boards: no board is marked."""
    index = api_get("/api/index.json")
    assert index["boards"] and all(b["reviewed"] for b in index["boards"].values())
    assert index["unreviewed_leaderboards"] == {}
    assert all(b["reviewed"] for b in api_get("/api/boards")["items"])
    page.goto(f"{webui_base_url}/webui/#/")
    page.wait_for_selector("[data-board] table.board tbody tr")
    assert page.locator(".badge.unreviewed").count() == 0
    cards = page.locator("section[data-board]")
    assert cards.count() == len(index["boards"])
    assert set(
        page.eval_on_selector_all("section[data-board]", "els => els.map(e => e.dataset.reviewed)")
    ) == {"true"}


def test_unreviewed_board_is_marked_and_listed_after_the_reviewed(
    page: Any, webui_base_url: str, api_get: Any, shot: Any
) -> None:
    """An unreviewed board carries the 'unreviewed' badge, comes after every reviewed board
    under its own heading, and a suspect best is still ranked, with its badge."""
    doc, leader = _marked_index(api_get("/api/index.json"))
    _serve(page, "**/api/index.json*", doc)
    page.goto(f"{webui_base_url}/webui/#/")
    card = page.locator(f"section[data-board='{FRESH_BOARD}']")
    card.wait_for()
    assert card.get_attribute("data-reviewed") == "false"
    assert card.locator(".board-head .badge.unreviewed").inner_text() == "unreviewed"
    order = page.eval_on_selector_all(
        "section[data-board]", "els => els.map(e => e.dataset.reviewed)"
    )
    assert order[-1] == "false" and set(order[:-1]) == {"true"}
    heading = page.locator(".unreviewed-head")
    assert heading.count() == 1 and "Unreviewed boards" in heading.inner_text()
    row = page.locator(f"tr[data-kernel='{leader}']")
    assert row.locator(".badge.suspect").inner_text() == "suspect"
    assert row.locator("td.col-rank").inner_text().startswith("1")
    shot(page, "board-unreviewed.png", full_page=True)
    page.goto(f"{webui_base_url}/webui/#/board/{FRESH_BOARD}")
    page.wait_for_selector(f"section[data-board='{FRESH_BOARD}'] .badge.unreviewed")


def test_submission_page_shows_the_suspect_badge_and_reasons(
    page: Any, webui_base_url: str, api_get: Any
) -> None:
    """A suspect submission shows the badge beside its status and lists every reason; once
    cleared it shows the cleared note instead."""
    sid = api_get("/api/submissions?limit=1")["items"][0]["submission_id"]
    detail = api_get(f"/api/submissions/{sid}")
    detail["submission"]["suspect"] = {"reasons": REASONS, "cleared": False, "cleared_reason": None}
    _serve(page, f"**/api/submissions/{sid}", detail)
    page.goto(f"{webui_base_url}/webui/#/submission/{sid}")
    badge = page.locator(".page-head .badge.suspect")
    badge.wait_for()
    assert badge.inner_text() == "suspect"
    reasons = page.locator(".suspect-reasons li").all_inner_texts()
    assert reasons == [
        "tripwire gc (src/k.py:3): uses gc",
        "judge flag extra_threads: a thread outlived the call",
    ]
    page.unroute(f"**/api/submissions/{sid}")
    detail["submission"]["suspect"] |= {"cleared": True, "cleared_reason": "numpy's pool"}
    _serve(page, f"**/api/submissions/{sid}", detail)
    page.reload()  # the page read afresh, from the cleared document
    page.locator(".page-head .badge.suspect-cleared").wait_for(timeout=30_000)
    assert page.locator(".page-head .badge.suspect").count() == 0


def test_kernel_page_marks_suspect_attempts_and_an_unreviewed_board(
    page: Any, webui_base_url: str, api_get: Any
) -> None:
    """The kernel page's attempts mark the suspect one, and an unreviewed board is marked in
    the breadcrumb."""
    index = api_get("/api/index.json")
    kernel_id = next(iter(index["leaderboards"].values()))[0]["kernel_id"]
    subs = api_get(f"/api/submissions?kernel_id={kernel_id}&limit=50")
    if not subs["items"]:
        pytest.skip("the seeded stack has no submission of this kernel")
    subs["items"][0]["suspect"] = {"reasons": REASONS, "cleared": False, "cleared_reason": None}
    detail = api_get(f"/api/kernels/{kernel_id}")
    detail["board"] = {**(detail.get("board") or {}), "reviewed": False}
    _serve(page, "**/api/submissions?*", subs)
    _serve(page, f"**/api/kernels/{kernel_id}", detail)
    page.goto(f"{webui_base_url}/webui/#/kernel/{kernel_id}")
    page.locator(".crumbs .badge.unreviewed").wait_for()
    assert page.locator("table.dense .badge.suspect").count() == 1
