"""Commands for submitters and agents: `kz submit` and `kz status`.

`kz submit` packs the directory canonically, validates it with the same checks (and the same
messages) as the server, submits it (with who made it, when given: agent, model, tokens, cost,
transcript link), then follows its status until the verdict. Exit codes and `--json` follow
`kz_cli.contract`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kz_cli.contract import (
    EXIT_CODES_HELP,
    CliError,
    Exit,
    emit,
    exit_for_status,
    fix_for,
    from_response,
)
from kz_cli.http import ApiClient, add_server_options, log_pointer, log_url, refusal_lines
from kz_events.ids import KernelId
from kz_events.lifecycle import TERMINAL as LIFECYCLE_TERMINAL
from kz_events.provenance import PROVENANCE_LIMITS, Provenance, parse_provenance
from kz_package import INVALID_PACKAGE, PackageError, pack_directory, validate_tarball

__all__ = [
    "EXIT_CODES",
    "add_provenance_options",
    "checked_tarball",
    "exit_code_for",
    "follow",
    "provenance_of",
    "register",
    "status_lines",
    "verdict_doc",
    "verdict_lines",
]

TERMINAL = {str(status) for status in LIFECYCLE_TERMINAL}
EXIT_CODES = EXIT_CODES_HELP
# Flag → provenance field, and the environment variable an agent's host may set once.
_PROVENANCE_FLAGS = {
    "agent": ("--agent", "KZ_AGENT"),
    "model": ("--model", "KZ_MODEL"),
    "tokens": ("--tokens", "KZ_TOKENS"),
    "cost_usd": ("--cost-usd", "KZ_COST_USD"),
    "transcript_url": ("--transcript-url", "KZ_TRANSCRIPT_URL"),
}


def add_provenance_options(parser: argparse.ArgumentParser) -> None:
    for name, (flag, env) in _PROVENANCE_FLAGS.items():
        parser.add_argument(
            flag, dest=name, metavar="VALUE", help=f"provenance: {PROVENANCE_LIMITS[name]} ({env})"
        )


def provenance_of(args: argparse.Namespace) -> Provenance | None:
    """The provenance the flags (else the environment) give; refused before anything is sent."""
    given = {
        name: getattr(args, name, None) or os.environ.get(env)
        for name, (_, env) in _PROVENANCE_FLAGS.items()
    }
    return parse_provenance(given)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    submit = subparsers.add_parser(
        "submit",
        help="submit a kernel package and follow it",
        description="Validate a package locally with the server's checks, submit it, and "
        "follow it to its verdict.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    submit.add_argument(
        "path", type=Path, help="package directory, or a .tar.gz of one (checked the same way)"
    )
    submit.add_argument(
        "--kernel-id",
        metavar="ID",
        help="arch/op_class/sub_class/quant/name (default: the kernel_id in desc.yaml; "
        "when given, it must match desc.yaml)",
    )
    submit.add_argument("--message", default="", help="a note stored with the submission")
    submit.add_argument(
        "--base-commit", metavar="SHA", help="main's commit the package was edited from"
    )
    submit.add_argument("--no-wait", action="store_true", help="return once queued")
    submit.add_argument(
        "--timeout", type=float, default=1800.0, metavar="S", help="seconds to follow (1800)"
    )
    add_provenance_options(submit)
    add_server_options(submit)
    submit.set_defaults(handler=_handle_submit)

    status = subparsers.add_parser(
        "status",
        help="show (or follow) a submission's status, queue position and where its log is",
        epilog="exit codes: 0 when shown; with --follow those of kz submit\n\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    status.add_argument("submission_id", metavar="ID", help="the submission id kz submit printed")
    status.add_argument("--follow", action="store_true", help="wait until its verdict")
    status.add_argument(
        "--timeout", type=float, default=3600.0, metavar="S", help="seconds to follow (3600)"
    )
    add_server_options(status)
    status.set_defaults(handler=_handle_status)


def exit_code_for(status: str, error_code: str | None = None) -> int:
    return int(exit_for_status(status, error_code))


def checked_tarball(path: Path, kernel_id: KernelId | None, tmp: Path) -> tuple[Path, KernelId]:
    """The tarball to upload and its kernel id, after the server's own checks: a folder is
    packed canonically first, a `.tar.gz` is checked as it is. Without `kernel_id` the id
    comes from the package's desc.yaml; with it, desc.yaml must agree."""
    if path.is_dir():
        tarball = tmp / "package.tar.gz"
        pack_directory(path, tarball)
    elif path.is_file():
        tarball = path
    else:
        raise PackageError.one(
            INVALID_PACKAGE, str(path), "", "expected a package directory or a .tar.gz of one"
        )
    package = validate_tarball(tarball, expected_kernel_id=kernel_id)
    return tarball, package.kernel_id


def _form(args: argparse.Namespace, client: ApiClient, kernel_id: KernelId) -> dict[str, str]:
    form = {"kernel_id": str(kernel_id), "submitter_id": client.submitter, "message": args.message}
    if args.base_commit:
        form["base_commit"] = args.base_commit
    made = provenance_of(args)
    if made is not None:
        form.update({k: str(v) for k, v in made.fields().items()})
    return form


def _handle_submit(args: argparse.Namespace) -> int:
    expected = KernelId.parse(args.kernel_id) if args.kernel_id else None
    client = ApiClient(args)
    with tempfile.TemporaryDirectory(prefix="kz-submit-") as tmp:
        try:
            tarball, kernel_id = checked_tarball(args.path, expected, Path(tmp))
        except PackageError as exc:
            return _refused(args, "invalid locally", exc.code, exc.message, exc.details)
        form = _form(args, client, kernel_id)
        with tarball.open("rb") as handle:
            response = client.call(
                "POST",
                "/api/submissions",
                data=form,
                files={"package": ("package.tar.gz", handle, "application/gzip")},
            )
    if response.status_code != 202:
        error = from_response(response)
        where = f"refused by the server (HTTP {response.status_code})"
        return _refused(args, where, error.code, error.message, error.details, error.exit)
    accepted = response.json()
    sid = accepted["submission_id"]
    if not args.json:
        print(f"submitted {sid} for {kernel_id}", flush=True)
    if args.no_wait:
        if args.json:
            emit(args, {**accepted, "log_url": log_url(client.base_url, sid)})
        return 0
    return follow(client, sid, args, args.timeout)


def _refused(
    args: argparse.Namespace,
    where: str,
    code: str,
    message: str,
    details: dict[str, Any],
    exit_code: Exit = Exit.REFUSED,
) -> int:
    body = {"error": {"code": code, "message": message, "fix": fix_for(code), "details": details}}
    if args.json:
        emit(args, body)
    else:
        print("\n".join(refusal_lines(where, body)), file=sys.stderr)
    return int(exit_code)


def _describe(doc: dict[str, Any]) -> str:
    """The status in the API's own words: the status, then for an ending the error's message
    (a failure's code first: it says which step failed) or the verdict's reason; a retry, the
    validity gate's reading, voided rivals, a suspect mark and a confirmation each on a line."""
    status = str(doc["status"])
    retry = doc.get("retry") or {}
    if status == "queued":
        position = doc.get("queue_position")
        line = "queued" + (f" (position {position})" if position is not None else "")
    elif status == "running":
        line = f"running attempt {doc.get('attempt')} on {doc.get('runner_id')}"
    else:
        line = status + _ending_words(doc)
    if retry.get("in_progress"):
        line += f"\n  retrying ({retry.get('count')} of 2 at most): {retry.get('reason')}"
    line += "".join(f"\n  {extra}" for extra in _marks(doc))
    commits = doc.get("commits") or {}
    if commits.get("source"):
        line += f"\n  source commit       {commits['source']}"
        line += f"\n  bench-result commit {commits['bench_result']}"
    return line


def _ending_words(doc: dict[str, Any]) -> str:
    error = doc.get("error") or {}
    if error:
        code = error.get("code")
        if doc.get("status") == "failed" and code:
            return f": {code}: {error.get('message')}"
        return f": {error.get('message')}"
    reason = (doc.get("result") or {}).get("reason")
    return f": {reason}" if reason else ""


def _marks(doc: dict[str, Any]) -> list[str]:
    """The lines under the status: validity, voided rivals, suspect, confirmation."""
    marks = []
    validity = doc.get("validity") or {}
    if validity:
        spread = validity.get("spread")
        figure = f" (spread {spread:.1%})" if isinstance(spread, int | float) else ""
        words = validity.get("reason") or ""
        marks.append(f"validity: {str(validity.get('reading')).replace('_', ' ')}{figure}")
        if words:
            marks[-1] += f": {words}"
    for rival in doc.get("voided_rivals") or []:
        marks.append(
            f"rival voided: the {rival.get('role')} ({rival.get('reason') or rival.get('code')}): "
            "its fault, not this submission's"
        )
    suspect = doc.get("suspect") or {}
    if suspect and not suspect.get("cleared"):
        codes = ", ".join(sorted({str(r.get("code")) for r in suspect.get("reasons") or []}))
        marks.append(f"suspect ({codes}): held back from the board until a maintainer clears it")
    confirmation = doc.get("confirmation") or {}
    if confirmation:
        reason = confirmation.get("reason") or (
            f"the confirmation run is {confirmation['status']}"
            if confirmation.get("status")
            else ""
        )
        marks.append(
            f"confirmation: {confirmation.get('mark')}" + (f": {reason}" if reason else "")
        )
    return marks


def verdict_lines(doc: dict[str, Any], base_url: str) -> list[str]:
    """The lines for a submission's state; every end but accepted or committed also says
    where the runner's log is."""
    lines = _describe(doc).split("\n")
    status = str(doc.get("status"))
    if status not in ("queued", "running", "accepted", "committed"):
        lines.append(log_pointer(base_url, str(doc.get("submission_id"))))
    return lines


def verdict_doc(doc: dict[str, Any], base_url: str) -> dict[str, Any]:
    """A status document for `--json` and the MCP tools: where its log is, and for a
    submission that ended without being accepted an error with what to do about it."""
    sid = str(doc.get("submission_id"))
    out = {**doc, "log_url": log_url(base_url, sid)}
    status = str(doc.get("status"))
    if status in TERMINAL and exit_for_status(status) != Exit.DONE:
        error = doc.get("error") or {}
        code = str(error.get("code") or status)
        reason = (doc.get("result") or {}).get("reason") or error.get("message") or status
        fix = fix_for(status if status in ("rejected", "failed", "cancelled") else code)
        out["error"] = {
            "code": code,
            "message": str(reason),
            "fix": fix.replace("ID", sid),
        }
    return out


def follow(client: ApiClient, sid: str, args: argparse.Namespace, timeout_s: float) -> int:
    """Follow a submission by long-poll until it ends or `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    since, last = 0, ""
    doc: dict[str, Any] = {}
    while time.monotonic() < deadline:
        wait = max(1, min(30, int(deadline - time.monotonic())))
        doc = client.json(
            "GET", f"/api/submissions/{sid}/status", params={"since": since, "timeout": wait}
        )
        since = int(doc.get("version", since))
        line = _describe(doc)
        if line != last and not args.json and doc["status"] not in TERMINAL:
            print(f"  {line}", flush=True)
            last = line
        if doc["status"] in TERMINAL:
            break
    status = str(doc.get("status", "unknown"))
    code = exit_for_status(status, (doc.get("error") or {}).get("code"))
    if status not in TERMINAL:
        return _still_open(args, client, sid, doc, timeout_s)
    if args.json:
        emit(args, verdict_doc(doc, client.base_url))
    else:
        print("\n".join(f"  {line}" for line in verdict_lines(doc, client.base_url)), flush=True)
    return int(code)


def _still_open(
    args: argparse.Namespace, client: ApiClient, sid: str, doc: dict[str, Any], timeout_s: float
) -> int:
    message = f"still {doc.get('status', 'unknown')} after {timeout_s:.0f} s"
    if args.json:
        error = CliError("wait_timeout", message, fix=f"kz status {sid} --follow")
        body = {**doc, "log_url": log_url(client.base_url, sid)}
        emit(args, {**body, "error": {"code": error.code, "message": message, "fix": error.fix}})
    else:
        print(f"  {message}: kz status {sid} --follow", flush=True)
    return int(Exit.TRANSIENT)


def _handle_status(args: argparse.Namespace) -> int:
    client = ApiClient(args)
    if args.follow:
        return follow(client, args.submission_id, args, args.timeout)
    body = client.json("GET", f"/api/submissions/{args.submission_id}/status")
    if args.json:
        emit(args, verdict_doc(body, client.base_url))
    else:
        print("\n".join(status_lines(body, client.base_url)))
    return 0


def status_lines(doc: dict[str, Any], base_url: str) -> list[str]:
    """`kz status`: the state, and once a runner took it, where its log is."""
    lines = _describe(doc).split("\n")
    if str(doc.get("status")) != "queued":
        lines.append(log_pointer(base_url, str(doc.get("submission_id"))))
    return lines
