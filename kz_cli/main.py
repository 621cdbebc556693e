"""The `kz` command: one sub-command per module, each module exposing `register(subparsers)`.

A sub-command handler takes the parsed arguments and returns the process exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from kz_events.errors import KzError

__all__ = ["build_parser", "main"]

# Modules that contribute sub-commands; each defines `register(subparsers) -> None`.
COMMAND_MODULES = (
    "kz_cli.cmd_validate",
    "kz_cli.cmd_bench",
    "kz_cli.cmd_server",
    "kz_cli.cmd_api",
    "kz_cli.cmd_runner",
    "kz_cli.cmd_projector",
    "kz_cli.cmd_submit",
    "kz_cli.cmd_logs",
    "kz_cli.cmd_events",
    "kz_cli.cmd_up",
    "kz_cli.cmd_problems",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kz", description="kernel zoo: LLM GPU kernel leaderboard"
    )
    parser.add_argument("--config", help="YAML settings file (the environment wins)")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except KzError as exc:
        print(f"kz: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
