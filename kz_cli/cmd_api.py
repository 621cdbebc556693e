"""`kz api`: serve the HTTP API with uvicorn on the host and port of the settings."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kz_cli import aio
from kz_cli.contract import emit
from kz_cli.logs import configure_logging
from kz_events.config import check_exposure, load_settings

__all__ = ["register", "run_api"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("api", help="serve the HTTP API (uvicorn)")
    parser.add_argument("--host", help="listen address (default: KZ_HOST)")
    parser.add_argument("--port", type=int, help="listen port (default: KZ_PORT)")
    parser.set_defaults(handler=run_api)


def run_api(args: argparse.Namespace) -> int:
    import uvicorn

    from kz_api import create_app
    from kz_api.http_server import listen_socket, server_config

    config = getattr(args, "config", None)
    settings = load_settings(config_file=Path(config) if config else None)
    host, port = args.host or settings.host, args.port or settings.port
    check_exposure(settings, host)  # off loopback: keys, tokens, secret
    sock = listen_socket(host, port)  # a busy port is one line, before anything starts
    configure_logging()
    if getattr(args, "json", False):
        url = f"http://{host}:{port}"
        emit(args, {"state": "starting", "url": url, "mcp_url": f"{url}/mcp"})
    server = uvicorn.Server(
        server_config(
            create_app(settings),
            settings,
            host=host,
            port=port,
            log_level="info",
            loop=aio.uvicorn_loop(),
        )
    )
    server.run(sockets=[sock])
    return 0
