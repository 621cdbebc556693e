"""The pure folds: scoreboard, index, and the sweeper's rule."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kz_events.events import (
    KernelImported,
    PackageSummary,
    SubmissionAccepted,
    SubmissionClaimed,
    SubmissionCommitted,
    SubmissionDisqualified,
    SubmissionSubmitted,
)
from kz_events.result import Metric, ResultDocument
from kz_package.schemas import validate
from kz_package.yaml_safe import load_yaml
from kz_projector.index import (
    IndexState,
    digest_needed,
    fold_index,
    headline_spread,
    render_index,
    score_of,
    with_facts,
)
from kz_projector.scoreboard import (
    Accepted,
    Board,
    board_accept,
    board_disqualify,
    board_import,
    render_yaml,
    scoreboard,
)
from kz_projector.sweeper import OpenTask, lost_tasks

pytestmark = pytest.mark.unit

KID = "cpu/Norm/RMSNorm/fp32/k"
T0 = datetime(2025, 1, 1, tzinfo=UTC)
METRIC = {"name": "latency", "unit": "us", "better": "lower"}
SUMMARY = PackageSummary(title="T", language="python", metric=METRIC)


def _result(value: float) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "accepted": True,
        "reason": "ok",
        "metric": {**METRIC, "value": value},
        "workloads": [
            {
                "name": "w",
                "value": value,
                "stats": {"median": value, "samples": [value], "p10": value, "p90": value},
            }
        ],
        "correctness": {"passed": True, "checks": [{"name": "w", "passed": True}]},
        "environment": {"device": "cpu"},
    }


def _accepted(n: int, value: float) -> Accepted:
    return Accepted(
        seq=n,
        submission_id=f"00000000-0000-4000-8000-{n:012d}",
        submitter="a",
        runner_id="r",
        digest=f"d{n}",
        value=value,
        at="2025-01-01T00:00:00Z",
        result=_result(value),
        environment={},
    )


@pytest.mark.parametrize(
    ("better", "values", "best"),
    [
        ("lower", [5.0, 3.0, 4.0], 3.0),
        ("higher", [5.0, 3.0, 7.0], 7.0),
        ("lower", [2.0, 2.0], 2.0),
    ],
)
def test_best_follows_the_metric_direction(better: str, values: list[float], best: float) -> None:
    """Best is the extreme value in the metric's direction; current is the latest."""
    board = Board(kernel_id=KID, metric=Metric.of({**METRIC, "better": better}))
    for n, value in enumerate(values):
        board = board_accept(board, _accepted(n, value), None)
    doc = scoreboard(board)
    assert doc["best"]["value"] == best and doc["current"]["value"] == values[-1]
    assert doc["accepted_count"] == len(values)
    assert validate("bench_result", doc) == []


def test_disqualification_falls_back_to_the_best_remaining_result() -> None:
    """Dropping the best result makes the next best the best and its package the source."""
    board = Board(kernel_id=KID, metric=Metric.of(METRIC))
    for n, value in enumerate([5.0, 1.0, 3.0]):
        board = board_accept(board, _accepted(n, value), None)
    after = board_disqualify(board, _accepted(1, 1.0).submission_id)
    assert after is not None
    assert scoreboard(after)["best"]["value"] == 3.0 and after.source_digest == "d2"
    assert board_disqualify(after, "not-there") is None


def test_imported_seed_competes_with_new_results() -> None:
    """An imported scoreboard's best stays best until a result beats it."""
    seed = {
        "schema_version": 1,
        "kernel_id": KID,
        "metric": METRIC,
        "accepted_count": 2,
        "best": {"value": 2.0, "submission_id": "x", "at": "2024-01-01T00:00:00Z"},
        "current": {"value": 2.5, "submission_id": "x", "at": "2024-01-01T00:00:00Z"},
    }
    board = board_import(Board(kernel_id=KID), "base", seed, Metric.of(METRIC))
    board = board_accept(board, _accepted(1, 3.0), None)
    assert scoreboard(board)["best"]["value"] == 2.0
    assert scoreboard(board)["accepted_count"] == 3
    assert render_yaml(scoreboard(board)) == render_yaml(scoreboard(board))


def _events() -> list[Any]:
    base: dict[str, Any] = {"kernel_id": KID, "actor": "a"}
    sids = [f"00000000-0000-4000-8000-{n:012d}" for n in range(3)]
    out: list[Any] = [
        KernelImported(event_id="i", occurred_at=T0, package_digest="p0", submitter_id="a", **base)
    ]
    for n, sid in enumerate(sids):
        at = T0 + timedelta(minutes=n + 1)
        out += [
            SubmissionSubmitted(
                event_id=f"s{n}",
                occurred_at=at,
                submission_id=sid,
                submitter_id="a",
                package_digest=f"p{n}",
                package_size=1,
                **base,
            ),
            SubmissionClaimed(
                event_id=f"c{n}",
                occurred_at=at,
                submission_id=sid,
                runner_id="r",
                attempt=1,
                lease_id="l",
                **base,
            ),
            SubmissionAccepted(
                event_id=f"a{n}",
                occurred_at=at,
                submission_id=sid,
                submitter_id="a",
                runner_id="r",
                attempt=1,
                package_digest=f"p{n}",
                result=_result(float(5 - n)),
                result_seq=1,
                **base,
            ),
            SubmissionCommitted(
                event_id=f"m{n}",
                occurred_at=at,
                submission_id=sid,
                source_commit="a" * 40,
                bench_result_commit="b" * 40,
                accepted_seq=1,
                **base,
            ),
        ]
    out.append(
        SubmissionDisqualified(
            event_id="d",
            occurred_at=T0 + timedelta(hours=1),
            submission_id=sids[2],
            reason="cheat",
            **base,
        )
    )
    out.append(
        SubmissionSubmitted(
            event_id="q",
            occurred_at=T0 + timedelta(hours=2),
            submission_id="00000000-0000-4000-8000-000000000009",
            submitter_id="b",
            package_digest="p9",
            package_size=1,
            **base,
        )
    )
    return out


def _index(upto: int | None = None) -> bytes:
    state = IndexState()
    for seq, event in enumerate(_events()[:upto], start=1):
        digest = getattr(event, "package_digest", None)
        if digest is not None:
            state = with_facts(state, digest, SUMMARY)
        state = fold_index(state, seq, event)
    return render_index(state)


def test_index_is_deterministic_and_fits_its_schema() -> None:
    """The same log position renders the same bytes; the document fits index.schema.json."""
    assert _index() == _index()
    doc = json.loads(_index())
    assert validate("index", doc) == []
    kernel = doc["kernels"][0]
    assert kernel["best"]["value"] == 4.0  # 3.0 was disqualified
    assert kernel["accepted_count"] == 2 and kernel["disqualified"]
    assert kernel["best"]["spread"] == {"p10": 4.0, "p90": 4.0}
    assert doc["queue"] == {"cpu": {"queued": 1, "running": 0}}
    assert doc["leaderboards"]["cpu/Norm/RMSNorm/fp32"][0]["kernel_id"] == KID
    assert doc["generated_at"] == "2025-01-01T02:00:00Z" and doc["head_commit"] == "b" * 40


def test_index_can_be_rendered_as_of_a_past_position() -> None:
    """Folding a prefix of the log gives the index as it was then."""
    doc = json.loads(_index(4))
    assert doc["log_seq"] == 4 and doc["kernels"][0]["best"]["value"] == 5.0


def test_the_index_titles_kernels_from_the_summary_events_carry() -> None:
    """A `submitted` event's summary titles the kernel once accepted; the fold asks for no
    package, and a refused submission's summary is not kept."""
    summary = PackageSummary(title="Fast norm", language="cuda", metric=METRIC)
    state = IndexState()
    for seq, event in enumerate(_events(), start=1):
        if isinstance(event, SubmissionSubmitted):
            event = msgspec.structs.replace(event, summary=summary)
        if isinstance(event, KernelImported):
            event = msgspec.structs.replace(event, summary=summary)
        assert digest_needed(state, event) is None
        state = fold_index(state, seq, event)
    kernel = json.loads(render_index(state))["kernels"][0]
    assert (kernel["title"], kernel["language"]) == ("Fast norm", "cuda")
    assert list(state.pending) == ["00000000-0000-4000-8000-000000000009"]  # still queued


def test_events_without_a_summary_ask_for_the_package() -> None:
    """Older events carry no summary: the fold names the digest whose desc.yaml it needs."""
    state = IndexState()
    wanted = [digest_needed(state, e) for e in _events()]
    assert wanted[0] == "p0" and "p1" in wanted


def test_lost_tasks_are_last_attempts_quiet_past_lease_and_grace() -> None:
    """Only tasks on their last attempt and silent past lease + grace are lost."""
    tasks = [OpenTask("a", 3, 3, T0), OpenTask("b", 1, 3, T0), OpenTask("c", 3, 3, T0)]
    beats = {"c": T0 + timedelta(seconds=50)}
    now = T0 + timedelta(seconds=60)
    assert lost_tasks(tasks, beats, now, lease_s=15, grace_s=15) == ["a"]
    assert lost_tasks(tasks, {}, T0 + timedelta(seconds=10), lease_s=15, grace_s=15) == []


@pytest.mark.parametrize(
    "doc",
    [
        {"schema_version": 1, "kernel_id": KID},
        {"a": [{"b": 1.5e-07, "c": "yes"}, {"d": None, "e": True}], "f": [], "g": {}, "on": "x"},
        {"s": 'line\nbreak: # "quoted" ü', "n": -3, "x": 1e20, "list": [1, "2", 3.0]},
    ],
)
def test_rendered_yaml_loads_back_to_the_same_data(doc: dict[str, Any]) -> None:
    """The scoreboard's YAML reads back, through the strict package loader, as the same data."""
    assert load_yaml(render_yaml(doc), path="bench_result.yaml") == doc


def _workload(name: str, median: float, p10: float, p90: float) -> dict[str, Any]:
    return {"name": name, "value": median, "stats": {"median": median, "p10": p10, "p90": p90}}


def test_the_spread_of_a_headline_that_is_one_workloads_value_is_that_workloads() -> None:
    result = {
        "metric": {**METRIC, "value": 300.0},
        "workloads": [
            _workload("small", 100.0, 90.0, 120.0),
            _workload("large", 300.0, 280.0, 330.0),
        ],
    }
    assert headline_spread(result) == (280.0, 330.0)


def test_the_spread_of_an_aggregate_headline_scales_the_workloads_ratios() -> None:
    """A geometric mean of medians gets the geometric mean of each workload's p10/median and
    p90/median: the board compares and ties by it, so it must bracket the headline."""
    result = {
        "metric": {**METRIC, "value": 200.0},  # geomean of 100 and 400
        "workloads": [
            _workload("small", 100.0, 81.0, 144.0),
            _workload("large", 400.0, 400.0, 400.0),
        ],
    }
    p10, p90 = headline_spread(result)
    assert p10 == pytest.approx(200.0 * 0.9) and p90 == pytest.approx(200.0 * 1.2)
    assert p10 <= 200.0 <= p90


@pytest.mark.parametrize(
    "workloads",
    [
        [],
        [{"name": "w", "value": 1.0}],
        [_workload("w", 0.0, 0.0, 0.0)],
        [{"name": "w", "value": 1.0, "stats": {"median": 1.0, "p10": None, "p90": 2.0}}],
    ],
)
def test_a_headline_without_usable_stats_has_no_spread(workloads: list[Any]) -> None:
    assert headline_spread({"metric": {**METRIC, "value": 2.0}, "workloads": workloads}) == (
        None,
        None,
    )


GOLDEN = Path(__file__).parents[1] / "kz_events" / "golden"


@pytest.mark.parametrize(
    ("name", "spread"), [("result_v1.json", (41.0, 42.0)), ("result_v2.json", (40.9, 42.8))]
)
def test_the_index_reads_a_stored_document_and_its_typed_view_alike(
    name: str, spread: tuple[float, float]
) -> None:
    """Spread and score are the same from the stored JSON and from its typed view; a version 1
    document has no score, a version 2 one its side-by-side score."""
    stored = json.loads((GOLDEN / name).read_text())
    view = ResultDocument.of(stored)
    assert headline_spread(stored) == headline_spread(view) == spread
    assert score_of(stored) == score_of(view)
    score = score_of(view)
    if view.schema_version == 1:
        assert score is None
    else:
        assert score is not None and (score.speedup, score.low, score.high) == (2.0, 1.93, 2.07)


def test_the_scoreboard_keeps_the_side_by_side_ratios_and_nothing_more() -> None:
    """bench_result.yaml shows a side-by-side result's speed-up over the incumbent and its
    score over the board's reference, each with its interval (not the samples); a result
    from before side by side renders exactly as it did."""
    plain = _accepted(1, 4.0)
    comparison = {
        "against": "incumbent",
        "outcome": "faster",
        "speedup": 1.3,
        "interval": [1.2, 1.4],
        "confidence": 0.95,
        "margin": 0.05,
        "reason": "r",
    }
    score = {"against": "reference", "speedup": 2.1, "interval": [2.0, 2.2], "confidence": 0.95,
             "blocks": 40}  # fmt: skip
    sided = dataclasses.replace(
        _accepted(2, 3.0), result={**_result(3.0), "comparison": comparison, "score": score}
    )
    board = board_accept(board_accept(Board(kernel_id=KID), plain, None), sided, None)
    doc = scoreboard(board)
    assert doc["current"]["comparison"] == {
        "against": "incumbent", "speedup": 1.3, "interval": [1.2, 1.4], "confidence": 0.95
    }  # fmt: skip
    assert doc["current"]["score"] == {
        "against": "reference", "speedup": 2.1, "interval": [2.0, 2.2], "confidence": 0.95
    }  # fmt: skip
    before = scoreboard(board_accept(Board(kernel_id=KID), plain, None))
    assert "comparison" not in before["current"] and "score" not in before["current"]
    assert validate("bench_result", doc) == []
