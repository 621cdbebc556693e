"""The suspect rules: reasons from tripwire hits and runtime flags, marking once, clearing once;
none of it changes the submission's status."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from kz_events.errors import RuleViolation
from kz_events.events import EventMeta, SubmissionSuspectCleared, SubmissionSuspected, TripwireHit
from kz_events.lifecycle import (
    Claim,
    ClearSuspect,
    MarkSuspect,
    ReportResult,
    Status,
    SubmissionState,
    Submit,
    decide,
    evolve,
    suspect_reasons,
)

pytestmark = pytest.mark.unit

AT = datetime(2025, 3, 1, tzinfo=UTC)
HIT = TripwireHit(code="gc", path="src/k.py", line=2, message="uses gc")


def _meta(actor: str = "svc") -> EventMeta:
    return EventMeta(event_id=str(uuid.uuid4()), occurred_at=AT, actor=actor)


def _apply(state: SubmissionState, command: Any, seq: int) -> SubmissionState:
    for event in decide(state, command):
        state = evolve(state, event, seq)
    return state


def _with_result(tripwire: list[TripwireHit]) -> SubmissionState:
    state = _apply(
        SubmissionState(),
        Submit(
            meta=_meta("alice"),
            submission_id="s1",
            kernel_id="cpu/A/b/fp32/k",
            submitter_id="alice",
            package_digest="d",
            package_size=1,
            tripwire=tripwire,
        ),
        1,
    )
    state = _apply(state, Claim(meta=_meta("r"), runner_id="r", lease_id="L", attempt=1), 2)
    return _apply(
        state,
        ReportResult(
            meta=_meta("r"),
            runner_id="r",
            lease_id="L",
            outcome="accepted",
            result={"accepted": True},
        ),
        3,
    )


@pytest.mark.parametrize(
    ("tripwire", "result", "codes"),
    [
        ([], None, []),
        ([], {"schema_version": 1, "accepted": True}, []),
        ([HIT], {"schema_version": 1}, [("tripwire", "gc")]),
        (
            [],
            {"flags": [{"code": "late_output", "message": "after the window"}]},
            [("runtime", "late_output")],
        ),
        (
            [HIT],
            {"flags": [{"code": "extra_threads"}, {"no": "code"}, "junk"]},
            [("tripwire", "gc"), ("runtime", "extra_threads")],
        ),
        ([], {"flags": "not a list"}, []),
    ],
)
def test_reasons_come_from_hits_then_flags(
    tripwire: list[TripwireHit], result: dict[str, Any] | None, codes: list[tuple[str, str]]
) -> None:
    """Tripwire hits first, then well-formed flags; version 1 documents and junk give none."""
    assert [(r.source, r.code) for r in suspect_reasons(tripwire, result)] == codes


def test_submitted_tripwire_hits_reach_the_state() -> None:
    """The hits the submitted event carries are part of the folded state."""
    assert _with_result([HIT]).tripwire == [HIT]


def test_marking_is_once_and_changes_no_status() -> None:
    """A mark is one event on the current result; a second mark is nothing; status stays."""
    state = _with_result([HIT])
    reasons = suspect_reasons(state.tripwire, state.result)
    [event] = decide(state, MarkSuspect(meta=_meta(), result_seq=3, reasons=reasons))
    assert isinstance(event, SubmissionSuspected) and event.result_seq == 3
    marked = evolve(state, event, 4)
    assert marked.status is Status.RUNNING and marked.suspect == reasons
    assert decide(marked, MarkSuspect(meta=_meta(), result_seq=3, reasons=reasons)) == []
    assert decide(state, MarkSuspect(meta=_meta(), result_seq=3, reasons=[])) == []
    with pytest.raises(RuleViolation) as stale:
        decide(state, MarkSuspect(meta=_meta(), result_seq=2, reasons=reasons))
    assert stale.value.code == "stale_result"


def test_clearing_needs_a_mark_and_happens_once() -> None:
    """Only a suspect result can be cleared, once; the reason is kept."""
    state = _with_result([HIT])
    with pytest.raises(RuleViolation) as unmarked:
        decide(state, ClearSuspect(meta=_meta("m"), reason="fine"))
    assert unmarked.value.code == "not_suspect"
    reasons = suspect_reasons(state.tripwire, state.result)
    state = _apply(state, MarkSuspect(meta=_meta(), result_seq=3, reasons=reasons), 4)
    [event] = decide(state, ClearSuspect(meta=_meta("m"), reason="gc for a pool"))
    assert isinstance(event, SubmissionSuspectCleared)
    cleared = evolve(state, event, 5)
    assert cleared.suspect_cleared == "gc for a pool" and cleared.suspect == reasons
    with pytest.raises(RuleViolation) as again:
        decide(cleared, ClearSuspect(meta=_meta("m"), reason="again"))
    assert again.value.code == "already_cleared"


def test_a_later_attempts_result_gets_its_own_mark() -> None:
    """A mark is about one result: the result of a later attempt (the first runner was lost)
    is marked afresh, and the new mark is not cleared."""
    state = _with_result([HIT])
    reasons = suspect_reasons(state.tripwire, state.result)
    state = _apply(state, MarkSuspect(meta=_meta(), result_seq=3, reasons=reasons), 4)
    state = _apply(state, ClearSuspect(meta=_meta("m"), reason="looked"), 5)
    state = _apply(state, Claim(meta=_meta("r2"), runner_id="r2", lease_id="L2", attempt=2), 6)
    state = _apply(
        state,
        ReportResult(
            meta=_meta("r2"),
            runner_id="r2",
            lease_id="L2",
            outcome="accepted",
            result={"flags": [{"code": "x"}]},
        ),
        7,
    )
    again = suspect_reasons(state.tripwire, state.result)
    [event] = decide(state, MarkSuspect(meta=_meta(), result_seq=7, reasons=again))
    marked = evolve(state, event, 8)
    assert marked.suspect_seq == 7 and marked.suspect_cleared is None
    assert [r.code for r in marked.suspect or []] == ["gc", "x"]
