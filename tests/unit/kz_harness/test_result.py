"""Sending the result document to the runner's KZ_RESULT_FD (or a path)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kz_harness.checks import compare
from kz_harness.errors import HarnessError
from kz_harness.result import write_result
from kz_harness.stats import Stats

pytestmark = pytest.mark.unit

METRIC = {"name": "latency", "unit": "us", "better": "lower", "value": 12.5}


def test_the_document_goes_to_the_result_channel(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no path given, the document is sent as JSON to $KZ_RESULT_FD, then closed."""
    read, write = os.pipe()
    monkeypatch.setenv("KZ_RESULT_FD", str(write))
    stats = Stats.from_samples([12.0, 12.5, 13.0])
    written = write_result(accepted=True, reason="1.2x faster", metric=METRIC,
                           workloads=[{"name": "w", "value": 12.5, "stats": stats}],
                           checks=[compare([1.0], [1.0], dtype="fp32")],
                           environment={"device": "cpu"})  # fmt: skip
    with os.fdopen(read) as channel:
        document = json.loads(channel.read())  # ends: the judge's end was closed
    assert document == written
    assert document["schema_version"] == 3 and document["accepted"] is True
    assert document["workloads"][0]["stats"]["samples"] == [12.0, 12.5, 13.0]
    assert document["correctness"] == {
        "passed": True,
        "checks": [compare([1.0], [1.0], dtype="fp32").to_dict()],
    }


def test_no_checks_or_a_failing_check_means_correctness_failed(tmp_path: Path) -> None:
    """Correctness passes only when there is at least one check and every check passes."""
    empty = write_result(tmp_path / "a.json", accepted=False, reason="r", metric=METRIC,
                         workloads=[], checks=[], environment={})  # fmt: skip
    failing = write_result(tmp_path / "b.json", accepted=False, reason="r", metric=METRIC,
                           workloads=[], checks=[compare([0.0], [1.0], dtype="fp32")],
                           environment={})  # fmt: skip
    assert empty["correctness"]["passed"] is False and failing["correctness"]["passed"] is False


@pytest.mark.parametrize(
    "metric",
    [{"name": "x", "unit": "us", "better": "faster", "value": 1.0},
     {"name": "x", "unit": "us", "value": 1.0},
     {"name": "x", "unit": "us", "better": "lower", "value": float("nan")}],
)  # fmt: skip
def test_a_bad_metric_is_refused(tmp_path: Path, metric: dict[str, object]) -> None:
    """A metric without a direction, with a wrong one, or with a NaN value is refused."""
    with pytest.raises(HarnessError):
        write_result(tmp_path / "r.json", accepted=True, reason="r", metric=metric,
                     workloads=[], checks=[], environment={})  # fmt: skip


def test_without_a_path_or_env_it_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """No path and no KZ_RESULT_FD is a clear error."""
    monkeypatch.delenv("KZ_RESULT_FD", raising=False)
    with pytest.raises(HarnessError, match="KZ_RESULT_FD"):
        write_result(
            accepted=True, reason="r", metric=METRIC, workloads=[], checks=[], environment={}
        )
