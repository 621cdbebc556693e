"""The `kz` command: one sub-command per module, each module exposing `register(subparsers)`.

A sub-command handler takes the parsed arguments and returns the process exit code. Every
command takes `--json` and keeps the contract of `kz_cli.contract`: its exit codes, one JSON
document on stdout, errors as `{"error": {"code", "message", "fix"}}`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from kz_cli.contract import EXIT_CODES_HELP, CliError, Exit, emit_error, from_kz_error
from kz_events.errors import KzError

__all__ = ["COMMAND_MODULES", "KzParser", "build_parser", "leaf_parsers", "main"]

# Modules that contribute sub-commands; each defines `register(subparsers) -> None`.
COMMAND_MODULES = (
    "kz_cli.cmd_validate",
    "kz_cli.cmd_bench",
    "kz_cli.cmd_server",
    "kz_cli.cmd_api",
    "kz_cli.cmd_runner",
    "kz_cli.cmd_projector",
    "kz_cli.cmd_submit",
    "kz_cli.cmd_kernels",
    "kz_cli.cmd_logs",
    "kz_cli.cmd_events",
    "kz_cli.cmd_up",
    "kz_cli.cmd_new",
    "kz_cli.cmd_boards",
    "kz_cli.cmd_mcp",
    "kz_cli.cmd_agents",
    "kz_cli.cmd_problems",
)


class KzParser(argparse.ArgumentParser):
    """An argument parser whose usage errors keep the contract: exit 2, and with `--json` in
    the arguments a JSON error document on stdout."""

    json_requested = False  # set by `main` from the arguments, before they are parsed

    def error(self, message: str) -> NoReturn:
        error = CliError("usage", f"{self.prog}: {message}", exit_code=Exit.REFUSED)
        if KzParser.json_requested:
            emit_error(argparse.Namespace(json=True, command=self.prog.removeprefix("kz ")), error)
        else:
            self.print_usage(sys.stderr)
            print(f"kz: {error.message}", file=sys.stderr)
        raise SystemExit(Exit.REFUSED)


def leaf_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every parser under `parser` that runs a command (those without sub-commands)."""
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found.extend(leaf_parsers(sub) or [])
    if not found and parser.prog != "kz":
        found.append(parser)
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = KzParser(
        prog="kz",
        description="kernel zoo: LLM GPU kernel leaderboard",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
    for leaf in leaf_parsers(parser):
        if "--json" not in leaf._option_string_actions:
            leaf.add_argument(
                "--json",
                action="store_true",
                help="print one JSON document (schemas/cli.schema.json)",
            )
        if not leaf.epilog:
            leaf.epilog = EXIT_CODES_HELP
            leaf.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    KzParser.json_requested = "--json" in (sys.argv[1:] if argv is None else list(argv))
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except KzError as exc:
        error = from_kz_error(exc)
        emit_error(args, error)
        return int(error.exit)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader closed stdout (`| head`): it had what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(Exit.DONE)
    except Exception as exc:
        if not getattr(args, "json", False):
            raise
        traceback.print_exc()  # a bug: its trace for a person, and still one JSON document
        emit_error(args, CliError("internal_error", f"{type(exc).__name__}: {exc}"))
        return int(Exit.REFUSED)
    return code


if __name__ == "__main__":
    sys.exit(main())
