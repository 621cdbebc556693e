"""Accepting a submission: every check runs before anything is stored, then the package goes to
the object store and `submitted` is appended. A refused request leaves no event and no object.
"""

from __future__ import annotations

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
from kz_api.service import catch_up, execute_seen, utcnow
from kz_api.upload import Upload
from kz_api.views import status_doc
from kz_events.commands import Submission
from kz_events.errors import ObjectNotFound
from kz_events.events import Event, EventMeta, PackageSummary, TripwireHit
from kz_events.ids import KernelId, new_submission_id
from kz_events.lifecycle import Admission, SubmissionState, Submit, admit
from kz_events.provenance import Provenance, parse_provenance
from kz_events.subjects import JUDGES_BUCKET, PACKAGES_BUCKET, judge_key
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
from kz_package.judge import board_judge_changes, judge_changes
from kz_package.memo import by_content
from kz_package.tripwire import Hit, scan_package
from kz_projector.index import board_of

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


def _admission(
    ctx: ApiContext,
    kernel_id: KernelId,
    submitter: Submitter,
    digest: str,
    judge: JudgeRef | None = None,
    changed: list[str] | None = None,
) -> Admission:
    """The facts the admission rules weigh (kz_events.lifecycle.admit), from the read models
    and, once the package was read, the judge parts it changes."""
    models, kid = ctx.models, str(kernel_id)
    return Admission(
        kernel_lease=models.leases.get(kid),
        open_submissions=models.open_by_submitter[submitter.id],
        max_open_submissions=ctx.settings.max_open_submissions,
        open_twin=models.open_digests.get((kid, digest)),
        judge_changes=list(changed or []),
        board_judge=judge.board_kernel if judge is not None else None,
        maintainer=submitter.maintainer,
    )


# An unpacked tree past this cap is checked on disk instead of in memory.
MEMORY_UNPACKED_BYTES = 16 * MIB


@dataclass(frozen=True, slots=True)
class Checked:
    """A package that passed: what the board shows of it, the judge parts it changes (of its
    kernel's judge, or for a new kernel of its board's), and its tripwire hits."""

    summary: PackageSummary
    changed: list[str]
    tripwire: list[Hit]


@dataclass(frozen=True, slots=True)
class JudgeRef:
    """The judge a package is compared with: its kernel's on main, or for a new kernel on an
    existing board the board's (`board_kernel` names the kernel whose judge that is)."""

    bundle: bytes
    board_kernel: str | None = None


def _changes(
    current: Path | PackageFiles, submitted: Path | PackageFiles, ref: JudgeRef
) -> list[str]:
    if ref.board_kernel is not None:
        return board_judge_changes(current, submitted)
    return judge_changes(current, submitted)


def _validate_on_disk(
    tarball: bytes | Path, kernel_id: KernelId, judge: JudgeRef | None, work: Path, limits: Limits
) -> Checked:
    root = work / "submitted"
    unpack_tarball(io.BytesIO(tarball) if isinstance(tarball, bytes) else tarball, root, limits)
    package = validate_package_dir(root, expected_kernel_id=kernel_id, limits=limits)
    hits = scan_package(root)
    if judge is None:
        return Checked(package.desc.summary(), [], hits)
    current = work / "current"
    unpack_tarball(io.BytesIO(judge.bundle), current, Limits())
    return Checked(package.desc.summary(), _changes(current, root, judge), hits)


def _validate_in_memory(
    tarball: bytes, kernel_id: KernelId, judge: JudgeRef | None, limits: Limits
) -> Checked:
    submitted = read_package(tarball, limits, max_memory_bytes=MEMORY_UNPACKED_BYTES)
    package = validate_package_files(submitted, expected_kernel_id=kernel_id, limits=limits)
    hits = scan_package(submitted)
    if judge is None:
        return Checked(package.desc.summary(), [], hits)
    changed = _changes(_judge_tree(judge.bundle), submitted, judge)
    return Checked(package.desc.summary(), changed, hits)


# Every upload for a kernel is compared with the same judge bundle, which changes only when
# main does: its tree is read once per content and kept (and only read from afterwards).
@by_content(256 * 1024, maxsize=64)
def _judge_tree(bundle: bytes) -> PackageFiles:
    return read_package(bundle, Limits())


def _validate_and_judge(
    tarball: bytes | Path, kernel_id: KernelId, judge: JudgeRef | None, limits: Limits
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
        return await ctx.log.get_object_bytes(JUDGES_BUCKET, judge_key(str(kernel_id)))
    except ObjectNotFound:
        return None


async def _board_judge(ctx: ApiContext, kernel_id: KernelId) -> JudgeRef | None:
    """For a kernel main does not have: its board's judge, or None when the board is new.

    The board's judge is the judge of the kernel its latest review named, else of its first
    kernel on main (docs/decisions.md). It is read from that kernel's judge bundle; before the
    git projector stored one (the kernel was just imported or accepted), from its package.
    """
    board = ctx.models.index.boards.get(board_of(str(kernel_id)))
    judge_kernel = board.judge if board is not None else None
    if judge_kernel is None or judge_kernel == str(kernel_id):
        return None
    bundle = await _judge_bundle(ctx, KernelId.parse(judge_kernel))
    if bundle is None:
        info = ctx.models.index.kernels.get(judge_kernel)
        with contextlib.suppress(ObjectNotFound):
            if info is not None and info.digest is not None:
                bundle = await ctx.log.get_object_bytes(PACKAGES_BUCKET, info.digest)
    if bundle is None:
        raise ApiError(
            409,
            "board_judge_pending",
            f"the judge of board {board_of(str(kernel_id))} ({judge_kernel}) is not stored yet; "
            "retry in a moment",
            details={"board": board_of(str(kernel_id)), "board_judge": judge_kernel},
        )
    return JudgeRef(bundle, board_kernel=judge_kernel)


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
    provenance = parse_provenance(upload.fields)  # a bad value: 400 naming the field
    package = upload.package
    assert package is not None
    lock_key = (submitter.id, idempotency_key or "")
    held = ctx.idempotency_locks.hold(lock_key) if idempotency_key else contextlib.nullcontext()
    async with held:
        if idempotency_key and (sid := await _earlier_try(ctx, lock_key)):
            return answer_for(ctx, sid)
        # The rules decide(Submit) applies, asked before the package is read: a refused
        # upload costs no validation.
        admit(
            str(kernel_id),
            submitter.id,
            _admission(ctx, kernel_id, submitter, upload.sha256),
            utcnow(),
        )
        bundle = await _judge_bundle(ctx, kernel_id)
        judge = JudgeRef(bundle) if bundle is not None else None
        if judge is None and not submitter.maintainer:
            judge = await _board_judge(ctx, kernel_id)
        limits = Limits(max_compressed_bytes=ctx.settings.max_upload_bytes)
        checked = await anyio.to_thread.run_sync(
            _validate_and_judge, package, kernel_id, judge, limits
        )
        facts = _admission(ctx, kernel_id, submitter, upload.sha256, judge, checked.changed)
        return await _store_and_announce(
            ctx, upload, kernel_id, submitter, idempotency_key, bundle, checked, facts, provenance
        )


async def _store_and_announce(
    ctx: ApiContext,
    upload: Upload,
    kernel_id: KernelId,
    submitter: Submitter,
    idempotency_key: str | None,
    judge: bytes | None,
    checked: Checked,
    facts: Admission,
    provenance: Provenance | None = None,
) -> SubmitAnswer:
    package = upload.package
    assert package is not None

    async def store_package(_: list[Event]) -> None:
        # Only for a submission the rules admit. A `submitted` event is appended only after
        # its package is stored, and packages are never deleted: one the log already names is
        # there. Any other is put without asking first (a request less): the key is the
        # content's digest, so a put of one that exists writes the same bytes again.
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
        summary=checked.summary,
        tripwire=[
            TripwireHit(code=h.code, path=h.path, line=h.line, message=h.message)
            for h in checked.tripwire
        ],
        admission=facts,
        provenance=provenance,
    )
    aggregate = Submission.of(str(kernel_id), sid)
    seq = await execute_seen(
        ctx, aggregate, command, expected=SubmissionState(), before_append=store_package
    )
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
