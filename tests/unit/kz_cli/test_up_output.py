"""What `kz up` prints around its banner."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from kz_cli.cmd_up import banner, configure_logging
from kz_cli.logs import PartFormatter

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


@pytest.mark.parametrize(
    ("name", "message", "shown"),
    [
        ("kz_projector.gitproj", "git projector: caught up to 3", "git projector: caught up to 3"),
        ("kz.runner", "runner: task 5f8b: done", "runner: task 5f8b: done"),
        ("kz.runner", "task 5f8b: done", "kz.runner: task 5f8b: done"),
        ("kz_api.errors", "unexpected error", "kz_api.errors: unexpected error"),
        ("nats.aio.client", "Encountered error", "nats.aio.client: Encountered error"),
    ],
)
def test_a_log_line_names_its_part_once(name: str, message: str, shown: str) -> None:
    """A message that names its part is shown as it is; one that does not gets its logger's
    name before it: every line says where it came from, once."""
    record = logging.LogRecord(name, logging.INFO, "x.py", 1, message, None, None)
    assert PartFormatter().format(record).endswith(f" INFO {shown}")
