"""Where the MCP server listens: stdio (`kz mcp`), its own HTTP server (`kz mcp --http`), or
the `/mcp` path of the API (`mount`), each on the SDK's own transports.

On HTTP the SDK's DNS-rebinding protection is on for loopback hosts (only local Host and
Origin headers are served), as the SDK sets it for its own apps.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from kz_mcp.api import Api
from kz_mcp.server import McpOptions, build_server

__all__ = ["MCP_PATH", "McpMount", "http_app", "serve_stdio"]

MCP_PATH = "/mcp"
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _security(host: str) -> TransportSecuritySettings | None:
    if host not in _LOOPBACK:
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


async def serve_stdio(api: Api, options: McpOptions) -> None:
    """Serve one client over this process's stdin and stdout until it closes them."""
    server = build_server(api, options)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def http_app(api: Api, options: McpOptions, host: str) -> Starlette:
    """A standalone streamable-HTTP app serving the tools at `/mcp`."""
    server = build_server(api, options)
    return server.streamable_http_app(
        streamable_http_path=MCP_PATH, host=host, transport_security=_security(host)
    )


class McpMount:
    """The `/mcp` the API mounts: its session manager runs for the app's lifespan, and its
    tools reach the API in process (an ASGI transport, no socket)."""

    def __init__(self, public_url: str, options: McpOptions, host: str) -> None:
        self.public_url, self.options, self.host = public_url, options, host
        self.manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self, app: Any) -> AsyncIterator[None]:
        api = Api(self.public_url, transport=httpx.ASGITransport(app=app))
        server = build_server(api, self.options)
        self.manager = StreamableHTTPSessionManager(
            app=server, security_settings=_security(self.host)
        )
        try:
            async with self.manager.run():
                yield
        finally:
            self.manager = None
            await api.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.manager is None:  # before start-up or after shutdown
            await _unavailable(send)
            return
        await self.manager.handle_request(scope, receive, send)


async def _unavailable(send: Send) -> None:
    body = b'{"error": {"code": "unavailable", "message": "the MCP server is not running"}}'
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})
