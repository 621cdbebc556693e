"""The event vocabulary: encoding, decoding, tolerance of the future, subjects and the golden
file that pins every tag and a sample payload (regenerate with KZ_UPDATE_GOLDEN=1)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from kz_events.errors import UnknownEventType
from kz_events.events import (
    ALL_EVENT_TYPES,
    EVENT_CLASSES,
    LIVE_EVENT_TYPES,
    BoardReviewed,
    Event,
    KernelClaimed,
    KernelImported,
    KernelReleased,
    PackageSummary,
    ReferencePinned,
    RunnerDeregistered,
    RunnerHeartbeat,
    RunnerRegistered,
    SubmissionAccepted,
    SubmissionCancelled,
    SubmissionClaimed,
    SubmissionCommitted,
    SubmissionConfirmed,
    SubmissionDisputed,
    SubmissionDisqualified,
    SubmissionFailed,
    SubmissionRejected,
    SubmissionResult,
    SubmissionSubmitted,
    SubmissionSuspectCleared,
    SubmissionSuspected,
    SuspectReason,
    TaskHeartbeat,
    TripwireHit,
    UnknownEvent,
    decode_event,
    encode_event,
    subject_of,
)
from kz_events.ids import KernelId
from kz_events.provenance import Provenance
from kz_events.subjects import parse_event_subject

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden" / "events.json"
AT = datetime(2025, 3, 1, 12, 30, 15, 250000, tzinfo=UTC)
SID = "6f1c3f0e-3b9a-4c55-9a59-2d5c8f0b7e41"
KID = "sm90/Attention/MHA/fp16/flash_v3"
DIGEST = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
RESULT = {
    "schema_version": 1,
    "accepted": True,
    "reason": "1.31x faster than current best",
    "metric": {"name": "latency", "unit": "us", "better": "lower", "value": 12.5},
    "workloads": [],
    "correctness": {"passed": True, "checks": []},
    "environment": {"device": "H100"},
}


def _meta(n: int, actor: str = "svc") -> dict[str, object]:
    return {"event_id": f"00000000-0000-4000-8000-{n:012d}", "occurred_at": AT, "actor": actor}


def _sub(n: int, actor: str = "svc") -> dict[str, object]:
    return {**_meta(n, actor), "submission_id": SID, "kernel_id": KID}


SAMPLES: dict[str, Event] = {
    "submitted": SubmissionSubmitted(
        **_sub(1, "alice"),
        submitter_id="alice",
        package_digest=DIGEST,
        package_size=2048,
        base_commit="a" * 40,
        message="faster softmax",
        idempotency_key="k-1",
        summary=PackageSummary(
            title="Row softmax",
            language="triton",
            metric={"name": "latency", "unit": "us", "better": "lower"},
        ),
        tripwire=[TripwireHit(code="gc", path="src/k.py", line=3, message="uses gc")],
        provenance=Provenance(
            agent="claude-code",
            model="claude-opus-4-1",
            tokens=183_000,
            cost_usd=2.75,
            transcript_url="https://example.org/t/1",
        ),
    ),
    "claimed": SubmissionClaimed(
        **_sub(2, "runner-1"), runner_id="runner-1", attempt=1, lease_id="L1"
    ),
    "result": SubmissionResult(
        **_sub(3, "runner-1"),
        runner_id="runner-1",
        attempt=1,
        lease_id="L1",
        outcome="accepted",
        result=RESULT,
        log_key=f"{SID}-1",
        environment={"device": "H100"},
        duration_s=42.5,
        timings={"build_s": 3.5, "benchmark_s": 39.0},
    ),
    "accepted": SubmissionAccepted(
        **_sub(4, "referee"),
        submitter_id="alice",
        runner_id="runner-1",
        attempt=1,
        package_digest=DIGEST,
        message="faster softmax",
        result=RESULT,
        result_seq=3,
        environment={"device": "H100"},
    ),
    "rejected": SubmissionRejected(**_sub(5, "referee"), reason="slower than best", result=RESULT),
    "failed": SubmissionFailed(
        **_sub(6, "sweeper"), code="timed_out", reason="no heartbeat", attempt=3, log_key="x-3"
    ),
    "cancelled": SubmissionCancelled(**_sub(7, "alice"), reason="superseded"),
    "confirmed": SubmissionConfirmed(
        **_sub(18, "referee"),
        confirms="0d4ad3c2-6f0e-4b7e-9d59-5b7e3f1c2a10",
        reason="agrees: 1.3x the reference (1.25-1.36x) on this run, 1.31x (1.27-1.35x) first",
        result=RESULT,
    ),
    "disputed": SubmissionDisputed(
        **_sub(19, "referee"),
        confirms="0d4ad3c2-6f0e-4b7e-9d59-5b7e3f1c2a10",
        reason="disagrees: 1.02x the reference (1-1.04x) on this run, 1.31x (1.27-1.35x) first",
    ),
    "committed": SubmissionCommitted(
        **_sub(8, "git"), source_commit="b" * 40, bench_result_commit="c" * 40, accepted_seq=4
    ),
    "disqualified": SubmissionDisqualified(**_sub(9, "maintainer"), reason="cheated timing"),
    "suspect": SubmissionSuspected(
        **_sub(17, "referee"),
        result_seq=3,
        reasons=[
            SuspectReason(source="tripwire", code="gc", message="uses gc", path="src/k.py", line=3),
            SuspectReason(source="runtime", code="extra_threads", message="a thread outlived"),
        ],
    ),
    "suspect_cleared": SubmissionSuspectCleared(**_sub(18, "maintainer"), reason="gc for a pool"),
    "board_reviewed": BoardReviewed(**_meta(19, "maintainer"), kernel_id=KID, message="ok"),
    "reference_pinned": ReferencePinned(
        **_meta(20, "maintainer"), kernel_id=KID, commit="d" * 40, message="a fairer baseline"
    ),
    "imported": KernelImported(
        **_meta(10, "importer"),
        kernel_id=KID,
        package_digest=DIGEST,
        submitter_id="bob",
        message="initial import",
        bench_result={"schema_version": 1, "kernel_id": KID},
    ),
    "kernel_claimed": KernelClaimed(
        **_meta(11, "alice"),
        kernel_id=KID,
        holder="alice",
        lease_id="K1",
        expires_at=datetime(2025, 3, 1, 13, 30, 15, tzinfo=UTC),
    ),
    "kernel_released": KernelReleased(
        **_meta(12, "alice"), kernel_id=KID, holder="alice", lease_id="K1"
    ),
    "registered": RunnerRegistered(
        **_meta(13, "runner-1"),
        runner_id="runner-1",
        arches=["sm90"],
        device="H100",
        backend="docker",
        labels={"rack": "r1"},
    ),
    "deregistered": RunnerDeregistered(
        **_meta(14, "runner-1"), runner_id="runner-1", arches=["sm90"], reason="shutdown"
    ),
    "task_heartbeat": TaskHeartbeat(
        **_sub(15, "runner-1"), runner_id="runner-1", attempt=1, lease_id="L1", phase="benchmark"
    ),
    "runner_heartbeat": RunnerHeartbeat(
        **_meta(16, "runner-1"), runner_id="runner-1", arches=["sm90"], device="H100", busy_with=SID
    ),
}


def _golden_entry(event: Event) -> dict[str, object]:
    return {"subject": subject_of(event), "payload": json.loads(encode_event(event))}


if os.environ.get("KZ_UPDATE_GOLDEN") == "1":  # pragma: no cover - maintenance switch
    GOLDEN.write_text(
        json.dumps({t: _golden_entry(e) for t, e in SAMPLES.items()}, indent=2) + "\n"
    )


def test_samples_cover_every_event_type() -> None:
    """The samples hold exactly one event of every type the vocabulary has."""
    assert set(SAMPLES) == set(ALL_EVENT_TYPES)
    assert len(ALL_EVENT_TYPES) == len(EVENT_CLASSES) == len(set(ALL_EVENT_TYPES))
    for tag, event in SAMPLES.items():
        assert event.type == tag


def test_golden_file_pins_every_tag() -> None:
    """The golden file names exactly the event types this build knows."""
    golden = json.loads(GOLDEN.read_text())
    assert sorted(golden) == sorted(ALL_EVENT_TYPES)


@pytest.mark.parametrize("tag", ALL_EVENT_TYPES)
def test_encoding_matches_the_golden_payload(tag: str) -> None:
    """Each sample encodes to the golden payload and subject: renames cannot change the wire."""
    golden = json.loads(GOLDEN.read_text())[tag]
    assert _golden_entry(SAMPLES[tag]) == golden


@pytest.mark.parametrize("tag", ALL_EVENT_TYPES)
def test_golden_payload_decodes_to_the_sample(tag: str) -> None:
    """Stored events written by this wire version decode to equal Structs."""
    payload = json.loads(GOLDEN.read_text())[tag]["payload"]
    assert decode_event(json.dumps(payload).encode()) == SAMPLES[tag]


@pytest.mark.parametrize("tag", ALL_EVENT_TYPES)
def test_round_trip(tag: str) -> None:
    """Every event type decodes back to an equal Struct of the same class."""
    event = SAMPLES[tag]
    decoded = decode_event(encode_event(event))
    assert decoded == event
    assert type(decoded) is type(event)


def test_a_submitted_event_without_a_summary_still_decodes() -> None:
    """Events stored before `submitted` carried the package summary read as summary None."""
    payload = json.loads(GOLDEN.read_text())["submitted"]["payload"]
    del payload["summary"]
    event = decode_event(json.dumps(payload).encode())
    assert isinstance(event, SubmissionSubmitted)
    assert event.summary is None


def test_common_envelope() -> None:
    """Every encoded event carries event_id, type, schema_version, occurred_at (UTC) and actor."""
    for event in SAMPLES.values():
        doc = json.loads(encode_event(event))
        assert {"event_id", "type", "schema_version", "occurred_at", "actor"} <= doc.keys()
        assert doc["schema_version"] == 1
        assert doc["occurred_at"].endswith("Z")


@pytest.mark.parametrize("tag", ALL_EVENT_TYPES)
def test_unknown_future_fields_are_tolerated(tag: str) -> None:
    """A payload from a newer writer with extra fields decodes to the known Struct."""
    doc = json.loads(encode_event(SAMPLES[tag]))
    doc["added_in_v2"] = {"nested": [1, 2, 3]}
    doc["schema_version"] = 2
    decoded = decode_event(json.dumps(doc).encode())
    assert msgspec.structs.replace(SAMPLES[tag], schema_version=2) == decoded


def test_unknown_type_is_surfaced_whole() -> None:
    """An unknown event type decodes to UnknownEvent holding the raw bytes, never dropped."""
    raw = b'{"type":"teleported","event_id":"e","where":"mars"}'
    decoded = decode_event(raw)
    assert decoded == UnknownEvent(type="teleported", raw=raw)


def test_event_without_type_is_an_error() -> None:
    """A stored object with no type at all raises UnknownEventType."""
    with pytest.raises(UnknownEventType, match="no type"):
        decode_event(b'{"event_id":"e"}')


def test_known_type_with_a_broken_body_is_not_hidden() -> None:
    """A known type whose body misses required fields raises instead of becoming UnknownEvent."""
    with pytest.raises(msgspec.ValidationError, match="event_id"):
        decode_event(b'{"type":"claimed"}')


def test_kernel_property_parses_the_id() -> None:
    """Submission and kernel events expose their kernel id as a KernelId."""
    sample = SAMPLES["claimed"]
    assert isinstance(sample, SubmissionClaimed)
    assert sample.kernel == KernelId.parse(KID)
    kernel_event = SAMPLES["imported"]
    assert isinstance(kernel_event, KernelImported)
    assert kernel_event.kernel.name == "flash_v3"


@pytest.mark.parametrize("tag", [t for t in ALL_EVENT_TYPES if t not in LIVE_EVENT_TYPES])
def test_subject_of_logged_events(tag: str) -> None:
    """Logged events live on kz.ev.<aggregate>.<arch>.<id>.<type> with kernel_ prefixes dropped."""
    event = SAMPLES[tag]
    aggregate, arch, ident, kind = parse_event_subject(subject_of(event))
    assert aggregate == type(event).aggregate
    assert arch == "sm90"
    assert kind == tag.removeprefix("kernel_")
    expected_id = {"submission": SID, "kernel": KID, "runner": "runner-1"}[aggregate]
    assert ident == expected_id


def test_subject_of_heartbeats() -> None:
    """Heartbeats live on kz.live.task.<arch>.<submission> and kz.live.runner.<arch>.<runner>."""
    assert subject_of(SAMPLES["task_heartbeat"]) == f"kz.live.task.sm90.{SID}"
    assert subject_of(SAMPLES["runner_heartbeat"]) == "kz.live.runner.sm90.runner-1"


def test_runner_without_arches_uses_any() -> None:
    """A runner event with no architectures is filed under the `any` architecture token."""
    event = RunnerRegistered(**_meta(20), runner_id="r", arches=[])
    assert subject_of(event) == "kz.ev.runner.any.r.registered"
    beat = RunnerHeartbeat(**_meta(21), runner_id="r", arches=[])
    assert subject_of(beat) == "kz.live.runner.any.r"


def test_defaults_keep_old_payloads_readable() -> None:
    """A minimal payload with only required fields decodes, filling the documented defaults."""
    raw = json.dumps(
        {
            "type": "submitted",
            "event_id": "e",
            "occurred_at": "2025-03-01T12:00:00Z",
            "actor": "a",
            "submission_id": SID,
            "kernel_id": KID,
            "submitter_id": "a",
            "package_digest": DIGEST,
            "package_size": 1,
        }
    ).encode()
    event = decode_event(raw)
    assert isinstance(event, SubmissionSubmitted)
    assert (event.schema_version, event.max_attempts, event.new_kernel) == (1, 3, False)
    assert event.occurred_at == datetime(2025, 3, 1, 12, tzinfo=UTC)


def test_a_submitted_event_written_before_provenance_decodes_without_one() -> None:
    """An old `submitted` payload (no provenance field) decodes with provenance None, and a
    new one without provenance equals it: old logs replay unchanged."""
    payload = json.loads(GOLDEN.read_text())["submitted"]["payload"]
    payload.pop("provenance")
    event = decode_event(json.dumps(payload).encode())
    assert isinstance(event, SubmissionSubmitted) and event.provenance is None
    assert event == msgspec.structs.replace(SAMPLES["submitted"], provenance=None)
