"""The accepted results an export is made of, read from the log: every `accepted` that no
`disqualified` followed, confirmation runs left out (they measure a result already listed),
with its package's files from the object store."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kz_events.errors import ObjectNotFound
from kz_events.events import SubmissionAccepted, SubmissionDisqualified, SubmissionSubmitted
from kz_events.port import LogPort
from kz_events.subjects import PACKAGES_BUCKET
from kz_package import read_package
from kz_problems.traces import Accepted, TraceExport, export_traces

__all__ = ["accepted_in_log", "export_from_log", "package_files"]

_SUBMISSIONS = "kz.ev.submission.>"


async def accepted_in_log(elog: LogPort) -> list[Accepted]:
    """Every accepted result of the log, in log order, less the disqualified and the
    confirmation runs."""
    confirmations: set[str] = set()
    accepted: dict[str, Accepted] = {}
    async for _, event in elog.replay(1, subject_filter=_SUBMISSIONS):
        if isinstance(event, SubmissionSubmitted) and event.confirms is not None:
            confirmations.add(event.submission_id)
        elif isinstance(event, SubmissionAccepted) and event.submission_id not in confirmations:
            accepted[event.submission_id] = Accepted(
                submission_id=event.submission_id,
                kernel_id=event.kernel_id,
                submitter_id=event.submitter_id,
                result=event.result,
                package_digest=event.package_digest,
                at=event.occurred_at,
                environment=dict(event.environment),
            )
        elif isinstance(event, SubmissionDisqualified):
            accepted.pop(event.submission_id, None)
    return list(accepted.values())


async def package_files(elog: LogPort, digests: Iterable[str]) -> dict[str, dict[str, bytes]]:
    """Each package's files (path → bytes) by digest; a package the store lacks is left out."""
    found: dict[str, dict[str, bytes]] = {}
    for digest in dict.fromkeys(digests):
        try:
            tarball = await elog.get_object_bytes(PACKAGES_BUCKET, digest)
        except ObjectNotFound:
            continue
        found[digest] = {path: data for path, (_mode, data) in read_package(tarball).files.items()}
    return found


async def export_from_log(elog: LogPort, *, board: str | None = None) -> TraceExport:
    """The FlashInfer Trace export of the log's accepted results (of one board, when given)."""
    results = [
        r for r in await accepted_in_log(elog)
        if board is None or r.kernel_id.rsplit("/", 1)[0] == board
    ]  # fmt: skip
    packages: dict[str, Any] = await package_files(elog, (r.package_digest for r in results))
    return export_traces(results, packages, board=board)
