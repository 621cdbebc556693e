"""`kz problems import`: each problem's board, imported through the log like any kernel.

A problem becomes its board's reference kernel: the package is stored in `KZ_PACKAGES` by its
sha256 and announced by one `kernel.imported` (the git projector commits it, and its `src/`
becomes the board's pinned reference). The version is found in the log: the board whose
reference carries the same problem digest is the problem's (re-importing it changes nothing);
one that carries another digest was an earlier version, so the changed problem goes to the next
board (`….v2`, `….v3`, …), never onto a judge already in use. The append states the last event
it saw on the kernel, so two imports racing for one version cannot both win.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kz_events.errors import ConcurrencyConflict, ObjectNotFound
from kz_events.events import KernelImported
from kz_events.port import LogPort
from kz_events.subjects import PACKAGES_BUCKET, aggregate_filter
from kz_package import PACKAGE_DIR, PackageError, load_yaml, read_package
from kz_problems.boards import BoardPackage, board_package
from kz_problems.errors import ProblemError
from kz_problems.model import Problem
from kz_projector.importer import IMPORT_NS

__all__ = ["MAX_VERSIONS", "Outcome", "build_boards", "import_boards"]

MAX_VERSIONS = 999
_DESC = f"{PACKAGE_DIR}/desc.yaml"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one problem: its board and reference kernel, the board's version, and
    whether it was imported now (`seq`: its event) or was there already."""

    problem: str
    kernel_id: str
    version: int
    state: str  # imported | unchanged
    digest: str
    seq: int | None = None

    @property
    def board(self) -> str:
        return self.kernel_id.rsplit("/", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        return {"problem": self.problem, "board": self.board, "kernel_id": self.kernel_id,
                "version": self.version, "state": self.state, "digest": self.digest,
                "seq": self.seq}  # fmt: skip


def build_boards(problems: Sequence[Problem], arch: str) -> list[BoardPackage]:
    """Every problem's first-version package, checked, before anything is written; raises
    ProblemError naming the problem whose package fails the platform's checks."""
    built = []
    for problem in problems:
        try:
            built.append(board_package(problem, arch))
        except PackageError as exc:
            raise ProblemError(problem.problem_id, f"its board's package: {exc.message}") from exc
    return built


@dataclass(frozen=True, slots=True)
class _There:
    """What the log holds at a kernel id: its last sequence (0: nothing), and the problem
    digest and package of its latest import ("" when it carries no problem digest)."""

    last: int = 0
    problem: str | None = None
    package: str = ""


async def _there(elog: LogPort, kernel_id: str) -> _There:
    arch = kernel_id.split("/", 1)[0]
    stored = await elog.load(aggregate_filter("kernel", arch, kernel_id))
    if not stored:
        return _There()
    imports = [e for _, e in stored if isinstance(e, KernelImported)]
    last = stored[-1][0]
    if not imports:
        return _There(last, "")
    package = imports[-1].package_digest
    try:
        files = read_package(await elog.get_object_bytes(PACKAGES_BUCKET, package)).files
    except ObjectNotFound:
        return _There(last, "", package)
    desc = load_yaml(files[_DESC][1], path=_DESC) if _DESC in files else {}
    problem = desc.get("x-problem") if isinstance(desc, dict) else None
    digest = problem.get("digest") if isinstance(problem, dict) else None
    return _There(last, str(digest or ""), package)


async def _import_one(
    elog: LogPort, first: BoardPackage, arch: str, submitter: str, clock: Callable[[], datetime]
) -> Outcome:
    problem = first.problem
    version = 1
    while version <= MAX_VERSIONS:
        board = first if version == 1 else board_package(problem, arch, version)
        kid = str(board.kernel_id)
        there = await _there(elog, kid)
        if there.problem == problem.digest:
            return Outcome(problem.problem_id, kid, version, "unchanged", there.package)
        if there.problem is not None:
            version += 1
            continue
        try:
            seq = await _announce(elog, board, submitter, clock, expect=there.last)
        except ConcurrencyConflict:
            continue  # another import took this version meanwhile: look again
        return Outcome(problem.problem_id, kid, version, "imported", board.digest, seq)
    raise ProblemError(problem.problem_id, f"more than {MAX_VERSIONS} versions of one problem")


async def _announce(
    elog: LogPort,
    board: BoardPackage,
    submitter: str,
    clock: Callable[[], datetime],
    *,
    expect: int,
) -> int:
    kid = str(board.kernel_id)
    await elog.put_object(PACKAGES_BUCKET, board.digest, board.tarball)
    problem = board.problem
    event = KernelImported(
        event_id=str(uuid.uuid5(IMPORT_NS, f"{kid}@{board.digest}")),
        occurred_at=clock(),
        actor=submitter,
        kernel_id=kid,
        package_digest=board.digest,
        submitter_id=submitter,
        message=f"imported {problem.format} problem {problem.problem_id} (version {board.version})",
        bench_result=board.package.bench_result,
        summary=board.package.desc.summary(),
    )
    return await elog.append(event, expect=expect)


async def import_boards(
    elog: LogPort,
    boards: Sequence[BoardPackage],
    *,
    arch: str,
    submitter: str,
    clock: Callable[[], datetime],
) -> list[Outcome]:
    """Import each board built by `build_boards`, in order; what became of each."""
    return [await _import_one(elog, board, arch, submitter, clock) for board in boards]
