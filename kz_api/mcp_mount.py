"""The MCP server at `/mcp` of the API (streamable HTTP): the same tools as `kz mcp`, reaching
this app in process. Callers act as their own `X-Submitter-Id` or `Authorization: Bearer`.

`KZ_MCP_BENCH` (true/false) says whether its `bench_files` judges packages on this host; by
default only where the API listens on loopback (a local stack), never on a shared server.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from litestar import Litestar, asgi
from litestar.handlers import ASGIRouteHandler
from litestar.types import Receive, Scope, Send

from kz_events.config import Settings
from kz_events.errors import ConfigError
from kz_mcp import MCP_PATH, McpMount, McpOptions

__all__ = ["mcp_mount"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _bench_enabled(settings: Settings) -> bool:
    raw = os.environ.get("KZ_MCP_BENCH", "").strip().lower()
    if raw == "":
        return settings.host in _LOOPBACK
    if raw not in ("1", "0", "true", "false", "yes", "no"):
        raise ConfigError(f"KZ_MCP_BENCH: expected true or false, got {raw!r}")
    return raw in ("1", "true", "yes")


def mcp_mount(
    settings: Settings,
) -> tuple[ASGIRouteHandler, Callable[[Litestar], AbstractAsyncContextManager[None]]]:
    """The `/mcp` route and the lifespan that runs its sessions."""
    options = McpOptions(bench_enabled=_bench_enabled(settings))
    mount = McpMount(f"http://{settings.host}:{settings.port}", options, settings.host)

    @asgi(MCP_PATH, is_mount=True, copy_scope=True, include_in_schema=False)
    async def mcp_handler(scope: Scope, receive: Receive, send: Send) -> None:
        await mount(scope, receive, send)  # type: ignore[arg-type]

    def lifespan(app: Litestar) -> AbstractAsyncContextManager[None]:
        return mount.running(app)

    return mcp_handler, lifespan
