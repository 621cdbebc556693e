"""A worker's container is one unit no descendant leaves, on a real Docker engine.

Each family of `kz_testing.containment` is attempted in a worker container started as a
judge's are (`DockerBackend.spawn`, no added capability, the engine's default seccomp
profile): no namespace can be made (EPERM, or ENOSYS for clone3), and what the worker forks
(a helper, a setsid daemon) is paused with it, counted by INSPECT and killed with it. After
every test no process of the workers' uids is left on the host.
"""

from __future__ import annotations

import re
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kz_runner.backends import DockerBackend
from kz_runner.backends.base import StepSpec
from kz_runner.backends.docker_engine import DockerProcess
from kz_runner.limits import MIB, StepLimits
from kz_testing.containment import FAMILIES, attempt, counter_moves, survivors

pytestmark = pytest.mark.integration

EPERM, ENOSYS = 1, 38
EXPECTED = {"setns": EPERM, "clone3": ENOSYS, "unshare_fork": EPERM, "clone_newuser": EPERM}
# The worker's side of its channel, as kz_harness.launch makes it: connect to /kz/fds/3.sock.
CONNECT = """
import os as _os, socket as _socket
_channel = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
_channel.connect("/kz/fds/3.sock")
"""


@pytest.fixture
def uids(worker_id: str, docker_backend: DockerBackend) -> Iterator[range]:
    """The workers' uids of this test process, with no survivor among them afterwards."""
    lane = int(worker_id.removeprefix("gw")) if worker_id.startswith("gw") else 0
    chosen = range(59000 - 100 * lane, 59000 - 100 * lane + 8)
    yield chosen
    deadline = time.monotonic() + 10
    while survivors(chosen) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert survivors(chosen) == []


def _start(
    backend: DockerBackend, tmp_path: Path, family: str, uid: int
) -> tuple[DockerProcess, Path, socket.socket]:
    workdir = tmp_path / "scratch"
    workdir.mkdir(mode=0o755)
    counter = workdir / "count"
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    step = StepSpec(
        argv=("python3", "-I", "-c", CONNECT + attempt(family, str(counter))),
        workdir=workdir, env={"LANG": "C.UTF-8"}, timeout_s=60,
        limits=StepLimits(memory_bytes=1024 * MIB), pass_fds=(theirs.fileno(),), uid=uid,
    )  # fmt: skip
    try:
        worker = backend.spawn(step)
    finally:
        theirs.close()
    deadline = time.monotonic() + 30
    while b"READY" not in worker.container.logs() and time.monotonic() < deadline:
        time.sleep(0.1)
    return worker, counter, ours


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_is_refused_or_held_in_a_container(
    docker_backend: DockerBackend, tmp_path: Path, uids: range, family: str
) -> None:
    """No namespace is made in a worker's container; its helper or daemon is paused with it
    (the counter stops), counted, and killed with it."""
    worker, counter, ours = _start(docker_backend, tmp_path, family, uids[3])
    try:
        logs = worker.container.logs()
        found = re.search(rf"TRIED {family} (-?\d+) (\d+)".encode(), logs)
        assert found, logs.decode()
        if family in EXPECTED:
            assert (int(found[1]), int(found[2])) == (-1, EXPECTED[family])
        assert b"SECCOMP 2" in logs
        if family in ("unshare_fork", "daemon"):
            assert counter_moves(counter), "the helper never ran"
            assert worker.inspect()["processes"] == 2
            worker.signal(signal.SIGSTOP)
            time.sleep(0.05)
            assert not counter_moves(counter), "the helper ran while its worker was paused"
            worker.signal(signal.SIGCONT)
            assert counter_moves(counter)
        members = worker.members()
    finally:
        worker.output()
        ours.close()
    assert not counter_moves(counter)
    assert all(not Path(f"/proc/{pid}").exists() for pid in members)
