"""Submitter and runner identification rules, without HTTP."""

from __future__ import annotations

import pytest

from kz_api.auth import RunnerAuth, Submitter, resolve_submitter
from kz_api.errors import ApiError
from kz_events.config import Settings

pytestmark = pytest.mark.unit

OPEN = Settings(maintainers=["root"])
TOKEN = Settings(submitter_tokens={"t1": "alice", "t2": "root"}, maintainers=["root"])


@pytest.mark.parametrize(
    ("settings", "sid", "auth", "expected"),
    [
        (OPEN, "alice", None, Submitter("alice", False)),
        (OPEN, "root", None, Submitter("root", True)),
        (OPEN, None, None, None),
        (TOKEN, None, "Bearer t1", Submitter("alice", False)),
        (TOKEN, None, "bearer t2", Submitter("root", True)),
        (TOKEN, "alice", None, None),
    ],
)
def test_resolve_submitter(
    settings: Settings, sid: str | None, auth: str | None, expected: Submitter | None
) -> None:
    """Open mode trusts X-Submitter-Id; token mode only known bearer tokens."""
    assert resolve_submitter(settings, sid, auth) == expected


@pytest.mark.parametrize(
    ("settings", "sid", "auth"),
    [
        (OPEN, "has space", None),
        (OPEN, "-lead", None),
        (TOKEN, None, "Bearer nope"),
        (TOKEN, None, "Token t1"),
    ],
)
def test_bad_credentials_raise_401(settings: Settings, sid: str | None, auth: str | None) -> None:
    """Malformed ids and unknown or non-bearer tokens are unauthenticated."""
    with pytest.raises(ApiError) as caught:
        resolve_submitter(settings, sid, auth)
    assert caught.value.status == 401


def test_runner_auth_arches() -> None:
    """A key bound to arches allows only those; an unbound key allows all."""
    bound = RunnerAuth("k", frozenset({"sm90"}))
    assert bound.allows("sm90") and not bound.allows("cpu")
    with pytest.raises(ApiError) as caught:
        bound.require("cpu")
    assert caught.value.code == "arch_not_allowed"
    assert RunnerAuth("k", None).allows("anything")
