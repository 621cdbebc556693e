"""How the submitter commands talk to the API: one client, and the lines they print for its
answers (refusals, the log pointer) kept as pure functions so tests read them directly."""

from __future__ import annotations

import argparse
import os
from typing import Any

import httpx

from kz_cli.contract import CliError, from_response, unreachable
from kz_cli.local import server_url_for
from kz_events.config import load_settings
from kz_package import Problem

__all__ = [
    "ApiClient",
    "add_server_options",
    "body_of",
    "error_lines",
    "log_pointer",
    "log_url",
    "refusal_lines",
]


def add_server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server",
        metavar="URL",
        help="API base URL (default KZ_SERVER_URL, else a kz up's in this data dir, else "
        "127.0.0.1:8000)",
    )
    parser.add_argument(
        "--submitter", metavar="ID", help="submitter id (default KZ_SUBMITTER_ID, else $USER)"
    )
    parser.add_argument(
        "--token", metavar="TOKEN", help="bearer token of a token-mode server (KZ_SUBMITTER_TOKEN)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print JSON documents instead of lines for people"
    )


class ApiClient:
    """An httpx client for the API named by `--server` (or `KZ_SERVER_URL`), sending the
    submitter's headers; a server it cannot reach ends the command as `unreachable` (exit 3).
    `transport` is the port tests swap for an `httpx.MockTransport` (None: the network)."""

    transport: httpx.BaseTransport | None = None

    def __init__(self, args: argparse.Namespace) -> None:
        settings = load_settings(config_file=args.config)
        submitter = getattr(args, "submitter", None)
        headers = {
            "X-Submitter-Id": submitter
            or os.environ.get("KZ_SUBMITTER_ID")
            or os.environ.get("USER", "anonymous")
        }
        token = getattr(args, "token", None) or os.environ.get("KZ_SUBMITTER_TOKEN")
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.base_url = server_url_for(args.server, settings).rstrip("/")
        self.http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(90.0, connect=5.0),
            transport=self.transport,
        )
        self.submitter = headers["X-Submitter-Id"]

    def call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            return self.http.request(method, path, **kw)
        except httpx.TransportError as exc:
            raise unreachable(self.base_url, exc) from exc

    def ok(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """The answer when it is a success; else the API's error as a `CliError`."""
        response = self.call(method, path, **kw)
        if response.status_code >= 400:
            raise from_response(response)
        return response

    def json(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        body = self.ok(method, path, **kw).json()
        if not isinstance(body, dict):
            raise CliError("invalid_answer", f"{path}: expected a JSON object from the server")
        return body


def body_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON object of an answer, or an error envelope describing what came instead."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()[:200] or "(empty)"
        return {"error": {"code": f"http_{response.status_code}", "message": text}}
    return body if isinstance(body, dict) else {"error": {"message": str(body)}}


def error_lines(body: dict[str, Any]) -> list[str]:
    """One line per package problem of an error envelope, else its one `code: message`."""
    error = body.get("error", {})
    problems = error.get("details", {}).get("problems", [])
    lines = [str(Problem(p["path"], p["field"], p["message"])) for p in problems]
    return lines or [f"{error.get('code', 'error')}: {error.get('message', body)}"]


def refusal_lines(where: str, body: dict[str, Any]) -> list[str]:
    """What `kz submit` prints when a package is refused, each fact once: a lease held by
    another submitter as such; a package's problems under one header; else one line."""
    error = body.get("error", {})
    code = str(error.get("code", "error"))
    message = str(error.get("message", ""))
    if code == "claim_held":
        details = error.get("details", {})
        return [
            f"kz: not submitted: {details.get('holder', 'another submitter')} holds the "
            f"optimisation lease on this kernel until {details.get('expires_at')} "
            "(submit after it ends, or ask them to release it: kz claim ID --release)"
        ]
    problems = error.get("details", {}).get("problems", [])
    if not problems:
        return [f"kz: package {where}: {code}: {message}"]
    count = f"{len(problems)} problem" + ("s" if len(problems) > 1 else "")
    return [f"kz: package {where} ({code}, {count}):", *(f"  {line}" for line in error_lines(body))]


def log_url(base_url: str, submission_id: str) -> str:
    return f"{base_url}/api/submissions/{submission_id}/logs"


def log_pointer(base_url: str, submission_id: str) -> str:
    """Where a submission's runner log is: its URL and the command that prints it."""
    return f"log: {log_url(base_url, submission_id)}  (or: kz logs {submission_id})"
