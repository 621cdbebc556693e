"""Steps the controllers share: event metadata, loading an aggregate, appending and waiting for
the read models to see the append (so a client reads its own writes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

from kz_api.context import ApiContext
from kz_api.errors import ApiError
from kz_api.readmodel import SubmissionView
from kz_events.commands import Aggregate, CommandOf, execute
from kz_events.errors import LogUnavailable
from kz_events.events import Event
from kz_events.ids import KernelId, parse_submission_id
from kz_events.lifecycle import SubmissionState, fold
from kz_events.subjects import aggregate_filter

__all__ = [
    "append_seen",
    "catch_up",
    "current_submission_view",
    "execute_seen",
    "load_submission",
    "submission_view",
    "utcnow",
]

READ_YOUR_WRITES_S = 5.0


def utcnow() -> datetime:
    return datetime.now(UTC)


def submission_view(ctx: ApiContext, submission_id: str) -> SubmissionView:
    """The read model's view of a submission; 404 unknown_submission when there is none."""
    sid = parse_submission_id(submission_id)
    view = ctx.models.submissions.get(sid)
    if view is None:
        raise ApiError(404, "unknown_submission", f"no submission {sid}")
    return view


async def current_submission_view(ctx: ApiContext, submission_id: str) -> SubmissionView:
    """Like `submission_view`, but an id this replica does not know yet is looked up again
    once its fold has caught up with the log: another replica may have just taken it."""
    sid = parse_submission_id(submission_id)
    if sid not in ctx.models.submissions:
        await catch_up(ctx)
    return submission_view(ctx, sid)


async def catch_up(ctx: ApiContext) -> None:
    """Wait (a bounded while) until this replica's fold has seen the log's present end, so it
    knows what another replica just appended; best effort when the log is away."""
    with contextlib.suppress(LogUnavailable):
        await ctx.models.wait_seq(await ctx.log.last_seq(), READ_YOUR_WRITES_S)


async def load_submission(ctx: ApiContext, view: SubmissionView) -> tuple[SubmissionState, str]:
    """The authoritative state of a submission, folded from the log, and its subject filter."""
    subject = aggregate_filter("submission", KernelId.parse(view.state.kernel_id).arch, view.id)
    return fold(await ctx.log.load(subject)), subject


async def append_seen(
    ctx: ApiContext, events: list[Event], *, expect: int | None, expect_on: str | None
) -> int:
    """Append `events` in order (the first with the concurrency check) and wait for the fold."""
    seq = 0
    for event in events:
        seq = await ctx.log.append(event, expect=expect, expect_on=expect_on)
        expect = seq if expect is not None else None
    await ctx.models.wait_seq(seq, READ_YOUR_WRITES_S)
    return seq


S = TypeVar("S")
C = TypeVar("C")


async def execute_seen(
    ctx: ApiContext,
    aggregate: Aggregate[S, C],
    command: CommandOf[C, S],
    *,
    expected: S | None = None,
    before_append: Callable[[list[Event]], Awaitable[None]] | None = None,
) -> int:
    """`kz_events.commands.execute`, then wait for the fold to see it; the last sequence
    appended (0: the command was done already)."""
    done = await execute(
        ctx.log, aggregate, command, expected=expected, before_append=before_append
    )
    if done.seq:
        await ctx.models.wait_seq(done.seq, READ_YOUR_WRITES_S)
    return done.seq
