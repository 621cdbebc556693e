"""`kz runner`'s backend settings from KZ_RUNNER_*: GPUs, read-only paths and bubblewrap."""

from __future__ import annotations

from pathlib import Path

import pytest

from kz_cli.cmd_runner import backend_settings
from kz_events.config import load_settings
from kz_events.errors import ConfigError
from kz_runner.backends import get_backend
from kz_runner.backends.sandbox import SandboxBackend

pytestmark = pytest.mark.unit


def test_a_gpu_sandbox_runner_gets_its_gpus_paths_and_bwrap() -> None:
    settings = load_settings(
        {
            "KZ_RUNNER_GPUS": "all",
            "KZ_RUNNER_READONLY": "/opt/torch/.venv, /opt/extra",
            "KZ_RUNNER_BWRAP": "/tmp/bw/usr/bin/bwrap",
        }
    )
    chosen = backend_settings(settings, "sandbox")
    assert chosen == {
        "bwrap": "/tmp/bw/usr/bin/bwrap",
        "gpus": "all",
        "readonly_paths": (Path("/opt/torch/.venv"), Path("/opt/extra")),
    }
    backend = get_backend("sandbox", **chosen)
    assert isinstance(backend, SandboxBackend)
    assert backend.gpus == () and Path("/opt/extra") in backend.readonly_paths


def test_defaults_leave_each_backend_as_it_was() -> None:
    settings = load_settings({})
    assert backend_settings(settings, "sandbox") == {}
    assert backend_settings(settings, "stub") == {}
    assert backend_settings(settings, "docker") == {"image": settings.runner_image}
    assert backend_settings(load_settings({"KZ_RUNNER_GPUS": "0"}), "docker")["gpus"] == "0"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KZ_RUNNER_GPUS": "gpu0"}, "KZ_RUNNER_GPUS: expected none, all or device indices"),
        ({"KZ_RUNNER_READONLY": "opt/torch"}, "KZ_RUNNER_READONLY: expected absolute paths"),
    ],
)
def test_bad_device_settings_stop_start_up_with_one_line(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(env)


def test_indices_and_none_are_accepted() -> None:
    assert load_settings({"KZ_RUNNER_GPUS": "0,1"}).runner_gpus == "0,1"
    assert load_settings({"KZ_RUNNER_GPUS": "none"}).runner_gpus == "none"
