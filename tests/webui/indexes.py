"""index.json documents for browser tests that need a board the demo cannot make (ties, a
disqualified kernel, 10,000 kernels, records awaiting, passing or failing their confirmation
run), rendered by the real projection from real events."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from kz_events.events import (
    BoardReviewed,
    Event,
    SubmissionAccepted,
    SubmissionConfirmed,
    SubmissionDisputed,
    SubmissionDisqualified,
    SubmissionFailed,
    SubmissionSubmitted,
)
from kz_projector.index import IndexState, fold_index, render_index

__all__ = ["CONFIRMATIONS", "Accepted", "confirmation_run_id", "render_accepted", "submission_id"]

T0 = datetime(2026, 5, 1, tzinfo=UTC)
# How a record's confirmation run went: opened and still open, agreed, disagreed, or failed
# (which leaves the record unconfirmed).
CONFIRMATIONS = ("unconfirmed", "confirmed", "disputed", "failed")


@dataclass(frozen=True)
class Accepted:
    """One accepted result of a kernel: value with its p10/p90 spread, optionally disqualified;
    `score` (speed-up, low, high) is the speed-up over the board's reference the judge measured
    side by side (none: the index estimates one from the absolute values); `confirmation` opens
    a confirmation run of it (as the referee does for a record) that ends as it says (one of
    CONFIRMATIONS)."""

    kernel_id: str
    value: float
    spread: float = 0.01
    submitter: str = "ada"
    disqualified: str | None = None
    better: str = "lower"
    unit: str = "us"
    score: tuple[float, float, float] | None = None
    confirmation: str | None = None


def _result(rec: Accepted) -> dict[str, object]:
    lo, hi = rec.value * (1 - rec.spread), rec.value * (1 + rec.spread)
    stats = {
        "median": rec.value,
        "mean": rec.value,
        "min": lo,
        "max": hi,
        "p10": lo,
        "p90": hi,
        "stdev": 0.0,
        "samples": 5,
    }
    return {
        "schema_version": 1,
        "accepted": True,
        "reason": "faster",
        "metric": {
            "name": "latency" if rec.better == "lower" else "throughput",
            "unit": rec.unit,
            "better": rec.better,
            "value": rec.value,
        },
        "workloads": [{"name": "w", "value": rec.value, "stats": stats}],
        "correctness": {"passed": True, "checks": []},
        "environment": {"device": "test"},
        **({"score": _score(rec.score)} if rec.score else {}),
    }


def _score(score: tuple[float, float, float]) -> dict[str, object]:
    speedup, low, high = score
    return {
        "against": "reference",
        "speedup": speedup,
        "interval": [low, high],
        "confidence": 0.95,
        "blocks": 8,
    }


def submission_id(n: int) -> str:
    """The submission id of the `n`th record `render_accepted` folds."""
    return f"00000000-0000-4000-8000-{n:012d}"


def confirmation_run_id(n: int) -> str:
    """The id of the confirmation run of the `n`th record."""
    return f"00000000-0000-4000-9000-{n:012d}"


def _confirmation(rec: Accepted, n: int, at: datetime) -> list[Event]:
    """The events of the record's confirmation run: opened by the projector for the same
    package, then ended as `rec.confirmation` says."""
    assert rec.confirmation in CONFIRMATIONS, rec.confirmation
    sid, run = submission_id(n), confirmation_run_id(n)
    ids: dict[str, Any] = {"submission_id": run, "kernel_id": rec.kernel_id}
    opened = SubmissionSubmitted(
        event_id=f"c{n}", occurred_at=at, actor="projector", **ids, submitter_id=rec.submitter,
        package_digest="0" * 64, package_size=1, confirms=sid, avoid_runner="r1",
    )  # fmt: skip
    when = at + timedelta(seconds=30)
    agrees = f"agrees: {rec.score[0] if rec.score else 1:.3g}x the reference on this run too"
    ended: dict[str, Event] = {
        "confirmed": SubmissionConfirmed(
            event_id=f"e{n}", occurred_at=when, actor="referee", **ids, confirms=sid,
            reason=agrees, result={**_result(rec), "reason": agrees},
        ),
        "disputed": SubmissionDisputed(
            event_id=f"e{n}", occurred_at=when, actor="referee", **ids, confirms=sid,
            reason="disagrees: 1.1x the reference on this run, outside the record's interval",
        ),
        "failed": SubmissionFailed(
            event_id=f"e{n}", occurred_at=when, actor="referee", **ids, code="timed_out",
            reason="the task ran past its time limit",
        ),
    }  # fmt: skip
    return [opened, *([ended[rec.confirmation]] if rec.confirmation in ended else [])]


def render_accepted(records: Iterable[Accepted]) -> bytes:
    """index.json after every record was accepted (run again and disqualified where it says
    so), each board then reviewed by a maintainer (a board a submission opens is unreviewed
    until then)."""
    state = IndexState()
    seq = 0
    for n, rec in enumerate(records):
        seq += 1
        at = T0 + timedelta(minutes=n)
        sid = submission_id(n)
        accepted = SubmissionAccepted(
            event_id=f"a{n}",
            occurred_at=at,
            actor="referee",
            submission_id=sid,
            kernel_id=rec.kernel_id,
            submitter_id=rec.submitter,
            runner_id="r1",
            attempt=1,
            package_digest="0" * 64,
            result=_result(rec),
            result_seq=seq,
        )
        state = fold_index(state, seq, accepted)
        for event in _confirmation(rec, n, at) if rec.confirmation else []:
            seq += 1
            state = fold_index(state, seq, event)
        if rec.disqualified:
            seq += 1
            dq = SubmissionDisqualified(
                event_id=f"d{n}",
                occurred_at=at,
                actor="maintainer",
                submission_id=sid,
                kernel_id=rec.kernel_id,
                reason=rec.disqualified,
            )
            state = fold_index(state, seq, dq)
    last = state.generated_at
    for n, board in enumerate(sorted(state.boards.values(), key=lambda b: b.key)):
        seq += 1
        review = BoardReviewed(
            event_id=f"r{n}", occurred_at=T0, actor="maintainer", kernel_id=board.kernels[0]
        )
        state = fold_index(state, seq, review)
    state.generated_at = last  # the time of the last result, as before the reviews
    return render_index(state)
