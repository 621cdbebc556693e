"""Token mode: bearer tokens map to submitter ids; X-Submitter-Id alone no longer counts, and
runner keys must be configured."""

from __future__ import annotations

from typing import Any

import pytest
from api_helpers import KERNEL, Api, tarball

pytestmark = pytest.mark.integration

TOKENS = {"submitter_tokens": {"tok-alice": "alice", "tok-root": "maintainer"}}
token_mode = pytest.mark.parametrize("api_overrides", [TOKENS])


async def _post(api: Api, headers: dict[str, str]) -> Any:
    return await api.client.post(
        "/api/submissions",
        files={"package": ("p.tar.gz", tarball(), "application/gzip")},
        data={"kernel_id": KERNEL},
        headers=headers,
    )


@token_mode
async def test_bearer_token_identifies_the_submitter(api: Api) -> None:
    """A known bearer token submits as its submitter."""
    resp = await _post(api, {"Authorization": "Bearer tok-alice"})
    assert resp.status_code == 202, resp.text
    sid = resp.json()["submission_id"]
    assert api.ctx.models.submissions[sid].state.submitter_id == "alice"


@token_mode
@pytest.mark.parametrize(
    "headers",
    [
        {"X-Submitter-Id": "alice"},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic dG9rLWFsaWNl"},
        {},
    ],
)
async def test_token_mode_refuses_everything_else(api: Api, headers: dict[str, str]) -> None:
    """Headers without a known bearer token are 401 unauthenticated in token mode."""
    resp = await _post(api, headers)
    assert resp.status_code == 401 and resp.json()["error"]["code"] == "unauthenticated"
    assert resp.headers["www-authenticate"] == "Bearer"


@token_mode
async def test_token_mode_without_runner_keys_refuses_runners(api: Api) -> None:
    """In token mode with no runner keys configured, a runner key is not accepted."""
    resp = await api.client.post(
        "/api/runner/register",
        json={"runner_id": "r", "arches": ["cpu"]},
        headers={"X-Runner-Key": "anything"},
    )
    assert resp.status_code == 401


async def test_malformed_open_mode_id_is_401(api: Api) -> None:
    """An X-Submitter-Id with spaces or control characters is refused."""
    resp = await _post(api, {"X-Submitter-Id": "a b"})
    assert resp.status_code == 401
