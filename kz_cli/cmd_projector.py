"""`kz projector`, `kz index [--at SEQ]`, `kz audit [--from-archive PATH]` and `kz import PATH`.

All but `kz audit --from-archive` talk to the running stack's NATS (`KZ_NATS_URL` or
`--nats-url`); the audit from an archive needs only a clone of the kernel repo.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import msgspec
from dulwich.errors import NotGitRepository

from kz_cli import aio
from kz_cli.contract import emit
from kz_cli.local import nats_url_for
from kz_cli.logs import configure_logging
from kz_events.config import Settings, load_settings
from kz_events.errors import ConfigError
from kz_events.eventlog import EventLog, LogOptions
from kz_projector.archive import ARCHIVE_BRANCH, ARCHIVE_REF, find_archive
from kz_projector.audit import AuditReport, run_audit
from kz_projector.gitproj import service_person, utcnow
from kz_projector.gitstore import open_repo
from kz_projector.importer import import_path
from kz_projector.index import render_index
from kz_projector.index_writer import build_index, write_atomic
from kz_projector.packages import ObjectStorePackages
from kz_projector.service import Projectors

__all__ = ["FETCH_ARCHIVE", "check_archive", "register"]

T = TypeVar("T")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    proj = subparsers.add_parser("projector", help="run the referee, git, index, archive, sweeper")
    proj.add_argument("--nats-url")
    proj.add_argument("--once", action="store_true", help="catch up with the log, then exit")
    proj.set_defaults(handler=_projector)
    index = subparsers.add_parser("index", help="build index.json now, or as of a past position")
    index.add_argument("--at", type=int, help="log sequence to build the index as of")
    index.add_argument(
        "--out", type=Path, help="write here (default: the index path; with --at: standard output)"
    )
    index.add_argument("--nats-url")
    index.set_defaults(handler=_index)
    audit = subparsers.add_parser("audit", help="replay the log and compare with the projections")
    audit.add_argument(
        "--from-archive",
        type=Path,
        metavar="PATH",
        help="replay from the archive of this kernel repo clone alone",
    )
    audit.add_argument("--json", action="store_true", help="print the report as one JSON document")
    audit.add_argument("--nats-url")
    audit.set_defaults(handler=_audit)
    imp = subparsers.add_parser("import", help="import a kernel repo or a folder of packages")
    imp.add_argument("path", type=Path)
    imp.add_argument("--submitter", default="import", help="submitter id the imports carry")
    imp.add_argument("--nats-url")
    imp.set_defaults(handler=_import)


def _with_log(args: argparse.Namespace, work: Callable[[EventLog, Settings], Awaitable[T]]) -> T:
    settings = load_settings(config_file=args.config)
    url = nats_url_for(args.nats_url, settings)

    async def main() -> T:
        options = LogOptions(replicas=settings.replicas)
        elog = await EventLog.connect(url, options, name=f"kz-{args.command}")
        try:
            await elog.ensure()
            return await work(elog, settings)
        finally:
            await elog.close()

    return aio.run(main())


def _projector(args: argparse.Namespace) -> int:
    configure_logging()

    if args.json:
        emit(args, {"state": "starting", "nats_url": args.nats_url})

    async def work(elog: EventLog, settings: Settings) -> None:
        projectors = Projectors(elog, settings)
        try:
            if args.once:
                await projectors.catch_up()
            else:
                await projectors.run()
        finally:
            projectors.close()

    try:
        _with_log(args, work)
    except KeyboardInterrupt:
        return 0
    return 0


def _index(args: argparse.Namespace) -> int:
    async def work(elog: EventLog, settings: Settings) -> tuple[bytes, Settings]:
        state = await build_index(elog, ObjectStorePackages(elog), upto=args.at)
        return render_index(state), settings

    data, settings = _with_log(args, work)
    out = args.out or (None if args.at is not None else settings.effective_index_path)
    if out is None:
        if args.json:
            index = json.loads(data)
            emit(args, {"path": None, "bytes": len(data), "log_seq": index.get("log_seq"),
                        "index": index})  # fmt: skip
        else:
            sys.stdout.buffer.write(data + b"\n")
        return 0
    write_atomic(out, data)
    if args.json:
        emit(args, {"path": str(out), "bytes": len(data), "log_seq": json.loads(data)["log_seq"]})
    else:
        print(f"wrote {out} ({len(data)} bytes)")
    return 0


FETCH_ARCHIVE = "git fetch origin 'refs/kz/*:refs/kz/*'"


def check_archive(path: Path, settings: Settings) -> None:
    """Refuse, with the fix, a clone that has no archive at all (neither `refs/kz/events` nor
    the branch `kz-archive` a plain clone fetches: a repo from before that branch, cloned
    before its projector ran again): an audit of an absent archive would read as a divergence."""
    try:
        repo = open_repo(path, create=False)
    except (FileNotFoundError, NotGitRepository) as exc:
        raise ConfigError(
            f"--from-archive: expected a clone of the kernel repo, got {path}"
        ) from exc
    if find_archive(repo, service_person(settings)) is None:
        raise ConfigError(
            f"--from-archive: {path} has no archive ({ARCHIVE_REF.decode()}, or the branch "
            f"{ARCHIVE_BRANCH.decode().removeprefix('refs/heads/')} a clone fetches); fetch it "
            f"with: cd {path} && {FETCH_ARCHIVE}"
        )


def _audit_from_archive(args: argparse.Namespace) -> AuditReport:
    """Audit a clone alone. The report goes to a scratch directory, never to the data dir of
    a stack that may run here: its audit.json is what `GET /api/audit` serves."""
    settings = load_settings(config_file=args.config)
    check_archive(args.from_archive, settings)
    with tempfile.TemporaryDirectory(prefix="kz-audit-") as scratch:
        local = msgspec.structs.replace(settings, data_dir=Path(scratch))
        return aio.run(run_audit(local, clock=utcnow, from_archive=args.from_archive))


def _audit(args: argparse.Namespace) -> int:
    if args.from_archive is not None:
        report = _audit_from_archive(args)
    else:
        report = _with_log(
            args, lambda elog, settings: run_audit(settings, clock=utcnow, elog=elog)
        )
    if args.json:
        emit(args, json.loads(report.to_json()))
    else:
        print("\n".join(report.lines()))
    return 0 if report.ok else 1


def _import(args: argparse.Namespace) -> int:
    path: Path = args.path
    if not path.exists():
        raise ConfigError(f"PATH: expected a kernel repo or a folder of packages, got {path}")
    done = _with_log(
        args,
        lambda elog, _settings: import_path(elog, path, submitter=args.submitter, clock=utcnow),
    )
    items = [
        {
            "kernel_id": item.kernel_id,
            "digest": item.digest,
            "state": f"event {item.seq}" if item.seq is not None else "already imported",
        }
        for item in done
    ]
    if args.json:
        emit(args, {"imported": items})
        return 0
    for row in items:
        print(json.dumps(row))
    return 0
