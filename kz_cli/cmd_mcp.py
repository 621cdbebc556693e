"""`kz mcp [--http]`: the Model Context Protocol server, the `kz` operations as tools for an
agent host. stdio by default (the host starts it; stdout is the protocol, logs go to stderr);
`--http` serves streamable HTTP at http://HOST:PORT/mcp. The API also serves it at `/mcp`.

It acts as `--submitter`/`--token` (KZ_SUBMITTER_ID, KZ_SUBMITTER_TOKEN); over HTTP a request's
own `X-Submitter-Id` or `Authorization: Bearer` header wins. docs/agents.md shows the setup.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

from kz_cli import aio
from kz_cli.contract import emit
from kz_cli.local import server_url_for
from kz_events.config import load_settings

if TYPE_CHECKING:  # imported when the command runs: the SDK is not loaded for other commands
    from kz_mcp import Api, McpOptions

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "mcp",
        help="run the MCP server (stdio, or --http) for an agent host",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP listen address (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="HTTP listen port (8765)")
    parser.add_argument(
        "--server",
        metavar="URL",
        help="the kernel zoo API (default KZ_SERVER_URL, else a kz up's in this data dir)",
    )
    parser.add_argument("--submitter", metavar="ID", help="act as this submitter (open mode)")
    parser.add_argument("--token", metavar="TOKEN", help="act with this bearer token")
    parser.add_argument(
        "--no-bench", action="store_true", help="refuse bench_files (judge nothing here)"
    )
    parser.set_defaults(handler=_handle_mcp)


def _handle_mcp(args: argparse.Namespace) -> int:
    from kz_mcp import Api, Identity, McpOptions, http_app

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    settings = load_settings(config_file=args.config)
    api = Api(server_url_for(args.server, settings))
    identity = Identity.from_environment(args.submitter, args.token)
    options = McpOptions(identity=identity, bench_enabled=not args.no_bench)
    if not args.http:
        aio.run(_stdio(api, options))
        return 0
    import uvicorn

    app = http_app(api, options, args.host)
    url = f"http://{args.host}:{args.port}/mcp"
    if args.json:
        emit(args, {"state": "starting", "url": url, "api": api.base_url})
    else:
        print(f"kz mcp: serving {url} (tools act on {api.base_url})", file=sys.stderr)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")
    uvicorn.Server(config).run()
    return 0


async def _stdio(api: Api, options: McpOptions) -> None:
    from kz_mcp import serve_stdio

    try:
        await serve_stdio(api, options)
    finally:
        await api.close()
