"""`kz logs ID`: print the runner's log of a submission's latest attempt."""

from __future__ import annotations

import argparse
import sys

from kz_cli.contract import CliError, emit, from_response
from kz_cli.http import ApiClient, add_server_options, log_url

__all__ = ["MAX_JSON_LOG_CHARS", "register"]

MAX_JSON_LOG_CHARS = 200_000  # `--json` carries the log's last this many characters


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    logs = subparsers.add_parser(
        "logs",
        help="print a submission's runner log",
        description="Print the runner's log of a submission's latest attempt "
        "(GET /api/submissions/ID/logs).",
    )
    logs.add_argument("submission_id", metavar="ID", help="the submission id kz submit printed")
    add_server_options(logs)
    logs.set_defaults(handler=_handle_logs)


def _handle_logs(args: argparse.Namespace) -> int:
    client = ApiClient(args)
    url = log_url(client.base_url, args.submission_id)
    response = client.call("GET", f"/api/submissions/{args.submission_id}/logs")
    if response.status_code != 200:
        error = from_response(response)
        raise CliError(
            error.code,
            f"no log at {url}: {error.message}",
            exit_code=error.exit,
            details=error.details,
        )
    text = response.text
    if args.json:
        cut = len(text) > MAX_JSON_LOG_CHARS
        body = {"submission_id": args.submission_id, "log_url": url, "truncated": cut}
        emit(args, {**body, "log": text[-MAX_JSON_LOG_CHARS:]})
        return 0
    sys.stdout.write(text)
    if text and not text.endswith("\n"):
        sys.stdout.write("\n")
    return 0
