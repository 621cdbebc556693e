"""Multipart uploads received with a size limit, hashing the file part as it arrives.

The request body is never held in memory whole: the push parser hands over chunks, the small
text fields are capped, and the `package` part stays in memory up to 1 MiB (a kernel package is
a few KiB, so it never touches disk) and spills to a file in a temporary directory past that,
or sooner when the uploads in flight together hold `UploadMemory.total`. `receive_upload` is a
context manager: leaving it removes what was spilled and returns what was held.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio.to_thread
from litestar import Request
from multipart import (  # type: ignore[import-untyped]
    MultipartError,
    MultipartSegment,
    PushMultipartParser,
    parse_options_header,
)

from kz_api.errors import ApiError

__all__ = ["MEMORY_UPLOAD_BYTES", "TEXT_FIELD_LIMITS", "Upload", "UploadMemory", "receive_upload"]

# Characters each text field may hold (any other field: OTHER_FIELD_LIMIT); a field is also cut
# off while it streams once it passes four bytes a character.
TEXT_FIELD_LIMITS = {"kernel_id": 400, "submitter_id": 128, "base_commit": 128, "message": 10_000}
TEXT_FIELD_LIMITS["transcript_url"] = 2000  # provenance (kz_events.provenance checks it)
OTHER_FIELD_LIMIT = 1000
OVERHEAD = 256 * 1024  # form fields and part headers on top of the file
MEMORY_UPLOAD_BYTES = 1024 * 1024  # a file part up to this size is kept in memory
MEMORY_UPLOADS_BYTES = 64 * 1024 * 1024  # what all uploads in flight keep in memory together


@dataclass
class Upload:
    """The text fields of a form and its one file part: `data` in memory, or `path` on disk."""

    fields: dict[str, str] = field(default_factory=dict)
    data: bytes | None = None
    path: Path | None = None
    sha256: str = ""
    size: int = 0

    @property
    def package(self) -> bytes | Path | None:
        """The file part, wherever it is; None when the form had none."""
        return self.data if self.data is not None else self.path


def _too_large(limit: int, what: str) -> ApiError:
    return ApiError(
        413,
        "package_too_large",
        f"the {what} must be at most {limit} bytes, got more",
        details={"limit": limit},
    )


def _field_too_large(name: str, limit: int) -> ApiError:
    return ApiError(
        400,
        "invalid_input",
        f"the form field {name!r} must be at most {limit} characters, got more",
        details={"field": name, "limit": limit},
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


class UploadMemory:
    """The memory file parts may hold: each up to `per_upload` bytes, and all uploads in flight
    together up to `total`, so many clients sending at once cannot fill the server's memory;
    a part that would pass either bound goes to disk. Used from the event loop only."""

    def __init__(
        self, per_upload: int = MEMORY_UPLOAD_BYTES, total: int = MEMORY_UPLOADS_BYTES
    ) -> None:
        self.per_upload, self.total = per_upload, total
        self.held = 0

    def take(self, size: int, holding: int) -> bool:
        """Whether an upload holding `holding` bytes may keep `size` more (they are counted)."""
        if holding + size > self.per_upload or self.held + size > self.total:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        self.held -= size


class _Spill:
    """A temporary directory made only when a file part outgrows memory; `remove` clears it."""

    def __init__(self) -> None:
        self.dir: Path | None = None

    def file(self, name: str) -> Path:
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="kz-upload-"))
        return self.dir / name

    async def remove(self) -> None:
        if self.dir is not None:
            # Removing it blocks on the file system; the loop serves others meanwhile.
            await anyio.to_thread.run_sync(shutil.rmtree, self.dir, True)
            self.dir = None


class _Sink:
    """Where the parser's events go: text fields and a small file part in memory, a large
    file part on disk."""

    def __init__(
        self, upload: Upload, file_field: str, spill: _Spill, limit: int, memory: UploadMemory
    ) -> None:
        self.upload, self.file_field, self.spill = upload, file_field, spill
        self.limit, self.memory = limit, memory
        self.held = 0  # bytes of the file part counted in `memory`
        self.name: str | None = None
        self.in_file = False
        self.buffer = bytearray()
        self.handle: IO[bytes] | None = None
        self.hasher = hashlib.sha256()

    def on(self, event: MultipartSegment | bytes | None) -> None:
        if isinstance(event, MultipartSegment):
            self.name = event.name or ""
            self.in_file = self.name == self.file_field and event.filename is not None
            if self.in_file and self.upload.package is not None:
                raise ApiError(
                    400, "invalid_input", f"the form must hold one {self.file_field} file part"
                )
            self.buffer.clear()
        elif isinstance(event, bytes | bytearray):
            self._data(event)
        else:
            self._end()

    def _data(self, data: bytes | bytearray) -> None:
        if not self.in_file:
            self.buffer += data
            limit = self._text_limit()
            if len(self.buffer) > 4 * limit:
                raise _field_too_large(self.name or "", limit)
            return
        self.upload.size += len(data)
        if self.upload.size > self.limit:
            raise _too_large(self.limit, "package")
        self.hasher.update(data)
        if self.handle is None and self.memory.take(len(data), self.held):
            self.held += len(data)
            self.buffer += data
            return
        if self.handle is None:
            self.upload.path = self.spill.file("package.tar.gz")
            self.handle = self.upload.path.open("wb")
            self.handle.write(self.buffer)
            self.buffer.clear()
            self.release()
        self.handle.write(data)

    def _end(self) -> None:
        if self.in_file:
            if self.handle is not None:
                self.handle.close()
                self.handle = None
            else:
                self.upload.data = bytes(self.buffer)
            self.upload.sha256 = self.hasher.hexdigest()
        elif self.name is not None:
            text = self.buffer.decode("utf-8", errors="replace")
            if len(text) > self._text_limit():
                raise _field_too_large(self.name, self._text_limit())
            self.upload.fields[self.name] = text
        self.buffer.clear()
        self.name, self.in_file = None, False

    def _text_limit(self) -> int:
        return TEXT_FIELD_LIMITS.get(self.name or "", OTHER_FIELD_LIMIT)

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()

    def release(self) -> None:
        """Give back what the file part held in memory."""
        self.memory.give(self.held)
        self.held = 0


async def _parse(
    request: Request[Any, Any, Any], boundary: str, sink: _Sink, max_bytes: int
) -> None:
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


@contextlib.asynccontextmanager
async def receive_upload(
    request: Request[Any, Any, Any],
    *,
    max_bytes: int,
    memory: UploadMemory,
    file_field: str = "package",
) -> AsyncIterator[Upload]:
    """Parse the multipart body; the file part `file_field` is kept in memory as far as
    `memory` allows and written to a temporary file past that, removed when the block ends."""
    boundary = _boundary(request)
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes + OVERHEAD:
        raise _too_large(max_bytes, "request")
    upload, spill = Upload(), _Spill()
    sink = _Sink(upload, file_field, spill, max_bytes, memory)
    try:
        await _parse(request, boundary, sink, max_bytes)
        yield upload
    finally:
        sink.release()
        await spill.remove()
