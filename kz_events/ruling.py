"""The referee's rules over one result, in their order: whose fault an ending is, the validity
gate, a voided rival, then the verdict (docs/judging.md, "The referee's order of rules").

`rule(outcome, document, facts)` is a pure function of the runner's outcome, the result
document as the `result` event keeps it and the facts the referee gathered; `lifecycle` turns
its `Ruling` into events. The gate and the confirmation rule are `kz_harness.validity`'s, never
a copy.

1. A runner outcome that is the runner's or the judge's fault (`build_failed`,
   `benchmark_error`, `invalid_result`, `timed_out`) fails the submission.
2. The candidate's own failure (its `failure`, or correctness failed) rejects it with its own
   error, before any figure is looked at.
3. A document that does not decode or fit the kernel's metric fails it (`invalid_result`).
4. The validity gate: a result that is not measured or not settled is measured again once
   (`retry`), then rejected as *inconclusive* with the gate's reason.
5. A rival voided: measured again once; voided again, the candidate is judged without it
   (an incumbent voided: against the incumbent's standing score, `versus_standing`).
6. A confirmation run agrees or disputes; a first result keeps the judge's verdict; else the
   side-by-side verdict re-derived from the samples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import msgspec

from kz_events.errors import InvalidResult
from kz_events.result import ResultDocument, stored_result
from kz_harness.sidebyside import document_score, document_verdict
from kz_harness.validity import Validity, agree, is_settled, validity

__all__ = [
    "DEFAULT_MARGIN",
    "FAILURE_OUTCOMES",
    "GATE_KEY",
    "GATE_RETRIES",
    "RIVAL_RETRY",
    "Facts",
    "MetricSpec",
    "Ruling",
    "Verdict",
    "candidate_failure",
    "gate_doc",
    "metric_problem",
    "rival_reason",
    "rule",
    "versus_standing",
    "voided_rivals",
]

# Runner outcomes that are not verdicts end the submission as `failed` with that code.
FAILURE_OUTCOMES = frozenset({"build_failed", "benchmark_error", "invalid_result", "timed_out"})
GATE_RETRIES = frozenset({"unmeasured", "unsettled"})  # one retry between them
RIVAL_RETRY = "rival_voided"  # and one for a voided rival
DEFAULT_MARGIN = 0.05  # the margin of a document that names none (kz_harness's default)
RIVALS = ("incumbent", "reference")
GATE_KEY = "gate"  # where a recorded document keeps the referee's reading of the gate

_FAILURE_REASONS = {
    "build_failed": "build_test_env.py exited non-zero",
    "benchmark_error": "benchmark.py failed or wrote no valid result",
    "invalid_result": "the result document does not match the schema",
    "timed_out": "the task ran past its time limit",
}
_STAGES = {
    "load": ("candidate_error", "the candidate failed to load"),
    "call": ("candidate_error", "the candidate failed in a call"),
    "output": ("wrong_output", "the candidate's output is wrong"),
    "inputs": ("inputs_changed", "the candidate changed its inputs"),
}


class MetricSpec(msgspec.Struct, frozen=True):
    """The kernel's declared metric that an accepted result must fit."""

    name: str
    unit: str
    better: str


class Verdict(StrEnum):
    FAILED = "failed"
    CANCELLED = "cancelled"
    REJECTED = "rejected"
    RETRY = "retry"
    ACCEPTED = "accepted"
    CONFIRMED = "confirmed"
    DISPUTED = "disputed"


@dataclass(frozen=True, slots=True)
class Facts:
    """What the referee knows beside the document. `retried`: the codes of the submission's
    retries so far; `confirming`: for a confirmation run, the confirmed result's score (speed-up,
    low, high); `standing`: the incumbent's standing score on its board, and `standing_value`
    main's scoreboard value of the kernel, against which a challenger whose incumbent was voided
    is judged."""

    metric: MetricSpec | None = None
    first_result: bool = False
    confirmation: bool = False
    confirming: Sequence[float] | None = None
    retried: frozenset[str] = frozenset()
    standing: Sequence[float] | None = None
    standing_value: float | None = None


@dataclass(frozen=True, slots=True)
class Ruling:
    """What the rules decide: the verdict, its code and its sentence, and the document to record
    with it (the platform's verdict written into it where it has one)."""

    verdict: Verdict
    code: str
    reason: str
    document: dict[str, Any] | None = None


def rule(outcome: str, document: dict[str, Any] | None, facts: Facts) -> Ruling:
    """The ruling on one result, by the order in the module docstring."""
    if outcome in FAILURE_OUTCOMES:
        return Ruling(Verdict.FAILED, outcome, _FAILURE_REASONS[outcome])
    if outcome == "cancelled":
        return Ruling(Verdict.CANCELLED, "cancelled", "stopped by the runner on cancellation")
    own = candidate_failure(document)
    if own is not None:
        code, reason = own
        if facts.confirmation:
            return Ruling(Verdict.DISPUTED, code, f"disagrees: {reason}", document)
        return Ruling(Verdict.REJECTED, code, reason, _with_verdict(document, False, reason))
    problem = metric_problem(document, facts.metric)
    if problem is not None:
        return Ruling(Verdict.FAILED, "invalid_result", problem)
    assert document is not None
    gate = validity(document)
    ruling = (
        _gated(gate, facts, document) if not gate.valid else _past_gate(outcome, document, facts)
    )
    if ruling.document is None:
        return ruling
    return replace(ruling, document={**ruling.document, GATE_KEY: gate_doc(gate)})


def _past_gate(outcome: str, document: dict[str, Any], facts: Facts) -> Ruling:
    """The rules after the gate: a voided rival, a confirmation, then the verdict."""
    voided = voided_rivals(document)
    if voided and RIVAL_RETRY not in facts.retried:
        words = _voided_words(document, voided)
        return Ruling(Verdict.RETRY, RIVAL_RETRY, f"{words}; measured again")
    if facts.confirmation:
        return _confirmation(document, facts.confirming)
    if facts.first_result:
        return _own_verdict(outcome, document)
    if "incumbent" in voided:
        return versus_standing(document, facts)
    return _side_by_side(outcome, document)


def gate_doc(gate: Validity) -> dict[str, Any]:
    """The gate's reading as the recorded document keeps it (under `gate`): the platform's,
    beside the judge's own `validity`, so readers need not derive it again."""
    return {
        "measured": gate.measured,
        "settled": gate.settled,
        "spread": gate.spread,
        "reason": gate.reason,
    }


def candidate_failure(document: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(code, reason) of the candidate's own failure, or None: its `failure` (version 3) names
    the stage and the error; else a failed correctness check, in the check's words."""
    if not isinstance(document, Mapping):
        return None
    failure = document.get("failure")
    if isinstance(failure, Mapping) and failure.get("who", "candidate") == "candidate":
        code, words = _STAGES.get(str(failure.get("stage")), ("candidate_error", "it failed"))
        return code, f"{words}: {failure.get('error') or 'no error was reported'}"
    correctness = document.get("correctness")
    if isinstance(correctness, Mapping) and correctness.get("passed") is False:
        return "wrong_output", _check_words(document, correctness)
    return None


def _check_words(document: Mapping[str, Any], correctness: Mapping[str, Any]) -> str:
    checks = correctness.get("checks")
    for check in checks if isinstance(checks, list) else []:
        if isinstance(check, Mapping) and check.get("passed") is False:
            said = check.get("reason") or check.get("message")
            if said:
                return f"the output does not match the reference ({check.get('name')}): {said}"
    return str(document.get("reason") or "the output does not match the reference")


def metric_problem(result: dict[str, Any] | None, spec: MetricSpec | None) -> str | None:
    """Why `result` does not decode or does not fit the kernel's metric, or None when it
    does; the problem names the field."""
    if result is None:
        return "the result document is missing"
    try:
        metric = ResultDocument.of(result).metric
    except InvalidResult as exc:
        return exc.message
    if metric is None:
        return "the result document has no metric"
    if metric.value is None or not math.isfinite(metric.value):
        return f"metric.value must be a finite number, got {metric.value!r}"
    if spec is not None:
        for field in ("name", "unit", "better"):
            if getattr(metric, field) != getattr(spec, field):
                return (
                    f"metric.{field} must be {getattr(spec, field)!r} as the kernel declares, "
                    f"got {getattr(metric, field)!r}"
                )
    return None


def _gated(gate: Validity, facts: Facts, document: dict[str, Any]) -> Ruling:
    """Not a measurement, or not settled: measured again once, then inconclusive."""
    code = "unsettled" if gate.measured else "unmeasured"
    if not facts.retried & GATE_RETRIES:
        return Ruling(Verdict.RETRY, code, gate.reason)
    reason = f"inconclusive: {gate.reason} (measured twice)"
    return Ruling(Verdict.REJECTED, "inconclusive", reason, _with_verdict(document, False, reason))


def voided_rivals(document: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The rivals the document says were voided (version 3 `rivals`), incumbent first."""
    rivals = document.get("rivals") if isinstance(document, Mapping) else None
    if not isinstance(rivals, Mapping):
        return ()
    return tuple(
        who
        for who in RIVALS
        if isinstance(rivals.get(who), Mapping) and rivals[who].get("status") == "voided"
    )


def rival_reason(document: Mapping[str, Any], who: str) -> str:
    """Why the judge voided rival `who`, in its words (its code when it gave none)."""
    entry = document.get("rivals", {}).get(who, {})
    return str(entry.get("reason") or entry.get("code") or "no reason given")


def _voided_words(document: Mapping[str, Any], voided: Sequence[str]) -> str:
    return "; ".join(f"the {who} was voided ({rival_reason(document, who)})" for who in voided)


def _confirmation(document: dict[str, Any], confirmed: Sequence[float] | None) -> Ruling:
    """A confirmation run (settled, by the gate) agrees when the confirmed result was settled
    too and each estimate lies inside the other's interval (`agree`)."""
    score = document_score(document)
    if score is None:
        reason = "inconclusive: the confirmation run has no score against the board's reference"
        return Ruling(Verdict.REJECTED, "inconclusive", reason, {**document, "reason": reason})
    if confirmed is None or len(confirmed) != 3:
        reason = "disagrees: the confirmed result has no score to compare with"
        return Ruling(Verdict.DISPUTED, "disputed", reason, {**document, "reason": reason})
    first, first_low, first_high = (float(x) for x in confirmed)
    speedup, low, high = score
    figures = (
        f"{speedup:.3g}x the reference ({low:.3g}-{high:.3g}x) on this run, "
        f"{first:.3g}x ({first_low:.3g}-{first_high:.3g}x) on the confirmed one"
    )
    if not is_settled(first_low, first_high):
        reason = f"disagrees: the confirmed result's interval is not settled: {figures}"
        return Ruling(Verdict.DISPUTED, "disputed", reason, {**document, "reason": reason})
    agrees = agree(score, (first, first_low, first_high))
    verdict, word = (Verdict.CONFIRMED, "agrees") if agrees else (Verdict.DISPUTED, "disagrees")
    reason = f"{word}: {figures}"
    return Ruling(verdict, str(verdict), reason, {**document, "reason": reason})


def _own_verdict(outcome: str, document: dict[str, Any]) -> Ruling:
    """The judge's own verdict, for a result with nothing the platform re-derives one from."""
    own = stored_result(document)
    accepted = outcome != "rejected" and own is not None and own.accepted is True
    reason = (own.reason or "") if own is not None else ""
    if accepted:
        return Ruling(Verdict.ACCEPTED, "accepted", reason, document)
    reason = reason or "the benchmark rejected it"
    return Ruling(Verdict.REJECTED, "rejected", reason, document)


def _side_by_side(outcome: str, document: dict[str, Any]) -> Ruling:
    """The platform's rule over the samples against the incumbent, where the document has
    them; else the judge's own verdict."""
    rederived = document_verdict(document)
    if rederived is None:
        return _own_verdict(outcome, document)
    accepted, reason = rederived
    verdict = Verdict.ACCEPTED if accepted else Verdict.REJECTED
    return Ruling(verdict, str(verdict), reason, _with_verdict(document, accepted, reason))


def versus_standing(document: dict[str, Any], facts: Facts) -> Ruling:
    """A challenger whose incumbent was voided twice, judged without it: *faster* when the low
    end of its score's interval beats the incumbent's standing score by the board's margin
    (low > standing x (1 + margin)); with no standing score on either side, when its headline
    value beats main's scoreboard value of the kernel by the margin. With neither, the judge's
    own verdict stands."""
    margin = _margin(document)
    voided = f"the incumbent was voided ({rival_reason(document, 'incumbent')})"
    score = document_score(document)
    if score is not None and facts.standing is not None and len(facts.standing) == 3:
        speedup, low, high = score
        theirs = float(facts.standing[0])
        faster = low > theirs * (1 + margin)
        figures = (
            f"{speedup:.3g}x the reference ({low:.3g}-{high:.3g}x) against the incumbent's "
            f"standing {theirs:.3g}x, margin {margin:.0%}; {voided}"
        )
    elif facts.standing_value is not None and facts.standing_value > 0:
        metric = ResultDocument.of(document).metric
        assert metric is not None and metric.value is not None  # metric_problem checked it
        ratio = metric.speedup(metric.value, facts.standing_value)
        faster = ratio > 1 + margin
        figures = (
            f"{metric.value:.4g} {metric.unit} against main's {facts.standing_value:.4g} "
            f"{metric.unit} ({ratio:.3g}x), margin {margin:.0%}; {voided}"
        )
    else:
        return _own_verdict("accepted", document)
    reason = f"{'faster' if faster else 'not faster'} than the incumbent's standing: {figures}"
    verdict = Verdict.ACCEPTED if faster else Verdict.REJECTED
    return Ruling(verdict, str(verdict), reason, _with_verdict(document, faster, reason))


def _margin(document: Mapping[str, Any]) -> float:
    comparison = document.get("comparison")
    margin = comparison.get("margin") if isinstance(comparison, Mapping) else None
    if isinstance(margin, int | float) and not isinstance(margin, bool) and 0 <= margin < 1:
        return float(margin)
    return DEFAULT_MARGIN


def _with_verdict(
    document: dict[str, Any] | None, accepted: bool, reason: str
) -> dict[str, Any] | None:
    """The document with the platform's verdict in place of its own."""
    return None if document is None else {**document, "accepted": accepted, "reason": reason}
