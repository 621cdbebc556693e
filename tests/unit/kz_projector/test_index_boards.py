"""Boards in the index: imported boards are reviewed, a board a submission opened is listed
apart until a maintainer reviews it, and suspect bests are shown marked."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from kz_events.events import (
    BoardReviewed,
    KernelImported,
    PackageSummary,
    SubmissionAccepted,
    SubmissionSuspectCleared,
    SubmissionSuspected,
    SuspectReason,
)
from kz_package.schemas import validate
from kz_projector.index import IndexState, board_of, fold_index, render_index

pytestmark = pytest.mark.unit

T0 = datetime(2025, 1, 1, tzinfo=UTC)
OLD = "cpu/Norm/RMSNorm/fp32/ref"
NEW = "cpu/Norm/LayerNorm/fp32/first"
SECOND = "cpu/Norm/LayerNorm/fp32/second"
METRIC = {"name": "latency", "unit": "us", "better": "lower"}


def _meta(n: int, actor: str = "svc") -> dict[str, Any]:
    return {"event_id": str(uuid.uuid4()), "occurred_at": T0 + timedelta(seconds=n), "actor": actor}


def _accepted(n: int, kernel_id: str, sid: str, value: float) -> SubmissionAccepted:
    result = {"accepted": True, "metric": {**METRIC, "value": value}, "workloads": []}
    return SubmissionAccepted(
        **_meta(n, "referee"),
        submission_id=sid,
        kernel_id=kernel_id,
        submitter_id="alice",
        runner_id="r",
        attempt=1,
        package_digest="d" * 64,
        result=result,
        result_seq=n - 1,
    )


def _fold(events: list[Any]) -> dict[str, Any]:
    state = IndexState()
    for seq, event in enumerate(events, 1):
        state = fold_index(state, seq, event)
    doc: dict[str, Any] = json.loads(render_index(state))
    return doc


IMPORTED = KernelImported(
    **_meta(1, "importer"),
    kernel_id=OLD,
    package_digest="a" * 64,
    submitter_id="importer",
    bench_result={"best": {"value": 9.0}, "metric": METRIC},
)


def test_board_key_is_the_first_four_segments() -> None:
    """A kernel's board is its id without the name."""
    assert board_of(NEW) == "cpu/Norm/LayerNorm/fp32"


def test_imported_board_is_reviewed_and_a_submitted_one_is_not() -> None:
    """An import makes a reviewed board; a new board's first accepted kernel an unreviewed one,
    ranked apart; both fit index.schema.json."""
    doc = _fold([IMPORTED, _accepted(2, NEW, "s1", 3.0), _accepted(3, SECOND, "s2", 2.0)])
    assert doc["boards"]["cpu/Norm/RMSNorm/fp32"]["reviewed"] is True
    fresh = doc["boards"]["cpu/Norm/LayerNorm/fp32"]
    assert fresh["reviewed"] is False and fresh["judge_kernel"] == NEW
    assert fresh["kernels"] == [NEW, SECOND]
    assert list(doc["leaderboards"]) == ["cpu/Norm/RMSNorm/fp32"]
    ranked = doc["unreviewed_leaderboards"]["cpu/Norm/LayerNorm/fp32"]
    assert [(r["kernel_id"], r["rank"]) for r in ranked] == [(NEW, 1), (SECOND, None)]
    assert ranked[1]["unranked"] == "no interval: an estimate from figures measured apart"
    kernels = {k["id"]: k for k in doc["kernels"]}
    assert kernels[OLD]["board_reviewed"] is True and kernels[NEW]["board_reviewed"] is False
    assert validate("index", doc) == []


def test_an_imported_problems_origin_and_licence_reach_the_kernels_entry() -> None:
    """The problem a board was imported from (its reference's `x-problem`, carried by the
    summary) is on the kernel's index entry, for the board page to show without a request;
    a kernel of no problem set has none."""
    problem = {"format": "gpumode", "id": "matmul", "licence": {"conditions": "Attribute."}}
    summary = PackageSummary(title="matmul", language="python", metric=METRIC, problem=problem)
    imported = msgspec.structs.replace(IMPORTED, summary=summary)
    doc = _fold([imported, _accepted(2, NEW, "s1", 3.0)])
    kernels = {k["id"]: k for k in doc["kernels"]}
    assert kernels[OLD]["problem"] == problem and "problem" not in kernels[NEW]
    assert validate("index", doc) == []


def test_a_review_moves_the_board_among_the_reviewed() -> None:
    """board_reviewed makes the board reviewed, by whom and when, with the named judge."""
    review = BoardReviewed(**_meta(4, "maint"), kernel_id=SECOND, message="judge read")
    doc = _fold([IMPORTED, _accepted(2, NEW, "s1", 3.0), _accepted(3, SECOND, "s2", 2.0), review])
    board = doc["boards"]["cpu/Norm/LayerNorm/fp32"]
    assert board["reviewed"] is True and board["reviewed_by"] == "maint"
    assert board["judge_kernel"] == SECOND and board["reviewed_at"] == "2025-01-01T00:00:04Z"
    assert "cpu/Norm/LayerNorm/fp32" in doc["leaderboards"]
    assert doc["unreviewed_leaderboards"] == {}


def test_suspect_best_is_marked_until_cleared() -> None:
    """A suspect mark before the verdict marks the value, its history row and its rank row;
    a clear takes the mark off; nothing else changes."""
    reason = SuspectReason(source="tripwire", code="gc", message="uses gc")
    mark = SubmissionSuspected(
        **_meta(2, "referee"), submission_id="s1", kernel_id=OLD, result_seq=1, reasons=[reason]
    )
    events: list[Any] = [IMPORTED, mark, _accepted(3, OLD, "s1", 1.0)]
    doc = _fold(events)
    [kernel] = doc["kernels"]
    assert kernel["best"]["value"] == 1.0 and kernel["best"]["suspect"] is True
    assert kernel["history"][-1]["suspect"] is True
    assert doc["leaderboards"]["cpu/Norm/RMSNorm/fp32"][0]["suspect"] is True
    clear = SubmissionSuspectCleared(
        **_meta(4, "maint"), submission_id="s1", kernel_id=OLD, reason="fine"
    )
    after = _fold([*events, clear])
    assert "suspect" not in after["kernels"][0]["best"]
    assert "suspect" not in after["leaderboards"]["cpu/Norm/RMSNorm/fp32"][0]
    assert after["kernels"][0]["best"]["value"] == 1.0


def _scored(n: int, kernel_id: str, value: float, score: tuple[float, float, float]) -> Any:
    accepted = _accepted(n, kernel_id, f"s{n}", value)
    speedup, low, high = score
    result = {**accepted.result, "score": {"against": "reference", "speedup": speedup,
                                           "interval": [low, high], "blocks": 40}}  # fmt: skip
    return msgspec.structs.replace(accepted, result=result)


def test_a_board_ranks_by_settled_speedup_over_its_reference_and_ties_overlapping_ones() -> None:
    """Settled scores measured side by side rank the board, whatever the absolute values say
    (those came from other runs); kernels whose intervals overlap share a rank; the reference
    as pinned scores exactly 1. A result from before scoring (an estimate, no interval) and one
    whose interval is noise (the regression: 68.6x, 0.05-27705x) are listed, unranked, with
    the reason."""
    board = "cpu/Norm/RMSNorm/fp32"
    doc = _fold(
        [
            IMPORTED,  # the board's first kernel: its reference, at 9.0
            _scored(2, f"{board}/fast", 8.0, (1.50, 1.47, 1.53)),
            _scored(3, f"{board}/close", 4.0, (1.48, 1.45, 1.52)),
            _scored(4, f"{board}/modest", 3.0, (1.10, 1.08, 1.12)),
            _accepted(5, f"{board}/legacy", "s5", 5.0),
            _scored(6, f"{board}/noise", 0.001, (68.63, 0.05, 27705.0)),
        ]
    )
    ranked = doc["leaderboards"][board]
    assert [(r["kernel_id"].rsplit("/", 1)[1], r["rank"]) for r in ranked] == [
        ("fast", 1),
        ("close", 1),
        ("modest", 3),
        ("ref", 4),
        ("noise", None),  # by its current score, though it ranks nothing
        ("legacy", None),
    ]
    by_id = {k["id"].rsplit("/", 1)[1]: k for k in doc["kernels"]}
    assert by_id["ref"]["score"] == {"speedup": 1.0, "interval": [1.0, 1.0], "basis": "reference"}
    assert by_id["legacy"]["score"] == {"speedup": 1.8, "interval": None, "basis": "absolute"}
    assert by_id["fast"]["score"]["basis"] == "side_by_side"
    assert ranked[1]["tied"] is True and "tied" not in ranked[0]
    assert ranked[4]["unranked"].startswith("unsettled: its score's interval (0.05-2.77e+04x)")
    assert by_id["noise"]["best"] is None  # noise is no best either
    assert doc["boards"][board]["reference"] == {"kernel_id": OLD, "commit": None}
    assert validate("index", doc) == []
