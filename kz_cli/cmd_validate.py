"""`kz validate PATH [--kernel-id ID] [--against URL] [--json]`: check a package directory or
tarball the way the server will, and print every problem.

A directory is first packed canonically, exactly as `kz submit` sends it, so the archive limits
apply locally too and the summary shows the sha256 the server will store. When an API is known
(`--against URL`, else `KZ_SERVER_URL` or the `kz up` of this data dir, as `kz submit` finds
it) the package's judge is compared with the one that server holds for the kernel (main's, or
for a new kernel its board's), with the server's own rule, so a changed `benchmark.py` is
refused here as the server would refuse it (`harness_change_forbidden`). Without one it says
it checked the package alone.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from kz_cli.contract import Exit, emit, fix_for
from kz_cli.local import API_URL_FILE
from kz_events.config import Settings, load_settings
from kz_events.errors import InvalidInput
from kz_events.ids import KernelId
from kz_package import (
    Limits,
    Package,
    PackageError,
    judge_changes,
    pack_directory,
    read_package,
    validate_tarball,
)
from kz_package.judge import board_judge_changes

__all__ = ["JudgeCheck", "compare_judge", "judge_check", "register", "run_validate"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate", help="check a kernel package (directory or .tar.gz) like the server does"
    )
    parser.add_argument("path", type=Path, help="package directory or gzip tarball")
    parser.add_argument("--kernel-id", help="the kernel id the package must declare")
    parser.add_argument(
        "--against",
        metavar="URL",
        help="compare the judge with this API's (default KZ_SERVER_URL, else a kz up's in "
        "this data dir; none: the package is checked alone)",
    )
    parser.set_defaults(handler=run_validate)


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def _check(path: Path, expected: KernelId | None) -> tuple[Package, str, bytes]:
    """The package, its sha256 and the tarball's bytes (as `kz submit` would send them)."""
    if path.is_dir():
        with tempfile.TemporaryDirectory(prefix="kz-validate-") as tmp:
            tarball = Path(tmp) / "package.tar.gz"
            digest = pack_directory(path, tarball)
            package = validate_tarball(tarball, expected_kernel_id=expected)
            return package, digest, tarball.read_bytes()
    if path.is_file():
        package = validate_tarball(path, expected_kernel_id=expected)
        return package, _sha256_of(path), path.read_bytes()
    raise InvalidInput(f"PATH must be a package directory or a .tar.gz file, got {str(path)!r}")


def known_server(flag: str | None, settings: Settings) -> str | None:
    """The API to compare with: the flag, a configured KZ_SERVER_URL, the kz up of this data
    dir; None when none is known (the default address is not a server anyone named)."""
    if flag:
        return flag.rstrip("/")
    if settings.server_url != Settings().server_url:
        return settings.server_url.rstrip("/")
    local = Path(settings.data_dir) / API_URL_FILE
    if local.is_file() and (url := local.read_text().strip()):
        return url.rstrip("/")
    return None


@dataclass(frozen=True)
class JudgeCheck:
    """What comparing with a server's judge found: `refusal` (code, message, details) when the
    server would refuse the package, `note` a line for people either way."""

    server: str | None
    note: str
    refusal: dict[str, Any] | None = None


def _refusal(kernel_id: KernelId, scope: str, owner: str, changed: list[str]) -> dict[str, Any]:
    """The server's harness_change_forbidden refusal, in its words."""
    if scope == "board":
        board = str(kernel_id).rsplit("/", 1)[0]
        message = (
            f"a new kernel on board {board} must carry the board's judge (that of {owner}); "
            f"these differ: {', '.join(changed)}"
        )
        details: dict[str, Any] = {"changed": changed, "board": board, "board_judge": owner}
    else:
        message = f"only maintainers may change the judge of {kernel_id}: {', '.join(changed)}"
        details = {"changed": changed}
    return {"code": "harness_change_forbidden", "message": message, "details": details}


def compare_judge(
    server: str | None,
    kernel_id: KernelId,
    tarball: bytes,
    transport: httpx.BaseTransport | None = None,
) -> JudgeCheck:
    """Compare the package's judge with the one `server` holds for `kernel_id`."""
    if server is None:
        return JudgeCheck(
            None,
            "checked the package alone: no server known to compare its judge with "
            "(--against URL, KZ_SERVER_URL, or a kz up in this data dir)",
        )
    path = f"/api/kernels/{kernel_id}/judge"
    try:
        with httpx.Client(base_url=server, timeout=30.0, transport=transport) as client:
            answer = client.get(path)
    except httpx.TransportError as exc:
        return JudgeCheck(server, f"checked the package alone: cannot reach {server} ({exc})")
    return judge_check(server, kernel_id, tarball, answer)


def judge_check(
    server: str, kernel_id: KernelId, tarball: bytes, answer: httpx.Response
) -> JudgeCheck:
    """What the server's answer to `GET /api/kernels/{id}/judge` says of the package's judge."""
    if answer.status_code == 404 and _code(answer) == "no_judge":
        return JudgeCheck(server, f"judge: {server} has none for this board yet; this one opens it")
    if answer.status_code != 200:
        why = _code(answer) or f"HTTP {answer.status_code}"
        return JudgeCheck(server, f"checked the package alone: {server} gave no judge ({why})")
    scope = answer.headers.get("Kz-Judge-Scope", "kernel")
    owner = answer.headers.get("Kz-Judge-Kernel", str(kernel_id))
    theirs, ours = read_package(answer.content, Limits()), read_package(tarball, Limits())
    changed = board_judge_changes(theirs, ours) if scope == "board" else judge_changes(theirs, ours)
    if changed:
        return JudgeCheck(server, "", _refusal(kernel_id, scope, owner, changed))
    whose = "main's" if scope == "kernel" else f"board's (that of {owner})"
    return JudgeCheck(server, f"judge: the same as {whose} on {server}")


def _code(answer: httpx.Response) -> str | None:
    try:
        body = answer.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("code")) if isinstance(error, dict) else None


def _summary(package: Package, digest: str) -> str:
    desc = package.desc
    metric = f"{desc.metric.name} in {desc.metric.unit}, {desc.metric.better} is better"
    return (
        f"valid: {package.kernel_id} ({desc.language}; {metric}; "
        f"{len(desc.workloads)} workloads; sha256 {digest})"
    )


def run_validate(args: argparse.Namespace) -> int:
    expected = KernelId.parse(args.kernel_id) if args.kernel_id else None
    try:
        package, digest, tarball = _check(args.path, expected)
    except PackageError as exc:
        if args.json:
            error = {"code": exc.code, "message": exc.message, "fix": fix_for(exc.code)}
            emit(args, {"valid": False, "error": {**error, "details": exc.details}})
        else:
            for problem in exc.problems:
                print(problem)
        return int(Exit.REFUSED)
    server = known_server(args.against, load_settings(config_file=args.config))
    judge = compare_judge(server, package.kernel_id, tarball)
    if judge.refusal is not None:
        if args.json:
            details = {**judge.refusal["details"], "server": server}
            fix = fix_for(judge.refusal["code"])
            emit(args, {"valid": False, "error": {**judge.refusal, "fix": fix, "details": details}})
        else:
            print(
                f"{judge.refusal['code']}: {judge.refusal['message']} (as {server} would refuse it)"
            )
        return int(Exit.REFUSED)
    if args.json:
        document = {"valid": True, "kernel_id": str(package.kernel_id), "sha256": digest}
        emit(args, {**document, "checked_against": server, "judge": judge.note})
    else:
        print(_summary(package, digest))
        print(judge.note)
    return 0
