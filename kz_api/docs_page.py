"""The API's documentation page at `/schema`: one self-contained HTML page (inline style and
script, no CDN) that reads `/schema/openapi.json` and lists every operation with its
parameters, body and answers, and every schema. It works with no internet, where a viewer
loaded from a CDN (Litestar's Redoc plugin) leaves the page blank.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from litestar import Request
from litestar.openapi.plugins import OpenAPIRenderPlugin

__all__ = ["OfflineDocsPlugin"]

_ICON = (
    "<link rel='icon' href=\"data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' "
    "viewBox='0 0 16 16'%3E%3Crect width='16' height='16' rx='3' fill='%232563eb'/%3E%3C/svg%3E\">"
)

ASSETS = Path(__file__).resolve().parent / "docs_assets"


def _asset(name: str) -> str:
    """One of the page's assets, read once at start (a missing one fails the start)."""
    text = (ASSETS / name).read_text(encoding="utf-8")
    return text.replace("</", "<\\/")  # nothing in it can close its inline element


class OfflineDocsPlugin(OpenAPIRenderPlugin):
    """Serves the self-contained documentation page (at `/schema` and `/schema/docs`)."""

    def __init__(self, *, path: str | list[str] | None = None) -> None:
        super().__init__(path=path or ["/docs", "/redoc"], favicon=_ICON)
        self.style = f"<style>{_asset('docs.css')}</style>"
        self.script = _asset("docs.js")

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        title = html.escape(str(openapi_schema.get("info", {}).get("title", "API")))
        schema_url = html.escape(self.get_openapi_json_route(request), quote=True)
        page = (
            f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{title}</title>{self.favicon}{self.style}</head><body>"
            f"<main id='docs' data-schema='{schema_url}'><p>Reading the OpenAPI document…</p>"
            f"<noscript><p>This page needs JavaScript; the document itself is at "
            f"<a href='{schema_url}'>{schema_url}</a>.</p></noscript></main>"
            f"<script>{self.script}</script></body></html>"
        )
        return page.encode()
