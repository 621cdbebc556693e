"""Kernels: list with filters, detail from the kernel repo, bench history, optimisation lease."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any

import anyio.to_thread
from litestar import Controller, Response, delete, get, post
from litestar.di import Provide
from litestar.params import FromPath, JSONBody, QueryParameter

from kz_api.auth import Submitter, SubmitterDep, identify_submitter
from kz_api.context import Ctx
from kz_api.controllers.boards import board_doc
from kz_api.errors import ApiError
from kz_api.kernelrepo import KernelSnapshot, kernel_snapshot
from kz_api.kernels_query import KernelQuery, query_kernels
from kz_api.models import (
    BenchHistory,
    ClaimBody,
    CommitRow,
    FileEntry,
    KernelDetail,
    KernelList,
    LeaseDoc,
)
from kz_api.openapi import errors
from kz_api.readmodel import SubmissionView
from kz_api.service import append_seen

# The judge a submission is compared with, picked as the upload path picks it.
from kz_api.submit import _board_judge as board_judge
from kz_api.submit import _judge_bundle as judge_bundle
from kz_api.views import history_row, lease_doc
from kz_events.errors import InvalidInput, KzError
from kz_events.events import EventMeta
from kz_events.ids import KernelId
from kz_events.lifecycle import (
    ClaimKernel,
    KernelLease,
    ReleaseKernel,
    decide_lease,
    evolve_lease,
    fold_lease,
)
from kz_events.result import NO_METRIC
from kz_events.subjects import aggregate_filter
from kz_package import PACKAGE_DIR, load_yaml
from kz_projector.index import BoardInfo, board_of

__all__ = ["KernelsController"]

LeaseCommand = ClaimKernel | ReleaseKernel
KERNEL = "/{arch:str}/{op_class:str}/{sub_class:str}/{quant:str}/{name:str}"


def _kernel_id(arch: str, op_class: str, sub_class: str, quant: str, name: str) -> KernelId:
    return KernelId(arch, op_class, sub_class, quant, name)


def _summary(ctx: Ctx, kernel_id: KernelId) -> dict[str, Any] | None:
    wanted = str(kernel_id)
    entries = ctx.index_cache.get(ctx.models).kernels
    return next((e for e in entries if e.get("id") == wanted), None)


def _yaml(files: dict[str, bytes], name: str) -> dict[str, Any] | None:
    data = files.get(f"{PACKAGE_DIR}/{name}")
    if data is None:
        return None
    try:
        value = load_yaml(data, path=f"{PACKAGE_DIR}/{name}")
    except InvalidInput:
        return None
    return value if isinstance(value, dict) else None


def _detail(
    ctx: Ctx,
    kernel_id: KernelId,
    snap: KernelSnapshot | None,
    summary: dict[str, Any] | None,
    submitted_desc: dict[str, Any] | None = None,
) -> KernelDetail:
    files = snap.files if snap else {}
    lease = ctx.models.leases.get(str(kernel_id))
    return KernelDetail(
        kernel_id=str(kernel_id),
        arch=kernel_id.arch,
        op_class=kernel_id.op_class,
        sub_class=kernel_id.sub_class,
        quant=kernel_id.quant,
        name=kernel_id.name,
        source="repo" if snap else "submission" if submitted_desc is not None else "read_model",
        head_commit=snap.head if snap else None,
        desc=_yaml(files, "desc.yaml") if snap else submitted_desc,
        scoreboard=_yaml(files, "bench_result.yaml"),
        files=[FileEntry(path=p, size=len(b)) for p, b in sorted(files.items())],
        commits=[
            CommitRow(id=c.id, message=c.message, author=c.author, at=c.at)
            for c in (snap.commits if snap else [])
        ],
        summary=summary,
        lease=lease_doc(lease) if lease and lease.holder else None,
        board=board_doc(board) if (board := _board_of(ctx, kernel_id)) else None,
    )


def _board_of(ctx: Ctx, kernel_id: KernelId) -> BoardInfo | None:
    return ctx.models.index.boards.get(board_of(str(kernel_id)))


def _known(ctx: Ctx, kernel_id: KernelId) -> bool:
    kid = str(kernel_id)
    return (
        ctx.models.kernel_known(kid)
        or kid in ctx.models.history
        or (_summary(ctx, kernel_id) is not None)
    )


def _latest_submission(ctx: Ctx, kernel_id: KernelId) -> SubmissionView | None:
    """The newest submission for `kernel_id`: a new kernel has a page from its first one on,
    accepted or not."""
    wanted = str(kernel_id)
    views = reversed(ctx.models.submissions.values())
    return next((v for v in views if v.state.kernel_id == wanted), None)


async def _submitted_desc(ctx: Ctx, view: SubmissionView) -> dict[str, Any] | None:
    """desc.yaml of a submission's stored package (None when it is gone or unreadable)."""
    try:
        files = await ctx.packages.files(view.submitted.package_digest)
    except KzError:
        return None
    entry = files.get(f"{PACKAGE_DIR}/desc.yaml")
    return _yaml({f"{PACKAGE_DIR}/desc.yaml": entry[1]}, "desc.yaml") if entry else None


def _unknown(kernel_id: KernelId) -> ApiError:
    return ApiError(404, "unknown_kernel", f"no kernel {kernel_id}")


async def _lease_command(
    ctx: Ctx, kernel_id: KernelId, build: Callable[[KernelLease], list[LeaseCommand]]
) -> LeaseDoc:
    """Decide the commands `build` makes from the stored lease, in order, and append what they
    decide under one concurrency check."""
    subject = aggregate_filter("kernel", kernel_id.arch, str(kernel_id))
    stored = await ctx.log.load(subject)
    lease = fold_lease(stored)
    events = []
    for command in build(lease):
        decided = decide_lease(lease, command)
        for event in decided:
            lease = evolve_lease(lease, event)
        events.extend(decided)
    await append_seen(ctx, events, expect=stored[-1][0] if stored else 0, expect_on=subject)
    current = ctx.models.leases.get(str(kernel_id), KernelLease(kernel_id=str(kernel_id)))
    return lease_doc(current)


def _held_by_other(lease: KernelLease, submitter: Submitter, now: datetime) -> bool:
    return lease.held_at(now) and lease.holder not in (None, submitter.id)


def _claim_commands(
    kernel_id: KernelId, submitter: Submitter, ttl_s: float, override: bool
) -> Callable[[KernelLease], list[LeaseCommand]]:
    """Claim (or renew); with `override`, a maintainer first releases another holder's lease."""

    def build(lease: KernelLease) -> list[LeaseCommand]:
        meta = EventMeta.now(submitter.id)
        claim = ClaimKernel(
            meta=meta,
            kernel_id=str(kernel_id),
            holder=submitter.id,
            lease_id=str(uuid.uuid4()),
            ttl_s=ttl_s,
        )
        if (
            override
            and lease.holder is not None
            and _held_by_other(lease, submitter, meta.occurred_at)
        ):
            # its own event id: one shared with the claim would de-duplicate the claim away
            release_meta = EventMeta.now(submitter.id)
            release = ReleaseKernel(
                meta=release_meta, kernel_id=str(kernel_id), holder=lease.holder
            )
            return [release, claim]
        return [claim]

    return build


def _release_commands(
    kernel_id: KernelId, submitter: Submitter
) -> Callable[[KernelLease], list[LeaseCommand]]:
    """Release the caller's lease; a maintainer releases whoever holds it."""

    def build(lease: KernelLease) -> list[LeaseCommand]:
        meta = EventMeta.now(submitter.id)
        holder = submitter.id
        if (
            submitter.maintainer
            and lease.holder is not None
            and _held_by_other(lease, submitter, meta.occurred_at)
        ):
            holder = lease.holder  # released on the holder's behalf; the actor says by whom
        return [ReleaseKernel(meta=meta, kernel_id=str(kernel_id), holder=holder)]

    return build


def _lease_ttl(ctx: Ctx, data: ClaimBody | None) -> float:
    ttl = data.ttl_s if data else ClaimBody().ttl_s
    cap = ctx.settings.max_kernel_lease_s
    if ttl > cap:
        raise ApiError(
            400,
            "ttl_too_long",
            f"ttl_s: expected at most {cap:g} seconds (KZ_MAX_KERNEL_LEASE_S), got {ttl:g}",
            details={"field": "ttl_s", "max": cap},
        )
    return ttl


class KernelsController(Controller):
    path = "/api/kernels"
    tags = ["kernels"]
    dependencies = {"submitter": Provide(identify_submitter)}

    @get("/", responses=errors(), summary="List kernels")
    async def list_kernels(
        self,
        ctx: Ctx,
        arch: Annotated[str | None, QueryParameter(max_length=64)] = None,
        op_class: Annotated[str | None, QueryParameter(max_length=64)] = None,
        sub_class: Annotated[str | None, QueryParameter(max_length=64)] = None,
        quant: Annotated[str | None, QueryParameter(max_length=64)] = None,
        q: Annotated[str | None, QueryParameter(max_length=200)] = None,
        sort: Annotated[
            str,
            QueryParameter(
                description="id, title, accepted_count, "
                "last_activity_at or best; prefix - to reverse"
            ),
        ] = "id",
        limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 50,
        offset: Annotated[int, QueryParameter(ge=0, le=2**63 - 1)] = 0,
        model: Annotated[
            str | None,
            QueryParameter(
                max_length=100,
                description="only kernels whose current result this model made (provenance)",
            ),
        ] = None,
        agent: Annotated[
            str | None,
            QueryParameter(
                max_length=100,
                description="only kernels whose current result this agent made (provenance)",
            ),
        ] = None,
    ) -> Response[KernelList]:
        query = KernelQuery(
            arch, op_class, sub_class, quant, q, model, agent, sort=sort, limit=limit, offset=offset
        )
        index = ctx.index_cache.get(ctx.models)
        data = ctx.kernels_cache.get(index.seq, query)
        if data is None:
            data = ctx.kernels_cache.put(query, query_kernels(index.kernels, query, index.seq))
        return Response(data, media_type="application/json")  # type: ignore[arg-type]  # pre-encoded

    @get(KERNEL, responses=errors(404), summary="Kernel detail")
    async def detail(
        self,
        ctx: Ctx,
        arch: FromPath[str],
        op_class: FromPath[str],
        sub_class: FromPath[str],
        quant: FromPath[str],
        name: FromPath[str],
    ) -> KernelDetail:
        kernel_id = _kernel_id(arch, op_class, sub_class, quant, name)
        snap = await anyio.to_thread.run_sync(
            kernel_snapshot, ctx.settings.kernel_repo_path, kernel_id.repo_path
        )
        summary = _summary(ctx, kernel_id)
        if snap is None and not _known(ctx, kernel_id):
            latest = _latest_submission(ctx, kernel_id)
            if latest is None:
                raise _unknown(kernel_id)
            return _detail(ctx, kernel_id, None, summary, await _submitted_desc(ctx, latest) or {})
        return _detail(ctx, kernel_id, snap, summary)

    @get(KERNEL + "/bench-history", responses=errors(404), summary="Accepted history")
    async def bench_history(
        self,
        ctx: Ctx,
        arch: FromPath[str],
        op_class: FromPath[str],
        sub_class: FromPath[str],
        quant: FromPath[str],
        name: FromPath[str],
    ) -> BenchHistory:
        kernel_id = _kernel_id(arch, op_class, sub_class, quant, name)
        history = ctx.models.history.get(str(kernel_id))
        if (
            history is None
            and not _known(ctx, kernel_id)
            and _latest_submission(ctx, kernel_id) is None
        ):
            raise _unknown(kernel_id)
        entries = [e for e in (history.entries if history else []) if e.disqualified is None]
        metric = history.metric if history else None
        scored = [e for e in entries if e.value is not None]
        best = (metric or NO_METRIC).best(scored, lambda e: e.value or 0.0)
        committed = [e for e in entries if e.commit] or entries
        return BenchHistory(
            kernel_id=str(kernel_id),
            metric=metric.fields() if metric else None,
            best=history_row(best, ctx.models) if best else None,
            current=history_row(committed[-1], ctx.models) if committed else None,
            history=[history_row(e, ctx.models) for e in (history.entries if history else [])],
        )

    @get(
        KERNEL + "/files/{file_path:path}",
        media_type="text/plain",
        responses=errors(404),
        summary="One file of the kernel's package as main has it",
        include_in_schema=False,
    )
    async def file(
        self,
        ctx: Ctx,
        arch: FromPath[str],
        op_class: FromPath[str],
        sub_class: FromPath[str],
        quant: FromPath[str],
        name: FromPath[str],
        file_path: FromPath[str],
    ) -> Response[bytes]:
        kernel_id = _kernel_id(arch, op_class, sub_class, quant, name)
        snap = await anyio.to_thread.run_sync(
            kernel_snapshot, ctx.settings.kernel_repo_path, kernel_id.repo_path
        )
        if snap is None:
            raise _unknown(kernel_id)
        wanted = file_path.lstrip("/")
        data = snap.files.get(wanted)
        if data is None:
            raise ApiError(404, "unknown_file", f"kernel {kernel_id} has no file {wanted!r}")
        return Response(data, media_type="text/plain; charset=utf-8")

    @get(
        KERNEL + "/judge",
        media_type="application/gzip",
        responses=errors(404, 409),
        summary="The judge a submission of this kernel is compared with (kz validate --against)",
    )
    async def judge(
        self,
        ctx: Ctx,
        arch: FromPath[str],
        op_class: FromPath[str],
        sub_class: FromPath[str],
        quant: FromPath[str],
        name: FromPath[str],
    ) -> Response[bytes]:
        """Main's judge bundle of the kernel (a gzip tarball holding `.kernel_package/`'s judge
        files), or for a kernel main does not have its board's; the `Kz-Judge-Scope` header
        says which (`kernel` or `board`), `Kz-Judge-Kernel` whose judge it is."""
        kernel_id = _kernel_id(arch, op_class, sub_class, quant, name)
        bundle = await judge_bundle(ctx, kernel_id)
        scope, owner = "kernel", str(kernel_id)
        if bundle is None:
            board = await board_judge(ctx, kernel_id)
            if board is None or board.board_kernel is None:
                raise ApiError(
                    404,
                    "no_judge",
                    f"{kernel_id} has no judge on main and its board none yet: a first kernel "
                    "brings its own",
                    details={"board": board_of(str(kernel_id))},
                )
            bundle, scope, owner = board.bundle, "board", board.board_kernel
        headers = {"Kz-Judge-Scope": scope, "Kz-Judge-Kernel": owner}
        return Response(bundle, media_type="application/gzip", headers=headers)

    @post(
        KERNEL + "/claim",
        status_code=200,
        responses=errors(400, 401, 403, 404, 409),
        summary="Take or renew the optimisation lease (maintainers may override another's)",
    )
    async def claim(
        self,
        ctx: Ctx,
        submitter: SubmitterDep,
        arch: FromPath[str],
        op_class: FromPath[str],
        sub_class: FromPath[str],
        quant: FromPath[str],
        name: FromPath[str],
        data: JSONBody[ClaimBody | None] = None,
        override: Annotated[
            bool,
            QueryParameter(description="maintainers: release another holder's lease and take it"),
        ] = False,
    ) -> LeaseDoc:
        kernel_id = _kernel_id(arch, op_class, sub_class, quant, name)
        if not _known(ctx, kernel_id):
            raise _unknown(kernel_id)
        ttl = _lease_ttl(ctx, data)
        if override and not submitter.maintainer:
            raise ApiError(
                403, "maintainers_only", "override: only maintainers may take another's lease"
            )
        return await _lease_command(
            ctx, kernel_id, _claim_commands(kernel_id, submitter, ttl, override)
        )

    @delete(
        KERNEL + "/claim",
        status_code=200,
        responses=errors(401, 404, 409),
        summary="Release the optimisation lease (maintainers may release anyone's)",
    )
    async def release(
        self,
        ctx: Ctx,
        submitter: SubmitterDep,
        arch: FromPath[str],
        op_class: FromPath[str],
        sub_class: FromPath[str],
        quant: FromPath[str],
        name: FromPath[str],
    ) -> LeaseDoc:
        kernel_id = _kernel_id(arch, op_class, sub_class, quant, name)
        if not _known(ctx, kernel_id):
            raise _unknown(kernel_id)
        return await _lease_command(ctx, kernel_id, _release_commands(kernel_id, submitter))
