"""Runner endpoints for runners that speak HTTP: register, claim, heartbeat, result, downloads."""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import Controller, Response, get, post
from litestar.di import Provide
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, HeaderParameter, JSONBody, QueryParameter

from kz_api.auth import RunnerDep, identify_runner
from kz_api.context import Ctx
from kz_api.errors import ApiError
from kz_api.leases import LeaseClaim
from kz_api.models import (
    MAX_LOG_CHARS,
    MAX_RESULT_DOCUMENT_BYTES,
    RUNNER_ID_PATTERN,
    ClaimTaskBody,
    HeartbeatAnswer,
    HeartbeatBody,
    RegisterAnswer,
    RegisterBody,
    ResultAnswer,
    ResultBody,
    RunnerList,
    TaskOffer,
)
from kz_api.openapi import errors
from kz_api.runner_tasks import (
    claim_task,
    heartbeat,
    register_runner,
    report_result,
    verify_lease,
)
from kz_api.views import runner_doc
from kz_events.bundles import runner_bundle
from kz_events.errors import ObjectNotFound
from kz_events.events import EventMeta, RunnerRegistered
from kz_events.subjects import PACKAGES_BUCKET

__all__ = ["RunnerController", "RunnersController"]

NO_TASK = ResponseSpec(data_container=None, description="No task within wait_s")
# A result body holds the log (escaped, it can take a few bytes a character) and the document.
RESULT_BODY_BYTES = 2 * MAX_LOG_CHARS + 2 * MAX_RESULT_DOCUMENT_BYTES
LeaseHeader = Annotated[
    str, HeaderParameter(name="X-Lease-Token", description="the task's lease token")
]


async def _object(ctx: Ctx, bucket: str, key: str, what: str) -> Response[bytes]:
    try:
        data = await ctx.log.get_object_bytes(bucket, key)
    except ObjectNotFound as exc:
        raise ApiError(404, "object_not_found", f"the {what} is not in the object store") from exc
    return Response(data, media_type="application/gzip")


class RunnerController(Controller):
    path = "/api/runner"
    tags = ["runner"]
    dependencies = {"runner": Provide(identify_runner)}

    @post(
        "/register",
        status_code=200,
        responses=errors(401, 403, 409),
        summary="Announce a runner (its id becomes the key's)",
    )
    async def register(
        self, ctx: Ctx, runner: RunnerDep, data: JSONBody[RegisterBody]
    ) -> RegisterAnswer:
        for arch in data.arches:
            runner.require(arch)
        meta = EventMeta.now(runner.actor)  # the key registers: the runner id becomes its own
        event = RunnerRegistered(
            **meta.fields(),
            runner_id=data.runner_id,
            arches=list(data.arches),
            device=data.device,
            backend=data.backend,
            labels=dict(data.labels),
        )
        await register_runner(ctx, runner, event)
        settings = ctx.settings
        return RegisterAnswer(
            runner_id=data.runner_id,
            heartbeat_s=settings.heartbeat_s,
            lease_s=settings.lease_s,
            task_timeout_s=settings.task_timeout_s,
            step_timeout_s=settings.step_timeout_s,
        )

    @post(
        "/claim",
        status_code=200,
        responses={**errors(401, 403, 404), 204: NO_TASK},
        summary="Long-poll for a task of the runner's architectures",
    )
    async def claim(
        self, ctx: Ctx, runner: RunnerDep, data: JSONBody[ClaimTaskBody]
    ) -> Response[TaskOffer | None]:
        offer = await claim_task(ctx, runner, data.runner_id, data.wait_s)
        if offer is None:
            return Response(None, status_code=204)
        return Response(offer)

    @get(
        "/claim",
        responses={**errors(401, 403, 404), 204: NO_TASK},
        summary="Long-poll for a task (query-string form of POST /api/runner/claim)",
    )
    async def claim_get(
        self,
        ctx: Ctx,
        runner: RunnerDep,
        runner_id: Annotated[str, QueryParameter(pattern=RUNNER_ID_PATTERN)],
        wait_s: Annotated[float, QueryParameter(ge=0, le=30)] = 0.0,
    ) -> Response[TaskOffer | None]:
        offer = await claim_task(ctx, runner, runner_id, wait_s)
        if offer is None:
            return Response(None, status_code=204)
        return Response(offer)

    @post(
        "/heartbeat",
        status_code=200,
        responses=errors(401, 403, 409),
        summary="Keep a lease alive; says whether the task was cancelled",
    )
    async def heartbeat(
        self, ctx: Ctx, runner: RunnerDep, data: JSONBody[HeartbeatBody]
    ) -> HeartbeatAnswer:
        return HeartbeatAnswer(cancelled=await heartbeat(ctx, runner, data.lease_token, data.phase))

    @get(
        "/tasks/{submission_id:str}/package",
        media_type="application/gzip",
        responses=errors(401, 403, 404, 409),
        summary="Download the task's package",
    )
    async def package(
        self, ctx: Ctx, runner: RunnerDep, submission_id: FromPath[str], lease_token: LeaseHeader
    ) -> Response[bytes]:
        claim = await _task_claim(ctx, runner, submission_id, lease_token)
        view = ctx.models.submissions[claim.submission_id]
        return await _object(ctx, PACKAGES_BUCKET, view.submitted.package_digest, "package")

    @get(
        "/tasks/{submission_id:str}/judge",
        media_type="application/gzip",
        responses=errors(401, 403, 404, 409),
        summary="Download main's trusted judge bundle",
    )
    async def judge(
        self, ctx: Ctx, runner: RunnerDep, submission_id: FromPath[str], lease_token: LeaseHeader
    ) -> Response[bytes]:
        claim = await _task_claim(ctx, runner, submission_id, lease_token)
        bundle = await runner_bundle(ctx.log, claim.kernel_id)
        if bundle is None:
            raise ApiError(404, "object_not_found", "main has no judge bundle for this kernel")
        return Response(bundle, media_type="application/gzip")


async def _task_claim(
    ctx: Ctx, runner: RunnerDep, submission_id: FromPath[str], token: str
) -> LeaseClaim:
    claim = await verify_lease(ctx, runner, token)
    if claim.submission_id != submission_id:
        raise ApiError(409, "stale_lease", "the lease token is for another submission")
    return claim


def _check_document_size(body: ResultBody) -> None:
    """Refuse a result document over its limit before anything of the result is stored."""
    if body.result is None:
        return
    size = len(msgspec.json.encode(body.result))
    if size > MAX_RESULT_DOCUMENT_BYTES:
        raise ApiError(
            413,
            "field_too_large",
            f"the result document must be at most {MAX_RESULT_DOCUMENT_BYTES} bytes as JSON, "
            f"got {size}",
            details={"field": "result", "limit": MAX_RESULT_DOCUMENT_BYTES},
        )


class RunnersController(Controller):
    path = "/api"
    tags = ["runner"]

    @post(
        "/submissions/{submission_id:str}/result",
        status_code=200,
        request_max_body_size=RESULT_BODY_BYTES,
        dependencies={"runner": Provide(identify_runner)},
        responses=errors(401, 403, 404, 409),
        summary="Report a result for the lease held",
    )
    async def result(
        self, ctx: Ctx, runner: RunnerDep, submission_id: FromPath[str], data: JSONBody[ResultBody]
    ) -> ResultAnswer:
        _check_document_size(data)
        status, version = await report_result(ctx, runner, submission_id, data)
        return ResultAnswer(status=status, version=version)

    @get("/runners", responses=errors(), summary="Registered runners and their heartbeats")
    async def runners(self, ctx: Ctx) -> RunnerList:
        views = sorted(ctx.models.runners.values(), key=lambda v: v.runner_id)
        return RunnerList(items=[runner_doc(v) for v in views])
