"""The docker backend against a fake Engine API served over HTTP, through the real SDK."""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import docker
import pytest

from kz_runner.backends import docker_engine
from kz_runner.backends.base import BackendUnavailable, Bind, StepSpec
from kz_runner.backends.docker_engine import DockerBackend, DockerProcess
from kz_runner.limits import MIB, StepLimits

pytestmark = pytest.mark.unit


class FakeEngine:
    """What the fake engine was asked, and how its one container behaves."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.created: dict[str, Any] = {}
        self.output = b"hello from the container\n"
        self.exit_code = 0
        self.hang = False
        self.killed = threading.Event()
        self.removed = False
        self.security = ["name=seccomp,profile=builtin", "name=cgroupns"]
        self.paused = False
        self.freeze_errors: list[tuple[int, bool]] = []  # (status, paused after it), in turn


def _frame(payload: bytes) -> bytes:
    return struct.pack(">BxxxL", 1, len(payload)) + payload


def make_handler(engine: FakeEngine) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _json(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _empty(self, status: int = 204) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _route(self, method: str) -> None:
            path = urlparse(self.path).path.split("/", 2)[-1]  # drop the /v1.xx prefix
            engine.calls.append((method, path))
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            done = not engine.hang or engine.killed.is_set()
            if path == "version":
                self._json(200, {"ApiVersion": "1.43", "Version": "24.0.0"})
            elif path == "info":
                self._json(200, {"SecurityOptions": engine.security})
            elif path == "containers/create":
                engine.created = json.loads(body)
                self._json(201, {"Id": "c0ffee", "Warnings": []})
            elif path == "containers/c0ffee/json":
                code = 137 if engine.killed.is_set() else engine.exit_code
                status = "exited" if done else "paused" if engine.paused else "running"
                state = {"Status": status, "Running": not done, "ExitCode": code}
                self._json(
                    200, {"Id": "c0ffee", "State": state, "Config": {"Tty": False}, "Name": "/t"}
                )
            elif path == "containers/c0ffee/logs":
                self._logs()
            elif path in ("containers/c0ffee/start", "containers/c0ffee/kill"):
                if path.endswith("kill"):
                    engine.killed.set()
                self._empty()
            elif path in ("containers/c0ffee/pause", "containers/c0ffee/unpause"):
                if engine.freeze_errors:
                    status, engine.paused = engine.freeze_errors.pop(0)
                    self._json(status, {"message": "OCI runtime pause failed: unable to freeze"})
                else:
                    engine.paused = path.endswith("/pause")
                    self._empty()
            elif path == "containers/c0ffee/top":
                self._json(
                    200,
                    {
                        "Titles": ["UID", "PID", "CMD"],
                        "Processes": [["65000", "4242", "python3 -I launch.py worker"]],
                    },
                )
            elif path == "containers/c0ffee/stats":
                self._json(
                    200,
                    {
                        "cpu_stats": {"cpu_usage": {"total_usage": 12_000_000}},
                        "pids_stats": {"current": 3},
                    },
                )
            elif path == "containers/c0ffee/wait":
                self._json(200, {"StatusCode": engine.exit_code})
            elif method == "DELETE" and path == "containers/c0ffee":
                engine.removed = True
                self._empty()
            else:
                self._json(404, {"message": f"no route {method} {path}"})

        def _logs(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.docker.raw-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(_frame(engine.output))
            self.wfile.flush()
            if engine.hang:
                engine.killed.wait(10)
            self.close_connection = True

        def do_GET(self) -> None:
            self._route("GET")

        def do_POST(self) -> None:
            self._route("POST")

        def do_DELETE(self) -> None:
            self._route("DELETE")

    return Handler


@pytest.fixture
def engine() -> Iterator[tuple[FakeEngine, docker.DockerClient]]:
    fake = FakeEngine()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(fake))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = docker.DockerClient(
        base_url=f"tcp://127.0.0.1:{server.server_address[1]}", version="1.43"
    )
    yield fake, client
    client.close()
    server.shutdown()
    server.server_close()


def _step(tmp_path: Path, timeout_s: float = 10.0, **limits: Any) -> StepSpec:
    return StepSpec(
        argv=("python3", ".kernel_package/benchmark.py"),
        workdir=tmp_path,
        env={"KZ_ARCH": "sm90"},
        timeout_s=timeout_s,
        limits=StepLimits(memory_bytes=2048 * MIB, max_pids=64, max_file_bytes=8 * MIB, **limits),
        readonly_paths=(tmp_path / "harness",),
    )


def test_the_container_carries_every_limit(engine: tuple[FakeEngine, Any], tmp_path: Path) -> None:
    """The create payload disables the network, locks the root and sets every limit."""
    fake, client = engine
    backend = DockerBackend(image="kz/runner:cuda", client=client, cpus=2.0, user="1000:1000")
    result = backend.run(_step(tmp_path))
    assert result.exit_code == 0 and result.output == b"hello from the container\n"
    made = fake.created
    host = made["HostConfig"]
    assert made["Image"] == "kz/runner:cuda" and made["User"] == "1000:1000"
    assert made["NetworkDisabled"] is True and host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    assert host["Memory"] == 2048 * MIB and host["MemorySwap"] == 2048 * MIB
    assert host["PidsLimit"] == 64 and host["NanoCpus"] == 2_000_000_000
    assert {"Name": "fsize", "Soft": 8 * MIB, "Hard": 8 * MIB} in host["Ulimits"]
    assert host["CapDrop"] == ["ALL"] and "no-new-privileges" in host["SecurityOpt"]
    assert host["DeviceRequests"][0]["Count"] == -1 and host["DeviceRequests"][0][
        "Capabilities"
    ] == [["gpu"]]
    assert "/tmp" in host["Tmpfs"]
    assert f"{tmp_path}:{tmp_path}:rw" in host["Binds"]
    assert f"{tmp_path / 'harness'}:{tmp_path / 'harness'}:ro" in host["Binds"]
    assert made["WorkingDir"] == str(tmp_path) and "KZ_ARCH=sm90" in made["Env"]
    assert fake.removed


def test_a_hanging_container_is_killed_at_the_timeout_and_removed(
    engine: tuple[FakeEngine, Any], tmp_path: Path
) -> None:
    """A container that outlives its step timeout is killed, reported, and removed."""
    fake, client = engine
    fake.hang = True
    result = DockerBackend(image="i", client=client).run(_step(tmp_path, timeout_s=0.5))
    assert result.timed_out and result.killed_reason == "timeout"
    assert fake.killed.is_set() and fake.removed


def test_output_over_the_limit_kills_the_container(
    engine: tuple[FakeEngine, Any], tmp_path: Path
) -> None:
    """Logs past max_output_bytes are cut with a marker and the container is killed."""
    fake, client = engine
    fake.hang = True
    fake.output = b"x" * 100_000
    result = DockerBackend(image="i", client=client).run(_step(tmp_path, max_output_bytes=1000))
    assert result.killed_reason == "output_limit" and result.output_truncated
    assert result.output.startswith(b"x" * 1000) and b"truncated" in result.output
    assert fake.removed


def test_a_failing_exit_code_is_reported(engine: tuple[FakeEngine, Any], tmp_path: Path) -> None:
    """The container's exit code comes back as the step's exit code."""
    fake, client = engine
    fake.exit_code = 3
    assert DockerBackend(image="i", client=client, gpus=None).run(_step(tmp_path)).exit_code == 3
    assert fake.created["HostConfig"].get("DeviceRequests") in (None, [])


def test_availability_is_checked_against_the_engine(engine: tuple[FakeEngine, Any]) -> None:
    """check_available asks the engine's version, and an unreachable engine is one clear error."""
    fake, client = engine
    DockerBackend(image="i", client=client).check_available()
    assert ("GET", "version") in fake.calls
    with pytest.raises(BackendUnavailable, match="docker engine not reachable"):
        DockerBackend(image="i", base_url="tcp://127.0.0.1:1").check_available()


@pytest.mark.parametrize(
    ("security", "problem"),
    [
        (["name=seccomp,profile=builtin"], None),
        (["name=apparmor", "name=seccomp,profile=default", "name=cgroupns"], None),
        (["name=seccomp,profile=unconfined"], "unconfined"),
        (["name=apparmor"], "seccomp is off"),
        ([], "seccomp is off"),
    ],
)
def test_an_engine_that_would_let_containers_make_namespaces_is_refused(
    engine: tuple[FakeEngine, Any], security: list[str], problem: str | None
) -> None:
    """Without the engine's seccomp profile a worker could unshare: refused at start, naming
    why."""
    fake, client = engine
    fake.security = security
    if problem is None:
        DockerBackend(image="i", client=client).check_available()
        return
    with pytest.raises(BackendUnavailable, match=problem):
        DockerBackend(image="i", client=client).check_available()


def _connect_as_the_container(engine: FakeEngine, fd: int, kind: int) -> socket.socket:
    """What kz_harness.launch does inside the container: connect to /kz/fds/<fd>.sock."""
    deadline = time.monotonic() + 5
    while not engine.created and time.monotonic() < deadline:
        time.sleep(0.01)
    binds = engine.created["HostConfig"]["Binds"]
    folder = next(b.split(":")[0] for b in binds if b.split(":")[1] == "/kz/fds")
    conn = socket.socket(socket.AF_UNIX, kind)
    while True:
        try:
            conn.connect(f"{folder}/{fd}.sock")
            return conn
        except (FileNotFoundError, ConnectionRefusedError):
            time.sleep(0.01)


def test_a_worker_container_is_apart_and_its_channel_handed_over(
    engine: tuple[FakeEngine, Any], tmp_path: Path
) -> None:
    """A judge's worker runs in its own container under its own uid, sees src/ read-only and
    its scratch only; the runner hands the judge the container's own connection; STOP and
    CONT freeze and thaw its cgroup; the engine's stats count it."""
    fake, client = engine
    src, scratch = tmp_path / "src", tmp_path / "scratch"
    src.mkdir()
    scratch.mkdir()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    step = StepSpec(
        argv=("python3", "-I", "/kz/harness/kz_harness/launch.py", "worker"),
        workdir=scratch, env={"KZ_CHANNEL_FD": "3"}, timeout_s=10,
        binds=(Bind(scratch, "/kz/work/scratch", writable=True), Bind(src, "/kz/work/src")),
        tmpfs=("/home/kz",), cwd="/kz/work", pass_fds=(theirs.fileno(),), uid=65001,
    )  # fmt: skip
    backend = DockerBackend(image="kz/runner:cuda", client=client)
    box: list[socket.socket] = []
    connector = threading.Thread(
        target=lambda: box.append(
            _connect_as_the_container(fake, 3, socket.SOCK_SEQPACKET)  # spawn: from 3 up
        )
    )
    connector.start()
    worker = backend.spawn(step)
    connector.join()
    made = fake.created
    host = made["HostConfig"]
    assert made["User"] == "65001:65001" and made["WorkingDir"] == "/kz/work"
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
    assert (
        f"{src}:/kz/work/src:ro" in host["Binds"]
        and f"{scratch}:/kz/work/scratch:rw" in host["Binds"]
    )
    assert not any("/kz/judge" in bind for bind in host["Binds"]) and "/home/kz" in host["Tmpfs"]
    assert made["Env"].count("KZ_FD_SOCKETS=3:seqpacket") == 1
    box[0].send(b"ping")  # the container's end reaches the handed-over channel directly
    assert worker.channel.recv(16) == b"ping"
    worker.signal(19)
    worker.signal(18)
    assert ("POST", "containers/c0ffee/pause") in fake.calls
    assert ("POST", "containers/c0ffee/unpause") in fake.calls
    assert worker.inspect() == {"processes": 1, "threads": 3, "cpu_ns": 12_000_000,
                                "main_cpu_ns": 12_000_000}  # fmt: skip
    assert worker.output() == b"hello from the container\n"
    assert fake.killed.is_set() and fake.removed
    for sock in (ours, theirs, box[0]):
        sock.close()


def test_a_judge_container_gets_its_descriptors_through_the_bridge(
    engine: tuple[FakeEngine, Any], tmp_path: Path
) -> None:
    """The judge's control socket and result pipe reach the container as sockets it connects
    to; messages and the descriptors they carry are relayed both ways, the result streamed."""
    fake, client = engine
    fake.hang = True
    control, judge_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    result_read, result_write = os.pipe()
    step = StepSpec(
        argv=("python3", "-I", "/kz/harness/kz_harness/launch.py", "judge", "/kz/judge/b.py"),
        workdir=tmp_path, env={}, timeout_s=10,
        pass_fds=(judge_end.fileno(), result_write),
    )  # fmt: skip
    backend = DockerBackend(image="i", client=client)
    outcome: list[Any] = []
    runner = threading.Thread(target=lambda: outcome.append(backend.run(step)))
    runner.start()
    inside = _connect_as_the_container(fake, judge_end.fileno(), socket.SOCK_SEQPACKET)
    result = _connect_as_the_container(fake, result_write, socket.SOCK_STREAM)
    inside.send(b"\x14{}")  # the judge asks
    assert control.recv(16) == b"\x14{}"
    passed_r, passed_w = os.pipe()
    socket.send_fds(control, [b"\x0a{}"], [passed_w])  # the runner answers with a descriptor
    data, fds, _, _ = socket.recv_fds(inside, 16, 4)
    assert data == b"\x0a{}" and len(fds) == 1
    os.write(fds[0], b"through")
    assert os.read(passed_r, 16) == b"through"
    result.sendall(b'{"accepted": true}')
    result.close()
    assert os.read(result_read, 64) == b'{"accepted": true}'
    fake.killed.set()
    runner.join(10)
    assert outcome and fake.removed
    for fd in (*fds, passed_r, passed_w, result_read, result_write):
        os.close(fd)
    for sock in (control, judge_end, inside):
        sock.close()


def _process(fake: FakeEngine, client: Any) -> DockerProcess:
    fake.hang = True  # the container runs until killed
    backend = DockerBackend(image="kz/runner:cuda", client=client)
    return DockerProcess(backend, client.containers.get("c0ffee"), None, None, 0)  # type: ignore[arg-type]


def test_a_freeze_the_runtime_gives_up_on_is_asked_again_until_the_engine_has_it(
    engine: tuple[FakeEngine, Any],
) -> None:
    """A loaded host's freezer can fail ("unable to freeze") and thaw; the stop is asked again
    until the container is paused. A request refused because the engine is already in the
    state asked for (it froze after all) is that state, not an error."""
    fake, client = engine
    process = _process(fake, client)
    fake.freeze_errors = [(500, False), (500, False)]
    process.signal(19)
    assert process.paused and fake.paused
    assert fake.calls.count(("POST", "containers/c0ffee/pause")) == 3
    fake.freeze_errors = [(409, False)]  # "not paused": the thaw happened after all
    process.signal(18)
    assert not process.paused
    fake.freeze_errors = [(409, True)]  # "already paused"
    process.signal(19)
    assert process.paused and fake.paused


def test_a_freeze_that_keeps_failing_is_an_error(
    engine: tuple[FakeEngine, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, client = engine
    monkeypatch.setattr(docker_engine, "_FREEZE_S", 0.2)
    process = _process(fake, client)
    fake.freeze_errors = [(500, False)] * 100
    with pytest.raises(docker.errors.APIError, match="unable to freeze"):
        process.signal(19)
    assert not process.paused
