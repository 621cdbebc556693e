"""`kz server`: run the embedded `nats-server` alone, with the store under `KZ_DATA_DIR`."""

from __future__ import annotations

import argparse
import contextlib
import signal
import threading
from pathlib import Path

from kz_cli.contract import emit
from kz_events.config import load_settings
from kz_events.server import EmbeddedServer

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("server", help="run the embedded NATS JetStream server")
    parser.add_argument("--port", type=int, default=4222)
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    settings = load_settings(config_file=args.config)
    server = EmbeddedServer(
        Path(settings.data_dir) / "nats", port=args.port, sync_always=settings.nats_sync_always
    )
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with server:
        if args.json:
            emit(args, {"state": "ready", "nats_url": server.url, "store": str(server.store_dir)})
        else:
            print(f"nats-server listening on {server.url} (store {server.store_dir})", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            done.wait()
    return 0
