"""The whole stack as separate OS processes: NATS (one node or a 3-node cluster), two `kz api`
processes, one `kz projector` and `kz runner` processes, with kill/restart of any of them.

Every process runs in its own process group with its output in a log file under the test's
directory; `Stack.close` (and a finalizer, should a test forget) ends every group it started.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from kz_events.cluster import LocalCluster
from kz_events.server import EmbeddedServer, free_port
from kz_testing import KzProcess, kz_argv

__all__ = ["RoundRobin", "RunnerSpec", "Stack", "StackError", "stream_leader", "wait_for"]

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


class StackError(AssertionError):
    """A process of the stack did not come up, or a deadline passed."""


def wait_for(
    what: str, probe: Callable[[], T | None], timeout_s: float, *, every_s: float = 0.1
) -> T:
    """Poll `probe` until it returns something other than None/False; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last_error: BaseException | None = None
    while True:
        try:
            value = probe()
            if value is not None and value is not False:
                return value
        except (httpx.HTTPError, OSError, ValueError) as exc:
            last_error = exc
        if time.monotonic() > deadline:
            raise StackError(f"waited {timeout_s:.0f}s for {what}; last error: {last_error!r}")
        time.sleep(every_s)


def _end_all(procs: dict[str, KzProcess], servers: list[EmbeddedServer]) -> None:
    """SIGKILL every process of the stack still running. Only live `Popen` objects are
    signalled, so a pid the system has since given to someone else is never touched."""
    for proc in procs.values():
        proc.kill()
    for server in servers:
        server.kill()


@dataclass(frozen=True)
class RunnerSpec:
    """A runner process: its name, architecture and backend."""

    name: str
    arch: str
    backend: str


DEFAULT_RUNNERS = (
    RunnerSpec("runner-cpu-0", "cpu", "sandbox"),
    RunnerSpec("runner-cpu-1", "cpu", "sandbox"),
    RunnerSpec("runner-sm90-0", "sm90", "stub"),
    RunnerSpec("runner-sm90-1", "sm90", "stub"),
)


class RoundRobin:
    """An HTTP client that spreads requests over the API processes like a load balancer.

    A connection error on one process (it is restarting) moves the request to the next one;
    only requests that are safe to repeat (GETs, or POSTs carrying an Idempotency-Key) retry.
    """

    def __init__(self, base_urls: list[str], timeout_s: float = 60.0) -> None:
        self.base_urls = base_urls
        self._clients = [httpx.Client(base_url=u, timeout=timeout_s) for u in base_urls]
        self._next = itertools.count()
        self._lock = threading.Lock()

    def _order(self) -> list[httpx.Client]:
        with self._lock:
            start = next(self._next) % len(self._clients)
        return self._clients[start:] + self._clients[:start]

    def request(
        self, method: str, path: str, *, retry_s: float = 60.0, **kw: Any
    ) -> httpx.Response:
        headers = kw.get("headers") or {}
        repeatable = method == "GET" or "Idempotency-Key" in headers
        deadline = time.monotonic() + retry_s
        while True:
            for client in self._order():
                try:
                    response = client.request(method, path, **kw)
                except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as exc:
                    if not repeatable:
                        raise
                    error: Exception = exc
                    _rewind(kw)
                    continue
                if response.status_code in (502, 503) and repeatable:
                    error = StackError(f"{response.status_code} {response.text[:200]}")
                    continue
                return response
            if time.monotonic() > deadline:
                raise StackError(f"{method} {path}: no API process answered: {error!r}")
            time.sleep(0.2)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("POST", path, **kw)

    def close(self) -> None:
        for client in self._clients:
            client.close()


def _rewind(kw: dict[str, Any]) -> None:
    """File parts given as open files must start again from the beginning on a retry."""
    for part in (kw.get("files") or {}).values():
        handle = part[1] if isinstance(part, tuple) else part
        if hasattr(handle, "seek"):
            handle.seek(0)


@dataclass
class Stack:
    """The real stack under `root`: NATS, `apis` API processes, a projector and the runners."""

    root: Path
    cluster: bool = False
    apis: int = 2
    runners: tuple[RunnerSpec, ...] = DEFAULT_RUNNERS
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, KzProcess] = field(default_factory=dict, init=False)
    nats: EmbeddedServer | LocalCluster | None = field(default=None, init=False)
    api_ports: list[int] = field(default_factory=list, init=False)
    _servers: list[EmbeddedServer] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.logs = self.root / "logs"
        self.logs.mkdir(exist_ok=True)
        # Runs at garbage collection or interpreter exit if close() was never reached.
        self._finalizer = weakref.finalize(self, _end_all, self.procs, self._servers)

    # --- configuration -------------------------------------------------------------------

    @property
    def nats_url(self) -> str:
        assert self.nats is not None
        if isinstance(self.nats, LocalCluster):
            return ",".join(self.nats.urls)
        return self.nats.url

    @property
    def kernel_repo(self) -> Path:
        return self.root / "kernel_repo"

    @property
    def api_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}" for port in self.api_ports]

    def base_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KZ_")}
        env.update(
            {
                "PYTHONUNBUFFERED": "1",
                "KZ_NATS_URL": self.nats_url,
                "KZ_DATA_DIR": str(self.root / "data"),
                "KZ_KERNEL_REPO_PATH": str(self.kernel_repo),
                "KZ_INDEX_PATH": str(self.root / "index.json"),
                "KZ_LEASE_SECRET": "system-test-lease-secret-0123456789abcdef",
                "KZ_REPLICAS": "3" if self.cluster else "1",
                "KZ_MAX_OPEN_SUBMISSIONS": "1000",
                "KZ_RESUBMIT_LIMIT": "0",  # load, not the resubmission rate, is under test
                "KZ_LEASE_S": "6",
                "KZ_HEARTBEAT_S": "1",
                "KZ_MAX_ATTEMPTS": "3",
                "KZ_TASK_TIMEOUT_S": "20",
                "KZ_STEP_TIMEOUT_S": "15",
                "KZ_LONGPOLL_TIMEOUT_S": "10",
            }
        )
        env.update(self.env)
        return env

    def _proc(self, name: str, args: list[str], extra: dict[str, str] | None = None) -> KzProcess:
        env = {**self.base_env(), **(extra or {})}
        proc = KzProcess(name, kz_argv(*args), env, self.logs / f"{name}.log", cwd=REPO)
        self.procs[name] = proc
        return proc

    # --- lifecycle -----------------------------------------------------------------------

    def start(self, *, timeout_s: float = 90.0) -> Stack:
        try:
            self._start_nats(timeout_s)
            self.api_ports = [free_port() for _ in range(self.apis)]
            for i, port in enumerate(self.api_ports):
                self._proc(f"api-{i}", ["api", "--port", str(port)])
            # The first API creates the streams with the right replica count before the others.
            self.start_proc("api-0", timeout_s=timeout_s)
            for i in range(1, self.apis):
                self.start_proc(f"api-{i}", timeout_s=timeout_s)
            self._proc("projector", ["projector"])
            self.start_proc("projector")
            for spec in self.runners:
                workdir = self.root / "work" / spec.name
                extra = {"KZ_RUNNER_WORKDIR": str(workdir), "KZ_RUNNER_ID": spec.name}
                args = ["runner", "--arch", spec.arch, "--backend", spec.backend]
                self._proc(spec.name, args, extra)
                self.start_proc(spec.name)
            self.wait_runners(len(self.runners), timeout_s)
        except BaseException:
            print(self.tails(), file=sys.stderr)
            self.close()
            raise
        return self

    def _start_nats(self, timeout_s: float) -> None:
        if self.cluster:
            cluster = LocalCluster(self.root / "nats", size=3)
            self.nats = cluster
            cluster.start(timeout_s=timeout_s)
        else:
            server = EmbeddedServer(self.root / "nats", log_path=self.logs / "nats.log")
            self.nats = server
            server.start(timeout_s=timeout_s)
        nodes = self.nats.servers if isinstance(self.nats, LocalCluster) else [self.nats]
        self._servers.extend(nodes)

    def start_proc(self, name: str, *, timeout_s: float = 90.0) -> None:
        """Start (or restart) a process and wait until it serves, if it is an API."""
        proc = self.procs[name].start()
        assert proc.pid is not None
        if name.startswith("api-"):
            self.wait_api(int(name.split("-")[1]), timeout_s)

    def restart(self, name: str, *, sig: int = signal.SIGKILL, timeout_s: float = 90.0) -> None:
        """End a process with `sig` (SIGKILL: a crash; SIGTERM: a clean stop) and start it again."""
        proc = self.procs[name]
        if sig == signal.SIGKILL:
            proc.kill()
        else:
            proc.stop()
        self.start_proc(name, timeout_s=timeout_s)

    def cluster_node(self, server_name: str) -> int:
        assert isinstance(self.nats, LocalCluster)
        return self.nats.index_of(server_name)

    def kill_nats_node(self, i: int) -> None:
        assert isinstance(self.nats, LocalCluster)
        self.nats.kill(i)

    def restart_nats_node(self, i: int, *, timeout_s: float = 90.0) -> None:
        """Start cluster node `i` again on its store and wait until the cluster is healthy."""
        assert isinstance(self.nats, LocalCluster)
        self.nats.restart(i, timeout_s=timeout_s)

    def wait_api(self, i: int, timeout_s: float) -> None:
        self.procs[f"api-{i}"].wait_healthy(self.api_urls[i], timeout_s)

    def wait_runners(self, count: int, timeout_s: float) -> None:
        """Wait until the API knows `count` runners (each registers when it starts)."""

        def registered() -> bool:
            for name, proc in self.procs.items():
                if name.startswith("runner") and not proc.alive:
                    raise StackError(f"{name} exited:\n{proc.tail()}")
            health = httpx.get(self.api_urls[0] + "/api/health", timeout=5).json()
            return int(health.get("runners", 0)) >= count

        wait_for(f"{count} runners registered", registered, timeout_s, every_s=0.2)

    def client(self) -> RoundRobin:
        return RoundRobin(self.api_urls)

    def kz(self, *args: str, timeout_s: float = 180.0) -> subprocess.CompletedProcess[str]:
        """Run a one-shot `kz` command against the stack (audit, index)."""
        return subprocess.run(
            kz_argv(*args),
            env=self.base_env(),
            cwd=str(REPO),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )

    def tails(self, lines: int = 30) -> str:
        parts = [
            f"--- {name} (alive={p.alive}, starts={p.starts}) ---\n"
            f"{p.errors()}\n...\n{p.tail(lines)}"
            for name, p in self.procs.items()
        ]
        for log in (
            sorted((self.root / "nats").rglob("*.log")) if (self.root / "nats").exists() else []
        ):
            text = log.read_text(errors="replace").splitlines()[-10:]
            parts.append(f"--- {log.name} ---\n" + "\n".join(text))
        return "\n".join(parts)

    def close(self) -> None:
        for proc in reversed(list(self.procs.values())):
            proc.stop(timeout_s=10)
        if self.nats is not None:
            self.nats.stop()
        _end_all(self.procs, self._servers)

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def stream_leader(stack: Stack, stream: str = "KZ_EVENTS") -> str | None:
    """The server name that leads `stream` in the cluster, read from a node's monitoring port."""
    assert isinstance(stack.nats, LocalCluster)
    for i, server in enumerate(stack.nats.servers):
        if server.pid is None:
            continue
        url = stack.nats.monitor_url(i) + "/jsz?streams=true"
        with contextlib.suppress(httpx.HTTPError, ValueError):
            jsz = httpx.get(url, timeout=2).json()
            for account in jsz.get("account_details", []):
                for detail in account.get("stream_detail", []):
                    if detail["name"] == stream:
                        leader = (detail.get("cluster") or {}).get("leader")
                        if leader:
                            return str(leader)
    return None
