"""Every request body has a limit, and one over it is refused with 413 before it is taken.

The limit is the route's (`request_max_body_size`: JSON bodies 1 MiB, a runner's result its
own); an upload route, which bounds its package itself, gets `KZ_MAX_UPLOAD_BYTES` plus the
form's overhead. A declared `Content-Length` over the limit is refused before the handler runs;
a body without one (chunked) is counted as the handler reads it, and refused at the first byte
past the limit. The answer is the error envelope: `package_too_large` for an upload,
`body_too_large` for anything else, the limit in its details. What the client still sends
after the answer is read and dropped for a bounded while (kz_api.http_server), so a client that
writes its whole body before it reads gets the answer too.
"""

from __future__ import annotations

from collections.abc import Callable

from litestar.enums import ScopeType
from litestar.handlers import HTTPRouteHandler
from litestar.types import ASGIApp, Receive, ReceiveMessage, Scope, Send

from kz_api.errors import ApiError
from kz_api.upload import OVERHEAD

__all__ = ["body_limits"]


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and value.isdigit():
            return int(value)
    return None


def _limit(scope: Scope, upload_bytes: int) -> tuple[int, str]:
    """(the most bytes the route takes, the code of its refusal)."""
    handler = scope.get("route_handler")
    if isinstance(handler, HTTPRouteHandler):
        limit = handler.resolve_request_max_body_size()
        if limit is not None:
            return limit, "body_too_large"
    return upload_bytes + OVERHEAD, "package_too_large"


def _refused(scope: Scope, limit: int, code: str, got: str) -> ApiError:
    what = f"{scope.get('method', '')} {scope.get('path', '')}"
    return ApiError(
        413,
        code,
        f"the body of {what} must be at most {limit} bytes; {got}",
        details={"limit": limit},
    )


def body_limits(upload_bytes: int) -> Callable[[ASGIApp], ASGIApp]:
    """The middleware (a Litestar middleware factory) with uploads bounded by `upload_bytes`."""

    def middleware_for(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != ScopeType.HTTP:
                await app(scope, receive, send)
                return
            limit, code = _limit(scope, upload_bytes)
            declared = _content_length(scope)
            if declared is not None and declared > limit:
                raise _refused(scope, limit, code, f"its Content-Length is {declared}")
            taken = 0

            async def counted() -> ReceiveMessage:
                nonlocal taken
                message = await receive()
                if message["type"] == "http.request":
                    taken += len(message.get("body", b""))
                    if taken > limit:
                        raise _refused(scope, limit, code, f"more than {limit} came")
                return message

            await app(scope, counted, send)

        return middleware

    return middleware_for
