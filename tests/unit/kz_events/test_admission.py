"""The admission rules (`kz_events.admission.admit`), the resubmission rate above all: a few
submissions of one kernel by one submitter an hour, the next refused with when to retry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kz_events.admission import Admission, admit
from kz_events.errors import RuleViolation
from kz_events.kernel_lease import KernelLease

pytestmark = pytest.mark.unit

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
KID = "cpu/Norm/RMSNorm/fp32/numpy_ref"


def _ago(*minutes: float) -> list[datetime]:
    return [NOW - timedelta(minutes=m) for m in minutes]


def _rated(times: list[datetime], limit: int | None = 3) -> Admission:
    return Admission(recent_submissions=times, resubmit_limit=limit, resubmit_window_s=3600)


@pytest.mark.parametrize(
    ("times", "admitted"),
    [
        (_ago(), True),
        (_ago(50, 20), True),  # two in the hour: a third fits
        (_ago(50, 20, 5), False),  # three in the hour: the fourth waits
        (_ago(90, 70, 61, 20, 5), True),  # the older ones aged out
        (_ago(-1, 20, 5), False),  # one stamped ahead of this replica's clock still counts
    ],
)
def test_the_rate_counts_one_sliding_window(times: list[datetime], admitted: bool) -> None:
    """At most `resubmit_limit` submissions in any window of `resubmit_window_s`."""
    if admitted:
        admit(KID, "alice", _rated(times), NOW)
        return
    with pytest.raises(RuleViolation) as refused:
        admit(KID, "alice", _rated(times), NOW)
    assert refused.value.code == "rate_limited"


def test_a_refusal_says_when_to_retry() -> None:
    """The refusal names the limit and the window and gives the seconds until the oldest
    submission in the window ages out (the API's Retry-After)."""
    with pytest.raises(RuleViolation) as refused:
        admit(KID, "alice", _rated(_ago(50, 20, 5)), NOW)
    error = refused.value
    assert error.details["retry_after_s"] == 600  # the one of 50 min ago frees a place in 10
    assert error.details["retry_at"] == (NOW + timedelta(minutes=10)).isoformat()
    assert (error.details["limit"], error.details["window_s"]) == (3, 3600)
    assert error.message == (
        f"at most 3 submissions of {KID} per hour by one submitter; alice made 3 in the last "
        "hour: retry in 10 min"
    )


def test_no_limit_admits_any_number() -> None:
    admit(KID, "alice", _rated(_ago(*range(100)), limit=None), NOW)


def test_the_rules_apply_in_order() -> None:
    """A held lease is named before the rate; the rate before a duplicate package."""
    lease = KernelLease(kernel_id=KID, holder="bob", lease_id="K", expires_at=NOW + timedelta(1))
    both = Admission(
        kernel_lease=lease,
        recent_submissions=_ago(1, 2, 3),
        resubmit_limit=3,
        open_twin="s-1",
    )
    with pytest.raises(RuleViolation) as refused:
        admit(KID, "alice", both, NOW)
    assert refused.value.code == "claim_held"
    with pytest.raises(RuleViolation) as refused:
        admit(KID, "alice", Admission(**{**_as_dict(both), "kernel_lease": None}), NOW)
    assert refused.value.code == "rate_limited"


def _as_dict(facts: Admission) -> dict[str, object]:
    return {name: getattr(facts, name) for name in facts.__struct_fields__}
