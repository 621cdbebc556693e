"""The descriptor bridge's sockets, the docker backend's hand-over of writable folders and
its entry point, where a real engine found them wanting (tests/integration/docker runs them
for real)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from kz_runner.backends.base import Bind, StepSpec
from kz_runner.backends.docker_engine import DockerBackend
from kz_runner.backends.fdbridge import FdBridge

pytestmark = pytest.mark.unit


def test_sockets_are_bound_in_a_folder_deeper_than_a_socket_path_allows(tmp_path: Path) -> None:
    """A task folder over 108 bytes deep still gets its sockets (bound through the folder's
    descriptor), and the step connects to them by their short inside path."""
    folder = tmp_path / ("d" * 100) / ("e" * 100)
    folder.parent.mkdir()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    bridge = FdBridge(folder, [theirs.fileno()])
    try:
        assert (folder / f"{theirs.fileno()}.sock").exists()
        assert len(str(folder / f"{theirs.fileno()}.sock")) > 108
    finally:
        bridge.close()
        ours.close()
        theirs.close()


def test_an_accepted_socket_takes_no_second_connection(tmp_path: Path) -> None:
    """Once the step has connected, the listener is closed and its path gone: a second
    connection from inside (a candidate looking for another way out) is refused."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    folder = tmp_path / "fds"
    bridge = FdBridge(folder, [theirs.fileno()])
    path = str(folder / f"{theirs.fileno()}.sock")
    first = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    first.connect(path)
    handed = bridge.accept(theirs.fileno(), 5.0)
    second = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with pytest.raises(OSError):
        second.connect(path)
    first.send(b"ping")
    assert handed.recv(8) == b"ping"
    for sock in (first, second, handed, ours, theirs):
        sock.close()
    bridge.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="handing folders to another uid needs root")
def test_writable_folders_are_handed_to_the_steps_uid(tmp_path: Path) -> None:
    """As root, the work dir and the writable binds become the step's uid's (the container
    runs unprivileged); read-only binds stay root's."""
    work, scratch, src = tmp_path / "work", tmp_path / "scratch", tmp_path / "src"
    for folder in (work, scratch, src):
        folder.mkdir()
        (folder / "file").write_text("x")
    step = StepSpec(
        argv=("true",),
        workdir=work,
        env={},
        timeout_s=1.0,
        binds=(Bind(scratch, "/kz/work/scratch", writable=True), Bind(src, "/kz/work/src")),
        uid=65003,
    )
    DockerBackend(image="i", gpus=None)._hand_over(step)
    assert {(work / "file").stat().st_uid, scratch.stat().st_uid} == {65003}
    assert (scratch / "file").stat().st_gid == 65003
    assert src.stat().st_uid == 0 and (src / "file").stat().st_uid == 0


@pytest.mark.parametrize(
    ("user", "uid", "expected"),
    [
        ("65534:65534", None, (65534, 65534)),
        ("1000:1001", None, (1000, 1001)),
        ("2000", None, (2000, 2000)),
        ("kz", None, None),
        ("65534:65534", 65001, (65001, 65001)),
    ],
)
def test_the_owner_of_a_step_is_its_numeric_user(
    user: str, uid: int | None, expected: tuple[int, int] | None, tmp_path: Path
) -> None:
    """A numeric user (or the step's own uid) is handed the folders; a name is left alone."""
    step = StepSpec(argv=("true",), workdir=tmp_path, env={}, timeout_s=1.0, uid=uid)
    owner = DockerBackend(image="i", gpus=None, user=user)._owner(step)
    assert owner == (expected if os.geteuid() == 0 else None)


def test_the_images_entry_point_is_reset(tmp_path: Path) -> None:
    """A step is its own argv, whatever entry point the image declares."""
    step = StepSpec(argv=("python3", "-V"), workdir=tmp_path, env={}, timeout_s=1.0)
    options = DockerBackend(image="i", gpus=None).create_options(step)
    assert options["entrypoint"] == [""] and options["command"] == ["python3", "-V"]
