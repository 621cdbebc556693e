"""Errors of the HTTP layer and the one place where every error becomes the JSON envelope.

ApiError(KzError) carries an HTTP status beside its code; domain errors (`KzError`s from
kz_events and kz_package) and Litestar's own exceptions are mapped in `error_response`.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import nats.errors
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException

from kz_events.errors import (
    ConcurrencyConflict,
    InvalidInput,
    KzError,
    LogUnavailable,
    ObjectNotFound,
    RuleViolation,
)

__all__ = [
    "ApiError",
    "ErrorBody",
    "ErrorEnvelope",
    "error_response",
    "status_for",
]

log = logging.getLogger(__name__)


class ErrorBody(msgspec.Struct, frozen=True, kw_only=True):
    """What went wrong: a snake_case code, one human sentence, and structured details."""

    code: str
    message: str
    details: dict[str, Any] = msgspec.field(default_factory=dict)


class ErrorEnvelope(msgspec.Struct, frozen=True, kw_only=True):
    """The body of every 4xx and 5xx answer."""

    error: ErrorBody


class ApiError(KzError):
    """An error that only exists at the HTTP edge (auth, missing resources, limits)."""

    def __init__(
        self, status: int, code: str, message: str, *, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message, details=details)
        self.status = status
        self.code = code


# Codes whose HTTP status is not the default of their class.
_STATUS_BY_CODE: dict[str, int] = {
    "unauthenticated": 401,
    "forbidden": 403,
    "arch_not_allowed": 403,
    "harness_change_forbidden": 403,
    "unknown_kernel": 404,
    "unknown_submission": 404,
    "unknown_runner": 404,
    "package_too_large": 413,
    "quota_exceeded": 429,
    "rate_limited": 429,
}


def status_for(exc: KzError) -> int:
    """The HTTP status of a project error."""
    if isinstance(exc, ApiError):
        return exc.status
    if exc.code in _STATUS_BY_CODE:
        return _STATUS_BY_CODE[exc.code]
    if isinstance(exc, LogUnavailable):
        return 503
    if isinstance(exc, RuleViolation | ConcurrencyConflict):
        return 409
    if isinstance(exc, ObjectNotFound):
        return 404
    if isinstance(exc, InvalidInput):
        return 400
    return 500


def _http_code(exc: HTTPException) -> str:
    return {
        400: "invalid_input",
        401: "unauthenticated",
        403: "forbidden",
        404: "not_found",
        405: "method_not_allowed",
        413: "body_too_large",  # uploads answer package_too_large themselves
        415: "unsupported_media_type",
        429: "rate_limited",
        503: "unavailable",
    }.get(exc.status_code, f"http_{exc.status_code}")


def _from_http(exc: HTTPException) -> tuple[int, ErrorBody]:
    details: dict[str, Any] = {}
    if isinstance(exc, ValidationException) and exc.extra:
        extra = exc.extra if isinstance(exc.extra, list) else [exc.extra]
        details["problems"] = [
            {k: str(v) for k, v in item.items()}
            if isinstance(item, dict)
            else {"message": str(item)}
            for item in extra
        ]
    message = str(exc.detail) if exc.detail else "request refused"
    if exc.status_code >= 500:
        message = "the server could not answer this request"
    return exc.status_code, ErrorBody(code=_http_code(exc), message=message, details=details)


def _body_of(exc: Exception) -> tuple[int, ErrorBody]:
    if isinstance(exc, KzError):
        status = status_for(exc)
        details = exc.details if status < 500 or isinstance(exc, ApiError | LogUnavailable) else {}
        return status, ErrorBody(code=exc.code, message=exc.message, details=details)
    if isinstance(exc, HTTPException):
        return _from_http(exc)
    if isinstance(exc, nats.errors.Error):
        # The log answered with an error no caller expected (its stream deleted, say): the
        # request may be fine, the service behind it is not.
        log.warning("the event log failed a request: %r", exc)
        message = "the event log (NATS) could not serve this request"
        return 503, ErrorBody(code="log_unavailable", message=message, details={})
    if isinstance(exc, RecursionError):
        # A body nested deeper than the decoder can follow is bad input, not a server fault.
        message = "the request body is nested too deeply to decode"
        return 400, ErrorBody(code="invalid_input", message=message, details={})
    log.exception("unexpected error while answering a request", exc_info=exc)
    return 500, ErrorBody(code="internal_error", message="the server hit an unexpected error")


def error_response(request: Request[Any, Any, Any], exc: Exception) -> Response[ErrorEnvelope]:
    """The one exception handler: any error → the envelope of CONTRACTS.md, no stack traces."""
    status, body = _body_of(exc)
    headers: dict[str, str] = {}
    if status == 405 and isinstance(exc, HTTPException) and exc.headers:
        headers.update(exc.headers)
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if status in (429, 503) and isinstance(body.details.get("retry_after_s"), int):
        headers["Retry-After"] = str(body.details["retry_after_s"])
    return Response(ErrorEnvelope(error=body), status_code=status, headers=headers)
