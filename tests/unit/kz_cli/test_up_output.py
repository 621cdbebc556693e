"""What `kz up` prints around its banner."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from kz_cli.cmd_up import banner, configure_logging

pytestmark = pytest.mark.unit


@pytest.fixture
def restore_levels() -> Iterator[None]:
    names = ("httpx", "httpcore", "uvicorn.access")
    before = {name: logging.getLogger(name).level for name in names}
    yield
    for name, level in before.items():
        logging.getLogger(name).setLevel(level)


@pytest.mark.usefixtures("restore_levels")
def test_http_client_requests_do_not_log_at_info() -> None:
    """httpx logs every request at INFO; kz up keeps it to warnings so the banner shows."""
    configure_logging()
    assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
    assert not logging.getLogger("httpcore").isEnabledFor(logging.INFO)


def test_the_banner_needs_no_kernel_id_and_names_kz_logs() -> None:
    text = banner("http://127.0.0.1:8000", "nats://127.0.0.1:4222", Path(".kz/nats.url"))
    assert "kernel zoo is up: http://127.0.0.1:8000/webui/" in text
    assert "kz submit DIR --server http://127.0.0.1:8000" in text and "--kernel-id" not in text
    assert "kz logs ID" in text
