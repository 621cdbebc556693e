"""The typed result document: old and new versions decode, the view round-trips, bad input
names its field, and the metric's direction rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kz_events.errors import InvalidResult
from kz_events.events import decode_event
from kz_events.result import (
    RESULT_SCHEMA_VERSION,
    Flag,
    Metric,
    ResultDocument,
    Score,
    Stats,
    decode_result,
    result_flags,
    stored_result,
)
from kz_harness.result import SCHEMA_VERSION
from kz_package.schemas import validate

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden"
V1 = json.loads((GOLDEN / "result_v1.json").read_text())
V2 = json.loads((GOLDEN / "result_v2.json").read_text())
V3 = json.loads((GOLDEN / "result_v3.json").read_text())
LOWER = Metric(name="latency", unit="us", better="lower")
HIGHER = Metric(name="bandwidth", unit="GB/s", better="higher")


def test_the_golden_documents_pass_the_schema_and_the_harness_writes_version_3() -> None:
    """Every golden document is valid; the harness writes the version this view knows."""
    assert validate("result", V1) == [] and validate("result", V2) == []
    assert validate("result", V3) == []
    assert SCHEMA_VERSION == RESULT_SCHEMA_VERSION == V3["schema_version"] == 3


def test_a_version_1_document_decodes_with_the_new_fields_empty() -> None:
    """A version 1 document reads as it is; what version 2 adds reads as None or empty."""
    doc = ResultDocument.of(V1)
    assert (doc.schema_version, doc.accepted, doc.value, doc.device) == (1, True, 41.2, "cpu")
    assert doc.metric == Metric(name="latency", unit="us", better="lower", value=41.2)
    [workload] = doc.workloads
    assert workload.stats is not None and workload.stats.sample_values() == (41.2, 41.0, 42.8)
    assert workload.speedup is None and workload.incumbent is None
    assert (doc.flags, doc.timing, doc.comparison, doc.score) == ((), None, None, None)
    assert doc.correctness is not None and doc.correctness.checks[0].max_rel_err == 2e-06


def test_every_result_in_the_golden_events_decodes() -> None:
    """The result documents the golden events carry decode into the typed view."""
    golden = json.loads((GOLDEN / "events.json").read_text())
    carried = [decode_event(json.dumps(entry["payload"]).encode()) for entry in golden.values()]
    documents = [e.result for e in carried if isinstance(getattr(e, "result", None), dict)]
    assert len(documents) >= 3
    for document in documents:
        assert ResultDocument.of(document).metric is not None


def test_a_version_2_document_decodes_every_figure() -> None:
    """The side-by-side figures, the score, the flags and the timing method are typed."""
    doc = ResultDocument.of(json.dumps(V2).encode())
    [workload] = doc.workloads
    assert workload.speedup is not None and workload.speedup.interval == (1.24, 1.38)
    assert len(workload.speedup.log_ratios) == workload.speedup.blocks == 12
    assert workload.incumbent is not None and workload.incumbent.count == 5
    assert workload.reference_speedup is not None and workload.reference_speedup.value == 2.0
    assert doc.comparison is not None and doc.comparison.outcome == "faster"
    assert doc.score is not None and doc.score.figures() == (2.0, 1.93, 2.07)
    assert doc.timing is not None and doc.timing.method == "judge_clock"
    assert doc.timing.worker_cpu["b8_h4096"]["other_cpu_ns"] == 0
    assert doc.flags == (Flag(code="extra_threads", message=V2["flags"][0]["message"]),)


def test_a_version_3_document_decodes_resolutions_rivals_and_validity() -> None:
    """Each workload's resolution and calls per window, the timing method, what became of each
    rival and the judge's reading of the validity gate are typed; a version 2 document reads
    them as absent."""
    doc = ResultDocument.of(V3)
    [workload] = doc.workloads
    assert workload.resolution == V3["workloads"][0]["resolution"] and workload.batch == 85
    assert doc.timing is not None and doc.timing.method == "batched_window"
    assert doc.timing.batch == {"r64": 85} and doc.timing.resolution_unit == "us"
    assert doc.rivals["incumbent"].status == "measured" and not doc.rivals["incumbent"].voided
    assert doc.rivals["reference"].voided and doc.rivals["reference"].code == "wrong_output"
    assert doc.validity is not None and doc.validity.measured is False
    assert doc.failure is None
    old = ResultDocument.of(V2)
    assert (old.rivals, old.failure, old.validity) == ({}, None, None)
    assert old.workloads[0].resolution is None and old.workloads[0].batch is None


def test_a_candidates_failure_decodes_with_no_value() -> None:
    """A failed candidate's document: its failure typed, no headline value."""
    failed = {
        **V3,
        "accepted": False,
        "reason": "ValueError: boom",
        "metric": {**V3["metric"], "value": None},
        "failure": {"who": "candidate", "stage": "call", "error": "ValueError: boom"},
    }
    assert validate("result", failed) == []
    doc = ResultDocument.of(failed)
    assert doc.failure is not None and (doc.failure.stage, doc.failure.error) == (
        "call",
        "ValueError: boom",
    )
    assert doc.value is None
    assert validate("result", {**failed, "failure": {**failed["failure"], "stage": "x"}}) != []


@pytest.mark.parametrize("golden", [V1, V2, V3], ids=["v1", "v2", "v3"])
def test_the_view_round_trips(golden: dict[str, Any]) -> None:
    """Encoding the view and decoding it again gives the same view; a version 2 or 3 view
    encodes to a valid document (a version 1 one leaves out its default version)."""
    doc = ResultDocument.of(golden)
    encoded = msgspec.json.encode(doc)
    assert ResultDocument.of(encoded) == doc
    if doc.schema_version >= 2:
        assert validate("result", json.loads(encoded)) == []


def test_unknown_fields_of_a_newer_judge_are_ignored() -> None:
    """Extra fields anywhere (a newer judge's) do not break the reader."""
    newer = {**V2, "schema_version": 4, "provenance": {"x": 1}}
    newer["metric"] = {**V2["metric"], "basis": "geomean"}
    newer["workloads"] = [{**V2["workloads"][0], "energy_j": 0.2}]
    doc = ResultDocument.of(newer)
    assert doc.schema_version == 4 and doc.value == 41.2 and doc.workloads[0].name == "b8_h4096"


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        (b"{no", "", "must be JSON"),
        ([1], "", "must be a JSON object, got list"),
        ({"metric": {**V1["metric"], "value": "fast"}}, "metric.value", "got 'fast'"),
        ({"metric": {**V1["metric"], "better": "up"}}, "metric.better", "invalid enum value"),
        ({"metric": {"name": "l", "better": "lower"}}, "metric", "required field `unit`"),
        (
            {"workloads": [{"name": "w", "stats": {"samples": [1.0, "x"]}}]},
            "workloads[0].stats.samples[1]",
            "must be a finite number, got 'x'",
        ),
        ({"score": {"interval": [1.0]}}, "score.interval", "length 2"),
        ({"accepted": "yes"}, "accepted", "must be true or false or null, got 'yes'"),
    ],
)
def test_bad_documents_name_the_field(data: Any, field: str, message: str) -> None:
    """What does not decode raises InvalidResult naming the field and what was found."""
    with pytest.raises(InvalidResult) as caught:
        decode_result(data)
    assert caught.value.field == field and caught.value.code == "invalid_result"
    assert message in caught.value.message and field in caught.value.message


def test_flags_of_a_raw_document_skip_what_is_not_a_flag() -> None:
    """A malformed flag entry is skipped, the others are kept; no list, no flags."""
    raw = {"flags": [{"code": "late_output"}, {"no": "code"}, "junk"]}
    assert result_flags(raw) == (Flag(code="late_output"),)
    assert result_flags({"flags": "no"}) == () == result_flags(None)
    assert result_flags(ResultDocument.of(V2)) == ResultDocument.of(V2).flags


@pytest.mark.parametrize(
    ("metric", "a", "b", "better", "speedup"),
    [
        (LOWER, 10.0, 20.0, True, 2.0),  # half the time: twice as fast
        (LOWER, 20.0, 10.0, False, 0.5),
        (HIGHER, 30.0, 10.0, True, 3.0),  # three times the bandwidth
        (HIGHER, 10.0, 30.0, False, 1 / 3),
        (LOWER, 5.0, 5.0, False, 1.0),
    ],
)
def test_the_direction_rule(
    metric: Metric, a: float, b: float, better: bool, speedup: float
) -> None:
    """`better_than` and `speedup` follow the metric's direction; equal is not better."""
    assert metric.better_than(a, b) is better
    assert metric.speedup(of=a, over=b) == pytest.approx(speedup)
    assert (metric.rank_key(a) < metric.rank_key(b)) is better


@pytest.mark.parametrize(("metric", "best"), [(LOWER, ("b", 1.0)), (HIGHER, ("c", 7.0))])
def test_best_takes_the_first_of_the_best(metric: Metric, best: tuple[str, float]) -> None:
    """The best item in the metric's direction; among equals the first; None when empty."""
    items = [("a", 5.0), ("b", 1.0), ("c", 7.0), ("d", 1.0), ("e", 7.0)]
    assert metric.best(items, lambda item: item[1]) == best
    assert metric.best([], lambda item: item) is None


def test_a_declared_metric_and_its_fields() -> None:
    """A desc.yaml metric converts; what is not one gives None; fields drop the value."""
    assert Metric.of({"name": "latency", "unit": "us", "better": "lower"}) == LOWER
    assert Metric.of({"name": "latency", "unit": "us"}) is None
    assert Metric.of(None) is None
    measured = Metric(name="latency", unit="us", better="lower", value=3.0)
    assert measured.spec() == LOWER
    assert measured.fields() == {"name": "latency", "unit": "us", "better": "lower"}


def test_stats_count_samples_however_they_are_given() -> None:
    """Every sample, their count (version 1 allowed it), or n alone."""
    assert Stats(samples=(1.0, 2.0)).count == 2 and Stats(samples=7).count == 7
    assert Stats(n=4).count == 4 and Stats(samples=7).sample_values() == ()
    assert Stats(mean=2.0).centre == 2.0 and Stats(median=1.0, mean=2.0).centre == 1.0


@pytest.mark.parametrize(
    ("score", "figures"),
    [
        (Score(against="reference", speedup=1.2, interval=(1.1, 1.3)), (1.2, 1.1, 1.3)),
        (Score(against=None, reason="no reference"), None),
        (Score(against="reference", speedup=1.2), None),
        (Score(against="reference", speedup=0.0, interval=(0.0, 1.0)), None),
    ],
)
def test_a_score_has_figures_only_when_they_can_rank(
    score: Score, figures: tuple[float, float, float] | None
) -> None:
    """Only a score against the reference with positive figures ranks a kernel."""
    assert score.figures() == figures


def test_a_stored_document_that_does_not_decode_shows_nothing() -> None:
    """Readers that show stored documents get None for none or for one that cannot decode."""
    assert stored_result(None) is None
    assert stored_result({"metric": {"value": "fast"}}) is None
    assert stored_result(V1) == ResultDocument.of(V1)
