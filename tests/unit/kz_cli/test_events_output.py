"""What `kz events tail` prints: clean lines or one-line JSON, never Python reprs, and where it
follows from before any event arrives."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from kz_cli.cmd_events import event_json, following_line, format_event
from kz_events.events import PackageSummary, SubmissionSubmitted

pytestmark = pytest.mark.unit

T0 = datetime(2026, 12, 1, 20, 0, 0, tzinfo=UTC)


def submitted() -> SubmissionSubmitted:
    return SubmissionSubmitted(
        event_id="e1",
        occurred_at=T0,
        actor="alice",
        submission_id="s1",
        kernel_id="cpu/Norm/RMSNorm/fp32/k",
        submitter_id="alice",
        package_digest="d" * 64,
        package_size=1,
        summary=PackageSummary(title="RMSNorm", language="python", metric={"unit": "us"}),
    )


def test_a_human_line_holds_no_python_repr() -> None:
    """Nested structures print as compact JSON, not `summary=PackageSummary(...)`."""
    line = format_event(7, submitted())
    assert "PackageSummary(" not in line and "datetime" not in line
    assert 'summary={"language":"python","metric":{"unit":"us"},"title":"RMSNorm"}' in line
    assert line.split()[:3] == ["7", "20:00:00.000", "submitted"]


def test_json_output_is_one_line_of_plain_json() -> None:
    line = event_json(7, submitted())
    assert "\n" not in line
    doc = json.loads(line)
    assert doc["seq"] == 7 and doc["type"] == "submitted"
    assert doc["summary"]["title"] == "RMSNorm"
    assert doc["occurred_at"].startswith("2026-12-01T20:00:00")


def test_the_tail_says_where_it_follows_from_even_when_quiet() -> None:
    assert following_line(43, 42) == (
        "following the event log from seq 43 (it holds 42; waiting for new ones)"
    )
    assert following_line(1, 42) == "following the event log from seq 1 (it holds 42)"
