"""The one skip rule of every reader: undecodable, misfiled and repeated events, and the fold
of an aggregate that holds one."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from kz_events.errors import RuleViolation
from kz_events.events import (
    EventMeta,
    SubmissionClaimed,
    SubmissionSubmitted,
    UnknownEvent,
    checked_event,
    encode_event,
    subject_of,
)
from kz_events.lifecycle import Claim, Status, decide, fold, lease_lapsed
from kz_events.screen import Screen, skip_kind

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, tzinfo=UTC)
KID = "cpu/Norm/RMSNorm/fp32/k"


def submitted(sid: str = "s1") -> SubmissionSubmitted:
    return SubmissionSubmitted(
        event_id=str(uuid.uuid4()),
        occurred_at=T0,
        actor="alice",
        submission_id=sid,
        kernel_id=KID,
        submitter_id="alice",
        package_digest="d" * 64,
        package_size=1,
    )


def claimed(sid: str = "s1", attempt: int = 1, at: datetime = T0) -> SubmissionClaimed:
    return SubmissionClaimed(
        event_id=str(uuid.uuid4()),
        occurred_at=at,
        actor="r1",
        submission_id=sid,
        kernel_id=KID,
        runner_id="r1",
        attempt=attempt,
        lease_id=f"L{attempt}",
    )


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"{}", "undecodable"),
        (b"garbage \xff", "undecodable"),
        (b"[1, 2]", "undecodable"),
        (b'{"type": 5}', "undecodable"),
        (b'{"type": "claimed", "event_id": "e"}', "undecodable"),
        (b"", "undecodable"),
        (b'{"type": "from_the_future", "event_id": "e"}', "unknown_type"),
    ],
)
def test_messages_that_do_not_decode_are_skipped_not_raised(data: bytes, kind: str) -> None:
    """Whatever bytes are stored, reading them gives an event to skip, with its kind."""
    event = Screen().read(7, "kz.ev.submission.cpu.s1.submitted", data)
    assert isinstance(event, UnknownEvent) and skip_kind(event) == kind


def test_a_time_without_a_zone_is_undecodable() -> None:
    """A known event whose occurred_at has no zone would break every clock comparison."""
    raw = encode_event(submitted()).replace(b'Z"', b'"')
    event = checked_event(subject_of(submitted()), raw)
    assert isinstance(event, UnknownEvent) and event.skipped == "undecodable"
    assert "time zone" in event.reason


def test_a_body_under_another_subject_is_misfiled() -> None:
    """An event stored on a subject its body does not belong to is skipped as misfiled."""
    event = submitted()
    other = subject_of(event).replace(".cpu.", ".sm90.")
    screen = Screen()
    read = screen.read(3, other, encode_event(event))
    assert isinstance(read, UnknownEvent) and read.skipped == "misfiled"
    assert screen.counts == {"misfiled": 1}
    assert screen.recent[-1].seq == 3 and screen.recent[-1].subject == other


def test_a_repeated_event_id_is_skipped_once_folded() -> None:
    """The same event stored twice (another Nats-Msg-Id) is folded once; an id repeated in
    another aggregate is another event."""
    first = submitted()
    screen = Screen()
    assert screen.read(1, subject_of(first), encode_event(first)) == first
    again = screen.read(2, subject_of(first), encode_event(first))
    assert isinstance(again, UnknownEvent) and again.skipped == "repeated"
    elsewhere = SubmissionSubmitted(**{**_fields(first), "submission_id": "s2"})
    assert screen.read(3, subject_of(elsewhere), encode_event(elsewhere)) == elsewhere
    assert screen.counts == {"repeated": 1} and screen.total == 1


def _fields(event: SubmissionSubmitted) -> dict[str, object]:
    return {f: getattr(event, f) for f in event.__struct_fields__}


def test_a_whole_log_reader_and_an_aggregate_load_skip_the_same() -> None:
    """Keyed by aggregate, the rule gives the same answer on the whole log and on one
    aggregate's events alone."""
    a, b = submitted("a"), submitted("b")
    log = [(1, a), (2, b), (3, a), (4, b)]
    whole = Screen()
    skipped_whole = [s for s, e in log if skip_kind(whole.admit(s, e)) is not None]
    one = Screen()
    skipped_a = [s for s, e in log if e is a and skip_kind(one.admit(s, e)) is not None]
    assert skipped_whole == [3, 4] and skipped_a == [3]


def test_the_live_stream_screen_keeps_no_ids() -> None:
    """Heartbeats are not folded: the live screen does not remember their ids."""
    screen = Screen(repeats=False)
    event = submitted()
    assert screen.admit(1, event) == screen.admit(2, event) == event


def test_fold_moves_version_past_a_skipped_event() -> None:
    """An aggregate holding a skipped message folds to its newest sequence, so the next
    append's concurrency check names the right one."""
    junk = checked_event("kz.ev.submission.cpu.s1.result", b"{}")
    state = fold([(1, submitted()), (5, junk)])
    assert state.status is Status.QUEUED and state.version == 5


def test_the_archive_reader_skips_all_but_misfiling() -> None:
    """Without the subject it was stored under, a message is still screened for decoding and
    repeats."""
    screen = Screen()
    event = submitted()
    assert screen.read_unfiled(1, encode_event(event)) == event
    assert skip_kind(screen.read_unfiled(2, encode_event(event))) == "repeated"
    assert skip_kind(screen.read_unfiled(3, b"{}")) == "undecodable"


# --- attempts counted from the log -------------------------------------------------------------


def claim(attempt: int, at: datetime, seen: datetime | None = None, lease_s: float = 10) -> Claim:
    return Claim(
        meta=EventMeta(event_id="e", occurred_at=at, actor="r2"),
        runner_id="r2",
        lease_id="L9",
        attempt=attempt,
        holder_seen_at=seen,
        lease_s=lease_s,
    )


def test_a_live_lease_refuses_a_stale_redelivery() -> None:
    """A redelivery while the holder heartbeats is refused; once quiet past the lease, the
    next attempt the log counts takes over."""
    state = fold([(1, submitted()), (2, claimed(at=T0))])
    beat = T0 + timedelta(seconds=8)
    assert not lease_lapsed(state, beat, T0 + timedelta(seconds=12), 10)
    with pytest.raises(RuleViolation, match="live lease"):
        decide(state, claim(2, T0 + timedelta(seconds=12), beat))
    assert lease_lapsed(state, beat, T0 + timedelta(seconds=19), 10)
    [event] = decide(state, claim(2, T0 + timedelta(seconds=19), beat))
    assert isinstance(event, SubmissionClaimed) and event.attempt == 2


def test_claimed_at_and_first_claim_are_folded() -> None:
    """The state keeps when the current claim and the first claim were made."""
    later = T0 + timedelta(seconds=30)
    state = fold([(1, submitted()), (2, claimed(at=T0)), (3, claimed(attempt=2, at=later))])
    assert (state.attempt, state.claimed_at, state.first_claimed_at) == (2, later, T0)


def test_a_released_lease_is_taken_over_at_once() -> None:
    """A runner that hands its task back says so in a last heartbeat: the next claim need not
    wait for the lease to lapse."""
    state = fold([(1, submitted()), (2, claimed(at=T0))])
    now = T0 + timedelta(seconds=1)
    assert not lease_lapsed(state, now, now, 10)
    assert lease_lapsed(state, now, now, 10, released=True)
    [event] = decide(state, msgspec.structs.replace(claim(2, now, now), holder_released=True))
    assert isinstance(event, SubmissionClaimed) and event.attempt == 2
