"""Accepting a submission: every check runs before anything is stored, then the package goes to
the object store and `submitted` is appended. A refused request leaves no event and no object.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import tempfile
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread

from kz_api.auth import Submitter
from kz_api.context import ApiContext
from kz_api.errors import ApiError
from kz_api.models import SubmitAnswer
from kz_api.service import append_seen, catch_up, utcnow
from kz_api.upload import Upload
from kz_api.views import status_doc
from kz_events.errors import ObjectNotFound
from kz_events.events import EventMeta, PackageSummary
from kz_events.ids import KernelId, new_submission_id
from kz_events.lifecycle import SubmissionState, Submit, decide
from kz_events.subjects import PACKAGES_BUCKET, judge_key
from kz_package import (
    MIB,
    Limits,
    MemoryBudgetExceeded,
    PackageFiles,
    read_package,
    unpack_tarball,
    validate_package_dir,
    validate_package_files,
)
from kz_package.judge import judge_changes
from kz_package.memo import by_content

__all__ = ["accept_submission", "answer_for", "check_form"]


def answer_for(ctx: ApiContext, submission_id: str) -> SubmitAnswer:
    view = ctx.models.submissions[submission_id]
    doc = status_doc(view, ctx.models)
    return SubmitAnswer(
        submission_id=submission_id,
        kernel_id=view.state.kernel_id,
        status=doc.status,
        status_url=f"/api/submissions/{submission_id}/status",
        version=doc.version,
        queue_position=doc.queue_position,
        new_kernel=view.submitted.new_kernel,
    )


def check_form(upload: Upload, submitter: Submitter) -> KernelId:
    """The form's kernel id, after the fields and the file part are checked."""
    raw = upload.fields.get("kernel_id")
    if not raw:
        raise ApiError(400, "invalid_input", "the form needs a kernel_id field")
    kernel_id = KernelId.parse(raw)
    claimed = upload.fields.get("submitter_id")
    if claimed and claimed != submitter.id:
        raise ApiError(
            403,
            "forbidden",
            f"submitter_id must be the authenticated submitter {submitter.id}, got {claimed!r}",
        )
    if upload.package is None:
        raise ApiError(400, "invalid_input", "the form needs a package file part (tar.gz)")
    return kernel_id


def _check_admission(
    ctx: ApiContext, kernel_id: KernelId, submitter: Submitter, digest: str
) -> None:
    models, kid = ctx.models, str(kernel_id)
    lease = models.leases.get(kid)
    if lease is not None and lease.held_at(utcnow()) and lease.holder != submitter.id:
        until = lease.expires_at.isoformat() if lease.expires_at else None
        raise ApiError(
            409,
            "claim_held",
            f"{lease.holder} holds the optimisation lease on {kid} until {until}",
            details={"holder": lease.holder, "expires_at": until},
        )
    limit = ctx.settings.max_open_submissions
    if models.open_by_submitter[submitter.id] >= limit:
        raise ApiError(
            429,
            "quota_exceeded",
            f"at most {limit} open submissions per submitter, {submitter.id} has "
            f"{models.open_by_submitter[submitter.id]}",
            details={"limit": limit},
        )
    twin = models.open_digests.get((kid, digest))
    if twin is not None:
        raise ApiError(
            409,
            "duplicate_package",
            f"an identical package for {kid} is still open as submission {twin}",
            details={"submission_id": twin},
        )


# An unpacked tree past this cap is checked on disk instead of in memory.
MEMORY_UNPACKED_BYTES = 16 * MIB


@dataclass(frozen=True, slots=True)
class Checked:
    """A package that passed: what the board shows of it, and the judge parts it changes."""

    summary: PackageSummary
    changed: list[str]


def _validate_on_disk(
    tarball: bytes | Path, kernel_id: KernelId, judge: bytes | None, work: Path, limits: Limits
) -> Checked:
    root = work / "submitted"
    unpack_tarball(io.BytesIO(tarball) if isinstance(tarball, bytes) else tarball, root, limits)
    package = validate_package_dir(root, expected_kernel_id=kernel_id, limits=limits)
    if judge is None:
        return Checked(package.desc.summary(), [])
    current = work / "current"
    unpack_tarball(io.BytesIO(judge), current, Limits())
    return Checked(package.desc.summary(), judge_changes(current, root))


def _validate_in_memory(
    tarball: bytes, kernel_id: KernelId, judge: bytes | None, limits: Limits
) -> Checked:
    submitted = read_package(tarball, limits, max_memory_bytes=MEMORY_UNPACKED_BYTES)
    package = validate_package_files(submitted, expected_kernel_id=kernel_id, limits=limits)
    if judge is None:
        return Checked(package.desc.summary(), [])
    return Checked(package.desc.summary(), judge_changes(_judge_tree(judge), submitted))


# Every upload for a kernel is compared with the same judge bundle, which changes only when
# main does: its tree is read once per content and kept (and only read from afterwards).
@by_content(256 * 1024, maxsize=64)
def _judge_tree(bundle: bytes) -> PackageFiles:
    return read_package(bundle, Limits())


def _validate_and_judge(
    tarball: bytes | Path, kernel_id: KernelId, judge: bytes | None, limits: Limits
) -> Checked:
    """Validate the package (raises PackageError); its summary and the judge parts it changes.

    An upload held in memory is read in memory with the same checks and messages; one spilled
    to disk, and any whose files outgrow the memory cap, is unpacked to a temporary directory.
    """
    if isinstance(tarball, bytes):
        with contextlib.suppress(MemoryBudgetExceeded):
            return _validate_in_memory(tarball, kernel_id, judge, limits)
    with tempfile.TemporaryDirectory(prefix="kz-submit-") as tmp:
        return _validate_on_disk(tarball, kernel_id, judge, Path(tmp), limits)


async def _judge_bundle(ctx: ApiContext, kernel_id: KernelId) -> bytes | None:
    try:
        return await ctx.log.get_object_bytes(PACKAGES_BUCKET, judge_key(str(kernel_id)))
    except ObjectNotFound:
        return None


async def _earlier_try(ctx: ApiContext, key: tuple[str, str]) -> str | None:
    """The submission an earlier try with this Idempotency-Key made, if any. A retry may reach
    this replica before its fold saw the first try's event, so catch up with the log first."""
    sid = ctx.models.idempotency.get(key)
    if sid is None:
        await catch_up(ctx)
        sid = ctx.models.idempotency.get(key)
    return sid


async def accept_submission(
    ctx: ApiContext, upload: Upload, submitter: Submitter, idempotency_key: str | None
) -> SubmitAnswer:
    """Check, store and announce one submission; the same key returns the first answer."""
    kernel_id = check_form(upload, submitter)
    package = upload.package
    assert package is not None
    lock_key = (submitter.id, idempotency_key or "")
    locks = ctx.idempotency_locks
    lock = locks.setdefault(lock_key, asyncio.Lock()) if idempotency_key else asyncio.Lock()
    async with lock:
        if idempotency_key and (sid := await _earlier_try(ctx, lock_key)):
            return answer_for(ctx, sid)
        _check_admission(ctx, kernel_id, submitter, upload.sha256)
        judge = await _judge_bundle(ctx, kernel_id)
        limits = Limits(max_compressed_bytes=ctx.settings.max_upload_bytes)
        checked = await anyio.to_thread.run_sync(
            _validate_and_judge, package, kernel_id, judge, limits
        )
        changed = checked.changed
        if changed and not submitter.maintainer:
            raise ApiError(
                403,
                "harness_change_forbidden",
                f"only maintainers may change the judge of {kernel_id}: {', '.join(changed)}",
                details={"changed": changed},
            )
        return await _store_and_announce(
            ctx, upload, kernel_id, submitter, idempotency_key, judge, checked.summary
        )


async def _store_and_announce(
    ctx: ApiContext,
    upload: Upload,
    kernel_id: KernelId,
    submitter: Submitter,
    idempotency_key: str | None,
    judge: bytes | None,
    summary: PackageSummary,
) -> SubmitAnswer:
    package = upload.package
    assert package is not None
    # A `submitted` event is appended only after its package is stored, and packages are never
    # deleted: one the log already names is there. Any other is put without asking first (a
    # request less): the key is the content's digest, so a put of one that exists writes the
    # same bytes again.
    if upload.sha256 not in ctx.models.stored_packages:
        await ctx.log.put_object(PACKAGES_BUCKET, upload.sha256, package)
    sid = new_submission_id()
    command = Submit(
        meta=EventMeta.now(submitter.id),
        submission_id=sid,
        kernel_id=str(kernel_id),
        submitter_id=submitter.id,
        package_digest=upload.sha256,
        package_size=upload.size,
        base_commit=upload.fields.get("base_commit") or None,
        message=upload.fields.get("message", "")[:10_000],
        idempotency_key=idempotency_key,
        new_kernel=judge is None and not ctx.models.kernel_known(str(kernel_id)),
        max_attempts=ctx.settings.max_attempts,
        summary=summary,
    )
    events = decide(SubmissionState(), command)
    seq = await append_seen(ctx, events, expect=0, expect_on=None)
    if sid not in ctx.models.submissions:
        # Stored, but the fold lags (the log is changing leader): answer from the event.
        return SubmitAnswer(
            submission_id=sid,
            kernel_id=str(kernel_id),
            status="queued",
            status_url=f"/api/submissions/{sid}/status",
            version=seq,
            new_kernel=command.new_kernel,
        )
    return answer_for(ctx, sid)
