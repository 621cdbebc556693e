"""Event builders for the event log's integration tests, as the `build` fixture."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from kz_events.events import EventMeta, SubmissionSubmitted, TaskHeartbeat

KERNEL_ID = "sm90/Attention/MHA/fp16/flash_v3"


class Build:
    """Small constructors of well-formed events with fresh ids."""

    @staticmethod
    def meta(actor: str = "test") -> EventMeta:
        return EventMeta(event_id=str(uuid.uuid4()), occurred_at=datetime.now(UTC), actor=actor)

    @staticmethod
    def submitted(
        submission_id: str | None = None, kernel_id: str = KERNEL_ID
    ) -> SubmissionSubmitted:
        return SubmissionSubmitted(
            event_id=str(uuid.uuid4()),
            occurred_at=datetime.now(UTC),
            actor="alice",
            submission_id=submission_id or str(uuid.uuid4()),
            kernel_id=kernel_id,
            submitter_id="alice",
            package_digest="d" * 64,
            package_size=123,
        )

    @staticmethod
    def heartbeat(submission_id: str, phase: str) -> TaskHeartbeat:
        return TaskHeartbeat(
            event_id=str(uuid.uuid4()),
            occurred_at=datetime.now(UTC),
            actor="runner-1",
            submission_id=submission_id,
            kernel_id=KERNEL_ID,
            runner_id="runner-1",
            attempt=1,
            lease_id="L1",
            phase=phase,
        )


@pytest.fixture
def build() -> type[Build]:
    """The event builders."""
    return Build
