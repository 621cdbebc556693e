"""Browser tests of live behaviour and edge states: live board updates, a submission followed
through its long-poll, API errors, an empty zoo and 10,000 kernels."""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import pytest

pytestmark = pytest.mark.webui

MHA = "sm90/Attention/MHA/fp16"


def _committed_event(seq: int, sid: str, kernel_id: str) -> dict[str, Any]:
    event = {
        "event_id": f"00000000-0000-4000-8000-{seq:012d}",
        "type": "committed",
        "schema_version": 1,
        "occurred_at": "2025-05-13T10:00:00Z",
        "actor": "kz-git-projector",
        "submission_id": sid,
        "kernel_id": kernel_id,
        "commits": {"source": "ab" * 20, "bench_result": "cd" * 20},
    }
    return {"seq": seq, "subject": f"kz.ev.submission.sm90.{sid}.committed", "event": event}


def big_index(n: int, groups: int = 200) -> dict[str, Any]:
    """n kernels spread over `groups` boards, values deterministic."""
    kernels = []
    for i in range(n):
        g = i % groups
        value = 100 + (i * 7919 % 1000) / 10
        kernels.append(
            {
                "id": f"sm{g % 10}0/Op{g // 10}/main/fp16/k{i}",
                "title": f"kernel {i}",
                "language": "cuda",
                "metric": {"name": "latency", "unit": "us", "better": "lower"},
                "best": {
                    "value": value,
                    "p10": value * 0.99,
                    "p90": value * 1.01,
                    "submitter": f"s{i % 17}",
                    "at": "2025-05-01T00:00:00Z",
                },
                "accepted_count": 1,
                "last_activity_at": "2025-05-01T00:00:00Z",
            }
        )
    return {
        "schema_version": 1,
        "log_seq": n,
        "head_commit": None,
        "generated_at": "2025-05-01T00:00:00Z",
        "kernels": kernels,
        "leaderboards": {},
        "queue": {},
        "runners": [],
    }


def test_board_updates_live_keeping_search_focus(
    page: Any, webui_base_url: str, fixture_api: Any
) -> None:
    """A committed event refetches index.json and re-ranks the board, no reload, focus kept."""
    page.goto(f"{webui_base_url}/webui/#/board/{MHA}")
    page.wait_for_selector("table.board tbody tr")
    page.click("#search")
    page.keyboard.type("triton")
    page.wait_for_function("document.querySelectorAll('table.board tbody tr').length === 1")
    page.evaluate("window.__noReload = 1")
    index = copy.deepcopy(fixture_api.index)
    entry = next(k for k in index["kernels"] if k["id"] == f"{MHA}/triton_fa_v2")
    entry["best"].update(value=401.0, p10=399.0, p90=403.0)
    entry["last_activity_at"] = "2025-05-13T10:00:00Z"
    index["log_seq"] += 1
    fixture_api.set_index(index)
    fixture_api.publish(
        _committed_event(index["log_seq"], "11111111-2222-4333-8444-555555555555", entry["id"])
    )
    page.wait_for_function(
        "document.querySelector('tr[data-kernel$=\"/triton_fa_v2\"] td.value')"
        "?.textContent === '401'"
    )
    row = page.locator("tr[data-kernel$='/triton_fa_v2']")
    assert row.locator("td.col-rank").inner_text().startswith("1")
    assert "flash" in (row.get_attribute("class") or "")
    assert page.evaluate("document.activeElement.id") == "search"
    assert page.input_value("#search") == "triton"
    assert page.evaluate("window.__noReload") == 1


def test_submission_page_follows_a_running_submission(
    page: Any, webui_base_url: str, fixture_api: Any, api_get: Any
) -> None:
    """A running submission's page long-polls its status and shows the commit when it lands."""
    subs = api_get("/api/submissions?limit=100")["submissions"]
    running = next(s for s in subs if s["status"] == "running")
    sid = running["submission_id"]
    page.goto(f"{webui_base_url}/webui/#/submission/{sid}")
    page.wait_for_selector(".live-note")
    assert page.locator("#sub-status").inner_text().strip() == "running"
    detail = api_get(f"/api/submissions/{sid}")
    seq = 10_000
    commit = _committed_event(seq, sid, detail["kernel_id"])
    detail.update(
        status="committed",
        version=seq,
        commits=commit["event"]["commits"],
        updated_at="2025-05-13T10:00:00Z",
        events=[*detail["events"], commit],
        log_url=f"/api/submissions/{sid}/logs",
        log_text="[kz-runner] verdict: committed\n",
    )
    fixture_api.put_submission(detail)
    page.wait_for_function(
        "document.querySelector('#sub-status')?.textContent.trim() === 'committed'"
    )
    assert page.locator(".live-note").count() == 0
    assert "verdict: committed" in page.locator("pre.log").inner_text()
    assert page.locator("ol.timeline li").count() == len(detail["events"])


def test_api_down_shows_an_error_with_retry(
    page: Any, webui_base_url: str, page_problems: Any
) -> None:
    """When index.json fails the boards say what failed and offer a retry that recovers."""
    page_problems.allow()
    envelope = {
        "error": {
            "code": "log_unreachable",
            "message": "The event log is unreachable.",
            "details": {},
        }
    }
    page.route(
        "**/api/index.json*",
        lambda route: route.fulfill(
            status=503, content_type="application/json", body=json.dumps(envelope)
        ),
    )
    page.goto(f"{webui_base_url}/webui/#/")
    error = page.locator(".state-error")
    error.wait_for()
    assert "503" in error.inner_text() and "log_unreachable" in error.inner_text()
    assert "unreachable" in error.inner_text()
    page.unroute("**/api/index.json*")
    page.get_by_role("button", name="Retry").click()
    page.wait_for_selector("a.kname")


def test_no_kernels_yet_is_an_empty_state(page: Any, webui_base_url: str) -> None:
    """An index without kernels shows a friendly empty state, not an empty table."""
    empty = {
        "schema_version": 1,
        "log_seq": 0,
        "head_commit": None,
        "generated_at": None,
        "kernels": [],
        "leaderboards": {},
        "queue": {},
        "runners": [],
    }
    page.route(
        "**/api/index.json*",
        lambda route: route.fulfill(
            status=200, content_type="application/json", body=json.dumps(empty)
        ),
    )
    page.goto(f"{webui_base_url}/webui/#/")
    page.wait_for_selector(".state-empty")
    assert "No kernels yet" in page.locator(".state-empty").inner_text()


def test_ten_thousand_kernels_render_a_bounded_first_page(
    page: Any, webui_base_url: str, fixture_api: Any
) -> None:
    """With 10,000 kernels the overview renders one page of boards and pages through the rest."""
    fixture_api.serve_raw_index(json.dumps(big_index(10_000)).encode())
    started = time.perf_counter()
    page.goto(f"{webui_base_url}/webui/#/")
    page.wait_for_selector("a.kname")
    elapsed = time.perf_counter() - started
    assert page.locator("section[data-board]").count() == 8
    assert page.locator("table.board tbody tr").count() == 80
    assert "10,000 kernels on 200 boards" in page.locator(".summary").inner_text()
    assert "page 1 of 25" in page.locator(".pager").inner_text()
    page.get_by_role("button", name="next \u203a").click()
    page.wait_for_function("location.hash.includes('page=2')")
    assert page.locator("section[data-board]").count() == 8
    rendered = page.evaluate("performance.getEntriesByName('kz:boards-rendered')[0]?.startTime")
    print(
        f"10,000 kernels: boards rendered {rendered:.0f} ms into the page,"
        f" {elapsed * 1000:.0f} ms wall"
    )


def test_a_board_of_250_kernels_is_paged(page: Any, webui_base_url: str, fixture_api: Any) -> None:
    """A single board larger than a page shows 100 rows and a pager."""
    fixture_api.serve_raw_index(json.dumps(big_index(250, groups=1)).encode())
    page.goto(f"{webui_base_url}/webui/#/board/sm00/Op0/main/fp16")
    page.wait_for_selector("a.kname")
    assert page.locator("table.board tbody tr").count() == 100
    page.get_by_role("button", name="last \u00bb").click()
    page.wait_for_function("document.querySelectorAll('table.board tbody tr').length === 50")
    assert (
        page.locator("table.board tbody tr")
        .first.locator("td.col-rank")
        .inner_text()
        .startswith("201")
    )
