"""index.json served from memory: rendered once per fold position, with its ETag and gzip."""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kz_api.readmodel import ReadModels
from kz_projector.index import render_index

__all__ = ["IndexCache", "RenderedIndex", "rendered"]


@dataclass(frozen=True)
class RenderedIndex:
    """One rendering: bytes, gzip bytes, strong ETag, and the decoded kernel entries."""

    seq: int
    body: bytes
    etag: str
    kernels: list[dict[str, Any]] = field(default_factory=list)
    _gzip: list[bytes] = field(default_factory=list)

    @property
    def gzipped(self) -> bytes:
        if not self._gzip:
            self._gzip.append(gzip.compress(self.body, compresslevel=6, mtime=0))
        return self._gzip[0]


def rendered(body: bytes, seq: int) -> RenderedIndex:
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    document = msgspec.json.decode(body)
    kernels = document.get("kernels", []) if isinstance(document, dict) else []
    return RenderedIndex(seq=seq, body=body, etag=etag, kernels=list(kernels))


class IndexCache:
    """The latest rendering of the read models' index state."""

    def __init__(self) -> None:
        self._current: RenderedIndex | None = None

    def get(self, models: ReadModels) -> RenderedIndex:
        current = self._current
        if current is None or current.seq != models.seq:
            current = rendered(render_index(models.index), models.seq)
            self._current = current
        return current
