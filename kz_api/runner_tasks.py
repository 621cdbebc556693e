"""The HTTP runner transport: pull a task from the architecture's durable consumer on the
runner's behalf, claim it as a native runner would, and heartbeat, finish or refuse the lease
by publishing to the message's reply subject (so any API replica can do it).
"""

from __future__ import annotations

import asyncio
import hmac
import uuid

from kz_api.auth import RUNNER_KEY_ACTOR, RunnerAuth
from kz_api.context import ApiContext
from kz_api.errors import ApiError
from kz_api.leases import LeaseClaim
from kz_api.models import ResultBody, TaskOffer
from kz_api.service import append_seen, load_submission, submission_view
from kz_events.errors import ConcurrencyConflict, RuleViolation
from kz_events.events import (
    EventMeta,
    RunnerHeartbeat,
    RunnerRegistered,
    SubmissionSubmitted,
    TaskHeartbeat,
    checked_event,
)
from kz_events.ids import KernelId
from kz_events.lifecycle import (
    HOLDER_GONE_AFTER,
    OPEN,
    RELEASED_PHASE,
    Claim,
    ReportResult,
    Status,
    decide,
    fold,
)
from kz_events.port import Settle, TaskMessage, lease_signs
from kz_events.subjects import (
    LOGS_BUCKET,
    aggregate_filter,
    encode_token,
)
from kz_package import validate_result_document

__all__ = [
    "LOG_CAP",
    "claim_task",
    "heartbeat",
    "register_runner",
    "report_result",
    "runner_binding",
    "verify_lease",
]

LOG_CAP = 4 * 1024 * 1024
HAND_BACK_PHASE = "handed_back"  # a heartbeat in this phase gives the task back at once


async def _fetch_one(ctx: ApiContext, arch: str, wait_s: float) -> TaskMessage | None:
    if arch not in ctx.task_consumers:
        settings = ctx.settings
        await ctx.log.ensure_task_consumer(
            arch, lease_s=settings.lease_s, max_attempts=settings.max_attempts
        )
        ctx.task_consumers.add(arch)
    return await ctx.log.next_task(arch, wait_s)


def _runner_filter(runner_id: str) -> str:
    """Every event of one runner, whatever architecture its subjects name."""
    return f"kz.ev.runner.*.{encode_token(runner_id)}.*"


async def runner_binding(ctx: ApiContext, runner_id: str) -> tuple[str | None, int]:
    """(the actor of the runner id's first registration, None when it has none; the sequence
    of the runner's last event, 0 when none). The first registration binds the id to its key."""
    stored = await ctx.log.load(_runner_filter(runner_id))
    owner = next((e.actor for _, e in stored if isinstance(e, RunnerRegistered)), None)
    return owner, stored[-1][0] if stored else 0


def _refuse_binding(runner_id: str, owner: str, auth: RunnerAuth) -> None:
    if owner != auth.actor:
        by = "without a runner key" if not owner.startswith(RUNNER_KEY_ACTOR) else "by another key"
        raise ApiError(
            403,
            "runner_id_taken",
            f"runner id {runner_id} was registered {by}; this key may not use it",
            details={"runner_id": runner_id},
        )


async def register_runner(ctx: ApiContext, auth: RunnerAuth, event: RunnerRegistered) -> int:
    """Append a registration made with `auth`'s key: a new runner id becomes the key's, and an
    id some other key registered first is refused (so a key cannot take another's runner)."""
    owner, last = await runner_binding(ctx, event.runner_id)
    if owner is not None:
        _refuse_binding(event.runner_id, owner, auth)
    try:
        return await append_seen(
            ctx, [event], expect=last, expect_on=_runner_filter(event.runner_id)
        )
    except ConcurrencyConflict as exc:
        raise ApiError(
            409, "runner_changed", f"runner {event.runner_id} changed meanwhile; register again"
        ) from exc


async def _try_claim(
    ctx: ApiContext, msg: TaskMessage, runner_id: str, auth: RunnerAuth
) -> TaskOffer | None:
    event = checked_event(msg.subject, msg.data)
    if not isinstance(event, SubmissionSubmitted):
        await ctx.log.settle_task(msg.reply, Settle.TERM)
        return None
    arch = KernelId.parse(event.kernel_id).arch
    subject = aggregate_filter("submission", arch, event.submission_id)
    state = fold(await ctx.log.load(subject))
    attempt = state.attempt + 1  # counted from the log, not by deliveries (kz_runner.native)
    seen, phase = await lease_signs(ctx.log, arch, event.submission_id, state.lease_id)
    lease_id = str(uuid.uuid4())
    try:
        events = decide(
            state,
            Claim(
                meta=EventMeta.now(runner_id),
                runner_id=runner_id,
                lease_id=lease_id,
                attempt=attempt,
                holder_seen_at=seen,
                holder_released=phase == RELEASED_PHASE,
                lease_s=ctx.settings.lease_s * HOLDER_GONE_AFTER,
            ),
        )
        await append_seen(ctx, events, expect=state.version, expect_on=subject)
    except ConcurrencyConflict:
        await ctx.log.settle_task(msg.reply, Settle.NAK)
        return None
    except RuleViolation:
        # Never ack open work away: it may be the only copy of the task (kz_runner.native).
        if state.status in OPEN:
            await ctx.log.settle_task(msg.reply, Settle.NAK, delay_s=ctx.settings.lease_s)
        else:
            await ctx.log.settle_task(msg.reply, Settle.ACK)
        return None
    claim = LeaseClaim(
        submission_id=event.submission_id,
        kernel_id=event.kernel_id,
        attempt=attempt,
        lease_id=lease_id,
        runner_id=runner_id,
        key_id=auth.key_id,
        reply=msg.reply,
    )
    base = f"/api/runner/tasks/{event.submission_id}"
    settings = ctx.settings
    return TaskOffer(
        submission_id=event.submission_id,
        kernel_id=event.kernel_id,
        arch=arch,
        attempt=attempt,
        lease_id=lease_id,
        lease_token=ctx.signer.sign(claim),
        package_url=f"{base}/package",
        package_digest=event.package_digest,
        package_size=event.package_size,
        judge_url=None if event.new_kernel else f"{base}/judge",
        heartbeat_s=settings.heartbeat_s,
        task_timeout_s=settings.task_timeout_s,
        step_timeout_s=settings.step_timeout_s,
    )


def _runner_arches(ctx: ApiContext, auth: RunnerAuth, runner_id: str) -> list[str]:
    view = ctx.models.runners.get(runner_id)
    if view is None or view.deregistered:
        raise ApiError(404, "unknown_runner", f"runner {runner_id} is not registered")
    arches = [arch for arch in view.arches if auth.allows(arch)]
    if not arches:
        raise ApiError(403, "arch_not_allowed", f"this runner key covers none of {view.arches}")
    return arches


async def claim_task(
    ctx: ApiContext, auth: RunnerAuth, runner_id: str, wait_s: float
) -> TaskOffer | None:
    """A task of one of the runner's architectures, or None when none came within `wait_s`."""
    arches = _runner_arches(ctx, auth, runner_id)
    owner, _ = await runner_binding(ctx, runner_id)
    if owner is not None:
        _refuse_binding(runner_id, owner, auth)
    await _announce_idle(ctx, runner_id, arches)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        remaining = deadline - loop.time()
        slice_s = min(max(remaining, 0.0), 1.0) / len(arches)
        for arch in arches:
            msg = await _fetch_one(ctx, arch, slice_s)
            if msg is not None and (offer := await _try_claim(ctx, msg, runner_id, auth)):
                return offer
        if loop.time() >= deadline:
            return None


async def _announce_idle(ctx: ApiContext, runner_id: str, arches: list[str]) -> None:
    """A runner asking for work is alive and idle: say so on its live subject."""
    meta = EventMeta.now(runner_id)
    await ctx.log.publish_live(
        RunnerHeartbeat(
            **meta.fields(),
            runner_id=runner_id,
            arches=list(arches),
            busy_with=None,
        )
    )


def verify_lease(ctx: ApiContext, auth: RunnerAuth, token: str) -> LeaseClaim:
    """The claim of a lease token the caller may use: the key it was handed to, current lease."""
    claim = ctx.signer.verify(token)
    if not hmac.compare_digest(claim.key_id, auth.key_id):
        raise ApiError(403, "lease_not_yours", "this lease token was handed to another runner key")
    auth.require(KernelId.parse(claim.kernel_id).arch)
    view = ctx.models.submissions.get(claim.submission_id)
    if view is None or view.state.lease_id != claim.lease_id:
        raise ApiError(409, "stale_lease", "this lease is not the submission's current claim")
    return claim


async def heartbeat(ctx: ApiContext, auth: RunnerAuth, token: str, phase: str) -> bool:
    """Keep the lease alive; True when the submission was cancelled meanwhile."""
    claim = verify_lease(ctx, auth, token)
    view = ctx.models.submissions[claim.submission_id]
    if view.state.status is Status.CANCELLED:
        return True
    if view.state.status is not Status.RUNNING:
        raise ApiError(409, "stale_lease", f"the submission is {view.state.status}, not running")
    handing_back = phase == HAND_BACK_PHASE
    meta = EventMeta.now(claim.runner_id)
    beat = TaskHeartbeat(
        **meta.fields(),
        submission_id=claim.submission_id,
        kernel_id=claim.kernel_id,
        runner_id=claim.runner_id,
        attempt=claim.attempt,
        lease_id=claim.lease_id,
        phase=RELEASED_PHASE if handing_back else phase,
    )
    await ctx.log.publish_live(beat)
    if handing_back:
        # The runner is shutting down: give the task back at once for another runner (the
        # released heartbeat lets that runner take it without waiting for the lease to lapse).
        await ctx.log.settle_task(claim.reply, Settle.NAK)
        return False
    await ctx.log.settle_task(claim.reply, Settle.IN_PROGRESS)
    return False


def _check_result(body: ResultBody) -> None:
    if body.outcome in ("accepted", "rejected"):
        if body.result is None:
            raise ApiError(
                400, "invalid_result", f"outcome {body.outcome} needs the result document, got none"
            )
        validate_result_document(body.result)


async def report_result(
    ctx: ApiContext, auth: RunnerAuth, submission_id: str, body: ResultBody
) -> tuple[str, int]:
    """Store the log, append `result` for the lease, ack the task; (status, version)."""
    claim = verify_lease(ctx, auth, body.lease_token)
    if claim.submission_id != submission_id:
        raise ApiError(409, "stale_lease", "the lease token is for another submission")
    _check_result(body)
    state, subject = await load_submission(ctx, submission_view(ctx, submission_id))
    log_key = f"{submission_id}-{claim.attempt}"
    command = ReportResult(
        meta=EventMeta.now(claim.runner_id),
        runner_id=claim.runner_id,
        lease_id=claim.lease_id,
        outcome=body.outcome,
        result=body.result,
        log_key=log_key if body.log else None,
        environment=body.environment,
        duration_s=body.duration_s,
        timings=body.timings,
    )
    events = decide(state, command)  # refuses a stale lease before anything is stored
    if body.log:
        data = body.log.encode()[-LOG_CAP:]
        await ctx.log.put_object(LOGS_BUCKET, log_key, data)
    try:
        seq = await append_seen(ctx, events, expect=state.version, expect_on=subject)
    except ConcurrencyConflict as exc:
        raise ApiError(409, "stale_lease", "the submission moved on; this lease ended") from exc
    await ctx.log.settle_task(claim.reply, Settle.ACK)
    view = ctx.models.submissions[submission_id]
    return str(view.state.status), seq
