"""The submission rules: `decide` for every command in every status, and `evolve` per event."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from kz_events.errors import RuleViolation
from kz_events.events import (
    Event,
    EventMeta,
    KernelImported,
    RunnerRegistered,
    SubmissionAccepted,
    SubmissionCancelled,
    SubmissionClaimed,
    SubmissionCommitted,
    SubmissionConfirmed,
    SubmissionDisputed,
    SubmissionDisqualified,
    SubmissionFailed,
    SubmissionRejected,
    SubmissionRequeued,
    SubmissionResult,
    SubmissionSubmitted,
    UnknownEvent,
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
    fold,
)

pytestmark = pytest.mark.unit

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
SID = "6f1c3f0e-3b9a-4c55-9a59-2d5c8f0b7e41"
KID = "sm90/Attention/MHA/fp16/flash_v3"
SPEC = MetricSpec(name="latency", unit="us", better="lower")


def meta(n: int = 0, actor: str = "svc") -> EventMeta:
    return EventMeta(event_id=f"e-{n}", occurred_at=T0 + timedelta(seconds=n), actor=actor)


def document(accepted: bool = True, value: Any = 12.5, **metric: Any) -> dict[str, Any]:
    """A result whose timed windows agree within 1 %: settled, so it passes the gate."""
    samples = [12.5 * (1 + d / 100) for d in (-1, 0, 1, 0, -0.5, 0.5)]
    return {
        "schema_version": 1,
        "accepted": accepted,
        "reason": "1.3x faster" if accepted else "slower",
        "metric": {"name": "latency", "unit": "us", "better": "lower", "value": value, **metric},
        "workloads": [{"name": "w", "value": 12.5, "stats": {"median": 12.5, "samples": samples}}],
    }


def submit(max_attempts: int = 3) -> Submit:
    return Submit(
        meta=meta(1, "alice"),
        submission_id=SID,
        kernel_id=KID,
        submitter_id="alice",
        package_digest="d" * 64,
        package_size=100,
        max_attempts=max_attempts,
    )


def claim(attempt: int, runner: str = "r1", lease: str | None = None) -> Claim:
    return Claim(
        meta=meta(10 + attempt, runner),
        runner_id=runner,
        lease_id=lease or f"L{attempt}",
        attempt=attempt,
    )


def report(
    runner: str = "r1", lease: str = "L1", outcome: str = "accepted", result: Any = None
) -> ReportResult:
    doc = document() if result is None else result
    return ReportResult(
        meta=meta(20, runner), runner_id=runner, lease_id=lease, outcome=outcome, result=doc
    )


def run(state: SubmissionState, command: Command) -> SubmissionState:
    """Decide and apply, numbering stored events after the state's version."""
    for event in decide(state, command):
        state = evolve(state, event, state.version + 1)
    return state


def judge_of(state: SubmissionState, *, spec: MetricSpec | None = SPEC) -> Judge:
    event = SubmissionResult(
        **_ids(),
        runner_id=state.runner_id or "r1",
        attempt=state.attempt,
        lease_id=state.lease_id or "L1",
        outcome=state.outcome or "accepted",  # type: ignore[arg-type]
        result=state.result,
    )
    return Judge(
        meta=meta(30, "referee"), result_seq=state.result_seq or 3, result_event=event, metric=spec
    )


def _ids() -> dict[str, Any]:
    return {
        "event_id": "x",
        "occurred_at": T0,
        "actor": "r1",
        "submission_id": SID,
        "kernel_id": KID,
    }


def state_in(name: str) -> SubmissionState:
    """A submission brought to the named situation through decide/evolve only."""
    state = SubmissionState()
    if name == "new":
        return state
    state = run(state, submit())
    if name == "queued":
        return state
    state = run(state, claim(1))
    if name == "running":
        return state
    state = run(state, report())
    if name == "running_with_result":
        return state
    if name in ("accepted", "committed", "disqualified"):
        state = run(state, judge_of(state))
        if name in ("committed", "disqualified"):
            state = run(
                state,
                Commit(
                    meta=meta(40),
                    source_commit="s" * 40,
                    bench_result_commit="b" * 40,
                    accepted_seq=4,
                ),
            )
        if name == "disqualified":
            state = run(state, Disqualify(meta=meta(41), reason="cheated"))
        return state
    if name == "rejected":
        return run(state, judge_of(msgspec.structs.replace(state, result=document(accepted=False))))
    if name == "failed":
        return run(state, Fail(meta=meta(50), code="timed_out", reason="no heartbeat"))
    assert name == "cancelled"
    return run(state, Cancel(meta=meta(51), reason="bored"))


SITUATIONS = [
    "new",
    "queued",
    "running",
    "running_with_result",
    "accepted",
    "committed",
    "disqualified",
    "rejected",
    "failed",
    "cancelled",
]


def command_for(kind: str, state: SubmissionState) -> Command:
    """A well-formed command of `kind`, aimed at the state's current claim where it has one."""
    match kind:
        case "submit":
            return submit()
        case "claim":
            return claim(state.attempt + 1)
        case "result":
            return report(lease=state.lease_id or "L1")
        case "judge":
            return judge_of(state)
        case "fail":
            return Fail(meta=meta(60), code="timed_out", reason="lost runner")
        case "cancel":
            return Cancel(meta=meta(61), reason="withdrawn")
        case "commit":
            return Commit(
                meta=meta(62), source_commit="s" * 40, bench_result_commit="b" * 40, accepted_seq=4
            )
    assert kind == "disqualify"
    return Disqualify(meta=meta(63), reason="cheated")


COMMANDS = ["submit", "claim", "result", "judge", "fail", "cancel", "commit", "disqualify"]
R = "refused:"
# situation -> what each command (in COMMANDS order) yields: an event type, "none" or a refusal.
TABLE: dict[str, list[str]] = {
    "new": ["submitted"] + [R + "unknown_submission"] * 7,
    "queued": [
        R + "duplicate_submission",
        "claimed",
        R + "stale_lease",
        R + "stale_result",
        "failed",
        "cancelled",
        R + "not_accepted",
        R + "not_accepted",
    ],
    "running": [
        R + "duplicate_submission",
        "claimed",
        "result",
        R + "stale_result",
        "failed",
        "cancelled",
        R + "not_accepted",
        R + "not_accepted",
    ],
    "running_with_result": [
        R + "duplicate_submission",
        "claimed",
        R + "duplicate_result",
        "accepted",
        "failed",
        "cancelled",
        R + "not_accepted",
        R + "not_accepted",
    ],
    "accepted": [
        R + "duplicate_submission",
        R + "not_claimable",
        R + "stale_lease",
        R + "stale_result",
        R + "not_open",
        R + "not_open",
        "committed",
        "disqualified",
    ],
    "committed": [
        R + "duplicate_submission",
        R + "not_claimable",
        R + "stale_lease",
        R + "stale_result",
        R + "not_open",
        R + "not_open",
        "none",
        "disqualified",
    ],
    "disqualified": [
        R + "duplicate_submission",
        R + "not_claimable",
        R + "stale_lease",
        R + "stale_result",
        R + "not_open",
        R + "not_open",
        "none",
        R + "already_disqualified",
    ],
    "rejected": [
        R + "duplicate_submission",
        R + "not_claimable",
        R + "stale_lease",
        R + "stale_result",
        R + "not_open",
        R + "not_open",
        R + "not_accepted",
        R + "not_accepted",
    ],
    "failed": [
        R + "duplicate_submission",
        R + "not_claimable",
        R + "stale_lease",
        R + "stale_result",
        R + "not_open",
        R + "not_open",
        R + "not_accepted",
        R + "not_accepted",
    ],
    "cancelled": [
        R + "duplicate_submission",
        R + "not_claimable",
        R + "stale_lease",
        R + "stale_result",
        R + "not_open",
        R + "not_open",
        R + "not_accepted",
        R + "not_accepted",
    ],
}
CASES = [(s, c, TABLE[s][i]) for s in SITUATIONS for i, c in enumerate(COMMANDS)]


def outcome_of(state: SubmissionState, command: Command) -> str:
    try:
        events = decide(state, command)
    except RuleViolation as refusal:
        return R + refusal.code
    assert len(events) <= 1
    return events[0].type if events else "none"


@pytest.mark.parametrize(("situation", "kind", "expected"), CASES)
def test_decide_table(situation: str, kind: str, expected: str) -> None:
    """Every command in every status yields the one expected event or the expected refusal."""
    state = state_in(situation)
    assert outcome_of(state, command_for(kind, state)) == expected


def test_situations_have_the_expected_status() -> None:
    """The table's situations are the statuses they are named after."""
    statuses = {s: state_in(s).status for s in SITUATIONS}
    assert statuses == {
        "new": Status.NEW,
        "queued": Status.QUEUED,
        "running": Status.RUNNING,
        "running_with_result": Status.RUNNING,
        "accepted": Status.ACCEPTED,
        "committed": Status.COMMITTED,
        "disqualified": Status.COMMITTED,
        "rejected": Status.REJECTED,
        "failed": Status.FAILED,
        "cancelled": Status.CANCELLED,
    }


def test_decide_stamps_meta_and_ids() -> None:
    """Decided events carry the command's meta and the submission's ids, never a clock."""
    state = state_in("queued")
    [event] = decide(state, claim(1, "r7", "L9"))
    assert isinstance(event, SubmissionClaimed)
    assert (event.event_id, event.occurred_at, event.actor) == (
        "e-11",
        T0 + timedelta(seconds=11),
        "r7",
    )
    assert (event.submission_id, event.kernel_id, event.attempt, event.lease_id) == (
        SID,
        KID,
        1,
        "L9",
    )


def test_submit_copies_the_body() -> None:
    """`submitted` carries every field of the Submit command."""
    [event] = decide(SubmissionState(), submit(max_attempts=5))
    assert isinstance(event, SubmissionSubmitted)
    assert (event.submitter_id, event.package_size, event.max_attempts) == ("alice", 100, 5)


@pytest.mark.parametrize(
    ("current", "attempt", "code"),
    [
        (0, 0, "stale_lease"),
        (1, 1, "stale_lease"),
        (2, 1, "stale_lease"),
        (3, 4, "attempts_exhausted"),
    ],
)
def test_claim_attempt_rules(current: int, attempt: int, code: str) -> None:
    """A claim must be for a newer attempt than the current one and within max_attempts."""
    state = msgspec.structs.replace(state_in("queued"), attempt=current)
    with pytest.raises(RuleViolation) as caught:
        decide(state, claim(attempt))
    assert caught.value.code == code


def test_redelivery_claim_supersedes_the_old_lease() -> None:
    """A newer attempt takes over: the old lease's result is then refused as stale."""
    state = run(state_in("running"), claim(2, "r2"))
    assert (state.attempt, state.runner_id, state.lease_id) == (2, "r2", "L2")
    with pytest.raises(RuleViolation) as caught:
        decide(state, report("r1", "L1"))
    assert caught.value.code == "stale_lease"
    assert decide(state, report("r2", "L2"))[0].type == "result"


def test_result_from_another_runner_is_refused() -> None:
    """A result naming the current lease but another runner is refused as stale_lease."""
    with pytest.raises(RuleViolation) as caught:
        decide(state_in("running"), report("r9", "L1"))
    assert caught.value.code == "stale_lease"
    assert "r1" in caught.value.message


def test_judge_needs_the_current_result() -> None:
    """Judging a result sequence other than the current one is refused as stale_result."""
    state = state_in("running_with_result")
    stale = msgspec.structs.replace(judge_of(state), result_seq=(state.result_seq or 0) + 1)
    with pytest.raises(RuleViolation) as caught:
        decide(state, stale)
    assert caught.value.code == "stale_result"


@pytest.mark.parametrize(
    "outcome", ["build_failed", "benchmark_error", "invalid_result", "timed_out"]
)
def test_failure_outcomes_fail_with_their_code(outcome: str) -> None:
    """A runner outcome that is not a verdict ends the submission failed with that code."""
    state = run(state_in("running"), report(outcome=outcome))
    [event] = decide(state, judge_of(state))
    assert isinstance(event, SubmissionFailed)
    assert (event.code, event.attempt) == (outcome, 1)
    assert event.reason


def test_runner_cancellation_outcome_cancels() -> None:
    """A runner that stopped on cancellation leads to `cancelled`."""
    state = run(state_in("running"), report(outcome="cancelled"))
    assert isinstance(decide(state, judge_of(state))[0], SubmissionCancelled)


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        (None, "missing"),
        ({"accepted": True}, "no metric"),
        (document(value="fast"), "finite number"),
        (document(value=float("nan")), "finite number"),
        (document(value=True), "finite number"),
        (document(name="throughput"), "metric.name"),
        (document(unit="ms"), "metric.unit"),
        (document(better="higher"), "metric.better"),
        (
            {**document(), "workloads": [{"name": "w", "stats": {"samples": [1.0, "x"]}}]},
            "workloads[0].stats.samples[1] must be a finite number, got 'x'",
        ),
        ({**document(), "score": {"interval": [1.0]}}, "score.interval"),
    ],
)
def test_ill_formed_results_fail_as_invalid_result(result: Any, problem: str) -> None:
    """A result that does not fit the kernel's metric fails with invalid_result saying why."""
    state = msgspec.structs.replace(state_in("running_with_result"), result=result)
    [event] = decide(state, judge_of(state))
    assert isinstance(event, SubmissionFailed)
    assert event.code == "invalid_result"
    assert problem in event.reason


def test_metric_is_unchecked_without_a_spec() -> None:
    """Without the kernel's metric (a new kernel) any finite value is judged on the verdict."""
    state = msgspec.structs.replace(state_in("running_with_result"), result=document(name="other"))
    assert isinstance(decide(state, judge_of(state, spec=None))[0], SubmissionAccepted)


@pytest.mark.parametrize(
    ("outcome", "accepted", "verdict"),
    [
        ("accepted", True, "accepted"),
        ("accepted", False, "rejected"),
        ("rejected", True, "rejected"),
        ("rejected", False, "rejected"),
    ],
)
def test_the_benchmark_verdict_decides(outcome: str, accepted: bool, verdict: str) -> None:
    """Only an accepted outcome with `accepted: true` is accepted; anything else is rejected."""
    state = run(state_in("running"), report(outcome=outcome, result=document(accepted=accepted)))
    [event] = decide(state, judge_of(state))
    assert event.type == verdict
    if isinstance(event, SubmissionRejected):
        assert event.reason == ("1.3x faster" if accepted else "slower")


def test_accepted_carries_what_the_git_projector_needs() -> None:
    """`accepted` names the submitter, runner, attempt, package, result and its sequence."""
    state = state_in("running_with_result")
    [event] = decide(state, msgspec.structs.replace(judge_of(state), message="msg"))
    assert isinstance(event, SubmissionAccepted)
    assert (event.submitter_id, event.runner_id, event.attempt) == ("alice", "r1", 1)
    assert (event.package_digest, event.result_seq, event.message) == (
        "d" * 64,
        state.result_seq,
        "msg",
    )
    gate = event.result.pop("gate")  # the referee's reading of the validity gate
    assert event.result == document()
    assert gate["measured"] is gate["settled"] is True and gate["reason"] == ""


def test_commit_is_idempotent_only_for_the_same_commit() -> None:
    """Re-announcing the same commit yields nothing; a different commit is refused."""
    state = state_in("committed")
    same = Commit(
        meta=meta(70), source_commit="s" * 40, bench_result_commit="b" * 40, accepted_seq=4
    )
    assert decide(state, same) == []
    with pytest.raises(RuleViolation) as caught:
        decide(state, msgspec.structs.replace(same, source_commit="t" * 40))
    assert caught.value.code == "not_accepted"


# --- evolve ---------------------------------------------------------------------------------


def test_evolve_tracks_the_whole_story() -> None:
    """Folding a full story gives the status, attempt, claim, result, commits and version."""
    state = state_in("committed")
    assert state.status is Status.COMMITTED
    assert (state.submission_id, state.kernel_id, state.submitter_id) == (SID, KID, "alice")
    assert (state.attempt, state.runner_id, state.lease_id) == (1, "r1", "L1")
    assert (state.result_seq, state.outcome) == (3, "accepted")
    assert state.result is not None and state.result["metric"] == document()["metric"]
    assert (state.source_commit, state.bench_result_commit) == ("s" * 40, "b" * 40)
    assert state.version == 5
    assert state.created_at == T0 + timedelta(seconds=1)
    assert state.updated_at == T0 + timedelta(seconds=40)


@pytest.mark.parametrize(
    ("situation", "code", "message"),
    [
        ("rejected", "rejected", "slower"),
        ("failed", "timed_out", "no heartbeat"),
        ("cancelled", "cancelled", "bored"),
    ],
)
def test_evolve_records_why_it_ended(situation: str, code: str, message: str) -> None:
    """Terminal failures record an error code and message for the status document."""
    state = state_in(situation)
    assert (state.error_code, state.error_message) == (code, message)
    assert state.status in TERMINAL


def test_a_new_claim_clears_the_previous_result() -> None:
    """A claim resets the result of the previous attempt so it cannot be judged any more."""
    state = run(state_in("running_with_result"), claim(2, "r2"))
    assert (state.result_seq, state.outcome, state.result) == (None, None, None)


def test_disqualified_keeps_the_status() -> None:
    """Disqualification is recorded beside the status, which stays committed."""
    state = state_in("disqualified")
    assert (state.status, state.disqualified) == (Status.COMMITTED, "cheated")


def test_other_aggregates_and_unknown_events_change_nothing() -> None:
    """Kernel, runner and unknown events leave a submission's state (and version) as it was."""
    state = state_in("queued")
    others: list[Event | UnknownEvent] = [
        KernelImported(**_ids_kernel(), package_digest="d", submitter_id="a"),
        RunnerRegistered(event_id="x", occurred_at=T0, actor="r", runner_id="r", arches=["sm90"]),
        UnknownEvent(type="teleported", raw=b"{}"),
    ]
    for event in others:
        assert evolve(state, event, 99) is state


def _ids_kernel() -> dict[str, Any]:
    return {"event_id": "x", "occurred_at": T0, "actor": "a", "kernel_id": KID}


def test_fold_equals_successive_evolve() -> None:
    """`fold` over stored (seq, event) pairs equals evolving one event at a time."""
    events: list[tuple[int, Event | UnknownEvent]] = []
    state = SubmissionState()
    for n, command in enumerate([submit(), claim(1), report()], start=1):
        for event in decide(state, command):
            events.append((n * 10, event))
            state = evolve(state, event, n * 10)
    assert fold(events) == state
    assert state.version == 30
    assert state.result_seq == 30


def test_evolve_without_seq_keeps_the_version() -> None:
    """An event applied without a sequence (not stored yet) keeps the previous version."""
    state = state_in("queued")
    [event] = decide(state, Cancel(meta=meta(5)))
    assert evolve(state, event).version == state.version


def test_every_submission_event_is_folded() -> None:
    """Each submission event type changes a running submission: none is ignored by evolve."""
    ids = _ids()
    events: list[Event] = [
        SubmissionSubmitted(**ids, submitter_id="a", package_digest="d", package_size=1),
        SubmissionClaimed(**ids, runner_id="r2", attempt=2, lease_id="L2"),
        SubmissionResult(**ids, runner_id="r1", attempt=1, lease_id="L1", outcome="timed_out"),
        SubmissionAccepted(
            **ids,
            submitter_id="a",
            runner_id="r1",
            attempt=1,
            package_digest="d",
            result={},
            result_seq=3,
        ),
        SubmissionRejected(**ids, reason="slow"),
        SubmissionFailed(**ids, code="timed_out", reason="late"),
        SubmissionCancelled(**ids),
        SubmissionCommitted(**ids, source_commit="s", bench_result_commit="b", accepted_seq=4),
        SubmissionDisqualified(**ids, reason="cheated"),
    ]
    before = state_in("running")
    for event in events:
        after = evolve(before, event, 7)
        assert after != before
        assert after.version == 7


def _side_by_side(log_ratio: float, *, accepted: bool) -> dict[str, Any]:
    """A result document with samples against the incumbent: 16 block pairs per workload,
    each a speed-up of exp(-log_ratio) give or take a little."""
    blocks = [log_ratio + 0.004 * ((i * 7) % 5 - 2) for i in range(16)]
    return {
        **document(accepted=accepted),
        "correctness": {"passed": True, "checks": []},
        "workloads": [{"name": "w", "value": 1.0, "speedup": {"log_ratios": blocks}}],
        "comparison": {"against": "incumbent", "margin": 0.05, "outcome": "faster"},
    }


@pytest.mark.parametrize(
    ("log_ratio", "claimed", "verdict"),
    [
        (0.0, True, SubmissionRejected),  # identical code that says it is faster
        (-0.3, False, SubmissionAccepted),  # 1.35x faster, though the judge said no
    ],
)
def test_the_verdict_is_rederived_from_the_samples(
    log_ratio: float, claimed: bool, verdict: type
) -> None:
    """With side-by-side samples in the result the platform's rule decides, whatever the
    document's `accepted` or the runner's outcome say, and its reason states the figures."""
    outcome = "accepted" if claimed else "rejected"
    state = run(
        state_in("running"),
        report(outcome=outcome, result=_side_by_side(log_ratio, accepted=claimed)),
    )
    [event] = decide(state, judge_of(state))
    assert isinstance(event, verdict)
    assert event.result["accepted"] is (verdict is SubmissionAccepted)
    assert "x the incumbent's speed, side by side" in event.result["reason"]


def _scored(speedup: float, low: float, high: float, *, passed: bool = True) -> dict[str, Any]:
    return {
        **document(),
        "correctness": {"passed": passed, "checks": []},
        "score": {"against": "reference", "speedup": speedup, "interval": [low, high]},
    }


def _confirming_run(result: dict[str, Any]) -> SubmissionState:
    confirm = msgspec.structs.replace(submit(), confirms="first-sid", avoid_runner="r0")
    state = run(SubmissionState(), confirm)
    assert state.confirms == "first-sid"
    return run(run(state, claim(1)), report(result=result))


@pytest.mark.parametrize(
    ("result", "ending", "status"),
    [
        (_scored(1.32, 1.28, 1.36), SubmissionConfirmed, Status.CONFIRMED),  # overlaps
        (_scored(1.02, 1.00, 1.04), SubmissionDisputed, Status.DISPUTED),  # far below
        (_scored(1.32, 1.28, 1.36, passed=False), SubmissionDisputed, Status.DISPUTED),
        (document(), SubmissionRejected, Status.REJECTED),  # no score: inconclusive
    ],
)
def test_a_confirmation_run_agrees_or_disputes_and_is_never_accepted(
    result: dict[str, Any], ending: type, status: Status
) -> None:
    """A confirmation run is judged against the score of the result it confirms: nothing is
    committed twice; its ending names that result and states both figures."""
    state = _confirming_run(result)
    command = msgspec.structs.replace(judge_of(state), confirming=[1.31, 1.27, 1.35])
    [event] = decide(state, command)
    assert isinstance(event, ending)
    assert getattr(event, "confirms", "first-sid") == "first-sid"
    assert evolve(state, event, state.version + 1).status is status
    assert status in TERMINAL


def _noisy() -> dict[str, Any]:
    """A result whose timed windows spread by half: not settled."""
    doc = document()
    doc["workloads"][0]["stats"]["samples"] = [12.5 * (1 + d) for d in (-0.5, 0, 0.5, 0.3, -0.3)]
    return doc


def test_an_unsettled_result_is_requeued_once_then_rejected_inconclusive() -> None:
    """The gate's retry: `requeued` (naming the runner that measured, to avoid) returns the
    submission to the queue with a new round of attempts; the second unsettled result is
    rejected as inconclusive, and nothing unsettled is ever accepted."""
    state = run(state_in("running"), report(result=_noisy()))
    [requeued] = decide(state, judge_of(state))
    assert isinstance(requeued, SubmissionRequeued)
    assert (requeued.code, requeued.avoid_runner, requeued.attempt) == ("unsettled", "r1", 1)
    assert requeued.result_seq == state.result_seq
    assert "the host was too noisy to tell: spread" in requeued.reason
    queued = evolve(state, requeued, state.version + 1)
    assert queued.status is Status.QUEUED and queued.requeues == ["unsettled"]
    assert (queued.runner_id, queued.lease_id, queued.result_seq) == (None, None, None)
    assert (queued.round_start, queued.last_attempt, queued.task_seq) == (1, 4, queued.version)

    again = run(run(queued, claim(2, "r2")), report("r2", "L2", result=_noisy()))
    [ending] = decide(again, judge_of(again))
    assert isinstance(ending, SubmissionRejected) and ending.code == "inconclusive"
    rejected = evolve(again, ending, again.version + 1)
    assert rejected.status is Status.REJECTED
    assert rejected.result is not None and rejected.result["gate"]["settled"] is False


def test_a_requeued_submission_gets_a_whole_round_of_attempts() -> None:
    """After a retry the claim counts attempts from the round's start: a submission whose first
    round used every attempt may still be claimed `max_attempts` more times, and no more."""
    state = run(run(SubmissionState(), submit(max_attempts=1)), claim(1))
    state = run(state, report(result=_noisy()))
    state = run(state, judge_of(state))
    assert state.status is Status.QUEUED
    state = run(state, claim(2))
    assert state.status is Status.RUNNING and state.attempt == 2
    with pytest.raises(RuleViolation) as refused:
        decide(msgspec.structs.replace(state, status=Status.QUEUED), claim(3))
    assert refused.value.code == "attempts_exhausted"


def test_a_crash_in_a_side_by_side_run_is_the_candidates_own_error() -> None:
    """The regression: a candidate that raised ends rejected with its exception, not failed as
    `invalid_result: metric.value must be a finite number, got None`."""
    doc = {
        **document(value=None),
        "correctness": {"passed": False, "checks": []},
        "failure": {"who": "candidate", "stage": "call", "error": "RuntimeError: boom"},
        "comparison": {"against": "incumbent", "margin": 0.05},
    }
    state = run(state_in("running"), report(outcome="rejected", result=doc))
    [event] = decide(state, judge_of(state))
    assert isinstance(event, SubmissionRejected)
    assert (event.code, event.reason) == (
        "candidate_error",
        "the candidate failed in a call: RuntimeError: boom",
    )
