"""What a runner is given beside a task's package: main's trusted bundle of its kernel."""

from __future__ import annotations

from kz_events.errors import ObjectNotFound
from kz_events.ids import KernelId
from kz_events.port import LogPort
from kz_events.subjects import JUDGES_BUCKET, judge_key, reference_key

__all__ = ["runner_bundle"]


async def runner_bundle(log: LogPort, kernel_id: str) -> bytes | None:
    """Main's bundle of `kernel_id` (its judge files, its `src/` as the incumbent, and the
    board's pinned `reference/`); for a kernel main does not hold yet, the board's reference
    alone, so that a new kernel is measured beside it; None when the board has none either."""
    board = KernelId.parse(kernel_id).group
    for key in (judge_key(kernel_id), reference_key(board)):
        try:
            return await log.get_object_bytes(JUDGES_BUCKET, key)
        except ObjectNotFound:
            continue
    return None
