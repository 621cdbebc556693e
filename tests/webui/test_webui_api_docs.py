"""The API's documentation page works with no internet: `/schema` renders every operation and
schema from `/schema/openapi.json` in headless Chromium with every other host unreachable."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.webui


def test_the_api_docs_render_with_no_network(page: Any, webui_base_url: str, api_get: Any) -> None:
    """With every request off the API's host refused, /schema lists the operations (grouped
    by tag, each with its parameters and answers) and the schemas; it asks nothing elsewhere."""
    outside: list[str] = []

    def only_the_api(route: Any) -> None:
        if route.request.url.startswith(webui_base_url):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort("internetdisconnected")

    page.route("**/*", only_the_api)
    document = api_get("/schema/openapi.json")
    page.goto(f"{webui_base_url}/schema")
    page.wait_for_selector("details.op")
    operations = sum(
        1 for item in document["paths"].values() for op in item.values() if "responses" in op
    )
    schemas = len(document["components"]["schemas"])
    assert page.locator("details.op").count() == operations + schemas
    assert page.locator("h1").inner_text() == document["info"]["title"]
    submit = page.locator("details.op", has_text="/api/submissions/{submission_id}/status").first
    submit.locator("summary").click()
    assert "since" in submit.inner_text() and "ErrorEnvelope" in submit.inner_text()
    assert outside == []
