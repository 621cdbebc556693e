"""A kernel's optimisation lease: claim, renew, held-by-other, release and expiry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kz_events.errors import RuleViolation
from kz_events.events import EventMeta, KernelClaimed, KernelImported, KernelReleased
from kz_events.lifecycle import (
    ClaimKernel,
    KernelLease,
    ReleaseKernel,
    decide_lease,
    evolve_lease,
    fold_lease,
)

pytestmark = pytest.mark.unit

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
KID = "sm90/Attention/MHA/fp16/flash_v3"


def at(seconds: float, actor: str = "svc") -> EventMeta:
    return EventMeta(
        event_id=f"e{seconds}", occurred_at=T0 + timedelta(seconds=seconds), actor=actor
    )


def claim(who: str, when: float, ttl: float = 60, lease_id: str | None = None) -> ClaimKernel:
    return ClaimKernel(
        meta=at(when, who),
        kernel_id=KID,
        holder=who,
        lease_id=lease_id or f"{who}-{when}",
        ttl_s=ttl,
    )


def release(who: str, when: float) -> ReleaseKernel:
    return ReleaseKernel(meta=at(when, who), kernel_id=KID, holder=who)


def apply(lease: KernelLease, command: ClaimKernel | ReleaseKernel, seq: int) -> KernelLease:
    for event in decide_lease(lease, command):
        lease = evolve_lease(lease, event, seq)
    return lease


def test_claim_a_free_kernel() -> None:
    """Claiming a free kernel yields kernel_claimed with an expiry of now + ttl."""
    [event] = decide_lease(KernelLease(), claim("alice", 0, ttl=90))
    assert isinstance(event, KernelClaimed)
    assert (event.kernel_id, event.holder, event.lease_id) == (KID, "alice", "alice-0")
    assert event.expires_at == T0 + timedelta(seconds=90)
    lease = evolve_lease(KernelLease(), event, 1)
    assert lease.held_at(T0 + timedelta(seconds=89))
    assert not lease.held_at(T0 + timedelta(seconds=90))
    assert lease.version == 1


def test_holder_renews_keeping_the_lease_id() -> None:
    """The holder claiming again extends the expiry and keeps the same lease id."""
    lease = apply(KernelLease(), claim("alice", 0), 1)
    [event] = decide_lease(lease, claim("alice", 30, lease_id="new-id"))
    assert isinstance(event, KernelClaimed)
    assert event.lease_id == "alice-0"
    assert event.expires_at == T0 + timedelta(seconds=90)


def test_held_by_other_is_refused_with_holder_and_expiry() -> None:
    """A claim on a kernel held by another is refused as claim_held naming holder and expiry."""
    lease = apply(KernelLease(), claim("alice", 0), 1)
    with pytest.raises(RuleViolation) as caught:
        decide_lease(lease, claim("bob", 59))
    refusal = caught.value
    assert refusal.code == "claim_held"
    assert refusal.details == {
        "holder": "alice",
        "expires_at": (T0 + timedelta(seconds=60)).isoformat(),
    }
    assert "alice" in refusal.message


def test_expiry_lets_another_claim() -> None:
    """Once the lease has expired another submitter gets a fresh lease."""
    lease = apply(KernelLease(), claim("alice", 0), 1)
    [event] = decide_lease(lease, claim("bob", 60))
    assert isinstance(event, KernelClaimed)
    assert (event.holder, event.lease_id) == ("bob", "bob-60")


def test_claim_after_own_expiry_starts_a_new_lease() -> None:
    """A holder whose lease expired gets a new lease id when claiming again."""
    lease = apply(KernelLease(), claim("alice", 0), 1)
    [event] = decide_lease(lease, claim("alice", 61))
    assert isinstance(event, KernelClaimed)
    assert event.lease_id == "alice-61"


def test_release_by_holder() -> None:
    """The holder releases the lease; the kernel is then free for anyone."""
    lease = apply(KernelLease(), claim("alice", 0), 1)
    [event] = decide_lease(lease, release("alice", 10))
    assert isinstance(event, KernelReleased)
    assert (event.holder, event.lease_id) == ("alice", "alice-0")
    freed = evolve_lease(lease, event, 2)
    assert freed == KernelLease(kernel_id=KID, version=2)
    assert decide_lease(freed, claim("bob", 11))[0].holder == "bob"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("lease_claims", "who", "when"),
    [([], "alice", 0), ([("alice", 0)], "bob", 10), ([("alice", 0)], "alice", 60)],
)
def test_release_without_holding_is_refused(
    lease_claims: list[tuple[str, float]], who: str, when: float
) -> None:
    """Releasing a lease one does not hold (free, another's, expired) is refused as not_held."""
    lease = KernelLease()
    for seq, (holder, t) in enumerate(lease_claims, start=1):
        lease = apply(lease, claim(holder, t), seq)
    with pytest.raises(RuleViolation) as caught:
        decide_lease(lease, release(who, when))
    assert caught.value.code == "not_held"


@pytest.mark.parametrize("ttl", [0, 0.5, -1, 7 * 24 * 3600 + 1])
def test_ttl_bounds(ttl: float) -> None:
    """A ttl outside 1 s to 7 days is refused as invalid_ttl."""
    with pytest.raises(RuleViolation) as caught:
        decide_lease(KernelLease(), claim("alice", 0, ttl=ttl))
    assert caught.value.code == "invalid_ttl"


def test_fold_lease_ignores_other_events() -> None:
    """Folding a kernel's events keeps the latest lease and ignores non-lease events."""
    lease = apply(KernelLease(), claim("alice", 0), 1)
    [claimed] = decide_lease(KernelLease(), claim("alice", 0))
    imported = KernelImported(
        event_id="i", occurred_at=T0, actor="a", kernel_id=KID, package_digest="d", submitter_id="a"
    )
    assert fold_lease([(1, claimed), (2, imported)]) == lease


class LeaseMachine(RuleBasedStateMachine):
    """Random claims, releases and clock ticks against a simple reference model of the lease."""

    def __init__(self) -> None:
        super().__init__()
        self.lease = KernelLease()
        self.now = 0.0
        self.seq = 0
        self.model_holder: str | None = None
        self.model_expiry = 0.0

    def held(self) -> bool:
        return self.model_holder is not None and self.now < self.model_expiry

    @rule(seconds=st.sampled_from([0, 1, 10, 59, 60, 61, 300]))
    def tick(self, seconds: float) -> None:
        self.now += seconds

    @rule(who=st.sampled_from(["alice", "bob", "carol"]), ttl=st.sampled_from([1, 30, 60, 120]))
    def claim(self, who: str, ttl: float) -> None:
        held_by_other = self.held() and self.model_holder != who
        old_lease_id = self.lease.lease_id if self.held() else None
        try:
            events = decide_lease(
                self.lease, claim(who, self.now, ttl, lease_id=f"{who}-{self.seq}")
            )
        except RuleViolation as refusal:
            assert held_by_other
            assert refusal.code == "claim_held"
            assert refusal.details["holder"] == self.model_holder
            return
        assert not held_by_other
        [event] = events
        assert isinstance(event, KernelClaimed)
        if old_lease_id is not None:
            assert event.lease_id == old_lease_id
        self.seq += 1
        self.lease = evolve_lease(self.lease, event, self.seq)
        self.model_holder, self.model_expiry = who, self.now + ttl

    @rule(who=st.sampled_from(["alice", "bob", "carol"]))
    def release(self, who: str) -> None:
        try:
            events = decide_lease(self.lease, release(who, self.now))
        except RuleViolation as refusal:
            assert refusal.code == "not_held"
            assert not (self.held() and self.model_holder == who)
            return
        assert self.held() and self.model_holder == who
        self.seq += 1
        self.lease = evolve_lease(self.lease, events[0], self.seq)
        self.model_holder = None

    @invariant()
    def matches_the_model(self) -> None:
        now = T0 + timedelta(seconds=self.now)
        assert self.lease.held_at(now) == self.held()
        if self.held():
            assert self.lease.holder == self.model_holder
            assert self.lease.expires_at == T0 + timedelta(seconds=self.model_expiry)
        assert self.lease.version == self.seq


TestLeaseMachine = LeaseMachine.TestCase
TestLeaseMachine.settings = settings(max_examples=50, stateful_step_count=30, deadline=None)
