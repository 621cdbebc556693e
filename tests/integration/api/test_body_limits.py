"""Every endpoint that takes a body refuses one over its limit with 413 and the error envelope,
before the body has been taken: at once on a declared Content-Length, and while a chunked body
streams. The table is every POST, PUT and PATCH operation of the app's own OpenAPI document,
so an endpoint added later is in it without anyone remembering to add it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from kz_api import create_app
from kz_api.http_server import bounded_protocol, server_config
from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.server import EmbeddedServer, free_port

pytestmark = pytest.mark.integration

KEY = "runner-key"
MIB = 1024 * 1024
UPLOAD_LIMIT = 1 * MIB
BODY_METHODS = ("post", "put", "patch")
CHUNK = 64 * 1024
OVER = 48 * MIB  # what a client offers: far past every limit, so an answer must come first
BUFFERED = 12 * MIB  # what the sockets between them may hold once the server stops reading
PATH_VALUES = {
    "arch": "cpu",
    "op_class": "Norm",
    "sub_class": "RMSNorm",
    "quant": "fp32",
    "name": "limits",
}
HEADERS = f"X-Submitter-Id: alice\r\nX-Runner-Key: {KEY}\r\nIdempotency-Key: limits\r\n"


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    content_type: str

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def body_operations(document: dict[str, Any]) -> list[Operation]:
    """Every operation of the OpenAPI document that takes a body, its path filled in."""
    found = []
    for template, operations in document["paths"].items():
        path = template
        for name, value in PATH_VALUES.items():
            path = path.replace("{" + name + "}", value)
        path = path.replace("{submission_id}", str(uuid.uuid4()))
        for method, operation in operations.items():
            if method not in BODY_METHODS:
                continue
            assert "{" not in path, f"no test value for a parameter of {template}"
            content = operation.get("requestBody", {}).get("content", {"application/json": {}})
            kind = next(iter(content))
            if kind == "multipart/form-data":
                kind += "; boundary=XyZ"
            found.append(Operation(method.upper(), path, kind))
    return found


@dataclass
class Answer:
    status: int
    body: bytes
    sent: int


async def offer(port: int, op: Operation, *, chunked: bool) -> Answer:
    """Send `op` with an OVER-byte body (declared, or chunked), reading while sending; the
    answer and how much of the body went out before it came."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {OVER}"
    head = f"{op.method} {op.path} HTTP/1.1\r\nHost: t\r\n{HEADERS}Content-Type: {op.content_type}"
    reading = asyncio.create_task(_answer(reader))
    sent = 0
    try:
        writer.write(f"{head}\r\n{framing}\r\n\r\n".encode())
        with contextlib.suppress(ConnectionError):
            while sent < OVER and not reading.done():
                piece = b"[" * CHUNK
                writer.write(f"{CHUNK:x}\r\n".encode() + piece + b"\r\n" if chunked else piece)
                await writer.drain()
                await asyncio.sleep(0)  # let the reader see an answer that came
                sent += CHUNK
        status, body = await asyncio.wait_for(reading, 60)
        return Answer(status, body, sent)
    finally:
        reading.cancel()
        writer.close()


async def _answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(
        int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")
    )
    return int(lines[0].split()[1]), await reader.readexactly(length)


@contextlib.asynccontextmanager
async def serving(
    settings: Settings, log: EventLog, **config: Any
) -> AsyncIterator[tuple[int, dict[str, Any]]]:
    """The app behind uvicorn as `kz api` serves it; its port and its OpenAPI document."""
    port = free_port()
    app = create_app(settings, event_log=log)
    server = uvicorn.Server(server_config(app, settings, port=port, log_level="warning", **config))
    task = asyncio.create_task(server.serve())
    for _ in range(400):
        if server.started:
            break
        await asyncio.sleep(0.05)
    try:
        yield port, app.openapi_schema.to_schema()
    finally:
        server.should_exit = True
        await task


def _settings(nats: EmbeddedServer, tmp: Path) -> Settings:
    return Settings(
        nats_url=nats.url,
        data_dir=tmp / "data",
        kernel_repo_path=tmp / "repo",
        runner_keys={KEY: ["cpu"]},
        maintainers=["alice"],
        lease_secret="s" * 32,
        max_upload_bytes=UPLOAD_LIMIT,
    )


@pytest.mark.parametrize("chunked", [False, True], ids=["declared", "chunked"])
async def test_every_body_over_its_limit_is_refused_with_413_before_it_is_taken(
    nats_server: EmbeddedServer, event_log: EventLog, tmp_path: Path, chunked: bool
) -> None:
    """For each operation with a body: 413, the error envelope with a code saying what was too
    large and the limit in its details, long before the offered body went out; nothing is
    appended to the log."""
    before = await event_log.last_seq()
    async with serving(_settings(nats_server, tmp_path), event_log) as (port, document):
        operations = body_operations(document)
        assert {str(op).split(" ")[1] for op in operations} >= {
            "/api/submissions",
            "/api/runner/register",
            "/api/edits/rebase",
        }
        answers = {str(op): await offer(port, op, chunked=chunked) for op in operations}
    wrong = {}
    print(f"{'operation':44} status code               limit      sent of {OVER}")  # -rP shows it
    for name, answer in answers.items():
        error = json.loads(answer.body).get("error", {}) if answer.body else {}
        upload = name in ("POST /api/submissions", "POST /api/edits/rebase")
        limit = error.get("details", {}).get("limit")
        print(f"{name:44} {answer.status:<6} {error.get('code')!s:18} {limit!s:10} {answer.sent}")
        if (
            answer.status != 413
            or error.get("code") != ("package_too_large" if upload else "body_too_large")
            or not isinstance(limit, int)
            or f"at most {limit} bytes" not in error.get("message", "")
            or answer.sent > limit + BUFFERED
        ):
            wrong[name] = (answer.status, answer.body[:300], answer.sent)
    assert wrong == {}
    assert await event_log.last_seq() == before


async def test_a_client_that_sends_its_whole_body_first_gets_the_413(
    nats_server: EmbeddedServer, event_log: EventLog, tmp_path: Path
) -> None:
    """A runner registration of 7 MiB sent by a client that reads only once it has sent all
    (httpx does): the server reads and drops the rest after its answer, so the client gets
    the 413 envelope, not a reset; nothing is stored."""
    labels = {f"l{i}": "y" * MIB for i in range(7)}
    body = {"runner_id": "big", "arches": ["cpu"], "device": "x", "labels": labels}
    async with serving(_settings(nats_server, tmp_path), event_log) as (port, _):
        client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60)
        try:
            answers = [
                await client.post("/api/runner/register", json=body, headers={"X-Runner-Key": KEY})
                for _ in range(3)
            ]
        finally:
            await client.aclose()
    for answer in answers:
        assert answer.status_code == 413, answer.text
        assert answer.json()["error"]["code"] == "body_too_large"
    assert await event_log.last_seq() == 0


async def test_the_rest_of_a_refused_body_is_read_only_so_far(
    nats_server: EmbeddedServer, event_log: EventLog, tmp_path: Path
) -> None:
    """A client that reads its 413 but goes on sending the body is cut off once the server has
    read and dropped its linger bound of it: an endless body costs the server a bounded read."""
    settings = _settings(nats_server, tmp_path)
    linger = 2 * MIB
    protocol = type("Short", (bounded_protocol(settings),), {"linger_bytes": linger})
    op = Operation("POST", "/api/runner/register", "application/json")
    async with serving(settings, event_log, http=protocol) as (port, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        reading = asyncio.create_task(_answer(reader))
        head = f"{op.method} {op.path} HTTP/1.1\r\nHost: t\r\n{HEADERS}Content-Length: {10**12}"
        writer.write(f"{head}\r\n\r\n".encode())
        sent = 0
        with contextlib.suppress(ConnectionError):
            while sent < OVER:
                writer.write(b"[" * CHUNK)
                await writer.drain()
                await asyncio.sleep(0)
                sent += CHUNK
        status, body = await asyncio.wait_for(reading, 30)
        writer.close()
    assert status == 413 and json.loads(body)["error"]["code"] == "body_too_large"
    assert sent < linger + BUFFERED
