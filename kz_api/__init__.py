"""kz_api: the HTTP API of kernel zoo on Litestar; `create_app(settings)` builds it."""

from __future__ import annotations

from kz_api.app import create_app

__all__ = ["create_app"]
