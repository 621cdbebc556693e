"""Driving a local stack the cheap way: its environment, prepared submissions sent over
keep-alive sockets, and the CPU its processes spent.

The load generator shares the machine with the stack it measures, so it sends requests built
ahead of time over plain sockets (an HTTP client library spends milliseconds of CPU a POST).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from pathlib import Path

__all__ = [
    "RawClient",
    "filesystem_of",
    "process_cpu_s",
    "scratch_base",
    "stack_env",
    "submission_request",
]


def stack_env(tmp: Path, nats_url: str, port: int, **extra: str) -> dict[str, str]:
    """The environment of `kz` processes of one stack kept under `tmp`; `extra` adds or
    overrides settings."""
    return {
        **os.environ,
        "KZ_NATS_URL": nats_url,
        "KZ_DATA_DIR": str(tmp / "data"),
        "KZ_KERNEL_REPO_PATH": str(tmp / "repo"),
        "KZ_INDEX_PATH": str(tmp / "index.json"),
        "KZ_PORT": str(port),
        **extra,
    }


def submission_request(host: str, kid: str, data: bytes, who: str) -> bytes:
    """A raw HTTP/1.1 multipart `POST /api/submissions` of `data` as the package of `kid`."""
    boundary = f"kzbench{hashlib.sha256(data).hexdigest()[:24]}"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="kernel_id"\r\n\r\n{kid}\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="package"; '
            'filename="p.tar.gz"\r\nContent-Type: application/gzip\r\n\r\n'
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    head = (
        f"POST /api/submissions HTTP/1.1\r\nHost: {host}\r\nX-Submitter-Id: {who}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class RawClient:
    """One keep-alive HTTP/1.1 connection that sends prepared requests."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> RawClient:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def send(self, request: bytes) -> tuple[int, bytes]:
        """Send `request`; the answer's status and body."""
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds process `pid` has spent so far, all threads (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def filesystem_of(path: Path) -> str:
    """The type of the filesystem `path` lives on ("ext4", "tmpfs", ...), from the mount
    table: the mount point that is the longest prefix of its resolved path."""
    resolved = path.resolve()
    best, kind = "", "unknown"
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _dev, point, fstype, *_ = line.split()
        point = point.replace("\\040", " ")
        if resolved.is_relative_to(point) and len(point) > len(best):
            best, kind = point, fstype
    return kind


def scratch_base(fallback: Path) -> Path:
    """Where runners' task folders go in a local stack: `/dev/shm` when it is a writable tmpfs
    (as deployments mount one, see docs/deploy.md), else `fallback`."""
    shm = Path("/dev/shm")  # noqa: S108 - a tmpfs chosen on purpose, per-stack folders below
    if shm.is_dir() and os.access(shm, os.W_OK) and filesystem_of(shm) == "tmpfs":
        return shm
    return fallback
