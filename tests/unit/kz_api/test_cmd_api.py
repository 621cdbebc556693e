"""`kz api` is registered with host and port options."""

from __future__ import annotations

import pytest

from kz_cli.cmd_api import run_api
from kz_cli.main import build_parser

pytestmark = pytest.mark.unit


def test_kz_api_parses_host_and_port() -> None:
    """`kz api --host H --port P` routes to the API runner with those values."""
    args = build_parser().parse_args(["api", "--host", "0.0.0.0", "--port", "9000"])
    assert args.handler is run_api and args.host == "0.0.0.0" and args.port == 9000
