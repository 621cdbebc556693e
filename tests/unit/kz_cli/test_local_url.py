"""Where a command finds NATS: the flag, then KZ_NATS_URL, then a local `kz up`'s file."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from kz_cli.local import (
    API_URL_FILE,
    forget_local_url,
    nats_url_for,
    remember_local_url,
    server_url_for,
)
from kz_events.config import Settings
from kz_events.errors import ConfigError

pytestmark = pytest.mark.unit


def test_the_flag_then_the_setting_then_the_local_stack(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    remember_local_url(tmp_path, "nats://127.0.0.1:4999")
    configured = msgspec.structs.replace(settings, nats_url="nats://nats:4222")

    assert nats_url_for("nats://flag:1", configured) == "nats://flag:1"
    assert nats_url_for(None, configured) == "nats://nats:4222"
    assert nats_url_for(None, settings) == "nats://127.0.0.1:4999"


def test_without_any_the_error_names_every_way_to_give_one(tmp_path: Path) -> None:
    remember_local_url(tmp_path, "nats://127.0.0.1:4999")
    forget_local_url(tmp_path)
    forget_local_url(tmp_path)  # twice is fine: a stop after a crash finds nothing

    with pytest.raises(ConfigError) as caught:
        nats_url_for(None, Settings(data_dir=tmp_path))
    assert "KZ_NATS_URL" in str(caught.value) and "--nats-url" in str(caught.value)
    assert str(tmp_path / "nats.url") in str(caught.value)


def test_the_api_is_the_flag_then_the_setting_then_the_local_stack(tmp_path: Path) -> None:
    """`kz submit`/`kz logs` next to a `kz up` on another port need no --server."""
    settings = Settings(data_dir=tmp_path)
    assert server_url_for(None, settings) == "http://127.0.0.1:8000"
    remember_local_url(tmp_path, "http://127.0.0.1:18001", API_URL_FILE)
    configured = msgspec.structs.replace(settings, server_url="http://kz.example:80")

    assert server_url_for("http://flag:1", configured) == "http://flag:1"
    assert server_url_for(None, configured) == "http://kz.example:80"
    assert server_url_for(None, settings) == "http://127.0.0.1:18001"
    forget_local_url(tmp_path, API_URL_FILE)
    assert server_url_for(None, settings) == "http://127.0.0.1:8000"
