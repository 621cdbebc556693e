"""`kz problems import --format F [--arch A] PATH` and `kz export --format flashinfer-trace
[--board B] OUT.jsonl`: problem sets in as boards, accepted results out as traces.

Both keep the contract of `kz_cli.contract`: `--json` prints one document on stdout (an error is
`{"error": {"code", "message", "fix"}}`), and the exit code says what happened: 0 done, 2 refused
or misused (do not retry), 3 transient (the log unreachable: retry).
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from kz_cli import aio
from kz_cli.contract import EXIT_CODES_HELP, CliError, Exit, emit
from kz_cli.local import nats_url_for
from kz_events.config import load_settings
from kz_events.errors import ConfigError, InvalidInput
from kz_events.eventlog import EventLog, LogOptions
from kz_events.ids import KernelId
from kz_package import write_tree
from kz_problems import FORMATS, ProblemError, build_boards, import_boards, read_set
from kz_problems.boards import BoardPackage
from kz_problems.exporter import export_from_log
from kz_problems.flashinfer import MAX_WORKLOADS
from kz_problems.importer import Outcome
from kz_problems.traces import write_export

__all__ = ["EXPORT_FORMATS", "register"]

T = TypeVar("T")
EXPORT_FORMATS = ("flashinfer-trace",)
_IMPORT_FIX = (
    "fix the file and field the message names, or give the --format the set is in "
    "(docs/problem_sets.md)"
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    problems = subparsers.add_parser(
        "problems", help="import problem sets (KernelBench, GPU MODE, FlashInfer Trace)"
    )
    sub = problems.add_subparsers(dest="problems_command", required=True, metavar="COMMAND")
    imp = sub.add_parser(
        "import",
        help="make one board per problem of a set, through the log",
        description="Read a checkout or folder of a problem set (a whole set or one problem) "
        "and import one board per problem: its judge, workloads and provenance, with the "
        "set's reference as the board's pinned reference. Re-importing changes nothing; a "
        "changed problem becomes a new board version.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    imp.add_argument("path", type=Path, metavar="PATH", help="a checkout, folder or file")
    imp.add_argument("--format", required=True, choices=FORMATS, help="the set's format")
    imp.add_argument("--arch", default="cpu", help="the boards' architecture (default cpu)")
    imp.add_argument("--submitter", default="import", help="submitter id the imports carry")
    imp.add_argument(
        "--max-workloads",
        type=int,
        default=MAX_WORKLOADS,
        metavar="N",
        help=f"FlashInfer: workloads per definition, the first N (default {MAX_WORKLOADS})",
    )
    imp.add_argument(
        "--out", type=Path, metavar="DIR", help="write the boards' packages here instead"
    )
    imp.add_argument("--nats-url")
    imp.set_defaults(handler=_import)
    export = subparsers.add_parser(
        "export",
        help="write accepted results as FlashInfer Trace lines",
        description="Write every accepted result (of one board with --board) as a Trace line "
        "to OUT.jsonl, and beside it, in a folder named after it, the data set in FlashInfer "
        "Trace's layout: definitions/, solutions/ (with their sources) and traces/.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("out", type=Path, metavar="OUT.jsonl")
    export.add_argument("--format", required=True, choices=EXPORT_FORMATS)
    export.add_argument("--board", metavar="B", help="arch/op_class/sub_class/quant")
    export.add_argument("--nats-url")
    export.set_defaults(handler=_export)


def _with_log(args: argparse.Namespace, work: Callable[[EventLog], Awaitable[T]]) -> T:
    settings = load_settings(config_file=args.config)
    try:
        url = nats_url_for(args.nats_url, settings)
    except ConfigError as exc:
        raise CliError(
            "invalid_config", exc.message, fix="start the stack (kz up) in this data dir, or "
            "give --nats-url (KZ_NATS_URL)"
        ) from exc  # fmt: skip

    async def main() -> T:
        name = f"kz-{args.command}"
        elog = await EventLog.connect(url, LogOptions(replicas=settings.replicas), name=name,
                                      connect_timeout_s=10.0)  # fmt: skip
        try:
            await elog.ensure()
            return await work(elog)
        finally:
            await elog.close()

    return aio.run(main())


def _import(args: argparse.Namespace) -> int:
    try:
        return _run_import(args)
    except ProblemError as exc:
        raise CliError(exc.code, exc.message, fix=_IMPORT_FIX, details=exc.details) from exc


def _run_import(args: argparse.Namespace) -> int:
    KernelId(args.arch, "x", "x", "x", "x")  # the architecture is a kernel id segment
    if args.max_workloads < 1:
        raise InvalidInput(f"--max-workloads: expected a number >= 1, got {args.max_workloads}")
    problems, skipped = read_set(args.format, args.path, max_workloads=args.max_workloads)
    if not problems:
        reasons = "; ".join(f"{s.problem}: {s.reason}" for s in skipped[:5])
        raise ProblemError(str(args.path), f"no problem could be imported ({reasons})")
    boards = build_boards(problems, args.arch)
    if args.out is not None:
        outcomes = [_write(board, args.out) for board in boards]
    else:
        outcomes = _with_log(
            args,
            lambda elog: import_boards(elog, boards, arch=args.arch, submitter=args.submitter,
                                       clock=lambda: datetime.now(UTC)),
        )  # fmt: skip
    states = [o.state for o in outcomes]
    body = {
        "format": args.format,
        "path": str(args.path),
        "arch": args.arch,
        "boards": [o.to_dict() for o in outcomes],
        "skipped": [s.to_dict() for s in skipped],
        "counts": {state: states.count(state) for state in ("imported", "unchanged", "written")},
    }
    if args.json:
        emit(args, body)
    else:
        _print_import(body)
    return int(Exit.DONE)


def _write(board: BoardPackage, out: Path) -> Outcome:
    folder = out / str(board.kernel_id)
    write_tree({path: (0o644, data) for path, data in board.files.items()}, folder,
               {"/".join(p.split("/")[:i]) for p in board.files
                for i in range(1, p.count("/") + 1)})  # fmt: skip
    return Outcome(board.problem.problem_id, str(board.kernel_id), board.version, "written",
                   board.digest)  # fmt: skip


def _print_import(document: dict[str, Any]) -> None:
    for board in document["boards"]:
        print(f"{board['state']:9}  {board['kernel_id']}  (problem {board['problem']}, "
              f"version {board['version']})")  # fmt: skip
    for item in document["skipped"]:
        print(f"skipped    {item['problem']}: {item['reason']}")
    counts = document["counts"]
    print(f"{len(document['boards'])} boards: {counts['imported']} imported, "
          f"{counts['unchanged']} unchanged, {counts['written']} written; "
          f"{len(document['skipped'])} problems skipped")  # fmt: skip


def _export(args: argparse.Namespace) -> int:
    return _run_export(args)


def _run_export(args: argparse.Namespace) -> int:
    board = args.board
    if board is not None:
        parts = board.split("/")
        if len(parts) != 4:
            raise InvalidInput(f"--board: expected arch/op_class/sub_class/quant, got {board!r}")
        KernelId(parts[0], parts[1], parts[2], parts[3], "x")
    export = _with_log(args, lambda elog: export_from_log(elog, board=board))
    folder = write_export(export, args.out)
    body = {
        "format": args.format,
        "out": str(args.out),
        "folder": str(folder),
        "board": board,
        "traces": len(export.traces),
        "solutions": len(export.solutions),
        "definitions": len(export.definitions),
    }
    if args.json:
        emit(args, body)
    else:
        print(f"wrote {body['traces']} traces to {args.out}; {body['solutions']} solutions and "
              f"{body['definitions']} definitions under {folder}")  # fmt: skip
    return int(Exit.DONE)
