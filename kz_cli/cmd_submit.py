"""Commands for submitters and agents: `kz submit`, `kz status`, `kz claim`, `kz kernels`.

`kz submit` packs the directory canonically, validates it with the same checks (and the same
messages) as the server, submits it, then follows its status until the verdict. Exit codes:
0 accepted or committed, 1 rejected, 2 failed, cancelled or any error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from kz_events.config import load_settings
from kz_events.ids import KernelId
from kz_package import PackageError, Problem, pack_directory, validate_tarball

__all__ = ["exit_code_for", "register"]

TERMINAL = {"committed", "rejected", "failed", "cancelled"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    submit = subparsers.add_parser("submit", help="submit a kernel package and follow it")
    submit.add_argument("path", type=Path, help="package directory (or .tar.gz)")
    submit.add_argument("--kernel-id", required=True)
    submit.add_argument("--message", default="")
    submit.add_argument("--base-commit")
    submit.add_argument("--no-wait", action="store_true", help="return once queued")
    submit.add_argument("--timeout", type=float, default=1800.0, help="seconds to follow")
    _common(submit)
    submit.set_defaults(handler=_handle_submit)

    status = subparsers.add_parser("status", help="show (or follow) a submission's status")
    status.add_argument("submission_id")
    status.add_argument("--follow", action="store_true")
    _common(status)
    status.set_defaults(handler=_handle_status)

    claim = subparsers.add_parser("claim", help="take, renew or release a kernel's lease")
    claim.add_argument("kernel_id")
    claim.add_argument("--ttl", type=float, default=3600.0)
    claim.add_argument("--release", action="store_true")
    _common(claim)
    claim.set_defaults(handler=_handle_claim)

    kernels = subparsers.add_parser("kernels", help="list kernels")
    kernels.add_argument("--arch")
    kernels.add_argument("--q")
    kernels.add_argument("--limit", type=int, default=50)
    _common(kernels)
    kernels.set_defaults(handler=_handle_kernels)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", help="API base URL (default KZ_SERVER_URL)")
    parser.add_argument("--submitter", help="submitter id (default KZ_SUBMITTER_ID or $USER)")
    parser.add_argument("--token", help="bearer token (default KZ_SUBMITTER_TOKEN)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def exit_code_for(status: str) -> int:
    if status in ("accepted", "committed"):
        return 0
    if status == "rejected":
        return 1
    return 2


class _Client:
    def __init__(self, args: argparse.Namespace) -> None:
        settings = load_settings(config_file=args.config)
        headers = {
            "X-Submitter-Id": args.submitter
            or os.environ.get("KZ_SUBMITTER_ID")
            or os.environ.get("USER", "anonymous")
        }
        token = args.token or os.environ.get("KZ_SUBMITTER_TOKEN")
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.http = httpx.Client(
            base_url=(args.server or settings.server_url).rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(90.0, connect=5.0),
        )
        self.submitter = headers["X-Submitter-Id"]

    def call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            return self.http.request(method, path, **kw)
        except httpx.TransportError as exc:
            raise SystemExit(f"kz: cannot reach {self.http.base_url}: {exc}") from exc


def error_lines(body: dict[str, Any]) -> list[str]:
    error = body.get("error", {})
    problems = error.get("details", {}).get("problems", [])
    lines = [str(Problem(p["path"], p["field"], p["message"])) for p in problems]
    return lines or [f"{error.get('code', 'error')}: {error.get('message', body)}"]


def _pack(path: Path, kernel_id: KernelId, tmp: Path) -> Path:
    if path.is_file():
        return path
    tarball = tmp / "package.tar.gz"
    pack_directory(path, tarball)
    validate_tarball(tarball, expected_kernel_id=kernel_id)
    return tarball


def _handle_submit(args: argparse.Namespace) -> int:
    kernel_id = KernelId.parse(args.kernel_id)
    client = _Client(args)
    with tempfile.TemporaryDirectory(prefix="kz-submit-") as tmp:
        try:
            tarball = _pack(args.path, kernel_id, Path(tmp))
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
        body = response.json()
        error = body.get("error", {})
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
        print(f"kz: package {where}: {message}", file=sys.stderr)
        for line in error_lines(body):
            print(f"  {line}", file=sys.stderr)
    return 2


def _describe(doc: dict[str, Any]) -> str:
    status = str(doc["status"])
    if status == "queued":
        position = doc.get("queue_position")
        return "queued" + (f" (position {position})" if position is not None else "")
    if status == "running":
        return f"running attempt {doc.get('attempt')} on {doc.get('runner_id')}"
    result = doc.get("result") or {}
    line = status
    if result.get("reason"):
        line += f": {result['reason']}"
    error = doc.get("error") or {}
    if error and error.get("message") != result.get("reason"):  # a rejection's error repeats it
        line += f": {error.get('code')}: {error.get('message')}"
    commits = doc.get("commits") or {}
    if commits.get("source"):
        line += f"\n  source commit       {commits['source']}"
        line += f"\n  bench-result commit {commits['bench_result']}"
    return line


def _follow(client: _Client, sid: str, as_json: bool, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    since = 0
    last = ""
    doc: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = client.call(
            "GET", f"/api/submissions/{sid}/status", params={"since": since, "timeout": 30}
        )
        if response.status_code != 200:
            print("\n".join(error_lines(response.json())), file=sys.stderr)
            return 2
        doc = response.json()
        since = int(doc.get("version", since))
        line = _describe(doc)
        if line != last and not as_json:
            print(f"  {line}", flush=True)
            last = line
        if doc["status"] in TERMINAL:
            break
    if as_json:
        print(json.dumps(doc))
    return exit_code_for(str(doc.get("status", "failed")))


def _handle_status(args: argparse.Namespace) -> int:
    client = _Client(args)
    if args.follow:
        return _follow(client, args.submission_id, args.json, 3600.0)
    response = client.call("GET", f"/api/submissions/{args.submission_id}/status")
    body = response.json()
    if response.status_code != 200:
        print("\n".join(error_lines(body)), file=sys.stderr)
        return 2
    print(json.dumps(body, indent=2) if args.json else _describe(body))
    return 0


def _handle_claim(args: argparse.Namespace) -> int:
    client = _Client(args)
    kernel = KernelId.parse(args.kernel_id)
    path = f"/api/kernels/{kernel}/claim"
    if args.release:
        response = client.call("DELETE", path)
    else:
        response = client.call("POST", path, json={"ttl_s": args.ttl})
    body = response.json() if response.content else {}
    if response.status_code >= 400:
        print("\n".join(error_lines(body)), file=sys.stderr)
        return 2
    print(json.dumps(body) if args.json else claim_line(body))
    return 0


def claim_line(lease: dict[str, Any]) -> str:
    """`kz claim`'s answer for people: who holds the kernel and until when, or that it is free."""
    if not lease.get("holder"):
        return f"released {lease.get('kernel_id')}: nobody holds it"
    return (f"{lease['holder']} holds {lease.get('kernel_id')} until {lease.get('expires_at')} "
            f"(lease {lease.get('lease_id')}; renew with kz claim, give back with --release)")


def _handle_kernels(args: argparse.Namespace) -> int:
    client = _Client(args)
    params = {k: v for k, v in {"arch": args.arch, "q": args.q, "limit": args.limit}.items() if v}
    response = client.call("GET", "/api/kernels", params=params)
    body = response.json()
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
        rows.append((str(kernel.get("id", kernel.get("kernel_id"))), shown,
                     str(best.get("submitter") or "-"), str(kernel.get("accepted_count", 0))))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]  # the last column ragged
    return ["  ".join([*(row[i].ljust(widths[i]) for i in range(3)), row[3]]) for row in rows]
