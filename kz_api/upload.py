"""Multipart uploads streamed to a temporary file with a size limit, hashing as they arrive.

The request body is never held in memory whole: the push parser hands over chunks, the
`package` part goes to disk, the small text fields are capped.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from litestar import Request
from multipart import (  # type: ignore[import-untyped]
    MultipartError,
    MultipartSegment,
    PushMultipartParser,
    parse_options_header,
)

from kz_api.errors import ApiError

__all__ = ["Upload", "receive_upload"]

FIELD_LIMIT = 64 * 1024
OVERHEAD = 256 * 1024  # form fields and part headers on top of the file


@dataclass
class Upload:
    """The text fields of a form and the one file part, on disk."""

    fields: dict[str, str] = field(default_factory=dict)
    path: Path | None = None
    sha256: str = ""
    size: int = 0


def _too_large(limit: int, what: str) -> ApiError:
    return ApiError(
        413,
        "package_too_large",
        f"the {what} must be at most {limit} bytes, got more",
        details={"limit": limit},
    )


def _boundary(request: Request[Any, Any, Any]) -> str:
    kind, options = parse_options_header(request.headers.get("content-type", ""))
    if kind != "multipart/form-data" or not options.get("boundary"):
        raise ApiError(
            415,
            "unsupported_media_type",
            f"expected a multipart/form-data body, got {kind or 'no content type'!r}",
        )
    return str(options["boundary"])


class _Sink:
    """Where the parser's events go: text fields in memory, the file part on disk."""

    def __init__(self, upload: Upload, file_field: str, dest: Path, limit: int) -> None:
        self.upload, self.file_field, self.dest, self.limit = upload, file_field, dest, limit
        self.name: str | None = None
        self.text = bytearray()
        self.handle: IO[bytes] | None = None
        self.hasher = hashlib.sha256()

    def on(self, event: MultipartSegment | bytes | None) -> None:
        if isinstance(event, MultipartSegment):
            self.name = event.name or ""
            if self.name == self.file_field and event.filename is not None:
                self.handle = self.dest.open("wb")
            self.text.clear()
        elif isinstance(event, bytes | bytearray):
            self._data(bytes(event))
        else:
            self._end()

    def _data(self, data: bytes) -> None:
        if self.handle is not None:
            self.upload.size += len(data)
            if self.upload.size > self.limit:
                raise _too_large(self.limit, "package")
            self.hasher.update(data)
            self.handle.write(data)
            return
        self.text += data
        if len(self.text) > FIELD_LIMIT:
            raise _too_large(FIELD_LIMIT, f"form field {self.name!r}")

    def _end(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None
            self.upload.path = self.dest
            self.upload.sha256 = self.hasher.hexdigest()
        elif self.name is not None:
            self.upload.fields[self.name] = self.text.decode("utf-8", errors="replace")
        self.name = None

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()


async def receive_upload(
    request: Request[Any, Any, Any], dest: Path, *, max_bytes: int, file_field: str = "package"
) -> Upload:
    """Parse the multipart body; the file part `file_field` is written to `dest`."""
    boundary = _boundary(request)
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes + OVERHEAD:
        raise _too_large(max_bytes, "request")
    upload = Upload()
    sink = _Sink(upload, file_field, dest, max_bytes)
    received = 0
    try:
        with PushMultipartParser(boundary, max_segment_count=32) as parser:
            async for chunk in request.stream():
                received += len(chunk)
                if received > max_bytes + OVERHEAD:
                    raise _too_large(max_bytes, "request")
                for event in parser.parse(chunk):
                    sink.on(event)
            for event in parser.parse(b""):
                sink.on(event)
    except MultipartError as exc:
        raise ApiError(400, "invalid_input", f"the multipart body is malformed: {exc}") from exc
    finally:
        sink.close()
    return upload
