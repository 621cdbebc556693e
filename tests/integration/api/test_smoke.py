"""A first walk through the API: health and a submission."""

from __future__ import annotations

import pytest
from api_helpers import Api, tarball

pytestmark = pytest.mark.integration


async def test_health_and_submit(api: Api) -> None:
    """Health answers ok and a valid submission is accepted with 202."""
    resp = await api.client.get("/api/health")
    assert resp.status_code == 200, resp.text
    resp = await api.submit(tarball(api.tmp))
    assert resp.status_code == 202, resp.text
    body = resp.json()
    status = await api.client.get(body["status_url"], headers={"X-Submitter-Id": "alice"})
    assert status.json()["status"] == "queued"
