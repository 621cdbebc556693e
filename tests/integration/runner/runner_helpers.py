"""Helpers for runner tests: submit a package straight into the log, read a submission back."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

from kz_events.eventlog import EventLog
from kz_events.events import EventMeta
from kz_events.lifecycle import SubmissionState, Submit, decide, fold
from kz_events.subjects import PACKAGES_BUCKET, aggregate_filter
from kz_package import pack_directory

REPO = Path(__file__).resolve().parents[3]
RMSNORM = REPO / "examples/kernels/cpu/Norm/RMSNorm/fp32/numpy_ref"
RMSNORM_ID = "cpu/Norm/RMSNorm/fp32/numpy_ref"


def meta(actor: str = "tester") -> EventMeta:
    return EventMeta(event_id=str(uuid.uuid4()), occurred_at=datetime.now(UTC), actor=actor)


async def submit_dir(
    log: EventLog, package: Path, kernel_id: str, tmp: Path, *, package_size: int | None = None
) -> str:
    """Pack `package`, store it and append `submitted`, as the API does; `package_size`
    overrides the size the event states (a runner fetches big packages to disk)."""
    tarball = tmp / f"{uuid.uuid4().hex}.tar.gz"
    digest = pack_directory(package, tarball)
    await log.put_object(PACKAGES_BUCKET, digest, tarball)
    sid = str(uuid.uuid4())
    command = Submit(
        meta=meta("alice"),
        submission_id=sid,
        kernel_id=kernel_id,
        submitter_id="alice",
        package_digest=digest,
        package_size=tarball.stat().st_size if package_size is None else package_size,
    )
    (event,) = decide(SubmissionState(), command)
    await log.append(event, expect=0)
    return sid


async def state_of(log: EventLog, arch: str, sid: str) -> tuple[SubmissionState, list]:
    stored = await log.load(aggregate_filter("submission", arch, sid))
    return fold(stored), [event for _, event in stored]
