"""The contract every `kz` command keeps with scripts and agents: exit codes, `--json` documents
and structured errors.

Exit codes say what to do next: 0 done (or accepted), 1 rejected (read why, change the kernel),
2 usage or refused (do not retry as is), 3 transient (retry later). With `--json` a command
prints one JSON document on stdout, carrying `command` and `schema_version`; an error is
`{"error": {"code", "message", "fix"}}` in that document. Logs and lines for people go to
stderr. The MCP server (`kz_mcp`) answers with the same codes and fixes.
"""

from __future__ import annotations

import argparse
import json
import sys
from enum import IntEnum
from typing import Any

import httpx

from kz_events.errors import EventLogError, InvalidInput, KzError
from kz_events.lifecycle import FAILURE_OUTCOMES

__all__ = [
    "EXIT_CODES_HELP",
    "SCHEMA_VERSION",
    "CliError",
    "Exit",
    "document",
    "emit",
    "emit_error",
    "error_doc",
    "exit_for_status",
    "fix_for",
    "from_kz_error",
    "from_response",
    "unreachable",
]

SCHEMA_VERSION = 1


class Exit(IntEnum):
    DONE = 0
    REJECTED = 1
    REFUSED = 2
    TRANSIENT = 3


EXIT_CODES_HELP = """exit codes (the same for every kz command):
  0  done: shown, written, valid, accepted or committed
  1  rejected: judged and not accepted (not faster, wrong output, or its own run failed:
     build_failed, benchmark_error, invalid_result, timed_out); read the reason and the log
  2  usage or refused: bad arguments, an invalid package, refused by the server
     (claim_held, harness_change_forbidden, ...); do not retry as it is
  3  transient: server unreachable, timed out, queue full (HTTP 429), server unavailable
     (HTTP 5xx), a runner lost the task; retry later
with --json: one JSON document on stdout (its `command` and `schema_version` name its schema,
schemas/cli.schema.json); an error is {"error": {"code", "message", "fix"}}; logs on stderr
"""

# What to do about each error code: the `fix` of an error document.
_FIXES: dict[str, str] = {
    "usage": "run the command with --help and correct its arguments",
    "invalid_input": "correct the value the message names and try again",
    "invalid_kernel_id": "give five segments arch/op_class/sub_class/quant/name, each 1-64 of "
    "A-Z a-z 0-9 _ . + - starting with a letter or digit",
    "invalid_provenance": "correct or leave out the provenance field the message names",
    "invalid_package": "fix the files listed in details.problems, then validate again",
    "package_too_large": "make the package smaller (limits in docs/kernel_package_format.md)",
    "unsafe_archive": "pack the folder with kz submit or kz validate (no links, no .. paths)",
    "harness_change_forbidden": "keep .kernel_package/benchmark.py and build_test_env.py as "
    "the board has them (kz new writes them)",
    "claim_held": "wait until details.expires_at, or ask details.holder to release the lease",
    "quota_exceeded": "wait for your open submissions to end (kz status ID), then submit again",
    "rate_limited": "wait a moment and retry",
    "unknown_kernel": "check the kernel id (kz kernels lists them; kz new starts a new one)",
    "unknown_board": "pick a board from kz boards",
    "unknown_submission": "check the submission id kz submit printed",
    "no_judge": "this board has no kernel yet: a first kernel brings its own judge",
    "kernel_exists": "pick a new NAME, or improve the kernel itself (its package on main)",
    "board_judge_pending": "retry in a few seconds: the board's judge is being stored",
    "log_not_found": "the run has no log yet: retry once it runs (kz status ID)",
    "log_unavailable": "retry in a moment",
    "unauthenticated": "act as a submitter: kz --submitter ID or --token TOKEN; over HTTP "
    "(MCP) the header X-Submitter-Id (open mode) or Authorization: Bearer TOKEN",
    "forbidden": "act as the submitter the request names, or ask a maintainer",
    "arch_not_allowed": "submit to an architecture this server runs",
    "unreachable": "start the stack (kz up) or give --server URL (KZ_SERVER_URL), then retry",
    "log_unreachable": "start the stack (kz up) or give --nats-url (KZ_NATS_URL), then retry",
    "wait_timeout": "follow it further: kz status ID --follow",
    "sandbox_unavailable": "install bubblewrap (apt-get install bubblewrap) or use --backend "
    "docker",
    "not_a_package": "give a package folder holding .kernel_package/desc.yaml",
    "target_not_empty": "give an empty or new DIR",
    "target_exists": "give --force to overwrite, or another DIR",
    "rejected": "read the reason and the log (kz logs ID; MCP: submission_log), change src/, "
    "bench and submit again",
    "failed": "read the log (kz logs ID; MCP: submission_log): fix what it shows, or submit "
    "again if the runner was lost",
    "cancelled": "submit again if it was cancelled by mistake",
    "disputed": "a second run did not reproduce the result: submit again",
    "internal_error": "report it with the command you ran; the server's log has the cause",
}
_TRANSIENT_CODES = frozenset(
    {"unreachable", "log_unreachable", "wait_timeout", "rate_limited", "board_judge_pending",
     "log_not_found", "log_unavailable", "unavailable", "request_timeout", "runner_lost"}
)  # fmt: skip


GENERIC_FIX = "read the message; run the command with --help"


def fix_for(code: str) -> str:
    return _FIXES.get(code, GENERIC_FIX)


class CliError(KzError):
    """An error a command ends with: its code, message and fix, and the exit code."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        exit_code: Exit | None = None,
        fix: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message, details=details)
        self.code = code
        self.fix = fix or fix_for(code)
        self.exit = exit_code or (Exit.TRANSIENT if code in _TRANSIENT_CODES else Exit.REFUSED)


def from_kz_error(exc: KzError) -> CliError:
    """A project error as the command's error: a log out of reach is transient, bad input
    refused."""
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, EventLogError):
        return CliError("log_unreachable", exc.message, exit_code=Exit.TRANSIENT)
    code = exc.code if isinstance(exc, InvalidInput) else exc.code or "invalid_input"
    return CliError(code, exc.message, details=exc.details or None)


def from_response(response: httpx.Response) -> CliError:
    """The API's error envelope as the command's error: 429, 502-504 and 5xx are transient."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        text = response.text.strip()[:200] or "(empty)"
        error = {"code": f"http_{response.status_code}", "message": text}
    code = str(error.get("code") or f"http_{response.status_code}")
    status = response.status_code
    transient = status == 429 or status >= 500 or code in _TRANSIENT_CODES
    if code == "quota_exceeded":
        transient = True  # the queue is full for this submitter: it drains by itself
    details = error.get("details") if isinstance(error.get("details"), dict) else None
    return CliError(
        code,
        str(error.get("message") or f"HTTP {status}"),
        exit_code=Exit.TRANSIENT if transient else Exit.REFUSED,
        details={**(details or {}), "http_status": status},
    )


def unreachable(base_url: str, exc: Exception) -> CliError:
    return CliError("unreachable", f"cannot reach {base_url}: {exc}", details={"server": base_url})


def exit_for_status(status: str, error_code: str | None = None) -> Exit:
    """A submission's state as an exit code: accepted 0; rejected, disputed, or failed by its
    own run 1; cancelled 2; failed by the platform (a runner lost) or still open 3."""
    if status in ("accepted", "committed", "confirmed"):
        return Exit.DONE
    if status in ("rejected", "disputed"):
        return Exit.REJECTED
    if status == "failed":
        return Exit.REJECTED if error_code in FAILURE_OUTCOMES else Exit.TRANSIENT
    if status == "cancelled":
        return Exit.REFUSED
    return Exit.TRANSIENT


def document(command: str, body: dict[str, Any]) -> dict[str, Any]:
    """A `--json` document: the command, the schema version, then the body."""
    return {"command": command, "schema_version": SCHEMA_VERSION, **body}


def error_doc(error: CliError) -> dict[str, Any]:
    body: dict[str, Any] = {"code": error.code, "message": error.message, "fix": error.fix}
    if error.details:
        body["details"] = error.details
    return {"error": body}


def emit(args: argparse.Namespace, body: dict[str, Any]) -> None:
    """Print the command's `--json` document on stdout."""
    print(json.dumps(document(_command_of(args), body), default=str), flush=True)


def emit_error(args: argparse.Namespace | None, error: CliError) -> None:
    """The error as a JSON document on stdout with `--json`, else one line on stderr."""
    if args is not None and getattr(args, "json", False):
        print(json.dumps(document(_command_of(args), error_doc(error)), default=str), flush=True)
        return
    # One line for a person: the message, which says what to do, then a fix only where there
    # is one to add (JSON always carries the code and the fix).
    fix = "" if error.fix == GENERIC_FIX else f" (fix: {error.fix})"
    print(f"kz: {error.message}{fix}", file=sys.stderr)


def _command_of(args: argparse.Namespace) -> str:
    name = str(getattr(args, "command", "") or "")
    for sub in ("events_command", "agents_command", "problems_command"):
        if getattr(args, sub, None):
            name += f" {getattr(args, sub)}"
    return name
