"""`kz audit --from-archive` on clones of a real kernel repo, next to a stack's data dir."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kz_events.eventlog import EventLog
from kz_projector.audit import run_audit
from kz_projector.service import Projectors
from tests.integration.projector.projector_helpers import (
    Clock,
    settings_for,
    store_package,
    submit_and_run,
    write_package,
)

pytestmark = pytest.mark.integration

KID = "cpu/Norm/RMSNorm/fp32/audit_k"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    )
    return done.stdout


def kz_audit(clone: Path, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KZ_DATA_DIR": str(data_dir)}
    env.pop("KZ_NATS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "kz_cli.main", "audit", "--from-archive", str(clone)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


async def test_a_plain_clone_is_told_to_fetch_the_archive_and_the_stack_audit_stays(
    event_log: EventLog, tmp_path: Path
) -> None:
    """A plain `git clone` lacks refs/kz/*: the audit says so and how to fetch it instead of
    reporting a divergence; with the ref fetched it passes; neither run touches the stack's
    audit.json, which `GET /api/audit` serves."""
    settings = settings_for(tmp_path / "stack")
    clock = Clock()
    digest = await store_package(event_log, write_package(tmp_path / "p1", KID))
    for value in (5.0, 4.0):
        await submit_and_run(event_log, clock, KID, digest, value)
    projectors = Projectors(event_log, settings, clock=clock)
    try:
        await projectors.catch_up()
    finally:
        projectors.close()
    assert (await run_audit(settings, clock=clock, elog=event_log)).ok
    stack_report = (settings.data_dir / "audit.json").read_bytes()
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(settings.kernel_repo_path), str(clone))

    plain = kz_audit(clone, settings.data_dir)

    assert plain.returncode == 2, plain.stdout + plain.stderr
    assert "refs/kz/events" in plain.stderr
    assert "git fetch origin 'refs/kz/*:refs/kz/*'" in plain.stderr
    assert "diverge" not in plain.stdout + plain.stderr

    git(clone, "fetch", "-q", "origin", "refs/kz/*:refs/kz/*")
    fetched = kz_audit(clone, settings.data_dir)

    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    assert (settings.data_dir / "audit.json").read_bytes() == stack_report
