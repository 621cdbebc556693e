"""The request-head timeout judges what the client sent, not how far behind the server is: a
head that arrived but that the server's loop has not read yet (thousands of connections at once
on a busy host) is read and answered; a connection that sent nothing still gets its 408."""

from __future__ import annotations

import asyncio
import fcntl
import struct
import termios
from pathlib import Path

import pytest
import uvicorn

from kz_api import create_app
from kz_api.http_server import BoundedH11Protocol, server_config
from kz_events.config import Settings
from kz_events.eventlog import EventLog
from kz_events.server import EmbeddedServer, free_port

pytestmark = pytest.mark.integration

HEAD = b"GET /api/health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"


def _protocol(server: uvicorn.Server, writer: asyncio.StreamWriter) -> BoundedH11Protocol:
    """The server's protocol of the connection whose client end is `writer`."""
    port = writer.get_extra_info("sockname")[1]
    for protocol in server.server_state.connections:
        peer = protocol.transport.get_extra_info("peername")
        if isinstance(protocol, BoundedH11Protocol) and peer[1] == port:
            return protocol
    raise LookupError(port)


def _pending(protocol: BoundedH11Protocol) -> int:
    """Bytes waiting unread in the connection's receive buffer, on the server's side."""
    sock = protocol.transport.get_extra_info("socket")
    got = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    return int(struct.unpack("i", got)[0])


async def _accepted(server: uvicorn.Server, count: int) -> None:
    for _ in range(500):
        if len(server.server_state.connections) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the server did not accept the connections")


async def test_a_head_the_server_has_not_read_is_answered_not_timed_out(
    nats_server: EmbeddedServer, event_log: EventLog, tmp_path: Path
) -> None:
    """The head timer fires (called here at once) while a whole head waits unread in the
    connection's buffer: it looks again instead of answering 408, and the request is served;
    on a connection that sent nothing the same timer answers 408."""
    settings = Settings(
        nats_url=nats_server.url,
        data_dir=tmp_path / "data",
        kernel_repo_path=tmp_path / "repo",
        head_timeout_s=60.0,  # never fires by itself here: the test fires it
    )
    port = free_port()
    app = create_app(settings, event_log=event_log)
    server = uvicorn.Server(server_config(app, settings, port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started:
            break
        await asyncio.sleep(0.01)
    try:
        sent_r, sent_w = await asyncio.open_connection("127.0.0.1", port)
        silent_r, silent_w = await asyncio.open_connection("127.0.0.1", port)
        await _accepted(server, 2)
        behind, silent = _protocol(server, sent_w), _protocol(server, silent_w)
        behind.transport.pause_reading()  # the server's loop has not come to it yet
        sent_w.write(HEAD)
        await sent_w.drain()
        for _ in range(500):
            if _pending(behind):
                break
            await asyncio.sleep(0.01)

        for protocol in (behind, silent):
            protocol._disarm_head()
            protocol._on_head_timeout()
        behind.transport.resume_reading()

        answered = (await asyncio.wait_for(sent_r.read(), 30)).split(b"\r\n", 1)[0]
        refused = (await asyncio.wait_for(silent_r.read(), 30)).split(b"\r\n", 1)[0]
        sent_w.close()
        silent_w.close()
    finally:
        server.should_exit = True
        await serving
    assert answered == b"HTTP/1.1 200 OK"
    assert refused == b"HTTP/1.1 408 Request Timeout"
