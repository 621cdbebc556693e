"""Helpers of the hostile-client tests: `kz api` as a real process on an embedded NATS server,
raw HTTP/1.1 over asyncio sockets, the API process's memory, and what the log holds.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path

from nats.js.errors import NotFoundError

from kz_events.eventlog import EventLog
from kz_events.events import EventMeta, RunnerRegistered
from kz_events.server import EmbeddedServer, free_port
from kz_events.subjects import LOGS_BUCKET, PACKAGES_BUCKET
from kz_testing import KzProcess, kz_argv, package_files, package_tarball

__all__ = [
    "HEAD_TIMEOUT_S",
    "KERNEL",
    "RUNNER_KEY",
    "SLOW_READER_S",
    "TOKEN",
    "UPLOAD_LIMIT",
    "ApiProcess",
    "LogState",
    "RawAnswer",
    "log_state",
    "parse_answer",
    "raw_request",
    "read_all",
    "seed_registrations",
    "tarball",
]

TOKEN = "hostile-test-token-alice"
RUNNER_KEY = "hostile-test-runner-key"
UPLOAD_LIMIT = 256 * 1024
HEAD_TIMEOUT_S = 2.0  # short, so the suite sees slow request heads cut off quickly
SLOW_READER_S = 4.0  # likewise for clients that stop reading their answer
KERNEL = "cpu/Norm/RMSNorm/fp32/hostile"


def tarball(salt: str, kid: str = KERNEL) -> bytes:
    """A valid gzip package for `kid`, unique by `salt`, built in memory."""
    return package_tarball(package_files(kid, title="Hostile test kernel", salt=salt))


@dataclass
class ApiProcess:
    """An embedded NATS server and one `kz api` process in token mode with a small upload limit."""

    tmp: Path
    nats: EmbeddedServer = field(init=False)
    port: int = field(init=False, default=0)
    process: KzProcess | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.nats = EmbeddedServer(self.tmp / "nats")

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def scratch(self) -> Path:
        """The API process's temporary directory (TMPDIR): uploads land here while checked."""
        return self.tmp / "scratch"

    def leftovers(self) -> list[str]:
        """What the API left in its temporary directory."""
        return sorted(p.name for p in self.scratch.iterdir())

    @property
    def log_path(self) -> Path:
        return self.tmp / "api.log"

    def start(self) -> ApiProcess:
        self.nats.start()
        self.port = free_port()
        self.scratch.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "KZ_NATS_URL": self.nats.url,
            "KZ_PORT": str(self.port),
            "KZ_DATA_DIR": str(self.tmp / "data"),
            "KZ_KERNEL_REPO_PATH": str(self.tmp / "repo"),
            "KZ_SUBMITTER_TOKENS_JSON": f'{{"{TOKEN}": "alice"}}',
            "KZ_RUNNER_KEYS_JSON": f'{{"{RUNNER_KEY}": ["cpu"]}}',
            "KZ_MAX_UPLOAD_BYTES": str(UPLOAD_LIMIT),
            "KZ_LEASE_SECRET": "hostile-test-lease-secret-0123456789",
            "KZ_HEAD_TIMEOUT_S": str(HEAD_TIMEOUT_S),
            "KZ_SLOW_READER_S": str(SLOW_READER_S),
            "TMPDIR": str(self.scratch),
        }
        self.process = KzProcess("api", kz_argv("api"), env, self.log_path).start()
        self.process.wait_healthy(self.base, 60.0)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(15)
        self.nats.stop()

    def alive(self) -> bool:
        return self.process is not None and self.process.alive

    def rss_bytes(self) -> int:
        """Resident memory of the API process now, from /proc."""
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS line in /proc status")


async def seed_registrations(url: str, count: int, label_bytes: int = 4096) -> None:
    """Append `count` runner registrations of about `label_bytes` each, straight to the log."""
    elog = await EventLog.connect(url, name="hostile-seed")
    labels = {f"l{i:02d}": "x" * (label_bytes // 16) for i in range(16)}
    try:
        for start in range(0, count, 50):
            await asyncio.gather(
                *(
                    elog.append(
                        RunnerRegistered(
                            **EventMeta.now(f"seed-{i}").fields(),
                            runner_id=f"seed-{i}",
                            arches=["cpu"],
                            labels=labels,
                        )
                    )
                    for i in range(start, min(start + 50, count))
                )
            )
    finally:
        await elog.close()


@dataclass(frozen=True)
class LogState:
    """What the stack holds: the last event sequence and the stored object names."""

    last_seq: int
    packages: frozenset[str]
    logs: frozenset[str]


async def log_state(url: str) -> LogState:
    elog = await EventLog.connect(url, name="hostile-check")
    try:
        names: dict[str, frozenset[str]] = {}
        for bucket in (PACKAGES_BUCKET, LOGS_BUCKET):
            store = await elog.js.object_store(bucket)
            try:
                names[bucket] = frozenset(info.name for info in await store.list())
            except NotFoundError:  # what nats-py answers for an empty bucket
                names[bucket] = frozenset()
        return LogState(await elog.last_seq(), names[PACKAGES_BUCKET], names[LOGS_BUCKET])
    finally:
        await elog.close()


@dataclass(frozen=True)
class RawAnswer:
    """A parsed HTTP/1.1 answer; `status` 0 when the server closed without answering."""

    status: int
    headers: dict[str, str]
    body: bytes


def parse_answer(data: bytes) -> RawAnswer:
    if not data:
        return RawAnswer(0, {}, b"")
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = _dechunk(body)
    return RawAnswer(int(lines[0].split()[1]), headers, body)


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return bytes(out)


def _complete(data: bytes) -> bool:
    """Whether `data` holds a whole answer (head plus the body its framing announces)."""
    head, found, body = data.partition(b"\r\n\r\n")
    if not found:
        return False
    lowered = head.lower()
    if b"transfer-encoding: chunked" in lowered:
        return body.endswith(b"0\r\n\r\n")
    for line in lowered.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


async def read_all(reader: asyncio.StreamReader, timeout_s: float) -> bytes:
    """One whole answer, or everything until the server closes (or `timeout_s` passes)."""
    chunks = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            while not _complete(bytes(chunks)) and (chunk := await reader.read(65536)):
                chunks += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return bytes(chunks)


async def raw_request(
    port: int, head: str, body: bytes = b"", *, timeout_s: float = 30.0
) -> RawAnswer:
    """Send one request verbatim on a fresh connection (`Connection: close` is added)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head.rstrip("\r\n").encode() + b"\r\nConnection: close\r\n\r\n" + body)
        await writer.drain()
        return parse_answer(await read_all(reader, timeout_s))
    finally:
        writer.close()
