"""Inherited descriptors for steps that cannot inherit: Unix sockets in a folder they see.

A container cannot inherit a descriptor from the runner. For each descriptor a step should
have, the bridge listens on `<folder>/<fd>.sock` (a SEQPACKET socket for a socket, a stream
for a pipe), the step's `kz_harness.launch` connects to it and puts the connection at the
same descriptor number (`KZ_FD_SOCKETS`), and the bridge relays between the connection and
the runner's descriptor, descriptors passed along included. A worker's channel is not relayed
but handed over (`accept`): the judge then talks to the worker's container directly, so a
timed call crosses no relay.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["FD_SOCKETS_ENV", "INSIDE", "FdBridge"]

FD_SOCKETS_ENV = "KZ_FD_SOCKETS"
INSIDE = "/kz/fds"
_MESSAGE = 64 * 1024
_FDS = 16


def _is_seqpacket(fd: int) -> bool:
    if not stat.S_ISSOCK(os.fstat(fd).st_mode):
        return False
    probe = socket.socket(fileno=os.dup(fd))
    try:
        return probe.type == socket.SOCK_SEQPACKET
    finally:
        probe.close()


class FdBridge:
    """Listening sockets for `fds` in `folder` (which the step sees at `INSIDE`); the step
    puts each at its own number, or at `numbers[fd]` where given."""

    def __init__(
        self, folder: Path, fds: Sequence[int], numbers: Mapping[int, int] | None = None
    ) -> None:
        self.folder = folder
        folder.mkdir(mode=0o755, exist_ok=True)
        folder.chmod(0o755)
        self.kinds = {fd: "seqpacket" if _is_seqpacket(fd) else "stream" for fd in fds}
        self.names = {fd: (numbers or {}).get(fd, fd) for fd in fds}
        self.listeners: dict[int, socket.socket] = {}
        # Bound through the folder's descriptor: a socket path holds at most 107 bytes, and a
        # task's folder can be deeper than that.
        here = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for fd, kind in self.kinds.items():
                kind_type = socket.SOCK_SEQPACKET if kind == "seqpacket" else socket.SOCK_STREAM
                listener = socket.socket(socket.AF_UNIX, kind_type)
                listener.bind(f"/proc/self/fd/{here}/{self.names[fd]}.sock")
                (folder / f"{self.names[fd]}.sock").chmod(0o777)  # the step's uid connects
                listener.listen(1)
                self.listeners[fd] = listener
        finally:
            os.close(here)
        self.threads: list[threading.Thread] = []
        self.open: list[socket.socket] = []

    def env(self) -> dict[str, str]:
        wanted = (f"{self.names[fd]}:{kind}" for fd, kind in self.kinds.items())
        return {FD_SOCKETS_ENV: ",".join(wanted)}

    def accept(self, fd: int, timeout_s: float) -> socket.socket:
        """The step's connection for `fd`, handed over (not relayed). The listener closes
        once it has accepted, so nothing in the step can connect a second time."""
        listener = self.listeners[fd]
        listener.settimeout(timeout_s)
        try:
            conn, _ = listener.accept()
        finally:
            listener.close()
            (self.folder / f"{self.names[fd]}.sock").unlink(missing_ok=True)
        conn.settimeout(None)
        return conn

    def relay(self, timeout_s: float) -> None:
        """Relay every descriptor between the step's connections and the runner's ends."""
        for fd in self.kinds:
            thread = threading.Thread(target=self._serve, args=(fd, timeout_s), daemon=True)
            thread.start()
            self.threads.append(thread)

    def _serve(self, fd: int, timeout_s: float) -> None:
        try:
            conn = self.accept(fd, timeout_s)
        except OSError:
            return
        self.open.append(conn)
        if self.kinds[fd] == "stream":
            _copy_stream(conn, fd)
            return
        ours = socket.socket(fileno=os.dup(fd))
        self.open.append(ours)
        back = threading.Thread(target=_copy_packets, args=(ours, conn), daemon=True)
        back.start()
        _copy_packets(conn, ours)
        back.join(1.0)

    def close(self) -> None:
        for sock in (*self.listeners.values(), *self.open):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self.threads:
            thread.join(2.0)


def _copy_stream(conn: socket.socket, fd: int) -> None:
    while chunk := conn.recv(1 << 16):
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view) :]


def _copy_packets(source: socket.socket, target: socket.socket) -> None:
    """Messages (with their descriptors) from `source` to `target` until either side ends."""
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(source, _MESSAGE, _FDS)
        except OSError:
            return
        try:
            if not data:
                target.shutdown(socket.SHUT_WR)
                return
            if fds:
                socket.send_fds(target, [data], fds)
            else:
                target.send(data)
        except OSError:
            return
        finally:
            for passed in fds:
                os.close(passed)
