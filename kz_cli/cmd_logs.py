"""`kz logs ID`: print the runner's log of a submission's latest attempt."""

from __future__ import annotations

import argparse
import sys

from kz_cli.http import ApiClient, body_of, error_lines, log_url

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    logs = subparsers.add_parser(
        "logs",
        help="print a submission's runner log",
        description="Print the runner's log of a submission's latest attempt "
        "(GET /api/submissions/ID/logs).",
        epilog="exit codes: 0 printed, 2 no log yet, unknown submission or server unreachable",
    )
    logs.add_argument("submission_id", metavar="ID", help="the submission id kz submit printed")
    logs.add_argument(
        "--server",
        metavar="URL",
        help="API base URL (default KZ_SERVER_URL, else a kz up's in this data dir, else "
        "127.0.0.1:8000)",
    )
    logs.set_defaults(handler=_handle_logs)


def _handle_logs(args: argparse.Namespace) -> int:
    client = ApiClient(args)
    response = client.call("GET", f"/api/submissions/{args.submission_id}/logs")
    if response.status_code != 200:
        lines = error_lines(body_of(response))
        print(
            f"kz: no log at {log_url(client.base_url, args.submission_id)}: {lines[0]}",
            file=sys.stderr,
        )
        return 2
    sys.stdout.write(response.text)
    if response.text and not response.text.endswith("\n"):
        sys.stdout.write("\n")
    return 0
