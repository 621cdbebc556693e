"""How the API is served: uvicorn's h11 protocol with two timeouts it lacks, its config, and its
listening socket, bound before anything else starts so a busy port is one clear line.

A client that takes longer than `head_timeout_s` to send a request head (slow-loris: a byte
now and then, or nothing at all after connecting) gets a 408 envelope and is closed; bytes that
arrived but that the server has not read yet (its loop fell behind: thousands of connections
at once on a busy host) are the server's delay, not the client's, and get up to
`HEAD_GRACE_TIMES` more head timeouts to be read (bytes a client trickles are read at once by a
server that keeps up, so they earn no grace). A client
that reads nothing of its answer for `stall_s` while the server has more to send (a Server-Sent
Events reader that stopped reading) is dropped, so a slow reader holds no buffer for long. A
request answered before its body ended (a body over its limit gets its 413 at once) has the
rest of its body read and dropped for at most `linger_s` and `linger_bytes`, then the
connection is closed: a client that sends all before it reads still gets the answer (closing
on unread data would reset it), and none can make the server read an endless body.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import socket
import struct
import termios
from typing import Any

import h11
import msgspec
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from kz_api.errors import ErrorBody, ErrorEnvelope
from kz_events.config import Settings
from kz_events.errors import ConfigError

__all__ = [
    "MAX_HEADER_BYTES",
    "BoundedH11Protocol",
    "bounded_protocol",
    "listen_socket",
    "server_config",
]

# The h11 parser closes a connection whose request head grows past this without ending;
# uvicorn's httptools parser has no such bound, so a client trickling endless headers would
# grow the server's memory without limit.
MAX_HEADER_BYTES = 16 * 1024


def _timeout_answer() -> bytes:
    body = msgspec.json.encode(
        ErrorEnvelope(
            error=ErrorBody(
                code="request_timeout",
                message="the request head did not arrive in time; the connection is closed",
            )
        )
    )
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


_TIMEOUT_ANSWER = _timeout_answer()
_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a reset
HEAD_GRACE_S = 0.25  # one look again at a head that arrived but was not read yet
HEAD_GRACE_TIMES = 4  # at most this many head timeouts more, while bytes wait unread


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request-head timeout and a write-stall timeout."""

    head_timeout_s: float = 10.0
    stall_s: float = 30.0
    linger_s: float = 10.0
    linger_bytes: int = 64 * 1024 * 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._stall_timer: asyncio.TimerHandle | None = None
        self._linger_timer: asyncio.TimerHandle | None = None
        self._lingered = 0
        self._head_grace = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head()

    def data_received(self, data: bytes) -> None:
        if self._linger_timer is not None:
            self._lingered += len(data)
            if self._lingered > self.linger_bytes:
                self._end_linger()
                return
        if self._head_timer is None and self.conn.their_state is h11.IDLE:
            self._arm_head()  # the next request's head starts on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm_head()
        if self.conn.their_state is not h11.SEND_BODY:
            self._disarm_linger()  # the body ended: the connection serves on

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            # Answered before the body ended: read and drop the rest, for a while.
            self._lingered = 0
            self._linger_timer = self.loop.call_later(self.linger_s, self._end_linger)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head()
        self._disarm_stall()
        self._disarm_linger()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stall_timer is None:
            self._stall_timer = self.loop.call_later(self.stall_s, self._on_stall)

    def resume_writing(self) -> None:
        self._disarm_stall()
        super().resume_writing()

    def _arm_head(self) -> None:
        self._disarm_head()
        self._head_grace = 0.0
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._on_head_timeout)

    def _disarm_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _disarm_stall(self) -> None:
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None

    def _disarm_linger(self) -> None:
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None

    def _end_linger(self) -> None:
        self._disarm_linger()
        if not self.transport.is_closing():
            self.transport.close()

    def _on_head_timeout(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self._unread() and self._head_grace < HEAD_GRACE_TIMES * self.head_timeout_s:
            # The client sent more than the server has read: read it before judging it.
            self._head_grace += HEAD_GRACE_S
            self._head_timer = self.loop.call_later(HEAD_GRACE_S, self._on_head_timeout)
            return
        self.transport.write(_TIMEOUT_ANSWER)
        self.transport.close()

    def _unread(self) -> bool:
        """Whether bytes wait in the connection's receive buffer, unread by the server."""
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return False
        try:
            pending = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
        except OSError:
            return False
        return int(struct.unpack("i", pending)[0]) > 0

    def _on_stall(self) -> None:
        self._stall_timer = None
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            # Reset, not close: a close leaves the kernel sending what the client never reads
            # (megabytes a connection) before its FIN, and the client none the wiser.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
        self.transport.abort()


def bounded_protocol(settings: Settings) -> type[BoundedH11Protocol]:
    """The protocol class with the timeouts of `settings`."""
    return type(
        "ApiH11Protocol",
        (BoundedH11Protocol,),
        {"head_timeout_s": settings.head_timeout_s, "stall_s": settings.slow_reader_s},
    )


def server_config(app: Any, settings: Settings, **overrides: Any) -> uvicorn.Config:
    """uvicorn's config for serving `app`: h11 with bounded heads and the timeouts above."""
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "http": bounded_protocol(settings),
        "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
        **overrides,
    }
    return uvicorn.Config(app, **options)


def listen_socket(host: str, port: int) -> socket.socket:
    """The API's socket, bound to `host:port` as uvicorn binds it (address reuse, inheritable),
    for `uvicorn.Server.serve(sockets=[...])`. A port in use, or an address that cannot be
    bound, is a `ConfigError` naming the settings that change it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {port} is in use; use --port or KZ_PORT") from exc
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror}); use --port or KZ_PORT, "
            "and KZ_HOST for the address"
        ) from exc
    sock.set_inheritable(True)
    return sock
