"""Ranks and ties only between settled results; a disputed or suspect record takes no rank (the
kernel's last result that stands ranks for it); the index is the same bytes for the same log."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kz_events.events import (
    Event,
    KernelImported,
    SubmissionAccepted,
    SubmissionClaimed,
    SubmissionConfirmed,
    SubmissionDisputed,
    SubmissionRequeued,
    SubmissionSubmitted,
    SubmissionSuspectCleared,
    SubmissionSuspected,
    SuspectReason,
)
from kz_package.schemas import validate
from kz_projector.index import IndexState, fold_index, render_index

pytestmark = pytest.mark.unit

T0 = datetime(2025, 1, 1, tzinfo=UTC)
BOARD = "cpu/Norm/RMSNorm/fp32"
REF = f"{BOARD}/ref"
METRIC = {"name": "latency", "unit": "us", "better": "lower"}


class Log:
    """Events of one board in log order, numbered as the stream would."""

    def __init__(self) -> None:
        self.events: list[Event] = [
            KernelImported(
                **self._meta(),
                kernel_id=REF,
                package_digest="a" * 64,
                submitter_id="importer",
                bench_result={"best": {"value": 100.0}, "metric": METRIC},
            )
        ]

    def _meta(self, actor: str = "svc") -> dict[str, Any]:
        at = T0 + timedelta(seconds=len(getattr(self, "events", [])))
        return {"event_id": str(uuid.uuid4()), "occurred_at": at, "actor": actor}

    def accept(self, name: str, sid: str, score: tuple[float, float, float]) -> None:
        speedup, low, high = score
        result = {
            "accepted": True,
            "metric": {**METRIC, "value": 100.0 / speedup},
            "score": {"against": "reference", "speedup": speedup, "interval": [low, high]},
        }
        self.events.append(
            SubmissionAccepted(
                **self._meta("referee"),
                submission_id=sid,
                kernel_id=f"{BOARD}/{name}",
                submitter_id="alice",
                runner_id="r1",
                attempt=1,
                package_digest="d" * 64,
                result=result,
                result_seq=len(self.events),
            )
        )

    def confirm(self, name: str, sid: str, *, agrees: bool) -> None:
        run = f"confirm-{sid}"
        common = {"submission_id": run, "kernel_id": f"{BOARD}/{name}"}
        self.events.append(
            SubmissionSubmitted(
                **self._meta("referee"),
                **common,
                submitter_id="alice",
                package_digest="d" * 64,
                package_size=1,
                confirms=sid,
            )
        )
        ending = SubmissionConfirmed if agrees else SubmissionDisputed
        self.events.append(ending(**self._meta("referee"), **common, confirms=sid, reason="."))

    def suspect(self, name: str, sid: str) -> None:
        reason = SuspectReason(source="runtime", code="extra_threads", message="a thread")
        self.events.append(
            SubmissionSuspected(
                **self._meta("referee"),
                submission_id=sid,
                kernel_id=f"{BOARD}/{name}",
                result_seq=1,
                reasons=[reason],
            )
        )

    def clear(self, name: str, sid: str) -> None:
        self.events.append(
            SubmissionSuspectCleared(
                **self._meta("maint"), submission_id=sid, kernel_id=f"{BOARD}/{name}", reason="ok"
            )
        )

    def render(self) -> bytes:
        state = IndexState()
        for seq, event in enumerate(self.events, 1):
            state = fold_index(state, seq, event)
        return render_index(state)

    def board(self) -> list[dict[str, Any]]:
        doc = json.loads(self.render())
        assert validate("index", doc) == []
        rows: list[dict[str, Any]] = doc["leaderboards"][BOARD]
        return rows


def _ranks(rows: list[dict[str, Any]]) -> list[tuple[str, int | None]]:
    return [(row["kernel_id"].rsplit("/", 1)[1], row["rank"]) for row in rows]


def test_a_slow_kernel_never_ties_a_fast_one() -> None:
    """Settled intervals are narrow: 0.5x and 1.5x are apart, and an unsettled interval (the
    regression: one spanning 0.06x to 2.3x tied the whole board) takes no part in ties."""
    log = Log()
    log.accept("fast", "s1", (1.5, 1.46, 1.54))
    log.accept("slow", "s2", (0.5, 0.49, 0.51))
    log.accept("noise", "s3", (1.0, 0.06, 2.3))
    rows = log.board()
    assert _ranks(rows) == [("fast", 1), ("ref", 2), ("slow", 3), ("noise", None)]
    assert not any(row.get("tied") for row in rows)
    assert rows[3]["unranked"].startswith("unsettled: ")


def test_a_disputed_record_falls_back_to_the_kernels_last_standing_result() -> None:
    """The regression: a 0.034x kernel ranked first above a disputed 2.26x one. A disputed
    record takes no rank: the kernel's result before it stands for it, marked held back."""
    log = Log()
    log.accept("crawl", "s1", (0.034, 0.033, 0.035))
    log.accept("quick", "s2", (2.0, 1.96, 2.04))
    log.confirm("quick", "s2", agrees=True)
    log.accept("quick", "s3", (2.26, 2.2, 2.3))
    log.confirm("quick", "s3", agrees=False)
    rows = log.board()
    assert _ranks(rows) == [("quick", 1), ("ref", 2), ("crawl", 3)]
    quick = rows[0]
    assert quick["score"]["speedup"] == 2.0 and quick["submission"] == "s2"
    assert quick["confirmation"] == "confirmed"
    assert quick["held_back"] == {
        "submission": "s3",
        "reason": "disputed: a second run did not agree with it",
    }


def test_a_disputed_first_record_leaves_the_kernel_unranked() -> None:
    log = Log()
    log.accept("lucky", "s1", (2.5, 2.45, 2.55))
    log.confirm("lucky", "s1", agrees=False)
    rows = log.board()
    assert _ranks(rows) == [("ref", 1), ("lucky", None)]
    assert rows[1]["unranked"] == "disputed: a second run did not agree with it"
    assert rows[1]["confirmation"] == "disputed"


def test_a_suspect_result_is_held_back_and_never_shown_confirmed_until_cleared() -> None:
    """A result with a flag holds no rank (the kernel's earlier result stands meanwhile) and
    reads unconfirmed even when its second run agreed; a maintainer's clear restores both."""
    log = Log()
    log.accept("rival", "s1", (1.5, 1.47, 1.53))
    log.accept("flagged", "s2", (1.2, 1.18, 1.22))
    log.suspect("flagged", "s3")
    log.accept("flagged", "s3", (3.0, 2.95, 3.05))
    log.confirm("flagged", "s3", agrees=True)
    rows = log.board()
    assert _ranks(rows) == [("rival", 1), ("flagged", 2), ("ref", 3)]
    flagged = rows[1]
    assert flagged["suspect"] is True and flagged["submission"] == "s2"
    assert flagged["held_back"]["reason"] == "suspect: held back until a maintainer clears it"
    doc = json.loads(log.render())
    kernel = next(k for k in doc["kernels"] if k["id"].endswith("/flagged"))
    assert kernel["current"]["confirmation"] == "unconfirmed"
    assert kernel["history"][-1]["confirmation"] == "unconfirmed"

    log.clear("flagged", "s3")
    rows = log.board()
    assert _ranks(rows)[0] == ("flagged", 1)
    assert rows[0]["confirmation"] == "confirmed" and "suspect" not in rows[0]


def test_a_suspect_result_alone_is_listed_unranked() -> None:
    log = Log()
    log.suspect("only", "s1")
    log.accept("only", "s1", (4.0, 3.9, 4.1))
    rows = log.board()
    assert _ranks(rows) == [("ref", 1), ("only", None)]
    assert rows[1]["unranked"] == "suspect: held back until a maintainer clears it"


def test_the_same_log_renders_the_same_bytes() -> None:
    log = Log()
    log.accept("a", "s1", (1.5, 1.47, 1.53))
    log.accept("b", "s2", (1.49, 1.46, 1.52))
    log.confirm("a", "s1", agrees=False)
    assert log.render() == log.render()


def test_a_retry_is_queued_again_in_the_index() -> None:
    """A requeued submission counts as queued for its arch until a runner claims it again."""
    common = {"submission_id": "s1", "kernel_id": f"{BOARD}/k"}
    events: list[Event] = [
        SubmissionSubmitted(
            **Log()._meta("alice"),
            **common,
            submitter_id="alice",
            package_digest="d" * 64,
            package_size=1,
        ),
        SubmissionClaimed(**Log()._meta("r1"), **common, runner_id="r1", attempt=1, lease_id="L"),
        SubmissionRequeued(
            **Log()._meta("referee"),
            **common,
            code="unsettled",
            reason="too noisy",
            result_seq=3,
            attempt=1,
            avoid_runner="r1",
        ),
    ]
    state = IndexState()
    for seq, event in enumerate(events, 1):
        state = fold_index(state, seq, event)
    assert json.loads(render_index(state))["queue"] == {"cpu": {"queued": 1, "running": 0}}
