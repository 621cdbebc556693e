"""`kz new BOARD/NAME [DIR]`: a ready package for a new kernel on any board.

The board's judge comes from the server (the judge every kernel of the board shares), with an
empty scoreboard and `src/` started from the board's pinned reference (`kz_cli.starter`); the
folder passes `kz validate` as written. Edit `src/`, `kz bench DIR`, `kz submit DIR`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kz_cli.contract import CliError, emit, from_response
from kz_cli.http import ApiClient, add_server_options
from kz_cli.starter import FileMap, Starter, starter_package
from kz_events.errors import InvalidInput
from kz_events.ids import KernelId
from kz_package import PACKAGE_DIR

__all__ = ["fetch_starter", "register", "starter_doc", "write_starter"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "new",
        help="write a ready package for a new kernel on a board",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "kernel_id", metavar="BOARD/NAME", help="arch/op_class/sub_class/quant/name, on a board"
    )
    parser.add_argument("dir", nargs="?", type=Path, help="where to write it (default ./NAME)")
    add_server_options(parser)
    parser.set_defaults(handler=_handle_new)


def _reference_src(client: ApiClient, reference: str | None) -> FileMap:
    """`src/` of the board's reference kernel as main has it (a bundle from before pinned
    references carried none)."""
    if reference is None:
        return {}
    detail = client.json("GET", f"/api/kernels/{reference}")
    paths = [f["path"] for f in detail.get("files", []) if str(f["path"]).startswith("src/")]
    return {
        path: (0o644, client.ok("GET", f"/api/kernels/{reference}/files/{path}").content)
        for path in paths
    }


def fetch_starter(client: ApiClient, kernel_id: KernelId) -> Starter:
    """The new kernel's package, from the server's judge for its board."""
    answer = client.call("GET", f"/api/kernels/{kernel_id}/judge")
    board = "/".join(kernel_id.parts[:4])
    if answer.status_code == 404:
        raise CliError(
            "unknown_board",
            f"board {board} has no kernel yet, so no judge to start from",
            fix="pick a board from kz boards (or bring a whole package as the board's first)",
            details={"board": board},
        )
    if answer.status_code >= 400:
        raise from_response(answer)
    if answer.headers.get("Kz-Judge-Scope", "kernel") != "board":
        raise CliError("kernel_exists", f"{kernel_id} is on main already")
    judge_kernel = answer.headers.get("Kz-Judge-Kernel", "")
    board_doc = client.json("GET", f"/api/boards/{board}")
    reference = (board_doc.get("reference") or {}).get("kernel_id")
    bundle = answer.content
    try:
        return starter_package(
            kernel_id, bundle, author=client.submitter, judge_kernel=judge_kernel
        )
    except InvalidInput as exc:
        if exc.code != "no_reference":
            raise
    # a bundle from before references were pinned: the reference kernel's src/ on main
    src = _reference_src(client, reference)
    return starter_package(
        kernel_id, bundle, author=client.submitter, judge_kernel=judge_kernel, reference_src=src
    )


def write_starter(starter: Starter, target: Path) -> list[str]:
    """Write the package under `target` (new or empty); the paths written."""
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise CliError("target_not_empty", f"DIR must be new or empty, got {target}")
    for path, (mode, data) in starter.files.items():
        out = target / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        out.chmod(0o755 if mode & 0o111 else 0o644)
    return list(starter.files)


def starter_doc(starter: Starter, target: Path | None) -> dict[str, Any]:
    return {
        "kernel_id": str(starter.kernel_id),
        "dir": str(target) if target else None,
        "files": list(starter.files),
        "judge_kernel": starter.judge_kernel,
        "reference": starter.reference or None,
        "next": ["edit src/", "kz bench DIR", "kz submit DIR"],
    }


def _handle_new(args: argparse.Namespace) -> int:
    kernel_id = KernelId.parse(args.kernel_id)
    client = ApiClient(args)
    starter = fetch_starter(client, kernel_id)
    target: Path = args.dir or Path(kernel_id.name)
    write_starter(starter, target)
    if args.json:
        emit(args, starter_doc(starter, target))
        return 0
    print(f"wrote {target}/ for {kernel_id} (judge: {starter.judge_kernel}'s, the board's)")
    print(f"  src/ from the board's reference {starter.reference.get('kernel_id', '(main)')}")
    print(f"  {PACKAGE_DIR}/benchmark.py and build_test_env.py: leave them as they are")
    print(f"next: edit {target}/src/, then kz bench {target} and kz submit {target}")
    return 0
