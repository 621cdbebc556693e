"""The HTTP adapter of the lease service (kz_events.leasing): runners that reach the platform
only through the API claim, heartbeat, report and hand back here, and the service does on their
behalf what it does for a native runner. The lease token carries the delivery's reply subject,
so any API replica can settle a lease another one handed out.
"""

from __future__ import annotations

import hmac

from kz_api.auth import RUNNER_KEY_ACTOR, RunnerAuth
from kz_api.context import ApiContext
from kz_api.errors import ApiError
from kz_api.leases import LeaseClaim
from kz_api.models import ResultBody, TaskOffer
from kz_api.service import READ_YOUR_WRITES_S, append_seen
from kz_events.errors import ConcurrencyConflict
from kz_events.events import EventMeta, RunnerHeartbeat, RunnerRegistered
from kz_events.ids import KernelId
from kz_events.leasing import LeaseService, ResultReport, TaskLease
from kz_events.lifecycle import Status
from kz_events.subjects import encode_token
from kz_package import validate_result_document

__all__ = [
    "LOG_CAP",
    "claim_task",
    "heartbeat",
    "lease_service",
    "register_runner",
    "report_result",
    "runner_binding",
    "token_lease",
    "verify_lease",
]

LOG_CAP = 4 * 1024 * 1024
HAND_BACK_PHASE = "handed_back"  # a heartbeat in this phase gives the task back at once


def lease_service(ctx: ApiContext) -> LeaseService:
    """The lease service on the app's log (kz_events.leasing): the same one native runners use."""
    settings = ctx.settings
    return LeaseService(
        ctx.log,
        lease_s=settings.lease_s,
        max_attempts=settings.max_attempts,
        queues=ctx.task_consumers,
    )


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


def _offer(ctx: ApiContext, lease: TaskLease, auth: RunnerAuth) -> TaskOffer:
    claim = LeaseClaim(
        submission_id=lease.submission_id,
        kernel_id=lease.kernel_id,
        attempt=lease.attempt,
        lease_id=lease.lease_id,
        runner_id=lease.runner_id,
        key_id=auth.key_id,
        reply=lease.reply,
    )
    base = f"/api/runner/tasks/{lease.submission_id}"
    settings = ctx.settings
    return TaskOffer(
        submission_id=lease.submission_id,
        kernel_id=lease.kernel_id,
        arch=lease.arch,
        attempt=lease.attempt,
        lease_id=lease.lease_id,
        lease_token=ctx.signer.sign(claim),
        package_url=f"{base}/package",
        package_digest=lease.package_digest,
        package_size=lease.package_size,
        judge_url=f"{base}/judge",  # a new kernel's is its board's pinned reference
        heartbeat_s=settings.heartbeat_s,
        task_timeout_s=settings.task_timeout_s,
        step_timeout_s=settings.step_timeout_s,
        confirms=lease.confirms,
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
    lease = await lease_service(ctx).claim(runner_id, arches, wait_s)
    return None if lease is None else _offer(ctx, lease, auth)


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


def token_lease(ctx: ApiContext, auth: RunnerAuth, token: str) -> TaskLease:
    """The lease a token carries, when the caller may use it: the key it was handed to and an
    architecture of the key. Whether it is still current is the lease service's to say."""
    claim = ctx.signer.verify(token)
    if not hmac.compare_digest(claim.key_id, auth.key_id):
        raise ApiError(403, "lease_not_yours", "this lease token was handed to another runner key")
    auth.require(KernelId.parse(claim.kernel_id).arch)
    return TaskLease(
        submission_id=claim.submission_id,
        kernel_id=claim.kernel_id,
        attempt=claim.attempt,
        lease_id=claim.lease_id,
        runner_id=claim.runner_id,
        reply=claim.reply,
    )


async def verify_lease(ctx: ApiContext, auth: RunnerAuth, token: str) -> LeaseClaim:
    """The claim of a lease token the caller may use to download its task's files: the key it
    was handed to, and the submission's current claim, running. A runner asks for its files
    right after its claim, which this replica's read model may not have folded yet: where the
    model does not show the lease, it waits until the model has folded what the log holds of
    the submission, and the log decides."""
    lease = token_lease(ctx, auth, token)
    claim = ctx.signer.verify(token)
    if not _holds(ctx, claim):
        stored = await ctx.log.load(lease.aggregate.subject_filter)
        if stored:
            await ctx.models.wait_seq(stored[-1][0], READ_YOUR_WRITES_S)
        if not _holds(ctx, claim):
            view = ctx.models.submissions.get(claim.submission_id)
            status = view.state.status if view is not None else "unknown here"
            raise ApiError(
                409,
                "stale_lease",
                f"this lease is not the submission's current claim (the submission is {status})",
                details={"submission_id": claim.submission_id, "status": str(status)},
            )
    return claim


def _holds(ctx: ApiContext, claim: LeaseClaim) -> bool:
    view = ctx.models.submissions.get(claim.submission_id)
    return (
        view is not None
        and view.state.status is Status.RUNNING
        and view.state.lease_id == claim.lease_id
    )


async def heartbeat(ctx: ApiContext, auth: RunnerAuth, token: str, phase: str) -> bool:
    """Keep the lease alive; True when the submission was cancelled meanwhile. A heartbeat in
    the phase `handed_back` gives the task back at once (the runner is shutting down)."""
    lease = token_lease(ctx, auth, token)
    service = lease_service(ctx)
    if phase == HAND_BACK_PHASE:
        await service.hand_back(lease)
        return False
    return await service.heartbeat(lease, phase)


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
    """Report the lease's result through the lease service; (status, version)."""
    lease = token_lease(ctx, auth, body.lease_token)
    if lease.submission_id != submission_id:
        raise ApiError(409, "stale_lease", "the lease token is for another submission")
    _check_result(body)
    report = ResultReport(
        outcome=body.outcome,
        result=body.result,
        environment=body.environment,
        duration_s=body.duration_s,
        log=body.log.encode()[-LOG_CAP:] if body.log else b"",
        timings=body.timings,
    )
    state = await lease_service(ctx).report(lease, report)
    await ctx.models.wait_seq(state.version, READ_YOUR_WRITES_S)
    view = ctx.models.submissions.get(submission_id)
    return str(view.state.status if view is not None else state.status), state.version
