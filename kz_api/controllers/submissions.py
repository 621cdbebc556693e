"""Submissions: upload, status long-poll, list, detail, logs, cancel, disqualify, clear suspect."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from litestar import Controller, Request, Response, get, post
from litestar.di import Provide
from litestar.params import FromPath, HeaderParameter, JSONBody, QueryParameter

from kz_api.auth import Submitter, SubmitterDep, identify_submitter
from kz_api.context import ApiContext, Ctx
from kz_api.controllers.events import MAX_SEQ
from kz_api.errors import ApiError
from kz_api.models import (
    CancelBody,
    ClearSuspectBody,
    DisqualifyBody,
    StatusDoc,
    SubmissionDetail,
    SubmissionList,
    SubmitAnswer,
)
from kz_api.openapi import errors, multipart_operation
from kz_api.service import (
    append_seen,
    current_submission_view,
    load_submission,
    submission_view,
)
from kz_api.submit import accept_submission
from kz_api.upload import receive_upload
from kz_api.views import detail_doc, is_suspect, status_doc
from kz_events.errors import ObjectNotFound
from kz_events.events import EventMeta
from kz_events.lifecycle import Cancel, ClearSuspect, Disqualify, decide
from kz_events.provenance import made_by
from kz_events.subjects import LOGS_BUCKET

__all__ = ["SubmissionsController"]

MAX_LONGPOLL_S = 60.0

_SubmitOperation = multipart_operation(
    ["kernel_id"],
    {
        "kernel_id": "the kernel id the package declares",
        "submitter_id": "optional; must equal the authenticated submitter",
        "base_commit": "the kernel repo commit the package was made from",
        "message": "what changed, for the commit message",
        "agent": "provenance: the agent that wrote it (1-100 characters)",
        "model": "provenance: its model (1-100 characters)",
        "tokens": "provenance: tokens spent, an integer from 0 to 10^12",
        "cost_usd": "provenance: cost in US dollars, a number from 0 to 10^6",
        "transcript_url": "provenance: an http(s) link to the transcript (at most 2000)",
    },
)


class SubmissionsController(Controller):
    path = "/api/submissions"
    tags = ["submissions"]
    dependencies = {"submitter": Provide(identify_submitter)}

    @post(
        "/",
        status_code=202,
        operation_class=_SubmitOperation,
        request_max_body_size=None,  # receive_upload bounds it by KZ_MAX_UPLOAD_BYTES
        responses=errors(401, 403, 409, 413, 415, 429),
        summary="Submit a kernel package",
    )
    async def submit(
        self,
        request: Request[Any, Any, Any],
        ctx: Ctx,
        submitter: SubmitterDep,
        idempotency_key: Annotated[
            str | None, HeaderParameter(name="Idempotency-Key", required=False, max_length=200)
        ] = None,
    ) -> SubmitAnswer:
        async with receive_upload(
            request, max_bytes=ctx.settings.max_upload_bytes, memory=ctx.upload_memory
        ) as upload:
            return await accept_submission(ctx, upload, submitter, idempotency_key)

    @get("/", responses=errors(), summary="List submissions")
    async def list_submissions(
        self,
        ctx: Ctx,
        kernel_id: Annotated[str | None, QueryParameter(max_length=400)] = None,
        submitter_id: Annotated[str | None, QueryParameter(max_length=128)] = None,
        status: Annotated[str | None, QueryParameter(max_length=64)] = None,
        arch: Annotated[str | None, QueryParameter(max_length=64)] = None,
        suspect: Annotated[
            bool | None,
            QueryParameter(description="true: marked suspect and not cleared; false: the rest"),
        ] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=500)] = 50,
        offset: Annotated[int, QueryParameter(ge=0, le=MAX_SEQ)] = 0,
        model: Annotated[
            str | None, QueryParameter(max_length=100, description="only this model's (provenance)")
        ] = None,
        agent: Annotated[
            str | None, QueryParameter(max_length=100, description="only this agent's (provenance)")
        ] = None,
    ) -> SubmissionList:
        views = [
            v
            for v in reversed(ctx.models.submissions.values())
            if (kernel_id is None or v.state.kernel_id == kernel_id)
            and (submitter_id is None or v.state.submitter_id == submitter_id)
            and (status is None or str(v.state.status) == status)
            and (arch is None or v.arch == arch)
            and (suspect is None or is_suspect(v.state) is suspect)
            and made_by(v.submitted.provenance, model=model, agent=agent)
        ]
        page = views[offset : offset + limit]
        return SubmissionList(
            items=[status_doc(v, ctx.models) for v in page],
            total=len(views),
            limit=limit,
            offset=offset,
        )

    @get("/{submission_id:str}", responses=errors(404), summary="Submission detail")
    async def detail(self, ctx: Ctx, submission_id: FromPath[str]) -> SubmissionDetail:
        return detail_doc(await current_submission_view(ctx, submission_id), ctx.models)

    @get(
        "/{submission_id:str}/status",
        responses=errors(401, 404),
        summary="Status, long-polling for a change after `since`",
    )
    async def status(
        self,
        ctx: Ctx,
        submitter: SubmitterDep,
        submission_id: FromPath[str],
        since: Annotated[int | None, QueryParameter(ge=0, le=MAX_SEQ)] = None,
        timeout: Annotated[float | None, QueryParameter(ge=0, le=MAX_LONGPOLL_S)] = None,
    ) -> StatusDoc:
        view = await current_submission_view(ctx, submission_id)
        if since is not None and view.state.version <= since:
            wait_s = ctx.settings.longpoll_timeout_s if timeout is None else timeout
            await ctx.models.wait_change(view.id, since, min(wait_s, MAX_LONGPOLL_S))
        changed = since is None or view.state.version > since
        return status_doc(view, ctx.models, changed=changed)

    @get(
        "/{submission_id:str}/logs",
        media_type="text/plain",
        responses=errors(404),
        summary="The runner's log of the latest attempt",
    )
    async def logs(self, ctx: Ctx, submission_id: FromPath[str]) -> Response[bytes]:
        view = submission_view(ctx, submission_id)
        if view.log_key is None:
            raise ApiError(404, "log_not_found", f"submission {view.id} has no runner log yet")
        try:
            data = await ctx.log.get_object_bytes(LOGS_BUCKET, view.log_key)
        except ObjectNotFound as exc:
            raise ApiError(404, "log_not_found", f"the log {view.log_key} is gone") from exc
        return Response(data, media_type="text/plain; charset=utf-8")

    @post(
        "/{submission_id:str}/cancel",
        status_code=200,
        responses=errors(401, 403, 404, 409),
        summary="Cancel a queued or running submission (its submitter or a maintainer)",
    )
    async def cancel(
        self,
        ctx: Ctx,
        submitter: SubmitterDep,
        submission_id: FromPath[str],
        data: JSONBody[CancelBody | None] = None,
    ) -> StatusDoc:
        view = submission_view(ctx, submission_id)
        if view.state.submitter_id != submitter.id and not submitter.maintainer:
            raise ApiError(403, "forbidden", "only the submitter or a maintainer may cancel")
        state, subject = await load_submission(ctx, view)
        reason = (data.reason if data else "") or f"cancelled by {submitter.id}"
        events = decide(state, Cancel(meta=EventMeta.now(submitter.id), reason=reason))
        await append_seen(ctx, events, expect=state.version, expect_on=subject)
        return status_doc(view, ctx.models)

    @post(
        "/{submission_id:str}/disqualify",
        status_code=200,
        responses=errors(401, 403, 404, 409),
        summary="Disqualify an accepted submission (maintainers only)",
    )
    async def disqualify(
        self,
        ctx: Ctx,
        submitter: SubmitterDep,
        submission_id: FromPath[str],
        data: JSONBody[DisqualifyBody],
    ) -> StatusDoc:
        return await _as_maintainer(
            ctx, submitter, submission_id, "disqualify a submission",
            lambda meta: Disqualify(meta=meta, reason=data.reason),
        )  # fmt: skip

    @post(
        "/{submission_id:str}/clear-suspect",
        status_code=200,
        responses=errors(401, 403, 404, 409),
        summary="Clear the suspect mark of a result after a look (maintainers only)",
    )
    async def clear_suspect(
        self,
        ctx: Ctx,
        submitter: SubmitterDep,
        submission_id: FromPath[str],
        data: JSONBody[ClearSuspectBody],
    ) -> StatusDoc:
        return await _as_maintainer(
            ctx, submitter, submission_id, "clear a suspect mark",
            lambda meta: ClearSuspect(meta=meta, reason=data.reason),
        )  # fmt: skip


async def _as_maintainer(
    ctx: ApiContext,
    submitter: Submitter,
    submission_id: str,
    action: str,
    command: Callable[[EventMeta], Any],
) -> StatusDoc:
    """A maintainer's command on a submission: refused for others, decided by the rules and
    appended with the concurrency check; the submission's status after it."""
    view = submission_view(ctx, submission_id)
    if not submitter.maintainer:
        raise ApiError(403, "forbidden", f"only maintainers may {action}")
    state, subject = await load_submission(ctx, view)
    events = decide(state, command(EventMeta.now(submitter.id)))
    await append_seen(ctx, events, expect=state.version, expect_on=subject)
    return status_doc(view, ctx.models)
