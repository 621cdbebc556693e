"""The mapping from project errors to HTTP statuses and the envelope."""

from __future__ import annotations

import pytest

from kz_api.errors import ApiError, status_for
from kz_events.errors import (
    ConcurrencyConflict,
    InvalidInput,
    InvalidKernelId,
    KzError,
    LogUnavailable,
    ObjectNotFound,
    RuleViolation,
)
from kz_package import PackageError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ApiError(418, "teapot", "short and stout"), 418),
        (InvalidKernelId("bad"), 400),
        (InvalidInput("bad", code="unknown_submission"), 404),
        (PackageError.one("package_too_large", "p", "", "big"), 413),
        (PackageError.one("unsafe_archive", "p", "", "link"), 400),
        (RuleViolation("held", code="claim_held"), 409),
        (RuleViolation("no", code="stale_lease"), 409),
        (ConcurrencyConflict("moved"), 409),
        (ObjectNotFound("gone"), 404),
        (LogUnavailable("down"), 503),
        (KzError("boom"), 500),
    ],
)
def test_status_for(error: KzError, status: int) -> None:
    """Each kind of error gets the status its code calls for."""
    assert status_for(error) == status
