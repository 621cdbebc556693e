"""How the MCP tools reach the HTTP API: an async client acting as the caller, and the one
error the tools answer with (`ToolFailure`: code, message, fix, as the CLI's `CliError`).

The server is a client of the API like `kz` itself: over the network for `kz mcp` (stdio or
`--http`), or straight into the app for the `/mcp` the API mounts (an ASGI transport, no
socket), so every tool goes through the API's own checks and answers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import httpx

from kz_cli.contract import CliError, from_response, unreachable

__all__ = ["Api", "Identity", "ToolFailure", "failure"]

ToolFailure = CliError  # one error type for both doors: code, message, fix, details


def failure(code: str, message: str, **details: Any) -> ToolFailure:
    return CliError(code, message, details=details or None)


@dataclass(frozen=True)
class Identity:
    """Who the tools act as: a declared submitter id (open mode) and/or a bearer token."""

    submitter: str | None = None
    token: str | None = None

    @classmethod
    def from_environment(cls, submitter: str | None = None, token: str | None = None) -> Identity:
        return cls(
            submitter or os.environ.get("KZ_SUBMITTER_ID") or os.environ.get("USER"),
            token or os.environ.get("KZ_SUBMITTER_TOKEN"),
        )

    def headers(self) -> dict[str, str]:
        out = {}
        if self.submitter:
            out["X-Submitter-Id"] = self.submitter
        if self.token:
            out["Authorization"] = f"Bearer {self.token}"
        return out


class Api:
    """One API for the server's lifetime; each call carries the caller's identity."""

    def __init__(self, base_url: str, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = httpx.AsyncClient(
            base_url=self.base_url,
            transport=transport,
            timeout=httpx.Timeout(90.0, connect=5.0),
        )

    async def close(self) -> None:
        await self.http.aclose()

    async def call(
        self, method: str, path: str, who: Identity | None = None, **kw: Any
    ) -> httpx.Response:
        headers = {**(who.headers() if who else {}), **kw.pop("headers", {})}
        try:
            return await self.http.request(method, path, headers=headers, **kw)
        except httpx.TransportError as exc:
            raise unreachable(self.base_url, exc) from exc

    async def ok(
        self, method: str, path: str, who: Identity | None = None, **kw: Any
    ) -> httpx.Response:
        response = await self.call(method, path, who, **kw)
        if response.status_code >= 400:
            raise from_response(response)
        return response

    async def json(
        self, method: str, path: str, who: Identity | None = None, **kw: Any
    ) -> dict[str, Any]:
        body = (await self.ok(method, path, who, **kw)).json()
        if not isinstance(body, dict):
            raise failure("invalid_answer", f"{path}: expected a JSON object from the server")
        return body
