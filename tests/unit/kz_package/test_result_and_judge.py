"""Result documents and the fixed judge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kz_package import PackageError, judge_changes, validate_result_document

pytestmark = pytest.mark.unit


def _result(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": 1,
        "accepted": True,
        "reason": "1.3x faster than current best",
        "metric": {"name": "latency", "unit": "us", "better": "lower", "value": 12.5},
        "workloads": [{"name": "w", "value": 12.5, "stats": {"median": 12.5, "samples": 3}}],
        "correctness": {"passed": True, "checks": [{"name": "w", "passed": True}]},
        "environment": {"device": "cpu"},
    }
    doc.update(changes)
    return doc


def test_valid_result_round_trips_from_bytes() -> None:
    """A valid document given as JSON bytes comes back as the same dict."""
    assert validate_result_document(json.dumps(_result()).encode()) == _result()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            b"{not json",
            "invalid result document: result: must be JSON: "
            "JSON is malformed: object keys must be strings (byte 1)",
        ),
        (b"[1]", "invalid result document: result: must be a JSON object, got list"),
        (
            _result(accepted="yes"),
            'invalid result document: result: accepted: must be a boolean, got a string "yes"',
        ),
        (
            _result(correctness={"passed": False, "checks": []}),
            "invalid result document: result: correctness.passed: must be true when accepted is "
            "true, got false",
        ),
        (
            _result(metric={"name": "latency", "unit": "us", "better": "lower", "value": None}),
            "invalid result document: result: metric.value: must be a number when accepted is "
            "true, got null",
        ),
        (
            _result(metric={"name": "l", "unit": "us", "better": "lower", "value": float("nan")}),
            "invalid result document: result: metric.value: must be a finite number, got nan",
        ),
    ],
)
def test_bad_result_documents_are_refused(data: Any, message: str) -> None:
    """Malformed or inconsistent result documents raise invalid_result with a clear message."""
    with pytest.raises(PackageError) as caught:
        validate_result_document(data)
    assert caught.value.code == "invalid_result"
    assert caught.value.message == message


def _package(
    root: Path, *, benchmark: str = "b", build: str = "e", better: str = "lower", title: str = "T"
) -> Path:
    meta = root / ".kernel_package"
    meta.mkdir(parents=True)
    (meta / "benchmark.py").write_text(benchmark)
    (meta / "build_test_env.py").write_text(build)
    (meta / "desc.yaml").write_text(
        f"title: {title}\nmetric: {{name: latency, unit: us, better: {better}}}\n"
    )
    return root


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, []),
        ({"title": "Another title"}, []),
        ({"benchmark": "b2"}, ["benchmark.py"]),
        ({"build": "e2"}, ["build_test_env.py"]),
        ({"better": "higher"}, ["desc.yaml:metric"]),
        (
            {"benchmark": "x", "build": "y", "better": "higher"},
            ["benchmark.py", "build_test_env.py", "desc.yaml:metric"],
        ),
    ],
)
def test_judge_changes_names_changed_judge_parts(
    tmp_path: Path, changes: dict[str, str], expected: list[str]
) -> None:
    """Only benchmark.py, build_test_env.py and the desc metric count as judge changes."""
    current = _package(tmp_path / "current")
    submitted = _package(tmp_path / "submitted", **changes)
    assert judge_changes(current, submitted) == expected


def test_judge_sees_a_removed_script(tmp_path: Path) -> None:
    """Deleting a judge script is a change too."""
    current = _package(tmp_path / "current")
    submitted = _package(tmp_path / "submitted")
    (submitted / ".kernel_package" / "build_test_env.py").unlink()
    assert judge_changes(current, submitted) == ["build_test_env.py"]
