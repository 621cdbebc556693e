"""Browser tests of confirmation runs against the real stack: a result that takes rank 1 on its
board is measured a second time (the referee opens the run, the stub runner takes it); the board
marks the record confirmed next to its score, the kernel page marks its best and current results
and draws every history point's interval, the run's page says which result it confirms and why
it agrees, the record's page links its run, and statuses and the feed show the new endings.
Marks the stub cannot make (a record awaiting its run, a disputed one) come from the real
projection folding those events (tests/webui/indexes.py), served to the page as index.json."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from kz_cli.demo import EXAMPLES

from .build_js_fixtures import CONFIRMED_BOARD, NORM
from .indexes import render_accepted
from .stack import MAINTAINER, pack_variant, submit_package, wait_terminal

pytestmark = pytest.mark.webui

# A board of its own (opened by these submissions and then reviewed by a maintainer), so no
# other test's board changes its leader.
BOARD = "cpu/GEMM/wide/fp32"
REFERENCE = f"{BOARD}/wide_ref"
TILE = f"{BOARD}/wide_tile"


@dataclass(frozen=True)
class Record:
    """The tile kernel's two records and the confirmation run of each."""

    first: str
    first_run: str
    second: str
    second_run: str


def _package(folder: Path, kernel_id: str, stub: dict[str, Any]) -> Path:
    pkg = folder / "pkg"
    shutil.copytree(EXAMPLES / "cpu/GEMM/dense/fp32/numpy_ref", pkg)
    for file in ("desc.yaml", "bench_result.yaml"):
        path = pkg / ".kernel_package" / file
        path.write_text(path.read_text().replace("cpu/GEMM/dense/fp32/numpy_ref", kernel_id))
    return pack_variant(pkg, folder / "package.tar.gz", stub)


def _confirmed(client: httpx.Client, sid: str, timeout_s: float = 90.0) -> str:
    """Wait until the confirmation run of `sid` ended; its id."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        doc = client.get(f"/api/submissions/{sid}").json()["submission"]["confirmation"]
        if doc is not None and doc["mark"] != "unconfirmed":
            assert doc["mark"] == "confirmed", doc
            return str(doc["submission_id"])
        time.sleep(0.3)
    raise RuntimeError(f"the confirmation run of {sid} did not end in {timeout_s} s")


def _submit(
    client: httpx.Client, folder: Path, kernel_id: str, stub: dict[str, Any], message: str
) -> str:
    sid = submit_package(client, _package(folder, kernel_id, stub), kernel_id, "ada", message)
    wait_terminal(client, [sid])
    assert client.get(f"/api/submissions/{sid}").json()["submission"]["status"] == "committed"
    return sid


@pytest.fixture(scope="module")
def record(webui_base_url: str, tmp_path_factory: pytest.TempPathFactory) -> Record:
    """A new board: its reference (1000 us, scored 1x), then a tile kernel measured beside it
    at 100 us (10x: rank 1, so run again, and confirmed: the stub answers the same), then the
    tile kernel again at 80 us (12.5x, against itself as incumbent: faster; run again,
    confirmed); a maintainer then reviews the board, as every other board here is."""
    folder = tmp_path_factory.mktemp("confirmations")
    with httpx.Client(base_url=webui_base_url, timeout=30) as client:
        stub = {"value": 1000.0, "reference": 1000.0}  # scored: 1x, against itself
        _submit(client, folder / "ref", REFERENCE, stub, "the board's reference")
        first = _submit(client, folder / "v1", TILE, {"value": 100.0, "reference": 1000.0}, "tiled")
        first_run = _confirmed(client, first)
        stub = {"value": 80.0, "reference": 1000.0, "incumbent": 100.0}
        second = _submit(client, folder / "v2", TILE, stub, "tiled, wider")
        second_run = _confirmed(client, second)
        review = client.post(f"/api/boards/{BOARD}/review", headers={"X-Submitter-Id": MAINTAINER})
        assert review.status_code == 200, review.text
        for _ in range(100):  # the index folds the run's ending and the review right after
            rows = client.get("/api/index.json").json()["leaderboards"].get(BOARD, [])
            if rows and rows[0].get("confirmation") == "confirmed":
                break
            time.sleep(0.1)
    return Record(first, first_run, second, second_run)


def test_the_board_marks_a_confirmed_record_next_to_its_score(
    page: Any, webui_base_url: str, api_get: Any, record: Record
) -> None:
    """The record's row carries a confirmed check beside its score (its meaning as tooltip), as
    index.json marks it; the reference, never run again, has no mark."""
    [first, reference] = api_get("/api/index.json")["leaderboards"][BOARD]
    assert (first["kernel_id"], first["confirmation"]) == (TILE, "confirmed")
    assert "confirmation" not in reference
    page.goto(f"{webui_base_url}/webui/#/board/{BOARD}")
    row = page.locator(f"tr[data-kernel='{TILE}']")
    row.wait_for()
    mark = row.locator("td.col-score .confirm")
    assert mark.inner_text() == "\u2713 confirmed"
    assert mark.get_attribute("data-confirmation") == "confirmed"
    assert "tone-good" in (mark.get_attribute("class") or "")
    assert "a second run" in (mark.get_attribute("title") or "")
    assert "agreed" in (mark.get_attribute("title") or "")
    assert row.locator("td.col-score .ratio").inner_text() == "12.50\u00d7"
    assert page.locator(f"tr[data-kernel='{REFERENCE}'] .confirm").count() == 0


def test_the_kernel_page_marks_its_results_and_draws_every_points_interval(
    page: Any, webui_base_url: str, api_get: Any, record: Record
) -> None:
    """Best and current carry the confirmed mark, linking the confirmation run; the chart draws
    the interval of both results (not only the best's) and each point's mark; the attempts
    list names what each confirmation run confirms."""
    page.goto(f"{webui_base_url}/webui/#/kernel/{TILE}")
    page.wait_for_selector("svg.chart circle.pt")
    scoreboard = api_get(f"/api/kernels/{TILE}")["scoreboard"]
    for label in ("best", "current"):
        sid = scoreboard[label]["submission_id"]
        run = api_get(f"/api/submissions/{sid}")["submission"]["confirmation"]["submission_id"]
        mark = page.locator(f".stat:has(.stat-label:text-is('{label}')) .confirm")
        assert mark.inner_text() == "\u2713 confirmed", label
        assert mark.get_attribute("href") == f"#/submission/{run}", label
    dots = page.locator("svg.chart circle.pt")
    count = dots.count()  # two per run of the module's fixture on this stack
    assert count >= 2
    marks = [dots.nth(i).get_attribute("data-confirmation") for i in range(count)]
    assert marks == ["confirmed"] * count
    bars = page.locator("svg.chart g.band-score")
    assert bars.count() == count, "every history point has its score interval"
    for i in range(count):
        line = bars.nth(i).locator("line").first
        y1, y2 = (float(line.get_attribute(a) or 0) for a in ("y1", "y2"))
        assert abs(y1 - y2) > 2, "the interval spans some height"
    dots.first.hover()
    tip = page.locator(".chart-tip")
    tip.wait_for(state="visible")
    assert "speed-up 10.00\u00d7 (9.97\u201310.03) over the reference" in tip.inner_text()
    assert "confirmed by a second run" in tip.inner_text()
    assert "confirmed by a second run" in page.locator(".legend").inner_text()
    attempts = page.locator("section.card:has(h2:text-matches('^Attempts'))")
    run_row = attempts.locator(f"tr:has(td.mono > a[href='#/submission/{record.first_run}'])")
    assert "confirms" in run_row.inner_text()
    assert run_row.locator("a.confirms-link").get_attribute("href") == (
        f"#/submission/{record.first}"
    )
    assert "tone-good" in (run_row.locator(".badge").first.get_attribute("class") or "")


def test_a_confirmation_runs_page_says_what_it_confirms_and_why_it_agrees(
    page: Any, webui_base_url: str, api_get: Any, record: Record
) -> None:
    """The run's page links the result it confirms (details and its own box) and gives the
    agree reason; its status badge is the confirmed one, with its meaning."""
    detail = api_get(f"/api/submissions/{record.first_run}")["submission"]
    assert detail["confirms"] == record.first and detail["status"] == "confirmed"
    page.goto(f"{webui_base_url}/webui/#/submission/{record.first_run}")
    box = page.locator("section.card.confirmation")
    box.wait_for()
    assert box.get_attribute("data-confirms") == record.first
    assert box.locator("a.confirms-link").get_attribute("href") == f"#/submission/{record.first}"
    text = box.inner_text()
    assert "A confirmation run of" in text and "the second run agrees" in text
    assert detail["result"]["reason"] in text and detail["result"]["reason"].startswith("agrees")
    status = page.locator("#sub-status .badge")
    assert status.inner_text() == "confirmed" and "tone-good" in (
        status.get_attribute("class") or ""
    )
    assert "agreed" in (status.get_attribute("title") or "")
    details = page.locator("dl.kv")
    assert record.first[:8] in details.inner_text() and "confirms" in details.inner_text()
    assert "confirmation run of" in page.locator(".timeline").inner_text()
    box.locator("a.confirms-link").click()
    page.wait_for_function(f"location.hash === '#/submission/{record.first}'")
    page.locator("section.card.confirmation[data-confirmation='confirmed']").wait_for()


def test_the_records_page_shows_its_confirmation_and_links_the_run(
    page: Any, webui_base_url: str, api_get: Any, record: Record
) -> None:
    """The confirmed result's page gives its mark (header and its own box), the run's verdict,
    and links the run; the API gives the run's id."""
    doc = api_get(f"/api/submissions/{record.second}")["submission"]["confirmation"]
    assert doc["submission_id"] == record.second_run and doc["mark"] == "confirmed"
    page.goto(f"{webui_base_url}/webui/#/submission/{record.second}")
    box = page.locator("section.card.confirmation[data-confirmation='confirmed']")
    box.wait_for()
    assert "took rank 1 on its board" in box.inner_text()
    assert doc["reason"] in box.inner_text()
    link = box.locator("a.confirmation-link")
    assert link.get_attribute("href") == f"#/submission/{record.second_run}"
    header = page.locator(".page-head .meta a.confirm")
    assert header.inner_text() == "\u2713 confirmed"
    link.click()
    page.wait_for_function(f"location.hash === '#/submission/{record.second_run}'")
    page.locator("section.card.confirmation[data-confirms]").wait_for()


def test_statuses_and_the_feed_show_the_confirmation_endings(
    page: Any, webui_base_url: str, record: Record
) -> None:
    """The latest submissions show a confirmation run's status in its colour; the live feed's
    row of its ending is a submission.confirmed one, in the same colour, naming the result."""
    page.goto(f"{webui_base_url}/webui/#/activity")
    latest = page.locator("section.card:has(h2:text-is('Latest submissions'))")
    row = latest.locator("tr", has=page.locator(f"a[href='#/submission/{record.second_run}']"))
    row.wait_for()
    badge = row.locator(".badge")
    assert badge.inner_text() == "confirmed" and "tone-good" in (badge.get_attribute("class") or "")
    feed = page.locator(
        f"ol.feed li.feed-row:has(a[href='#/submission/{record.second_run}'])"
        ":has(.badge:text-is('submission.confirmed'))"
    )
    feed.first.wait_for()
    assert "tone-good" in (feed.first.get_attribute("class") or "")
    assert f"confirmed {record.second[:8]} (a second run agreed)" in feed.first.inner_text()


def _serve(page: Any, body: bytes) -> None:
    page.route(
        "**/api/index.json*",
        lambda route: route.fulfill(status=200, content_type="application/json", body=body),
    )


def test_a_record_awaiting_its_run_and_a_disputed_one_are_marked_on_the_board(
    new_page: Any, webui_base_url: str
) -> None:
    """From the real projection of a record awaiting its second run and one the second run
    disputed: the first carries a muted 'awaiting a second run' mark; the disputed one is listed
    last with a warning whose tooltip says the second run disagreed and it is not ranked first;
    on a phone only the marks' icons stay."""
    body = render_accepted(CONFIRMED_BOARD)
    board = json.loads(body)["leaderboards"][NORM]
    assert [r["kernel_id"].rsplit("/", 1)[1] for r in board] == ["fast", "rmsnorm_ref", "lucky"]
    page = new_page()
    _serve(page, body)
    page.goto(f"{webui_base_url}/webui/#/board/{NORM}")
    page.locator("table.board tbody tr").first.wait_for()
    names = page.locator("table.board a.kname").all_inner_texts()
    assert names == ["fast", "rmsnorm_ref", "lucky"]
    waiting = page.locator(f"tr[data-kernel='{NORM}/fast'] .confirm")
    assert waiting.inner_text() == "\u2026 awaiting a second run"
    assert "tone-muted" in (waiting.get_attribute("class") or "")
    assert "measured a second time" in (waiting.get_attribute("title") or "")
    disputed = page.locator(f"tr[data-kernel='{NORM}/lucky']")
    assert disputed.get_attribute("data-confirmation") == "disputed"
    mark = disputed.locator("td.col-score .confirm")
    assert mark.inner_text() == "! disputed" and "tone-warn" in (mark.get_attribute("class") or "")
    title = mark.get_attribute("title") or ""
    assert "disagreed" in title and "takes no rank" in title
    rank = disputed.locator("td.col-rank")
    assert rank.inner_text().split() == ["\u2014", "unranked"]
    assert "not ranked: disputed" in (rank.get_attribute("title") or "")
    assert page.locator(f"tr[data-kernel='{NORM}/rmsnorm_ref'] .confirm").count() == 0
    phone = new_page(viewport={"width": 390, "height": 800})
    _serve(phone, body)
    phone.goto(f"{webui_base_url}/webui/#/board/{NORM}")
    icon = phone.locator(f"tr[data-kernel='{NORM}/lucky'] .confirm")
    icon.wait_for()
    assert icon.inner_text() == "!", "the label hides on a phone, the icon stays"
