"""The web UI's generated vocabulary: current with the Python, and complete."""

from __future__ import annotations

from pathlib import Path

import pytest

from kz_events import vocab_gen
from kz_events.events import ALL_EVENT_TYPES
from kz_events.lifecycle import TERMINAL, Status

pytestmark = pytest.mark.unit


def test_the_committed_module_matches_the_code() -> None:
    """webui/js/lib/vocab.js is what the generator makes now (fix: `make schemas`)."""
    assert vocab_gen.check() == []


def test_every_status_and_event_type_is_in_it() -> None:
    """Each status, the terminal ones, and every event type with its aggregate are exported."""
    vocab = vocab_gen.vocabulary()
    assert vocab["STATUSES"] == [s.value for s in Status]
    assert set(vocab["TERMINAL_STATUSES"]) == {s.value for s in TERMINAL}
    assert list(vocab["EVENT_AGGREGATE"]) == list(ALL_EVENT_TYPES)
    assert set(vocab["EVENT_AGGREGATE"].values()) == {"submission", "kernel", "runner", "task"}
    assert vocab["COMPARISON"] == {
        "FASTER": "faster",
        "NOT_FASTER": "not_faster",
        "INCONCLUSIVE": "inconclusive",
    }


def test_check_reports_a_missing_or_stale_file_and_write_repairs_it(tmp_path: Path) -> None:
    """`check` names a missing or edited module; `write` makes it current again."""
    path = tmp_path / "vocab.js"
    assert vocab_gen.check(path) == ["vocab.js: missing"]
    vocab_gen.write(path)
    assert vocab_gen.check(path) == []
    path.write_text(path.read_text().replace("'queued'", "'waiting'"))
    assert vocab_gen.check(path) == ["vocab.js: out of date"]
    assert vocab_gen.main(["--check", "--out", str(path)]) == 1
    assert vocab_gen.main(["--out", str(path)]) == 0
    assert vocab_gen.check(path) == []
