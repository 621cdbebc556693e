"""Helpers that make a log of accepted results the way runners would, without runners."""

from __future__ import annotations

import io
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kz_events.config import Settings, load_settings
from kz_events.eventlog import EventLog
from kz_events.events import EventMeta
from kz_events.lifecycle import Claim, ReportResult, SubmissionState, Submit, decide, evolve
from kz_events.subjects import PACKAGES_BUCKET
from kz_package.archive import pack_directory
from kz_testing import package_files
from kz_testing import write_package as kz_write_package

T0 = datetime(2025, 1, 1, tzinfo=UTC)


class Clock:
    """A deterministic clock: each call is one second after the last."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def settings_for(tmp: Path, **extra: Any) -> Settings:
    env = {
        "KZ_KERNEL_REPO_PATH": str(tmp / "kernel_data"),
        "KZ_DATA_DIR": str(tmp / "data"),
        "KZ_INDEX_PATH": str(tmp / "index.json"),
        "KZ_LEASE_S": "1",
    }
    env.update({k: str(v) for k, v in extra.items()})
    return load_settings(env)


def write_package(
    root: Path, kernel_id: str, *, variant: str = "v1", better: str = "lower"
) -> Path:
    """A valid package folder for `kernel_id`; `variant` changes its source."""
    files = package_files(
        kernel_id,
        title=f"Kernel {kernel_id}",
        better=better,
        src={"kernel.py": f"VARIANT = {variant!r}\n"},
    )
    return kz_write_package(root, files)


async def store_package(elog: EventLog, root: Path) -> str:
    buffer = io.BytesIO()
    digest = pack_directory(root, buffer)
    await elog.put_object(PACKAGES_BUCKET, digest, buffer.getvalue())
    return digest


def result_doc(value: float, *, accepted: bool = True, better: str = "lower") -> dict[str, Any]:
    return {
        "schema_version": 1,
        "accepted": accepted,
        "reason": f"measured {value}",
        "metric": {"name": "latency", "unit": "us", "better": better, "value": value},
        "workloads": [
            {
                "name": "w1",
                "value": value,
                "stats": {
                    "median": value,
                    "samples": [value, value],
                    "p10": value * 0.9,
                    "p90": value * 1.1,
                },
            }
        ],
        "correctness": {"passed": True, "checks": [{"name": "w1", "passed": True}]},
        "environment": {"device": "cpu"},
    }


def _meta(clock: Clock, actor: str) -> EventMeta:
    return EventMeta(event_id=str(uuid.uuid4()), occurred_at=clock(), actor=actor)


async def _step(elog: EventLog, state: SubmissionState, command: Any) -> SubmissionState:
    event = decide(state, command)[0]
    seq = await elog.append(event, expect=state.version)
    return evolve(state, event, seq)


async def submit_and_run(
    elog: EventLog,
    clock: Clock,
    kernel_id: str,
    digest: str,
    value: float,
    *,
    submitter: str = "alice",
    accepted: bool = True,
    better: str = "lower",
    stop_after_claim: bool = False,
    max_attempts: int = 3,
    attempt: int = 1,
    document: dict[str, Any] | None = None,
) -> str:
    """Append submitted, claimed and result for one submission (`document`, else a plain
    result of `value`); returns its id."""
    sid = str(uuid.uuid4())
    submit = Submit(
        meta=_meta(clock, submitter),
        submission_id=sid,
        kernel_id=kernel_id,
        submitter_id=submitter,
        package_digest=digest,
        package_size=1,
        max_attempts=max_attempts,
    )
    state = await _step(elog, SubmissionState(), submit)
    claim = Claim(
        meta=_meta(clock, "runner-1"), runner_id="runner-1", lease_id="lease-1", attempt=attempt
    )
    state = await _step(elog, state, claim)
    if stop_after_claim:
        return sid
    report = ReportResult(
        meta=_meta(clock, "runner-1"),
        runner_id="runner-1",
        lease_id="lease-1",
        outcome="accepted" if accepted else "rejected",
        result=document or result_doc(value, accepted=accepted, better=better),
        environment={"runner": "runner-1"},
    )
    await _step(elog, state, report)
    return sid
