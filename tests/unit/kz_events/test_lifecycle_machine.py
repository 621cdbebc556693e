"""Hypothesis state machine over the submission rules: no command sequence reaches a bad state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kz_events.errors import RuleViolation
from kz_events.events import (
    Event,
    EventMeta,
    SubmissionAccepted,
    SubmissionClaimed,
    SubmissionResult,
)
from kz_events.lifecycle import (
    TERMINAL,
    Cancel,
    Claim,
    Command,
    Commit,
    Disqualify,
    Fail,
    Judge,
    MetricSpec,
    ReportResult,
    Status,
    SubmissionState,
    Submit,
    decide,
    evolve,
)

pytestmark = pytest.mark.unit

T0 = datetime(2025, 3, 1, tzinfo=UTC)
SPEC = MetricSpec(name="latency", unit="us", better="lower")
S = Status
ALLOWED: dict[Status, set[Status]] = {
    S.NEW: {S.QUEUED},
    S.QUEUED: {S.RUNNING, S.FAILED, S.CANCELLED},
    S.RUNNING: {S.RUNNING, S.QUEUED, S.ACCEPTED, S.REJECTED, S.FAILED, S.CANCELLED},
    S.ACCEPTED: {S.ACCEPTED, S.COMMITTED},
    S.COMMITTED: {S.COMMITTED},
    S.REJECTED: {S.REJECTED},
    S.FAILED: {S.FAILED},
    S.CANCELLED: {S.CANCELLED},
}
KNOWN_REFUSALS = {
    "unknown_submission",
    "duplicate_submission",
    "not_claimable",
    "stale_lease",
    "attempts_exhausted",
    "duplicate_result",
    "stale_result",
    "not_open",
    "not_accepted",
    "already_disqualified",
}
runners = st.sampled_from(["r1", "r2", "r3"])
leases = st.sampled_from(["L1", "L2", "L3", "L4"])
outcomes = st.sampled_from(
    [
        "accepted",
        "rejected",
        "build_failed",
        "benchmark_error",
        "invalid_result",
        "timed_out",
        "cancelled",
    ]
)
values = st.sampled_from([1.5, 0.0, float("nan"), "fast", None])
# A settled run's timed windows agree within 1 %; a noisy one's spread by half.
SPREADS = {"settled": 0.01, "noisy": 0.5}
spreads = st.sampled_from(sorted(SPREADS))
rivals = st.sampled_from([None, None, "incumbent", "reference"])


# Preconditions are named functions, not lambdas: hypothesis describes a lambda by parsing its
# source, and CPython 3.11.7's AST constructor can fail that parse with a spurious SystemError
# (its recursion-depth bookkeeping), which hypothesis then reports as a flaky test.
def _running(machine: SubmissionMachine) -> bool:
    return machine.state.status is S.RUNNING


def _has_results(machine: SubmissionMachine) -> bool:
    return bool(machine.results)


class SubmissionMachine(RuleBasedStateMachine):
    """Random commands against one submission; each decision is applied as the log would."""

    def __init__(self) -> None:
        super().__init__()
        self.state = SubmissionState()
        self.seq = 0
        self.seen: set[Status] = {S.NEW}
        self.results: dict[int, SubmissionResult] = {}

    def meta(self, actor: str = "svc") -> EventMeta:
        return EventMeta(
            event_id=f"e{self.seq + 1}", occurred_at=T0 + timedelta(seconds=self.seq), actor=actor
        )

    def apply(self, command: Command) -> None:
        before = self.state
        try:
            events = decide(before, command)
        except RuleViolation as refusal:
            assert refusal.code in KNOWN_REFUSALS
            return
        for event in events:
            self.check_event(before, event)
            self.seq += 1
            self.state = evolve(self.state, event, self.seq)
            if isinstance(event, SubmissionResult):
                self.results[self.seq] = event
        self.check_transition(before, self.state)

    def check_event(self, before: SubmissionState, event: Event) -> None:
        assert getattr(event, "submission_id", None) == (before.submission_id or "sub-1")
        if isinstance(event, SubmissionClaimed):
            assert before.attempt < event.attempt <= before.last_attempt
        if isinstance(event, SubmissionResult):
            assert before.status is S.RUNNING
            assert (event.runner_id, event.lease_id) == (before.runner_id, before.lease_id)
            assert event.attempt == before.attempt
        if isinstance(event, SubmissionAccepted):
            assert event.result_seq == before.result_seq
            stored = self.results[event.result_seq]
            assert stored.lease_id == before.lease_id
            assert stored.outcome == "accepted"
            assert stored.result is not None and stored.result.get("accepted") is True

    def check_transition(self, before: SubmissionState, after: SubmissionState) -> None:
        assert after.status in ALLOWED[before.status]
        assert after.attempt >= before.attempt
        if before.status in TERMINAL:
            assert after.status is before.status
        self.seen.add(after.status)

    # --- rules ------------------------------------------------------------------------------

    @initialize(max_attempts=st.integers(1, 4))
    def submit_first(self, max_attempts: int) -> None:
        self.submit(max_attempts)

    @rule(max_attempts=st.integers(1, 4))
    def submit(self, max_attempts: int) -> None:
        self.apply(
            Submit(
                meta=self.meta("alice"),
                submission_id="sub-1",
                kernel_id="sm90/A/B/fp16/k",
                submitter_id="alice",
                package_digest="d" * 64,
                package_size=1,
                max_attempts=max_attempts,
            )
        )

    @rule(delta=st.sampled_from([-1, 0, 1, 1, 2]), runner=runners, lease=leases)
    def claim(self, delta: int, runner: str, lease: str) -> None:
        attempt = self.state.attempt + delta
        self.apply(Claim(meta=self.meta(runner), runner_id=runner, lease_id=lease, attempt=attempt))

    @precondition(_running)
    @rule(
        current=st.sampled_from([True, True, True, False]),
        runner=runners,
        lease=leases,
        outcome=outcomes,
        accepted=st.sampled_from([True, True, False]),
        value=values,
        spread=spreads,
        voided=rivals,
    )
    def report(
        self,
        current: bool,
        runner: str,
        lease: str,
        outcome: str,
        accepted: bool,
        value: Any,
        spread: str = "settled",
        voided: str | None = None,
    ) -> None:
        if current and self.state.lease_id is not None:
            runner, lease = self.state.runner_id or runner, self.state.lease_id
        wide = SPREADS[spread]
        samples = [10.0 * (1 + wide * d) for d in (-1, 0, 1, 0.5, -0.5, 0)]
        doc: dict[str, Any] = {
            "accepted": accepted,
            "metric": {"name": "latency", "unit": "us", "better": "lower", "value": value},
            "workloads": [{"name": "w", "value": 10.0, "stats": {"samples": samples}}],
        }
        if voided is not None:
            doc["rivals"] = {voided: {"status": "voided", "reason": "it raised"}}
        self.apply(
            ReportResult(
                meta=self.meta(runner),
                runner_id=runner,
                lease_id=lease,
                outcome=outcome,
                result=doc,
            )
        )

    @precondition(_has_results)
    @rule(pick=st.integers(0, 10), spec=st.sampled_from([SPEC, None]))
    def judge(self, pick: int, spec: MetricSpec | None) -> None:
        seqs = sorted(self.results)
        seq = seqs[-1] if pick < 6 else seqs[pick % len(seqs)]
        self.apply(
            Judge(
                meta=self.meta("referee"),
                result_seq=seq,
                result_event=self.results[seq],
                metric=spec,
            )
        )

    @rule(roll=st.integers(0, 5))
    def fail(self, roll: int) -> None:
        if roll == 0:  # rare, so that sequences get deep before they end
            self.apply(Fail(meta=self.meta("sweeper"), code="timed_out", reason="lost"))

    @rule(roll=st.integers(0, 5))
    def cancel(self, roll: int) -> None:
        if roll == 0:  # rare, so that sequences get deep before they end
            self.apply(Cancel(meta=self.meta("alice"), reason="withdrawn"))

    @rule(source=st.sampled_from(["s1", "s2"]))
    def commit(self, source: str) -> None:
        self.apply(
            Commit(
                meta=self.meta("git"), source_commit=source, bench_result_commit="b", accepted_seq=1
            )
        )

    @rule(roll=st.integers(0, 5))
    def disqualify(self, roll: int) -> None:
        if roll == 0:  # rare, so that sequences get deep before they end
            self.apply(Disqualify(meta=self.meta("maintainer"), reason="cheated"))

    @rule()
    def advance(self) -> None:
        """The natural next step of the current status, so that runs get deep."""
        status = self.state.status
        if status is S.QUEUED:
            self.claim(1, "r1", "L1")
        elif status is S.RUNNING and self.state.result_seq is None:
            self.report(True, "r1", "L1", "accepted", True, 1.5)
        elif status is S.RUNNING:
            self.judge(0, SPEC)
        elif status is S.ACCEPTED:
            self.commit("s1")

    # --- invariants -------------------------------------------------------------------------

    @invariant()
    def state_is_coherent(self) -> None:
        st_ = self.state
        assert st_.version == self.seq
        assert 0 <= st_.attempt <= st_.last_attempt
        assert len(st_.requeues) == len(set(st_.requeues)) <= 2  # one retry of each kind
        assert len({"unmeasured", "unsettled"} & set(st_.requeues)) <= 1
        if st_.status is S.RUNNING:
            assert st_.attempt >= 1 and st_.lease_id is not None and st_.runner_id is not None
        if st_.status is S.COMMITTED:
            assert S.ACCEPTED in self.seen
            assert st_.source_commit is not None
        if st_.disqualified is not None:
            assert st_.status in (S.ACCEPTED, S.COMMITTED)
        if st_.status in (S.ACCEPTED, S.REJECTED):
            assert st_.result_seq in self.results
        if st_.status is S.NEW:
            assert self.seq == 0


TestSubmissionMachine = SubmissionMachine.TestCase
TestSubmissionMachine.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
