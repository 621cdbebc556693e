"""The sweeper's rule: which running tasks end now, and with which code."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kz_projector.sweeper import OpenTask, endings, open_limit_s

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = 10.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("task", "beat", "now", "gone", "code"),
    [
        # last attempt, quiet past lease + grace: the runner is lost
        (OpenTask("s", 3, 3, T0), None, at(21), False, "runner_lost"),
        # last attempt still heartbeating: nothing
        (OpenTask("s", 3, 3, T0), at(15), at(21), False, None),
        # attempts left: JetStream delivers the held message again
        (OpenTask("s", 1, 3, T0), None, at(100), False, None),
        # attempts left, but the queue no longer holds the task: nothing would offer it again
        (OpenTask("s", 1, 3, T0), None, at(21), True, "runner_lost"),
        # not yet quiet, whatever the queue holds
        (OpenTask("s", 1, 3, T0), None, at(19), True, None),
        # a result waits for the referee: its runner is done, however long ago
        (OpenTask("s", 3, 3, T0, has_result=True), None, at(5000), False, None),
        # open past its time limit since the first claim: ends, even heartbeating
        (OpenTask("s", 2, 3, at(500), T0), at(999), at(1000), False, "timed_out"),
    ],
)
def test_endings(
    task: OpenTask, beat: datetime | None, now: datetime, gone: bool, code: str | None
) -> None:
    """Lapsed last attempts and lapsed tasks the queue dropped end runner_lost; anything open
    past its time limit ends timed_out; the rest is left to JetStream and the referee."""
    found = endings(
        [task], {"s": beat}, now, LEASE, LEASE, limit_s=900, gone={"s"} if gone else set()
    )
    assert [e.code for e in found] == ([code] if code else [])


def test_the_time_limit_covers_every_attempt() -> None:
    """Each attempt may run to the task limit, with a lease to notice and one to redeliver."""
    assert open_limit_s(3, 600, 15) == 3 * 630
    assert open_limit_s(0, 10, 1) == 12
