"""The referee's order of rules over one result (`kz_events.ruling.rule`): whose fault an
ending is, the validity gate and its one retry, a voided rival and its one retry, confirmation."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kz_events.ruling import Facts, MetricSpec, Verdict, candidate_failure, rule, voided_rivals

pytestmark = pytest.mark.unit

SPEC = MetricSpec(name="latency", unit="us", better="lower")
WIGGLE = (-1.0, 0.0, 1.0, 0.5, -0.5, 0.0, 0.25, -0.25)


def _blocks(speedup: float, spread: float) -> list[float]:
    """Block log-ratios (challenger over rival) of a speed-up, give or take `spread`."""
    return [-math.log(speedup) + spread * d for d in WIGGLE]


def document(
    *,
    score: float = 1.5,
    spread: float = 0.005,
    median: float = 100.0,
    resolution: float = 1.0,
    incumbent: float | None = None,
    passed: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """A version 3 result: one workload measured beside the reference (`score`) and, with
    `incumbent`, beside the incumbent too, each block within `spread` (in logs)."""
    workload: dict[str, Any] = {
        "name": "w",
        "value": median,
        "resolution": resolution,
        "batch": 64,
        "stats": {"median": median, "samples": [median * (1 + spread * d) for d in WIGGLE]},
        "reference": {"median": median * score},
        "reference_speedup": {"value": score, "log_ratios": _blocks(score, spread)},
    }
    doc: dict[str, Any] = {
        "schema_version": 3,
        "accepted": True,
        "reason": "the judge's own words",
        "metric": {"name": "latency", "unit": "us", "better": "lower", "value": median},
        "workloads": [workload],
        "correctness": {"passed": passed, "checks": [{"name": "w", "passed": passed}]},
        "score": {"against": "reference", "speedup": score, "interval": [score, score]},
    }
    if incumbent is not None:
        workload["incumbent"] = {"median": median * incumbent}
        workload["speedup"] = {"value": incumbent, "log_ratios": _blocks(incumbent, spread)}
        doc["comparison"] = {"against": "incumbent", "margin": 0.05}
    return {**doc, **extra}


def crashed(stage: str = "call", error: str = "ZeroDivisionError: division by zero") -> dict:
    """What the judge reports for a candidate that failed: no figure at all."""
    return {
        **document(passed=False),
        "metric": {"name": "latency", "unit": "us", "better": "lower", "value": None},
        "failure": {"who": "candidate", "stage": stage, "error": error},
    }


def voided(who: str = "incumbent", **kw: Any) -> dict[str, Any]:
    rivals = {who: {"status": "voided", "code": "rival_raised", "reason": "it raised KeyError"}}
    return document(rivals=rivals, **kw)


FACTS = Facts(metric=SPEC)


@pytest.mark.parametrize("outcome", ["build_failed", "benchmark_error", "invalid_result"])
def test_the_runners_or_judges_fault_fails(outcome: str) -> None:
    """An outcome that is the runner's or the judge's fault fails, whatever the document says."""
    ruling = rule(outcome, None, FACTS)
    assert (ruling.verdict, ruling.code) == (Verdict.FAILED, outcome)


@pytest.mark.parametrize(
    ("stage", "code", "words"),
    [
        ("load", "candidate_error", "the candidate failed to load: ImportError: no module"),
        ("call", "candidate_error", "the candidate failed in a call: ImportError: no module"),
        ("output", "wrong_output", "the candidate's output is wrong: ImportError: no module"),
        ("inputs", "inputs_changed", "the candidate changed its inputs: ImportError: no module"),
    ],
)
def test_a_crashing_candidate_is_rejected_with_its_own_error(
    stage: str, code: str, words: str
) -> None:
    """The candidate's own failure rejects it with its own error before any figure is read:
    a null metric.value is not `invalid_result` (the regression: seven crashing cheats)."""
    ruling = rule("rejected", crashed(stage, "ImportError: no module"), FACTS)
    assert (ruling.verdict, ruling.code, ruling.reason) == (Verdict.REJECTED, code, words)
    assert ruling.document is not None and ruling.document["accepted"] is False


def test_wrong_output_is_rejected_in_the_checks_words() -> None:
    """Correctness failed without a `failure`: the failing check's own reason."""
    doc = document(passed=False)
    doc["correctness"]["checks"][0]["reason"] = "max_abs_err 3.1 > atol 0.01"
    ruling = rule("rejected", doc, FACTS)
    assert ruling.verdict is Verdict.REJECTED and ruling.code == "wrong_output"
    assert (
        ruling.reason == "the output does not match the reference (w): max_abs_err 3.1 > atol 0.01"
    )


def test_a_document_that_does_not_fit_the_metric_fails_as_the_judges_fault() -> None:
    doc = document()
    doc["metric"]["unit"] = "ms"
    ruling = rule("accepted", doc, FACTS)
    assert (ruling.verdict, ruling.code) == (Verdict.FAILED, "invalid_result")
    assert ruling.reason == "metric.unit must be 'us' as the kernel declares, got 'ms'"


@pytest.mark.parametrize(
    ("doc", "code", "words"),
    [
        (document(spread=0.3), "unsettled", "the host was too noisy to tell: spread"),
        (document(median=5.0, resolution=1.0), "unmeasured", "too small to measure here"),
    ],
)
def test_the_gate_measures_again_once_then_calls_it_inconclusive(
    doc: dict[str, Any], code: str, words: str
) -> None:
    """Not measured or not settled: measured again (one retry for the gate), then rejected as
    inconclusive with the gate's plain reason; never accepted."""
    first = rule("accepted", doc, FACTS)
    assert (first.verdict, first.code) == (Verdict.RETRY, code)
    assert words in first.reason
    for earlier in ("unsettled", "unmeasured"):
        second = rule("accepted", doc, Facts(metric=SPEC, retried=frozenset({earlier})))
        assert (second.verdict, second.code) == (Verdict.REJECTED, "inconclusive")
        assert second.reason.startswith("inconclusive: ") and words in second.reason


def test_a_rival_retry_leaves_the_gates_own_retry() -> None:
    """The two retries are apart: one spent on a voided rival leaves the gate its own."""
    ruling = rule("accepted", document(spread=0.3), Facts(retried=frozenset({"rival_voided"})))
    assert ruling.verdict is Verdict.RETRY and ruling.code == "unsettled"


def test_the_candidates_failure_comes_before_the_gate() -> None:
    doc = {**crashed(), "workloads": []}  # nothing measured at all
    assert rule("rejected", doc, FACTS).code == "candidate_error"


def test_a_settled_result_passes_the_gate_to_the_side_by_side_verdict() -> None:
    """Settled and measured: the platform's verdict from the samples, in the document too."""
    faster = rule("rejected", document(incumbent=1.3), FACTS)
    assert faster.verdict is Verdict.ACCEPTED and faster.reason.startswith("faster: ")
    assert faster.document is not None and faster.document["accepted"] is True
    same = rule("accepted", document(incumbent=1.0), FACTS)
    assert same.verdict is Verdict.REJECTED and same.reason.startswith("not faster: ")


def test_a_voided_incumbent_is_measured_again_then_the_standing_score_decides() -> None:
    """The incumbent's fault never rejects the challenger: measured again once; voided again,
    the challenger is faster when its score's low end beats the incumbent's standing score by
    the margin."""
    doc = voided(score=1.5, incumbent=0.5)  # the side-by-side figures against it are noise
    first = rule("accepted", doc, FACTS)
    assert (first.verdict, first.code) == (Verdict.RETRY, "rival_voided")
    assert "the incumbent was voided (it raised KeyError)" in first.reason
    again = frozenset({"rival_voided"})
    beats = rule("accepted", doc, Facts(metric=SPEC, retried=again, standing=[1.2, 1.15, 1.25]))
    assert beats.verdict is Verdict.ACCEPTED
    assert beats.reason.startswith("faster than the incumbent's standing: 1.5x the reference")
    close = rule("accepted", doc, Facts(metric=SPEC, retried=again, standing=[1.45, 1.4, 1.5]))
    assert close.verdict is Verdict.REJECTED and close.code == "rejected"
    assert "not faster than the incumbent's standing" in close.reason


def test_without_a_standing_score_main_s_value_decides() -> None:
    """An incumbent with no score on its board: the challenger's headline against main's."""
    doc = voided(median=100.0)
    again = frozenset({"rival_voided"})
    beats = rule("accepted", doc, Facts(metric=SPEC, retried=again, standing_value=120.0))
    assert beats.verdict is Verdict.ACCEPTED and "against main's 120 us (1.2x)" in beats.reason
    loses = rule("accepted", doc, Facts(metric=SPEC, retried=again, standing_value=102.0))
    assert loses.verdict is Verdict.REJECTED


def test_a_voided_reference_leaves_the_verdict_against_the_incumbent() -> None:
    doc = voided("reference", incumbent=1.3)
    assert rule("accepted", doc, FACTS).verdict is Verdict.RETRY
    ruling = rule("accepted", doc, Facts(metric=SPEC, retried=frozenset({"rival_voided"})))
    assert ruling.verdict is Verdict.ACCEPTED and ruling.reason.startswith("faster: ")
    assert voided_rivals(doc) == ("reference",)


CONFIRMATION = Facts(metric=SPEC, confirmation=True, confirming=[1.5, 1.45, 1.55])


@pytest.mark.parametrize(
    ("score", "confirmed", "verdict"),
    [
        (1.51, [1.5, 1.45, 1.55], Verdict.CONFIRMED),  # each inside the other's interval
        (1.3, [1.5, 1.45, 1.55], Verdict.DISPUTED),  # far below
        (1.52, [1.5, 0.05, 27705.0], Verdict.DISPUTED),  # the record itself was noise
        (1.52, None, Verdict.DISPUTED),
    ],
)
def test_confirmation_needs_two_settled_runs_that_agree(
    score: float, confirmed: list[float] | None, verdict: Verdict
) -> None:
    """Confirmed only when both runs are settled and each estimate lies inside the other's
    interval; a record that was noise (the regression: 0.05-27705x) is never confirmed."""
    doc = document(score=score)
    doc["score"] = {
        "against": "reference",
        "speedup": score,
        "interval": [score * 0.99, score * 1.01],
    }
    facts = Facts(metric=SPEC, confirmation=True, confirming=confirmed)
    assert rule("accepted", doc, facts).verdict is verdict


def test_an_unsettled_confirmation_run_confirms_nothing() -> None:
    """A confirmation run of noise is measured again, then inconclusive: it neither confirms
    nor disputes (the record stays unconfirmed)."""
    doc = document(spread=0.3)
    assert rule("accepted", doc, CONFIRMATION).verdict is Verdict.RETRY
    facts = Facts(metric=SPEC, confirmation=True, confirming=[1.5, 1.45, 1.55],
                  retried=frozenset({"unsettled"}))  # fmt: skip
    ruling = rule("accepted", doc, facts)
    assert (ruling.verdict, ruling.code) == (Verdict.REJECTED, "inconclusive")


def test_a_confirmation_run_whose_candidate_fails_disputes() -> None:
    ruling = rule("rejected", crashed(), CONFIRMATION)
    assert ruling.verdict is Verdict.DISPUTED
    assert (
        ruling.reason
        == "disagrees: the candidate failed in a call: ZeroDivisionError: division by zero"
    )


def test_a_first_result_keeps_the_judges_verdict() -> None:
    facts = Facts(metric=SPEC, first_result=True)
    assert rule("accepted", document(incumbent=1.0), facts).verdict is Verdict.ACCEPTED
    assert rule("rejected", document(), facts).verdict is Verdict.REJECTED


def test_candidate_failure_reads_nothing_into_a_good_document() -> None:
    assert candidate_failure(document()) is None
    assert candidate_failure(None) is None
    rival_only = {**document(), "failure": {"who": "incumbent", "stage": "call", "error": "x"}}
    assert candidate_failure(rival_only) is None
