"""Commands for submitters and agents: `kz submit`, `kz status`, `kz claim`, `kz kernels`.

`kz submit` packs the directory canonically, validates it with the same checks (and the same
messages) as the server, submits it, then follows its status until the verdict; `EXIT_CODES`
lists what it exits with.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kz_cli.http import (
    ApiClient,
    add_server_options,
    body_of,
    error_lines,
    log_pointer,
    log_url,
    refusal_lines,
)
from kz_events.ids import KernelId
from kz_events.lifecycle import TERMINAL as LIFECYCLE_TERMINAL
from kz_package import INVALID_PACKAGE, PackageError, pack_directory, validate_tarball

__all__ = [
    "EXIT_CODES",
    "checked_tarball",
    "claim_line",
    "error_lines",
    "exit_code_for",
    "kernel_table",
    "register",
    "status_lines",
    "verdict_lines",
]

TERMINAL = {str(status) for status in LIFECYCLE_TERMINAL}


EXIT_CODES = """exit codes:
  0  accepted or committed, or a confirmation run that agreed (kz submit --no-wait: queued)
  1  rejected: a verdict on the kernel (not faster, its own failure or wrong output, or
     inconclusive: the host could not tell, measured twice)
  2  failed (the build, the judge, its result or the time limit: no verdict), cancelled, a
     confirmation run that disputed its result, refused (locally or by the server, e.g. 429
     rate_limited), or any other error
"""


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
    add_server_options(submit)
    submit.set_defaults(handler=_handle_submit)

    status = subparsers.add_parser(
        "status",
        help="show (or follow) a submission's status and where its log is",
        epilog="exit codes: 0 when shown; with --follow those of kz submit",
    )
    status.add_argument("submission_id", metavar="ID", help="the submission id kz submit printed")
    status.add_argument("--follow", action="store_true", help="wait until its verdict")
    add_server_options(status)
    status.set_defaults(handler=_handle_status)

    claim = subparsers.add_parser("claim", help="take, renew or release a kernel's lease")
    claim.add_argument("kernel_id", metavar="ID", help="the kernel to hold")
    claim.add_argument("--ttl", type=float, default=3600.0, metavar="S", help="lease seconds")
    claim.add_argument("--release", action="store_true", help="give the lease back")
    add_server_options(claim)
    claim.set_defaults(handler=_handle_claim)

    kernels = subparsers.add_parser("kernels", help="list kernels")
    kernels.add_argument("--arch", help="only this architecture, e.g. sm90 or cpu")
    kernels.add_argument("--q", metavar="TEXT", help="only kernels whose id or title holds this")
    kernels.add_argument("--limit", type=int, default=50, help="at most this many (50)")
    add_server_options(kernels)
    kernels.set_defaults(handler=_handle_kernels)


def exit_code_for(status: str) -> int:
    if status in ("accepted", "committed", "confirmed"):
        return 0
    if status == "rejected":
        return 1
    return 2


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


def _handle_submit(args: argparse.Namespace) -> int:
    expected = KernelId.parse(args.kernel_id) if args.kernel_id else None
    client = ApiClient(args)
    with tempfile.TemporaryDirectory(prefix="kz-submit-") as tmp:
        try:
            tarball, kernel_id = checked_tarball(args.path, expected, Path(tmp))
        except PackageError as exc:
            return _refused(args, "invalid locally", exc.code, exc.message, exc.details)
        form = {
            "kernel_id": str(kernel_id),
            "submitter_id": client.submitter,
            "message": args.message,
        }
        if args.base_commit:
            form["base_commit"] = args.base_commit
        with tarball.open("rb") as handle:
            response = client.call(
                "POST",
                "/api/submissions",
                data=form,
                files={"package": ("package.tar.gz", handle, "application/gzip")},
            )
    if response.status_code != 202:
        error = body_of(response).get("error", {})
        return _refused(
            args,
            f"refused by the server (HTTP {response.status_code})",
            error.get("code", ""),
            error.get("message", ""),
            error.get("details", {}),
        )
    accepted = response.json()
    sid = accepted["submission_id"]
    if not args.json:
        print(f"submitted {sid} for {kernel_id}")
    if args.no_wait:
        if args.json:
            print(json.dumps(accepted))
        return 0
    return _follow(client, sid, args.json, args.timeout)


def _refused(
    args: argparse.Namespace, where: str, code: str, message: str, details: dict[str, Any]
) -> int:
    body = {"error": {"code": code, "message": message, "details": details}}
    if args.json:
        print(json.dumps(body))
    else:
        print("\n".join(refusal_lines(where, body)), file=sys.stderr)
    return 2


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
        marks.append(
            f"confirmation: {confirmation.get('mark')}: {confirmation.get('reason') or ''}"
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


def _follow(client: ApiClient, sid: str, as_json: bool, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    since = 0
    last = ""
    doc: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = client.call(
            "GET", f"/api/submissions/{sid}/status", params={"since": since, "timeout": 30}
        )
        if response.status_code != 200:
            print("\n".join(error_lines(body_of(response))), file=sys.stderr)
            return 2
        doc = response.json()
        since = int(doc.get("version", since))
        line = _describe(doc)
        if line != last and not as_json and doc["status"] not in TERMINAL:
            print(f"  {line}", flush=True)
            last = line
        if doc["status"] in TERMINAL:
            break
    if as_json:
        print(json.dumps({**doc, "log_url": log_url(client.base_url, sid)}))
    elif doc.get("status") in TERMINAL:
        print("\n".join(f"  {line}" for line in verdict_lines(doc, client.base_url)), flush=True)
    else:
        print(
            f"  still {doc.get('status', 'unknown')} after {timeout_s:.0f} s: "
            f"kz status {sid} --follow",
            flush=True,
        )
    return exit_code_for(str(doc.get("status", "failed")))


def _handle_status(args: argparse.Namespace) -> int:
    client = ApiClient(args)
    if args.follow:
        return _follow(client, args.submission_id, args.json, 3600.0)
    response = client.call("GET", f"/api/submissions/{args.submission_id}/status")
    body = body_of(response)
    if response.status_code != 200:
        print("\n".join(error_lines(body)), file=sys.stderr)
        return 2
    if args.json:
        body["log_url"] = log_url(client.base_url, args.submission_id)
        print(json.dumps(body, indent=2))
    else:
        print("\n".join(status_lines(body, client.base_url)))
    return 0


def status_lines(doc: dict[str, Any], base_url: str) -> list[str]:
    """`kz status`: the state, and once a runner took it, where its log is."""
    lines = _describe(doc).split("\n")
    if str(doc.get("status")) != "queued":
        lines.append(log_pointer(base_url, str(doc.get("submission_id"))))
    return lines


def _handle_claim(args: argparse.Namespace) -> int:
    client = ApiClient(args)
    kernel = KernelId.parse(args.kernel_id)
    path = f"/api/kernels/{kernel}/claim"
    if args.release:
        response = client.call("DELETE", path)
    else:
        response = client.call("POST", path, json={"ttl_s": args.ttl})
    body = body_of(response) if response.content else {}
    if response.status_code >= 400:
        print("\n".join(error_lines(body)), file=sys.stderr)
        return 2
    print(json.dumps(body) if args.json else claim_line(body))
    return 0


def claim_line(lease: dict[str, Any]) -> str:
    """`kz claim`'s answer for people: who holds the kernel and until when, or that it is free."""
    if not lease.get("holder"):
        return f"released {lease.get('kernel_id')}: nobody holds it"
    return (
        f"{lease['holder']} holds {lease.get('kernel_id')} until {lease.get('expires_at')} "
        f"(lease {lease.get('lease_id')}; renew with kz claim, give back with --release)"
    )


def _handle_kernels(args: argparse.Namespace) -> int:
    client = ApiClient(args)
    params = {k: v for k, v in {"arch": args.arch, "q": args.q, "limit": args.limit}.items() if v}
    response = client.call("GET", "/api/kernels", params=params)
    body = body_of(response)
    if response.status_code != 200:
        print("\n".join(error_lines(body)), file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(body))
        return 0
    items = body.get("items", body if isinstance(body, list) else [])
    print("\n".join(kernel_table(items)))
    return 0


def kernel_table(kernels: list[dict[str, Any]]) -> list[str]:
    """`kz kernels`: one aligned line per kernel with its best value (4 significant digits,
    its unit), who holds it and how many results were accepted."""
    if not kernels:
        return ["no kernels"]
    rows = [("KERNEL", "BEST", "BY", "ACCEPTED")]
    for kernel in kernels:
        best = kernel.get("best") or {}
        value = best.get("value")
        unit = (kernel.get("metric") or {}).get("unit", "")
        shown = f"{value:.4g} {unit}".strip() if isinstance(value, int | float) else "-"
        rows.append(
            (
                str(kernel.get("id", kernel.get("kernel_id"))),
                shown,
                str(best.get("submitter") or "-"),
                str(kernel.get("accepted_count", 0)),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(3)]  # the last column ragged
    return ["  ".join([*(row[i].ljust(widths[i]) for i in range(3)), row[3]]) for row in rows]
